"""Report pieces for ``reconguard audit``: the verdict table on top, plots, reconstructions, the settings."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from .html import figures_html, fmt, page_start, row_html
from .plots import _save, plot_image_grid, plt


def _head(cells) -> str:
    return "<tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in cells) + "</tr>"


def _pm(a) -> str:
    return f"{fmt(a.mse)} ± {fmt(a.stderr)}"


def _foot(figures) -> str:
    return (f"{figures_html(figures)}\n<p class=\"note\">Numbers are read from <code>results.json</code> beside this "
            "page.</p>\n</body></html>\n")


def _summary(head: str, rows: list, out_dir) -> str:
    """The terminal summary: a head line, one line per row, and where the report is."""
    tail = [f"  report: {Path(out_dir) / 'report.html'}"] if out_dir is not None else []
    return "\n".join([head, *(f"  {r}" for r in rows), *tail])


# --- encoder ---------------------------------------------------------------------------------------------------

def plot_encoder_audit(result, path: Path) -> Path:
    """Per σ: the bound, each attack (± 2 s.e.), the guess baseline and the ceiling, on a log scale."""
    fig, ax = plt.subplots(figsize=(8.4, 3.8))
    xs = np.arange(len(result.rows))
    names = [a.name for a in result.rows[0].attacks]
    width = 0.8 / (len(names) + 2)
    for j, name in enumerate(names):
        ys = [next(a for a in r.attacks if a.name == name) for r in result.rows]
        ax.bar(xs + j * width, [a.mse for a in ys], width, yerr=[2 * a.stderr for a in ys], label=name, capsize=2)
    ax.bar(xs + len(names) * width, [r.baseline.mse for r in result.rows], width, color="tab:gray",
           label="a guess (mean image)")
    bounds = [max(r.bound["value"], 1e-12) for r in result.rows]
    ax.bar(xs + (len(names) + 1) * width, bounds, width, color="black", label="lower bound (no attacker below)")
    ax.plot(xs + 0.4, [r.ceiling for r in result.rows], "r_", ms=30, mew=2, label="ceiling Tr(S⁻¹)/d (prior π)")
    ax.set_xticks(xs + 0.4, [f"σ = {r.sigma:g}" for r in result.rows])
    ax.set_yscale("log")
    ax.set_ylabel("MSE per pixel")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path)


def plot_image_rows(rows, title: str, path: Path) -> Path:
    """``rows``: ``[(label, images N×C×H×W in [0, 1]), …]``, up to 8 images a row."""
    n = min(8, min(len(images) for _, images in rows))
    return plot_image_grid([(label, list(images[:n])) for label, images in rows], path, title)


def encoder_figures(result, folder: Path) -> list:
    figures = [("What an attacker reaches against what the theory guarantees",
                plot_encoder_audit(result, folder / "audit.png").name)]
    for i, (sigma, ex) in enumerate(sorted(result.examples.items())):
        name = f"reconstructions_{i}.png"
        plot_image_rows([("original", ex["originals"]), ("reconstructed", ex["reconstructions"])],
                        f"σ = {sigma:g}: held-out images and the {ex['attack']} reconstructions", folder / name)
        figures.append((f"Reconstructions at σ = {sigma:g} ({ex['attack']})", name))
    return figures


def render_encoder_audit(result, figures) -> str:
    head = ["σ", "best attack (MSE ± s.e.)", "lower bound (95% LCB)", "rule", "E[G] sample", "a guess", "ceiling (π)",
            "RTC", "verdict"]
    body = []
    for r in result.rows:
        best = r.best
        b = r.bound
        body.append(row_html([f"{r.sigma:g}", f"{html.escape(best.name)}: {_pm(best)}",
                              f"{fmt(b['value'])} ({html.escape(b['name'])})", html.escape(b.get("kind", "")),
                              html.escape(b.get("saturation", "") or "—"), _pm(r.baseline), fmt(r.ceiling),
                              "∞" if r.rtc is None else fmt(r.rtc), html.escape(r.verdict())]))
    detail = []
    for r in result.rows:
        for a in r.attacks + [r.baseline]:
            extra = ", ".join(f"{k} {fmt(v)}" for k, v in a.detail.items())
            detail.append(row_html([f"{r.sigma:g}", html.escape(a.name), _pm(a), extra]))
    q = result.score_quality
    return f"""{page_start("Audit: your encoder")}
<p><code>{html.escape(result.model)}</code> on {result.n_images} images of shape {tuple(result.in_shape)}
(d = {result.d}, embedding m = {result.m}); preset <code>{result.preset}</code>; {result.seconds:.0f} s.
Pixel convention fed to the model: {_normalization(result)}.</p>
{"".join(f"<p class='bad'>warning: {html.escape(w)}</p>" for w in getattr(result, "warnings", ()))}
<h2>Verdict</h2>
<table>{_head(head)}{"".join(body)}</table>
<p class="note"><b>Lower bound</b>: no attacker reconstructs images of the prior π with a smaller mean squared error
per pixel (spectral-bounds paper: Corollary 1 for σ &gt; 0, Corollary 2 for σ = 0; the one-sided 95% lower confidence
bound over E[G]'s and S's sampling error). π is {html.escape(result.prior)}: your images, each blurred by a little
Gaussian noise. <b>Attacks</b> ran on {result.n_attacked} held-out images π never saw; <b>a guess</b> predicts the mean
image for every input — an attack is only worth its margin below it. <b>Ceiling</b>: the error with no information
under π; RTC = ln(ceiling / bound). A row where an attack falls below the bound by more than 3 s.e. would say
<b>CHECK</b> (it never should). <b>E[G] sample</b>: whether the inputs E[G] was estimated from saw every direction
the encoder uses (held-out inputs' Jacobian energy outside the sample's range); when not, the bound is the
tangent-plane bound or Theorem 1 (σ &gt; 0) or 0 (σ = 0), which stay valid, and the <b>rule</b> column says which.</p>
<h2>Every attack</h2>
<table>{_head(["σ", "attack", "MSE ± s.e.", "details"])}{"".join(detail)}</table>
<h2>Score check (§6.4.1)</h2>
<p>S from the {html.escape(result.score)} score: smallest eigenvalue of Σ^½SΣ^½ {fmt(q.get('min'))}; fraction below the
sampling-noise floor {fmt(q.get('noise_floor'))}: {fmt(q.get('fraction_below_floor'))} (a correct S has none beyond
noise). Bound path: {html.escape(result.bound_path)}.</p>
{_foot(figures)}"""


def _normalization(result) -> str:
    norm = getattr(result, "normalize", None)
    if not norm:
        return "none — the model takes [0, 1] pixels (give --normalize if it expects another convention)"
    return (f"{html.escape(norm['name'])} (mean {norm['mean']}, std {norm['std']}), applied inside the audited model: "
            "every MSE is in [0, 1] pixels")


def encoder_audit_summary(result, out_dir=None) -> str:
    return _summary(f"audit encoder: {result.model} — {result.n_images} images {tuple(result.in_shape)}, "
                    f"m = {result.m}, preset {result.preset}, {result.seconds:.0f} s",
                    [f"σ = {r.sigma:g}: {r.verdict()} [{r.bound.get('kind') or r.bound['name']}; E[G] sample "
                     f"{r.bound.get('saturation') or '—'}]" for r in result.rows], out_dir)


# --- classifier ------------------------------------------------------------------------------------------------

def plot_leakage_rows(result, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.8, 3.2))
    names, rows = list(result.leakage), list(result.leakage.values())
    ys = np.arange(len(rows))
    vals = [r["att_acc1"] for r in rows]
    lo = [max(0.0, v - r["att_acc1_ci"][0]) for v, r in zip(vals, rows)]
    hi = [max(0.0, r["att_acc1_ci"][1] - v) for v, r in zip(vals, rows)]
    colours = ["tab:red", "tab:orange", "tab:blue", "tab:gray"][:len(rows)]
    ax.barh(ys, vals, xerr=[lo, hi], color=colours, capsize=3)
    ax.set_yticks(ys, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("AttAcc@1 (Wilson 95% CI), scored by a separate evaluation classifier")
    return _save(fig, path)


def classifier_figures(result, folder: Path) -> list:
    figures = [("Model-inversion leakage of your classifier", plot_leakage_rows(result, folder / "leakage.png").name)]
    ex = result.examples
    if ex and "images" in ex:
        order = ex["targets"].argsort(stable=True)
        images = ex["images"][order][:8]
        plot_image_rows([("reconstructed", images)], "the generative attack's reconstructions, by class",
                        folder / "inversions.png")
        figures.append(("Reconstructions by the generative-prior attack", "inversions.png"))
    return figures


def render_classifier_audit(result, figures) -> str:
    body = [row_html([html.escape(name), f"{fmt(r['att_acc1'])} [{r['att_acc1_ci'][0]:.2f}, {r['att_acc1_ci'][1]:.2f}]",
                      fmt(r.get("att_acc5")), fmt(r.get("feature_l2")), f"{r.get('seconds', 0.0):.1f}"])
            for name, r in result.leakage.items()]
    gen, sel, _, chance = (r["att_acc1"] for r in result.leakage.values())
    verdict = (f"the generative attack identifies the target class in {100 * gen:.0f}% of reconstructions "
               f"(chance {100 * chance:.0f}%); {100 * sel:.0f}% needs no gradient of your model at all "
               "(selection only): a defense that keeps accuracy cannot remove that part")
    rob = "".join(row_html([f"{float(e):g}", fmt(v)]) for e, v in sorted(result.robust.items(), key=lambda t: float(t[0])))
    hsic = "".join(row_html([html.escape(k), fmt(v)]) for k, v in result.hsic.items()) or \
        row_html(["—", "the model names no hsic_layers"])
    return f"""{page_start("Audit: your classifier (model inversion)")}
<p><code>{html.escape(result.model)}</code>, {result.num_classes} classes, inputs {tuple(result.in_shape)}; data
{html.escape(result.data)}; test accuracy {fmt(result.test_acc)}; evaluation classifier accuracy {fmt(result.eval_acc)};
preset <code>{result.preset}</code>; {result.seconds:.0f} s.</p>
<h2>Verdict</h2>
<p><b>{html.escape(verdict)}</b>.</p>
<table>{_head(["attack", "AttAcc@1 [95% CI]", "AttAcc@5", "feature L2 to the nearest training image", "seconds"])}
{"".join(body)}</table>
<p class="note">AttAcc: the fraction of reconstructions a separate classifier trained on the private data assigns to the
attacked class (AT-AT paper, appendix C). The attacker's prior saw only the public data. <b>Chance</b> is what a guess
scores; an attack is only worth its margin over it.</p>
<h2>Robust accuracy (worst over the attacks; Table 4's ε, pixel units)</h2>
<table>{_head(["ε", "robust accuracy"])}{rob}</table>
<h2>HSIC(X, Z) at the named layers</h2>
<table>{_head(["layer", "HSIC"])}{hsic}</table>
{_foot(figures)}"""


def classifier_audit_summary(result, out_dir=None) -> str:
    leakage = [f"{name:32s} AttAcc@1 {r['att_acc1']:.3f} [{r['att_acc1_ci'][0]:.2f}, {r['att_acc1_ci'][1]:.2f}]"
               for name, r in result.leakage.items()]
    robust = [f"robust accuracy at ε = {float(e):g}: {v:.3f}"
              for e, v in sorted(result.robust.items(), key=lambda t: float(t[0]))]
    return _summary(f"audit classifier: {result.model} — {result.num_classes} classes, test accuracy "
                    f"{result.test_acc:.3f}, preset {result.preset}, {result.seconds:.0f} s", leakage + robust, out_dir)


# --- encrypted -------------------------------------------------------------------------------------------------

def encrypted_figures(result, folder: Path) -> list:
    figures = []
    for name, images in result.recovered.items():
        np.save(folder / f"recovered_{name}.npy", images.numpy())
        plot_image_rows([("recovered", images)], f"{name}: recovered images", folder / f"recovered_{name}.png")
        figures.append((f"{name}: recovered images (recovered_{name}.npy)", f"recovered_{name}.png"))
    return figures


def _pct(v) -> str:
    return "—" if v is None else f"{100 * v:.0f}%"


def _scores(r) -> list:
    s = r.score
    if s is None:
        return ["—"] * 4
    return [_pct(s.identified), fmt(s.matched_ssim), _pct(s.baseline.identified), fmt(s.baseline.matched_ssim)]


def render_encrypted_audit(result, figures) -> str:
    body = [row_html([html.escape(r.attack), html.escape(r.description), r.n_recovered, *_scores(r),
                      f"{r.seconds:.1f}"]) for r in result.rows]
    scored = [r for r in result.rows if r.score is not None]
    if scored:
        best = max(scored, key=lambda r: r.score.identified)
        verdict = (f"{best.attack} identifies {_pct(best.score.identified)} of the private images (random "
                   f"non-members: {_pct(best.score.baseline.identified)}); 1-to-1 SSIM {fmt(best.score.matched_ssim)}")
    else:
        verdict = "no truth folder given: the recovered images are beside this page for the owner to judge"
    caveats = "".join(f'<p class="bad"><b>Caveat ({html.escape(r.attack)})</b>: {html.escape(r.caveat)}</p>'
                      for r in result.rows if r.caveat)
    ks = ""
    if result.ks:
        ks = (f"<h2>KS test (§5.2)</h2><p>one image's encryptions against all: statistic {fmt(result.ks['statistic_all'])} "
              f"(p {fmt(result.ks['pvalue_all'])}); against the others': {fmt(result.ks['statistic_other'])} "
              f"(p {fmt(result.ks['pvalue_other'])}).</p>")
    return f"""{page_start("Audit: your encrypted release")}
<p><code>{html.escape(result.folder)}</code>: {result.n_encryptions} encryptions, k = {result.k}, {result.mode} mode,
n = {result.n}; truth {html.escape(str(result.truth))}; the attacker's own images:
{html.escape(str(result.public))}; {result.seconds:.0f} s.</p>
<h2>Verdict</h2>
<p><b>{html.escape(verdict)}</b>.</p>
{caveats}<table>{_head(["attack", "how", "recovered", "identified", "1-to-1 SSIM", "baseline identified", "baseline SSIM",
               "seconds"])}{"".join(body)}</table>
<p class="note"><b>identified</b>: the fraction of private images that some recovered image's nearest neighbour is,
among the private images and non-members; <b>baseline</b>: the same for random non-member images submitted as the
recovery — an attack is only worth its margin over it. Scores are what these attacks reach, a lower bound on what
leaks: a low one is not proof of privacy (on natural images Carlini's assignment is known to fall short — README).</p>
{ks}
{_foot(figures)}"""


def _recovery_line(r) -> str:
    caveat = f"\n{'':10s} caveat: {r.caveat}" if r.caveat else ""
    if r.score is None:
        return f"{r.attack:10s} {r.n_recovered} images recovered (no truth to score them){caveat}"
    ident, ssim, b_ident, b_ssim = _scores(r)
    return f"{r.attack:10s} identified {ident}, 1-to-1 SSIM {ssim} (baseline {b_ident}, {b_ssim}){caveat}"


def encrypted_audit_summary(result, out_dir=None) -> str:
    ks = [f"KS: vs all {result.ks['statistic_all']:.3f} (p {result.ks['pvalue_all']:.3g})"] if result.ks else []
    return _summary(f"audit encrypted: {result.folder} — {result.n_encryptions} encryptions, k = {result.k}, "
                    f"{result.mode}, the attacker's own images: {result.public}",
                    [_recovery_line(r) for r in result.rows] + ks, out_dir)
