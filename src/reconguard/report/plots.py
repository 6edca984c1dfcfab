"""Plots for sweep results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

_AXIS_LABEL = {"m": "embedding size m", "alpha": "eigenvalue skew α"}
_BOUND_LABEL = {"mse": "our bound (Cor. 1)", "noiseless_mse": "our bound (Cor. 2)"}
_ATTACK_STYLE = {"mmse": ("o", "tab:orange", "MMSE attack (Bayes-optimal)"), "map": ("s", "tab:green", "MAP (opt.) attack"),
                 "decoder": ("^", "tab:purple", "decoder (DNN) attack")}


def _save(fig, path) -> Path:
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _grid(result):
    datasets, sigmas = result.datasets(), result.sigmas()
    fig, axes = plt.subplots(len(datasets), len(sigmas), figsize=(5.2 * len(sigmas), 3.9 * len(datasets)),
                             squeeze=False)
    return fig, axes, datasets, sigmas


def plot_sweep(result, path: str | Path) -> Path:
    """Figure-2-style grid, one panel per dataset × σ: bound (solid), Maeng's bound (dotted, σ > 0),
    ceiling (dashed), each attack (markers, ±2 s.e.). Log y; values at or below 1e-12 × ceiling
    (exact recovery up to round-off) are drawn on the panel's floor, a bound of 0 marked '0'."""
    fig, axes, datasets, sigmas = _grid(result)
    for r, ds in enumerate(datasets):
        for c, sigma in enumerate(sigmas):
            ax, pts = axes[r][c], result.select(ds, sigma)
            pts = [p for p in pts if p.tau == pts[0].tau and p.k == pts[0].k]
            xs = [p.x for p in pts]
            tiny = 1e-12 * pts[0].ceiling
            vals = [v for p in pts for v in [p.bound, p.maeng, p.ceiling] + [a["mse"] for a in p.attacks.values()]]
            positives = [v for v in vals if v and v > tiny]
            floor = min(positives) / 10 if positives else tiny
            clip = lambda vs: [v if v is not None and v > floor else floor for v in vs]  # noqa: E731
            ax.plot(xs, clip([p.bound for p in pts]), "-", color="tab:blue", lw=2,
                    label=_BOUND_LABEL.get(pts[0].bound_name, pts[0].bound_name))
            if sigma > 0:
                ax.plot(xs, clip([p.maeng for p in pts]), ":", color="tab:blue", lw=1.5, label="Maeng et al. (Thm. 1)")
            ax.axhline(pts[0].ceiling, ls="--", color="grey", lw=1, label="ceiling Tr(S⁻¹)/d")
            names = list(dict.fromkeys(a for p in pts for a in p.attacks))
            for name in names:
                sub = [p for p in pts if name in p.attacks]
                ys = np.array(clip([p.attacks[name]["mse"] for p in sub]))
                err = np.array([2 * p.attacks[name]["stderr"] if math.isfinite(p.attacks[name]["stderr"]) else 0
                                for p in sub])
                marker, color, label = _ATTACK_STYLE.get(name, ("x", "black", name))
                ax.errorbar([p.x for p in sub], ys, yerr=np.minimum(err, ys * 0.999), fmt=marker, ms=4,
                            color=color, label=label, alpha=0.85)
            for p in pts:
                if p.bound <= tiny:
                    ax.annotate("0", (p.x, floor), textcoords="offset points", xytext=(0, 4), ha="center",
                                fontsize=7, color="tab:blue")
            ax.set_yscale("log")
            ax.set_ylim(bottom=floor * 0.8)
            ax.set_xlabel(_AXIS_LABEL.get(pts[0].axis, pts[0].axis))
            ax.set_ylabel("MSE / d")
            ax.set_title(f"{ds}, σ = {sigma:g}  (d = {pts[0].d})")
            ax.grid(True, which="both", alpha=0.25)
            ax.legend(fontsize=7)
    fig.suptitle(result.title, fontsize=11)
    return _save(fig, path)


def plot_scatter(result, path: str | Path, color_by: str = "family") -> Path:
    """Figure-5/8/9-style: each attack's MSE (y) against the bound (x); the shaded region below the
    diagonal is where an attack would beat the bound. Colour by encoder family, k or τ."""
    fig, axes, datasets, sigmas = _grid(result)
    for r, ds in enumerate(datasets):
        for c, sigma in enumerate(sigmas):
            ax, pts = axes[r][c], result.select(ds, sigma)
            groups = sorted({getattr(p, color_by) if getattr(p, color_by) is not None else "—" for p in pts},
                            key=lambda v: (isinstance(v, str), v))
            cmap = plt.get_cmap("tab10")
            xs_all, ys_all = [], []
            tiny = 1e-12 * pts[0].ceiling if pts else 0.0  # exact recovery up to round-off counts as 0
            positives = [v for p in pts for v in [p.bound] + [a["mse"] for a in p.attacks.values()] if v > tiny]
            floor = min(positives) / 10 if positives else 1e-12  # zeros are drawn on the left / bottom edge
            for gi, grp in enumerate(groups):
                for name in dict.fromkeys(a for p in pts for a in p.attacks):
                    sub = [p for p in pts if (getattr(p, color_by) if getattr(p, color_by) is not None else "—") == grp
                           and name in p.attacks]
                    if not sub:
                        continue
                    xs = [max(p.bound, floor) for p in sub]
                    ys = [max(p.attacks[name]["mse"], floor) for p in sub]
                    xs_all += xs
                    ys_all += ys
                    marker = _ATTACK_STYLE.get(name, ("x",))[0]
                    label = f"{color_by}={grp:g}" if isinstance(grp, float) else f"{grp}"
                    ax.scatter(xs, ys, marker=marker, color=cmap(gi % 10), s=22, alpha=0.85,
                               label=f"{label} · {name}")
            if xs_all:
                lo = floor / 2
                hi = max(xs_all + ys_all) * 2
                ax.plot([lo, hi], [lo, hi], "k-", lw=1)
                ax.fill_between([lo, hi], [lo, lo], [lo, hi], color="red", alpha=0.08, label="attack < bound")
                ax.set_xlim(lo, hi)
                ax.set_ylim(lo, hi)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("bound (MSE / d; 0 drawn at the edge)")
            ax.set_ylabel("attack MSE / d")
            name = {"mse": "Cor. 1", "noiseless_mse": "Cor. 2"}.get(pts[0].bound_name if pts else "", "")
            ax.set_title(f"{ds}, σ = {sigma:g}  ({name})")
            ax.grid(True, which="both", alpha=0.25)
            ax.legend(fontsize=6, ncol=2)
    fig.suptitle(result.title, fontsize=11)
    return _save(fig, path)


def plot_rtc(result, path: str | Path) -> Path:
    """RTC = ln(ceiling / bound) against the sweep axis, one line per dataset × σ (infinite RTC omitted)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for ds in result.datasets():
        for sigma in result.sigmas():
            pts = [p for p in result.select(ds, sigma) if math.isfinite(p.rtc)]
            if pts:
                ax.plot([p.x for p in pts], [p.rtc for p in pts], "o-", ms=3, label=f"{ds}, σ={sigma:g}")
    first = result.points[0]
    ax.set_xlabel(_AXIS_LABEL.get(first.axis, first.axis))
    ax.set_ylabel("RTC = ln(ceiling / bound)")
    ax.set_title("Ratio to ceiling (lower = more private; §5.5)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_reconstructions(example: dict, dataset: str, sigma: float, path: str | Path,
                         image_shape: tuple[int, ...] | None = None, max_rows: int = 7) -> Path:
    """Figure-10/11-style grid: the originals, then each encoder's best reconstruction, labelled with RTC."""
    originals = example["originals"].numpy()
    rows = example["rows"]
    if len(rows) > max_rows:
        keep = np.unique(np.linspace(0, len(rows) - 1, max_rows).round().astype(int))
        rows = [rows[i] for i in keep]
    n, d = originals.shape
    shape = image_shape or (int(round(math.sqrt(d))),) * 2
    table = [("original", originals)] + [(f"{label}\nRTC={rtc:.3g}", rec.numpy()) for label, rtc, rec in rows]
    fig, axes = plt.subplots(len(table), n, figsize=(1.0 * n + 1.6, 1.0 * len(table) + 0.4), squeeze=False)
    for i, (label, imgs) in enumerate(table):
        for j in range(n):
            img = np.clip(imgs[j].reshape(shape), 0, 1)
            if img.ndim == 3:
                img = img[0] if img.shape[0] == 1 else np.transpose(img, (1, 2, 0))
            ax = axes[i][j]
            ax.imshow(img, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(label, fontsize=6, rotation=0, ha="right", va="center")
    fig.suptitle(f"Reconstructions — {dataset}, σ = {sigma:g}", fontsize=9)
    return _save(fig, path)


def plot_score_quality(qualities: dict, path: str | Path) -> Path:
    """Figure 7: sorted eigenvalues of Σ^½ S Σ^½ per score source, against 1 and the sampling-noise floor."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, q in qualities.items():
        mu = q.eigenvalues.numpy()
        ax.plot(np.arange(1, len(mu) + 1), mu, lw=1.5, label=f"{label} ({100 * (1 - q.fraction_below_floor):.0f}% ≥ 1)")
        ax.axhline(q.noise_floor, color="grey", ls=":", lw=1)
    ax.axhline(1.0, color="red", ls="--", lw=1, label="1 (Cramér–Rao)")
    ax.set_yscale("log")
    ax.set_xlabel("eigenvalue index (ascending)")
    ax.set_ylabel("eigenvalue of Σ^½ S Σ^½")
    ax.set_title("Score-matrix quality (§6.4.1; dotted: sampling-noise floor)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    return _save(fig, path)
