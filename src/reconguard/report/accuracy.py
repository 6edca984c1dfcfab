"""Report pieces for accuracy experiments (InstaHide vs. the baselines)."""

from __future__ import annotations

import html
from pathlib import Path

from .html import figures_html, fmt, page_start, row_html, settings_table
from .plots import _save, plt
from ..experiments.instahide import DP_METHOD


def plot_accuracy(result, path: str | Path) -> Path:
    """Figure-3-style: accuracy against k for InstaHide inside / cross (plain and T-encryption inference),
    with vanilla, DP-SGD and Mixup as reference lines / markers."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for mode, color in (("inside", "tab:blue"), ("cross", "tab:red")):
        rows = sorted((r for r in result.rows if r.method == "instahide" and r.mode == mode), key=lambda r: r.k)
        if rows:
            ks = [r.k for r in rows]
            ax.plot(ks, [r.acc_T for r in rows], "o-", color=color, label=f"InstaHide {mode}, T={rows[0].T}")
            ax.plot(ks, [r.acc_T1 for r in rows], "o:", color=color, alpha=0.6, label=f"InstaHide {mode}, T=1")
            ax.plot(ks, [r.acc_plain for r in rows], "x--", color=color, alpha=0.5, label=f"InstaHide {mode}, plain")
    for r in result.rows:
        if r.method == "vanilla":
            ax.axhline(r.acc_plain, color="black", lw=1.2, label="vanilla")
        elif r.method == DP_METHOD:
            ax.axhline(r.acc_plain, color="tab:green", ls="--", lw=1.2, label=r.label)
        elif r.method == "mixup":
            ax.plot([r.k], [r.acc_plain], "s", color="tab:purple", label=f"Mixup k={r.k} (plain)")
    ax.set_xlabel("k (images mixed)")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"{result.dataset}: {result.n_train} training / {result.n_test} test images", fontsize=9)
    fig.suptitle(result.title, fontsize=10)
    return _save(fig, path)


def render_accuracy_html(result, figures) -> str:
    vanilla = next((r.acc_plain for r in result.rows if r.method == "vanilla"), None)
    head = ["method", "k", "mode", "plain", "T = 1", f"T = {result.rows[0].T if result.rows else ''}",
            "Δ vs vanilla (best)", "ε (DP-SGD)", "epochs", "seconds"]
    body = []
    for r in result.rows:
        best = max(v for v in (r.acc_plain, r.acc_T1, r.acc_T) if v is not None)
        delta = "—" if vanilla is None or r.method == "vanilla" else f"{100 * (best - vanilla):+.1f} pts"
        cells = [r.method, r.k, r.mode if r.method == "instahide" else "—", fmt(r.acc_plain), fmt(r.acc_T1),
                 fmt(r.acc_T), delta, fmt(r.epsilon), r.epochs, f"{r.seconds:.0f}"]
        body.append(row_html(cells))
    figs = figures_html(figures)
    s = result.settings
    return f"""{page_start(result.title)}
<p>recipe <code>{html.escape(result.recipe)}</code>, preset <code>{html.escape(result.preset)}</code>, dataset
{html.escape(result.dataset)} ({result.n_train} train / {result.n_test} test), {result.elapsed_s:.0f} s.
Encrypted inference averages the model's probabilities over T encryptions of each test image, mixed with other
test images (inside) or public patches (cross){", own coefficient ≥ " + str(s.get("own_floor")) if s.get("own_floor") else ""}.
Plain inference feeds the normalised image unmixed and unmasked.</p>
<h2>Settings</h2>
{settings_table(s)}
{figs}
<table><tr>{"".join(f"<th>{html.escape(h)}</th>" for h in head)}</tr>{"".join(body)}</table>
<p class="note">Numbers are read from <code>results.json</code> beside this page.</p>
</body></html>
"""


def accuracy_summary(result, out_dir=None) -> str:
    lines = [result.title, f"  recipe {result.recipe} · preset {result.preset} · {result.elapsed_s:.0f} s"]
    for r in result.rows:
        enc = "" if r.acc_T is None else f"   encrypted T=1 {fmt(r.acc_T1)}  T={r.T} {fmt(r.acc_T)}"
        lines.append(f"  {r.label:28s} plain {fmt(r.acc_plain)}{enc}")
    if out_dir is not None:
        lines.append(f"  report: {out_dir}/report.html   data: {out_dir}/results.json")
    return "\n".join(lines)
