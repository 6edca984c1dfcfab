"""The HTML report and the terminal summary of a sweep result. Every number shown is read from
the result whose JSON (``results.json``) sits beside the report."""

from __future__ import annotations

import base64
import html
import math
import re
from pathlib import Path

_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td.l{text-align:left}.bad{background:#fdd}.ok{color:#171}img{max-width:100%;margin:.5em 0}
code{background:#f5f5f5;padding:1px 4px}.note{color:#555;font-size:14px}"""


def page_start(title: str) -> str:
    """The page's head (title, style) and its heading."""
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>\n"
            f"<style>{_CSS}</style></head><body>\n<h1>{html.escape(title)}</h1>")


def figures_html(figures) -> str:
    """``<figure>`` blocks for (caption, file name) pairs."""
    return "\n".join(f"<figure><img src='{html.escape(f)}' alt='{html.escape(c)}'><figcaption>{html.escape(c)}"
                     f"</figcaption></figure>" for c, f in figures)


def embed_images(page: str, folder: str | Path) -> str:
    """Replace ``<img src='NAME.png'>`` by the PNG's bytes as a data URI, so the page stands alone."""
    folder = Path(folder)

    def inline(m: re.Match) -> str:
        path = folder / html.unescape(m.group(2))
        if not path.is_file():
            return m.group(0)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"{m.group(1)}data:image/png;base64,{data}{m.group(3)}"

    return re.sub(r"(<img src=')([^':]+\.png)(')", inline, page)


def settings_table(settings: dict) -> str:
    """The run's settings as a two-column table (nested values as compact JSON)."""
    import json

    from ..results import to_jsonable

    rows = []
    for k, v in settings.items():
        if k == "values":
            continue
        v = to_jsonable(v)
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        rows.append(f"<tr><th>{html.escape(str(k))}</th><td class='l'><code>{html.escape(text)}</code></td></tr>")
    return "<table class='settings'>" + "".join(rows) + "</table>"


CEILING_NOTE = ("ceiling = Tr(S⁻¹)/d: the bound when the encoder reveals nothing (E[G] = 0), i.e. what the prior alone "
                "guarantees. It is itself a lower bound: on a non-Gaussian prior such as digits an attacker with no "
                "information errs by Tr(Σ)/d, which is larger, so a Bayes attack can sit above the ceiling there.")


def row_html(cells) -> str:
    """One table row of escaped cells."""
    return "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"


def fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if math.isinf(v):
            return "∞"
        if v == 0:
            return "0"
        return f"{v:.4g}" if 1e-3 <= abs(v) < 1e4 else f"{v:.3e}"
    return str(v)


def _table(result) -> str:
    attacks = list(dict.fromkeys(a for p in result.points for a in p.attacks))
    lp = any(p.lpips_bound is not None for p in result.points)
    head = (["dataset", "σ", "encoder", "m", "k", "τ", "rank", "bound (95% lower)", "rule", "E[G] sample",
             "plug-in (paper)", "rule's estimate ± s.e."]
            + [f"{a} MSE/d" for a in attacks]
            + (["LPIPS bound"] + [f"{a} LPIPS" for a in attacks] if lp else [])
            + ["Maeng (Thm 1)", "ceiling", "RTC", "holds"])
    rows = []
    for ds in result.datasets():
        for sigma in result.sigmas():
            for p in result.select(ds, sigma):
                cls = "bad" if p.holds is False else ""
                att = []
                for a in attacks:
                    r = p.attacks.get(a)
                    att.append("—" if r is None else f"{fmt(r['mse'])} ± {fmt(r['stderr'])}"
                               + (f" (β={r['beta']:g})" if "beta" in r else ""))
                lp_cells = []
                if lp:
                    lp_cells = [f"{fmt(p.lpips_bound)} (plug-in {fmt(p.lpips_bound_point)} ± "
                                f"{fmt(p.lpips_bound_stderr)})"] + [
                        "—" if "lpips" not in p.attacks.get(a, {}) else
                        f"{fmt(p.attacks[a]['lpips'])} ± {fmt(p.attacks[a]['lpips_stderr'])}" for a in attacks]
                point = (f"{fmt(p.bound_point)} ± {fmt(p.bound_stderr)}" if p.bound_stderr
                         else "exact inputs")
                cells = ([p.dataset, fmt(p.sigma), p.encoder, p.m, p.k or "exact", fmt(p.tau), p.rank,
                          f"{fmt(p.bound)} ({p.bound_name})", p.kind, p.saturation or "—", fmt(p.bound_plugin), point]
                         + att + lp_cells
                         + [fmt(p.maeng) if p.sigma > 0 else "0 (σ=0)", fmt(p.ceiling), fmt(p.rtc),
                            _verdict(p)])
                rows.append(f'<tr class="{cls}">' + "".join(
                    f'<td class="{"l" if i in (0, 2) else ""}">{html.escape(str(c))}</td>' for i, c in enumerate(cells))
                    + "</tr>")
    return ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "\n".join(rows) + "</table>")


def _verdict(p) -> str:
    """'yes', 'NO', or 'yes, within noise (n.n s.e.)' when the attack sits below the plug-in bound; a heuristic
    row (τ > 0) is never 'yes'."""
    if not p.guarantee and p.beaten is not None:
        return "heuristic (τ > 0): " + ("beaten" if p.beaten else "not beaten")
    if p.holds is None:
        return "—"
    if not p.holds:
        return "NO"
    margin = p.margin_se
    if margin is not None and margin < 0:
        return f"yes, within noise ({margin:.1f} s.e.)"
    return "yes"


def _quality(result) -> str:
    q = result.extras.get("score_quality") or {}
    if not q:
        return ""
    items = "".join(f"<li>{html.escape(k)}: {html.escape(v.summary())}.</li>" for k, v in q.items())
    return f"<h2>Score-matrix quality</h2><ul>{items}</ul>"


def _lpips_note(result) -> str:
    trunk = result.extras.get("lpips_trunk")
    if not trunk:
        return ""
    return (f"<p class='note'>LPIPS: VGG-16 trunk with GELU/AvgPool, linear heads from torchmetrics' lpips_models/vgg.pth; "
            f"trunk weights: <b>{html.escape(trunk)}</b>. With a random trunk the numbers are a valid bound for that "
            f"Ψ, not for the published LPIPS. Bounds from {result.settings['lpips'].get('probes', 16)} Rademacher probes × "
            f"{result.settings['lpips'].get('n_inputs', 32)} inputs (Theorem 2 for σ &gt; 0, Corollary 3 for σ = 0), "
            f"reported as a one-sided 95% lower confidence bound (jackknife over the inputs), the plug-in value beside it.</p>")


def render_html(result, figures: list[tuple[str, str]]) -> str:
    """``figures``: (caption, file name relative to the report) pairs."""
    s = result.settings
    verdict = ("<p class='ok'>The bound held at every point: no attack beat it "
               "(allowing 3 standard errors of the attack's Monte-Carlo noise; the bound is a 95% lower confidence "
               "bound that carries its own sampling error).</p>" if result.violations == 0 else
               f"<p class='bad'>{result.violations} point(s) where an attack beat the bound — see rows marked NO."
               + (" A τ too large calls visible directions 'null' and overstates Corollary 2 (section 6.4.3)."
                  if len(set(p.tau for p in result.points if p.tau is not None)) > 1 else "") + "</p>")
    beaten, heur = result.heuristic_beaten
    if heur:
        verdict += (f"<p class='note'>{heur} row(s) use τ &gt; 0, the paper's heuristic (section 6.4.3): not "
                    f"guarantees, never counted as held; an attack beat {beaten} of them.</p>")
    figs = figures_html(figures)
    return f"""{page_start(result.title)}
<p>recipe <code>{html.escape(result.recipe)}</code>, preset <code>{html.escape(result.preset)}</code>,
{len(result.points)} points in {result.elapsed_s:.1f} s.</p>
{verdict}
<h2>Settings</h2>
{settings_table(s)}
<p class="note">Bounds are lower bounds on E‖x̂ − x‖²/d over the prior (spectral-bounds paper): Corollary 1 for
σ &gt; 0, Corollary 2 for σ = 0 (null space of E[G] at τ·λ<sub>max</sub>), Theorem 1 (Maeng et al.) for comparison,
and the ceiling. RTC = ln(ceiling / bound) (∞ when the bound is 0; JSON writes <code>rtc: null</code> with
<code>rtc_infinite: true</code>). When E[G] or S was estimated by sampling, the bound shown is a one-sided 95% lower
confidence bound (grouped jackknife over the samples), with the plug-in value ± its s.e. beside it; the spectrum of
E[G] is cut at float64 round-off whatever the encoder's dtype. {html.escape(CEILING_NOTE)} The attack is the
posterior mean E[x | e] (MMSE, linear encoders: the best any attacker can do in MSE), the MAP optimisation attack
with the prior's score (β = 2σ², or the best β of a sweep at σ = 0, chosen against the originals as in the paper),
and a decoder network trained on prior samples. <b>gaussian</b>: N(0.5, 0.2²·I), S = I/0.2² exactly.
<b>digits</b>: scikit-learn's 1,797 digits plus N(0, σ<sub>s</sub>²·I) smoothing; π is exactly that mixture, so its
score is exact and S is averaged over samples of π. An attacker who knows π knows the 1,797 images, so on digits the
bound is about how much of the smoothed image (its noise included) leaks; learned priors come with score models.</p>
{figs}
{_lpips_note(result)}
{_quality(result)}
<h2>All points</h2>
{_table(result)}
<p class="note">Numbers are read from <code>results.json</code> beside this page.</p>
</body></html>
"""


def _noise_note(p) -> str:
    if p.holds and p.attack_mse is not None and p.attack_mse < p.bound:
        a = min(p.attacks.values(), key=lambda a: a["mse"])
        return f" (within noise: {(p.bound - a['mse']) / a['stderr']:.2f} s.e. below)" if a["stderr"] else ""
    return ""


def summary_text(result, out_dir=None) -> str:
    """A short terminal summary: per dataset and σ, the bound and the attack at a few points."""
    lines = [f"{result.title}", f"  recipe {result.recipe} · preset {result.preset} · {len(result.points)} points · "
             f"{result.elapsed_s:.1f} s"]
    for ds in result.datasets():
        for sigma in result.sigmas():
            pts = result.select(ds, sigma)
            show = pts if len(pts) <= 5 else [pts[i] for i in sorted({0, len(pts) // 4, len(pts) // 2, 3 * len(pts) // 4, len(pts) - 1})]
            lines.append(f"  {ds:8s} σ={sigma:<6g} " + "  ".join(
                f"{p.encoder if p.family not in ('linear', 'skewed') else f'{p.axis}={p.x:g}'}: bound {fmt(p.bound)}"
                f" / attack {fmt(p.attack_mse)}{_noise_note(p)}" for p in show))
    lines.append("  bound held at every point (bounds: 95% lower confidence; attacks: within 3 s.e.)"
                 if result.violations == 0 else f"  WARNING: an attack beat the bound at {result.violations} point(s)")
    beaten, heur = result.heuristic_beaten
    if heur:
        lines.append(f"  {heur} heuristic row(s) with τ > 0 (not guarantees, not counted): an attack beat {beaten}")
    unsat = sum(1 for p in result.points if p.saturation.startswith("not saturated"))
    if unsat:
        lines.append(f"  {unsat} point(s) rest on an unsaturated E[G] sample: their bound is the tangent plane or "
                     "Theorem 1 (see the report's 'rule' column)")
    lines.append("  " + CEILING_NOTE)
    if out_dir is not None:
        lines.append(f"  report: {out_dir}/report.html   data: {out_dir}/results.json")
    return "\n".join(lines)
