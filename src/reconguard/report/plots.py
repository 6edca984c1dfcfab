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


def _positive(values, floor):
    """Values at or below the panel's floor (zeros, round-off) are drawn on the floor."""
    return [v if v is not None and v > floor else floor for v in values]


def plot_sweep(result, path: str | Path) -> Path:
    """Figure-2-style grid: one panel per dataset (rows) × σ (columns); bound (solid), Maeng's
    bound (dotted, σ > 0), ceiling (dashed), attack MSE (markers, ±2 s.e.). Log y axis; values
    that are exactly 0 are drawn at the panel's floor and marked '0'."""
    datasets, sigmas = result.datasets(), result.sigmas()
    fig, axes = plt.subplots(len(datasets), len(sigmas), figsize=(5.2 * len(sigmas), 3.8 * len(datasets)),
                             squeeze=False)
    for r, ds in enumerate(datasets):
        for c, sigma in enumerate(sigmas):
            ax, pts = axes[r][c], result.select(ds, sigma)
            xs = [p.x for p in pts]
            # below 1e-12 × ceiling is float round-off of an exact recovery: drawn at the floor as "0"
            tiny = 1e-12 * pts[0].ceiling
            positives = [v for p in pts for v in (p.bound, p.attack_mse, p.maeng, p.ceiling) if v and v > tiny]
            floor = min(positives) / 10 if positives else tiny
            ax.plot(xs, _positive([p.bound for p in pts], floor), "-", color="tab:blue", lw=2,
                    label=_BOUND_LABEL.get(pts[0].bound_name, pts[0].bound_name))
            if sigma > 0:
                ax.plot(xs, _positive([p.maeng for p in pts], floor), ":", color="tab:blue", lw=1.5,
                        label="Maeng et al. (Thm. 1)")
            ax.axhline(pts[0].ceiling, ls="--", color="grey", lw=1, label="ceiling Tr(S⁻¹)/d")
            if any(p.attack_mse is not None for p in pts):
                ys = np.array(_positive([p.attack_mse for p in pts], floor))
                err = np.array([2 * (p.attack_stderr or 0.0) for p in pts])
                ax.errorbar(xs, ys, yerr=np.minimum(err, ys * 0.999), fmt="o", ms=4, color="tab:orange",
                            label="MMSE attack (Bayes-optimal)")
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
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_reconstructions(example: dict, dataset: str, sigma: float, axis: str, path: str | Path,
                         image_shape: tuple[int, int] | None = None, max_rows: int = 7) -> Path:
    """Grid: first row the originals (prior samples), then the attack's reconstruction per encoder."""
    originals = example["originals"].numpy()
    recons = [r.numpy() for r in example["recons"]]
    xs = example["x"]
    if len(xs) > max_rows:
        keep = np.unique(np.linspace(0, len(xs) - 1, max_rows).round().astype(int))
        xs, recons = [xs[i] for i in keep], [recons[i] for i in keep]
    n, d = originals.shape
    side = image_shape or (int(round(math.sqrt(d))),) * 2
    rows = [("original", originals)] + [(f"{axis}={x:g}", r) for x, r in zip(xs, recons)]
    fig, axes = plt.subplots(len(rows), n, figsize=(1.0 * n + 0.9, 1.0 * len(rows) + 0.4), squeeze=False)
    for i, (label, imgs) in enumerate(rows):
        for j in range(n):
            ax = axes[i][j]
            ax.imshow(np.clip(imgs[j].reshape(side), 0, 1), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(label, fontsize=8)
    fig.suptitle(f"MMSE reconstructions — {dataset}, σ = {sigma:g}", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
