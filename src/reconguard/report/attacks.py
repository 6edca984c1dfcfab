"""Report pieces for the attack suite on Mixup / InstaHide challenges: a table and, per scheme, a grid of
original | the reconstruction matched to it 1-to-1 by each attack."""

from __future__ import annotations

import html
from pathlib import Path

from .html import figures_html, fmt, page_start, row_html, settings_table
from .plots import plot_image_grid


def plot_attack_grid(label: str, example: dict, path, columns: int = 10) -> Path:
    rows = ["truth"] + [k for k in example if k != "truth"]
    n = min(columns, len(example["truth"]))
    return plot_image_grid([(name, list(example[name][:n])) for name in rows], path,
                           f"{label}: private images and the outputs matched to them 1-to-1")


def render_attacks_html(result, figures) -> str:
    head = ["scheme", "mode", "k", "attack", "identified", "1-to-1 SSIM", "other", "seconds"]
    body = []
    for r in result.rows:
        other = ", ".join(f"{k} {fmt(v)}" for k, v in r.extra.items())
        cells = [r.scheme, r.mode, r.k, r.attack, "—" if r.identified is None else f"{100 * r.identified:.0f}%",
                 fmt(r.matched_ssim), other, f"{r.seconds:.1f}"]
        body.append(row_html(cells))
    figs = figures_html(figures)
    s = result.settings
    return f"""{page_start(result.title)}
<p>recipe <code>{html.escape(result.recipe)}</code>, preset <code>{html.escape(result.preset)}</code>; {s.get('n')} private
images × {s.get('T')} encryptions per scheme; {result.elapsed_s:.0f} s. <b>identified</b>: the fraction of private images
that some output's nearest neighbour is, among the private images and the non-member digits (a stranger's random digits
reach about n/(n + non-members)); <b>1-to-1 SSIM</b>: mean SSIM of a one-to-one matching of private images to outputs.
The <b>random guess</b> row scores n random non-member digits submitted as the recovery: an attack is only worth its
margin over it.</p>
<table><tr>{"".join(f"<th>{html.escape(h)}</th>" for h in head)}</tr>{"".join(body)}</table>
{figs}
<h2>Settings</h2>
{settings_table(s)}
<p class="note">Numbers are read from <code>results.json</code> beside this page.</p>
</body></html>
"""


def attacks_summary(result, out_dir=None) -> str:
    lines = [result.title, f"  recipe {result.recipe} · preset {result.preset} · {result.elapsed_s:.0f} s"]
    for r in result.rows:
        if r.identified is not None:
            lines.append(f"  {r.scheme:9s} {r.mode:6s} k={r.k}  {r.attack:18s} identified {100 * r.identified:3.0f}%  "
                         f"1-to-1 SSIM {r.matched_ssim:.3f}")
        else:
            lines.append(f"  {r.scheme:9s} {r.mode:6s} k={r.k}  {r.attack:17s} "
                         + ", ".join(f"{k} {fmt(v)}" for k, v in r.extra.items()))
    if out_dir is not None:
        lines.append(f"  report: {out_dir}/report.html   data: {out_dir}/results.json")
    return "\n".join(lines)
