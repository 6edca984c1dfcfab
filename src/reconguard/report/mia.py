"""Report pieces for the model-inversion experiments: per-defense accuracy, leakage under the
generative-prior attack, robust accuracy per ε, HSIC per stage, the regressions and the randomised
AT-AT experiment (the AT-AT paper's Tables 1, 4, 5, 21 and Figures 2 / 4, at the scale that was run)."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

import numpy as np

from .html import figures_html, fmt, page_start, settings_table
from .plots import _save, plot_image_grid, plt
from ..defenses.registry import EXPERIMENT, NO_DEFENSE, defense_class


def _by_label(result):
    groups = defaultdict(list)
    for r in result.rows:
        groups[r.label].append(r)
    return groups


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _finish(fig, ax, path, xlabel: str, ylabel: str) -> Path:
    """Labels, a [0, 1] y-axis, grid and legend, then save."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def plot_accuracy_bars(result, path) -> Path:
    groups = _by_label(result)
    labels = list(groups)
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(labels) + 2), 3.8))
    x = np.arange(len(labels))
    test = [_mean([r.test_acc for r in groups[k]]) for k in labels]
    train = [_mean([r.train_acc for r in groups[k]]) for k in labels]
    ax.bar(x - 0.2, train, 0.4, label="train", color="tab:gray")
    ax.bar(x + 0.2, test, 0.4, label="test", color="tab:blue")
    nodef = _mean([r.test_acc for r in result.rows if r.defense == NO_DEFENSE])
    if nodef is not None:
        ax.axhline(nodef - 0.10, color="tab:red", ls="--", lw=1, label="NoDef test − 10 points")
    ax.set_xticks(x, labels, rotation=40, ha="right", fontsize=8)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=7)
    ax.set_title(result.split, fontsize=8)
    return _save(fig, path)


def plot_leakage(result, path) -> Path:
    """Figure 4 analogue: AttAcc@1 (Wilson 95 % CI) against test accuracy, one point per model."""
    fig, ax = plt.subplots(figsize=(6.2, 4.4))
    colors = plt.cm.tab20(np.linspace(0, 1, max(len(_by_label(result)), 2)))
    for (label, rows), c in zip(_by_label(result).items(), colors):
        rows = [r for r in rows if "attack" in r.evaluation and defense_class(r.defense).labels_meaningful]
        if not rows:
            continue
        xs = [r.test_acc for r in rows]
        ys = [r.evaluation["attack"]["att_acc1"] for r in rows]
        lo = [max(0.0, y - r.evaluation["attack"]["att_acc1_ci"][0]) for y, r in zip(ys, rows)]
        hi = [max(0.0, r.evaluation["attack"]["att_acc1_ci"][1] - y) for y, r in zip(ys, rows)]
        style = "*" if label.startswith(EXPERIMENT[0]) else "o"
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style, color="tab:red" if label.startswith(EXPERIMENT[0]) else c,
                    ms=9 if style == "*" else 6, capsize=2, label=label)
    return _finish(fig, ax, path, "test accuracy", "AttAcc@1 (generative-prior attack)")


def plot_robustness(result, path) -> Path:
    """Table 4 as a plot: AutoAttack (worst-case) robust accuracy against ε per defense."""
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    for label, rows in _by_label(result).items():
        rows = [r for r in rows if "robust" in r.evaluation]
        if not rows:
            continue
        eps = sorted(rows[0].evaluation["robust"], key=float)
        ys = [_mean([r.evaluation["robust"][e]["worst"] for r in rows]) for e in eps]
        ax.plot([float(e) for e in eps], ys, "o-", lw=2.2 if label.startswith(EXPERIMENT[0]) else 1.2,
                color="tab:red" if label.startswith(EXPERIMENT[0]) else None, label=label)
    ax.set_xscale("log")
    return _finish(fig, ax, path, "ε (L∞, pixel units)", "robust accuracy (AutoAttack ensemble)")


def plot_reconstructions(result, path, train_images=None, train_labels=None) -> Path:
    """One row per defense: the top reconstruction for each target class (first row: real images)."""
    examples = result.examples
    classes = sorted({int(c) for ex in examples.values() for c in ex["targets"].tolist()})
    rows = [] if train_images is None else [("private", [train_images[train_labels == c][0] for c in classes])]
    for label, ex in examples.items():
        picks = [(ex["targets"] == c).nonzero() for c in classes]
        rows.append((label, [ex["images"][int(sel[0])] if len(sel) else None for sel in picks]))
    return plot_image_grid(rows, path, column_titles=[f"class {c}" for c in classes])


def plot_fit(result, path) -> Path | None:
    """Figure 2 analogue: observed leakage against the regression's prediction."""
    fit = result.analysis.get("ols_hc2")
    if not fit or fit.get("fitted") is None:
        return None
    scored = [r for r in result.rows if "attack" in r.evaluation and defense_class(r.defense).labels_meaningful]
    obs = [r.evaluation["attack"]["att_acc1"] for r in scored]
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    ax.scatter(fit["fitted"], obs, c="tab:blue")
    for r, x, y in zip(scored, fit["fitted"], obs):
        ax.annotate(r.label, (x, y), fontsize=6)
    ax.plot([0, 1], [0, 1], "k--", lw=1)
    ax.set_xlabel("predicted AttAcc@1 (OLS)")
    ax.set_ylabel("observed AttAcc@1")
    ax.set_title(f"adj. R² = {fit['rsquared_adj']:.3f}", fontsize=9)
    return _save(fig, path)


def _row_cells(r, eps, layers):
    ev = r.evaluation
    att = ev.get("attack") or {}
    base = ev.get("baseline") or {}
    ci = att.get("att_acc1_ci")
    cells = [r.label, r.seed, fmt(r.test_acc), fmt(r.train_acc), fmt(r.val_acc),
             fmt(att.get("att_acc1")) + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""), fmt(att.get("eval_conf")),
             fmt(att.get("feature_l2")), fmt((ev.get("selection_only") or {}).get("att_acc1")), fmt(base.get("att_acc1"))]
    cells += [fmt((ev.get("robust") or {}).get(e, {}).get("worst")) for e in eps]
    cells += [fmt((ev.get("hsic") or {}).get(n)) for n in layers]
    extras = ", ".join(f"{k}={v if not isinstance(v, float) else fmt(v)}" for k, v in r.extras.items())
    return cells + [f"{r.seconds:.0f}", extras]


def _coef_table(fit: dict, title: str) -> str:
    rows = "".join(f"<tr><td class='l'>{html.escape(n)}</td><td>{p:.4g}</td><td>{b:.4g}</td><td>[{lo:.4g}, {hi:.4g}]</td>"
                   f"<td>{pv:.3g}</td></tr>" for n, p, b, (lo, hi), pv in
                   zip(fit["names"], fit["params"], fit["bse"], fit["ci"], fit["pvalues"]))
    r2 = fit.get("rsquared_adj", fit.get("pseudo_rsquared"))
    return (f"<h3>{html.escape(title)}</h3><table><tr><th>term</th><th>coef</th><th>SE</th><th>95 % CI</th>"
            f"<th>p</th></tr>{rows}</table><p class='note'>R² = {fmt(r2)}, MAE = {fmt(fit['mae'])}, n = {fit['nobs']}</p>")


def render_mia_html(result, figures) -> str:
    eps = sorted({e for r in result.rows for e in (r.evaluation.get("robust") or {})}, key=float)
    layers = list(dict.fromkeys(n for r in result.rows for n in (r.evaluation.get("hsic") or {})))
    head = (["defense", "seed", "test", "train", "val", "AttAcc@1 [95 % CI]", "EvalConf", "feature L2",
             "AttAcc@1 selection only", "AttAcc@1 gradient inv."] + [f"robust ε={e}" for e in eps] + [f"HSIC(X,{n})" for n in layers]
            + ["seconds", "defense's own measure"])
    body = "".join("<tr>" + "".join(f"<td{' class=l' if i in (0, len(head) - 1) else ''}>{html.escape(str(c))}</td>"
                                    for i, c in enumerate(_row_cells(r, eps, layers))) + "</tr>" for r in result.rows)
    figs = figures_html(figures)
    a = result.analysis
    parts = []
    if "treatment" in a:
        t = a["treatment"]
        parts.append(
            "<h2>Randomised AT-AT vs NoDef (appendix H, Table 21)</h2>"
            f"<p>{t['n_treated']} treated / {t['n_control']} control models. AttAcc@1: control {t['mu_control']:.3f}, "
            f"AT-AT {t['mu_treated']:.3f} (Beta fit). Odds ratio exp(τ) = {t['odds_ratio']:.3g} "
            f"(95 % CI {t['odds_ratio_ci'][0]:.3g}–{t['odds_ratio_ci'][1]:.3g}, z = {t['beta_z']:.2f}, p = {t['beta_p']:.3g}); "
            f"Δ = {t['delta']:+.3f} ({t['delta_ci'][0]:+.3f} to {t['delta_ci'][1]:+.3f}); OLS ATE {t['ols_ate']:+.3f} "
            f"(HC2, t: {t['ols_ci'][0]:+.3f} to {t['ols_ci'][1]:+.3f}). Test accuracy: control "
            f"{t['test_acc_control']:.3f}, AT-AT {t['test_acc_treated']:.3f}.</p>")
        for key, what in (("treatment_selection_only", "the selection-only attack (0 optimisation steps)"),
                          ("treatment_baseline", "plain gradient inversion")):
            if key in a:
                s = a[key]
                parts.append(f"<p>The same experiment for {what}: AttAcc@1 {s['mu_control']:.3f} → {s['mu_treated']:.3f}, "
                             f"odds ratio {s['odds_ratio']:.3g} (95 % CI {s['odds_ratio_ci'][0]:.3g}–"
                             f"{s['odds_ratio_ci'][1]:.3g}); Δ = {s['delta']:+.3f} ({s['delta_ci'][0]:+.3f} to "
                             f"{s['delta_ci'][1]:+.3f}).</p>")
    if "gate" in a:
        g = a["gate"]
        parts.append(f"<p><b>Gate</b> (Table 4): {html.escape(g['defense'])} robust accuracy at ε = {g['eps']:g} is "
                     f"{g['robust_acc']:.3f} over {g['n']} models — "
                     + ("near 0, the paper's regime." if g["near_zero"] else "not near 0 (the paper has 0): the classes "
                        "rest on robust features, and a defense acting on input gradients has less to remove.") + "</p>")
    for key, title in (("ols_hc2", "OLS of AttAcc@1, HC2 errors, t intervals (Table 5)"),
                       ("beta", "Beta regression (logit link), Wald intervals (Table 5)")):
        if key in a:
            parts.append(_coef_table(a[key], title))
        elif f"{key}_error" in a:
            parts.append(f"<p class='note'>{html.escape(title)}: not fitted — {html.escape(a[key + '_error'])}</p>")
    if "regression_note" in a:
        parts.append(f"<p class='note'>{html.escape(a['regression_note'])}</p>")
    if "cost_of_privacy" in a:
        rows = "".join(f"<tr><td class='l'>{html.escape(n)}</td><td>{c['gamma']:.3g}</td><td>[{c['ci'][0]:.3g}, "
                       f"{c['ci'][1]:.3g}]</td></tr>" for n, c in a["cost_of_privacy"].items())
        parts.append("<h3>Cost of privacy (appendix G): pp of robust accuracy per pp of leakage</h3>"
                     f"<table><tr><th>predictor</th><th>γ</th><th>95 % CI</th></tr>{rows}</table>")
    return f"""{page_start(result.title)}
<p>recipe <code>{html.escape(result.recipe)}</code>, preset <code>{html.escape(result.preset)}</code>; {html.escape(result.split)};
{result.elapsed_s:.0f} s. Leakage: a generative-prior attack (PPA-style) whose generator saw only the public
split, scored by an evaluation classifier of another architecture trained on the private set.</p>
{figs}
<table><tr>{"".join(f"<th>{html.escape(h)}</th>" for h in head)}</tr>{body}</table>
{"".join(parts)}
<h2>Settings</h2>
{settings_table(result.settings)}
<p class="note">Numbers are read from <code>results.json</code> beside this page.</p>
</body></html>
"""


def mia_summary(result, out_dir=None) -> str:
    lines = [result.title, f"  recipe {result.recipe} · preset {result.preset} · {result.elapsed_s:.0f} s · {result.split}"]
    for label, rows in _by_label(result).items():
        att = _mean([r.evaluation.get("attack", {}).get("att_acc1") for r in rows])
        rob = ""
        if rows[0].evaluation.get("robust"):
            e0 = sorted(rows[0].evaluation["robust"], key=float)[-1]
            rob = f"  robust@{e0} {fmt(_mean([r.evaluation['robust'][e0]['worst'] for r in rows]))}"
        lines.append(f"  {label:24s} test {fmt(_mean([r.test_acc for r in rows]))}  train "
                     f"{fmt(_mean([r.train_acc for r in rows]))}" + (f"  AttAcc@1 {fmt(att)}" if att is not None else "")
                     + rob + (f"  (n={len(rows)})" if len(rows) > 1 else ""))
    t = result.analysis.get("treatment")
    if t:
        lines.append(f"  randomised AT-AT vs NoDef: AttAcc@1 {t['mu_control']:.3f} → {t['mu_treated']:.3f}, odds ratio "
                     f"{t['odds_ratio']:.3g} (95% CI {t['odds_ratio_ci'][0]:.3g}–{t['odds_ratio_ci'][1]:.3g})")
    for key, what in (("treatment_selection_only", "selection only"), ("treatment_baseline", "gradient inversion")):
        s = result.analysis.get(key)
        if s:
            lines.append(f"    {what}: AttAcc@1 {s['mu_control']:.3f} → {s['mu_treated']:.3f}, odds ratio "
                         f"{s['odds_ratio']:.3g} (95% CI {s['odds_ratio_ci'][0]:.3g}–{s['odds_ratio_ci'][1]:.3g})")
    g = result.analysis.get("gate")
    if g:
        lines.append(f"  gate: {g['defense']} robust accuracy at ε = {g['eps']:g} is {g['robust_acc']:.3f} "
                     f"({'near 0, as in the paper' if g['near_zero'] else 'not near 0: the paper has 0 here'})")
    if out_dir is not None:
        lines.append(f"  report: {out_dir}/report.html   data: {out_dir}/results.json")
    return "\n".join(lines)


def write_mia_report(result, tmp: Path, split=None) -> list:
    figures = [("Accuracy per defense (train / test)", plot_accuracy_bars(result, tmp / "accuracy.png").name)]
    if any("attack" in r.evaluation for r in result.rows):
        figures.append(("Leakage against accuracy (Figure 4 analogue)", plot_leakage(result, tmp / "leakage.png").name))
    if any("robust" in r.evaluation for r in result.rows):
        figures.append(("Robust accuracy against ε (Table 4 analogue)", plot_robustness(result, tmp / "robust.png").name))
    if result.examples:
        figures.append(("Reconstructions: the most confident per class and defense (Figure 3 analogue)",
                        plot_reconstructions(result, tmp / "reconstructions.png",
                                             *(split if split is not None else (None, None))).name))
    fitfig = plot_fit(result, tmp / "fit.png")
    if fitfig is not None:
        figures.append(("Observed vs predicted leakage (Figure 2 analogue)", fitfig.name))
    return figures
