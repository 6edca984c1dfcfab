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
_METRIC = {  # what each metric's panels read: bound field, attack value / s.e. keys, axis label
    "mse": ("bound", "mse", "stderr", "MSE / d"),
    "lpips": ("lpips_bound", "lpips", "lpips_stderr", "LPIPS"),
}
_ATTACK_STYLE = {"mmse": ("o", "tab:orange", "MMSE attack (Bayes-optimal)"), "map": ("s", "tab:green", "MAP (opt.) attack"),
                 "decoder": ("^", "tab:purple", "decoder (DNN) attack")}


def _save(fig, path, tight_bbox: bool = False) -> Path:
    """``tight_bbox``: the saved area grows to every text (labels drawn outside the axes, as ``plot_image_grid``'s)."""
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110, **({"bbox_inches": "tight", "pad_inches": 0.1} if tight_bbox else {}))
    plt.close(fig)
    return path


def _grid(result):
    datasets, sigmas = result.datasets(), result.sigmas()
    fig, axes = plt.subplots(len(datasets), len(sigmas), figsize=(5.2 * len(sigmas), 3.9 * len(datasets)),
                             squeeze=False)
    return fig, axes, datasets, sigmas


def _bound_label(p, metric: str) -> str:
    if metric == "lpips":
        return "LPIPS bound (Thm. 2)" if p.sigma > 0 else "LPIPS bound (Cor. 3)"
    return _BOUND_LABEL.get(p.bound_name, p.bound_name)


def plot_sweep(result, path: str | Path, metric: str = "mse") -> Path:
    """Figure-2-style grid, one panel per dataset × σ: bound (solid), Maeng's bound (dotted, σ > 0),
    ceiling (dashed), each attack (markers, ±2 s.e.). Log y; values at or below 1e-9 × ceiling
    (exact recovery up to round-off) are drawn on the panel's floor, a bound of 0 marked '0'."""
    fig, axes, datasets, sigmas = _grid(result)
    for r, ds in enumerate(datasets):
        for c, sigma in enumerate(sigmas):
            bfield, vkey, skey, ylabel = _METRIC[metric]
            ax, pts = axes[r][c], result.select(ds, sigma)
            pts = [p for p in pts if p.tau == pts[0].tau and p.k == pts[0].k]
            xs = [p.x for p in pts]
            tiny = 1e-9 * pts[0].ceiling
            extra = [p.maeng for p in pts] + [pts[0].ceiling] if metric == "mse" else []
            vals = [getattr(p, bfield) for p in pts] + extra + [a.get(vkey) for p in pts for a in p.attacks.values()]
            positives = [v for v in vals if v and v > tiny]
            floor = min(positives) / 10 if positives else tiny
            clip = lambda vs: [v if v is not None and v > floor else floor for v in vs]  # noqa: E731
            ax.plot(xs, clip([getattr(p, bfield) for p in pts]), "-", color="tab:blue", lw=2,
                    label=_bound_label(pts[0], metric))
            unsat = [p for p in pts if getattr(p, "saturation", "").startswith("not saturated")]
            if metric == "mse" and unsat:  # where the E[G] sample missed directions: the valid fallback's points,
                # and the paper's plug-in, which overstates there
                ax.plot([p.x for p in unsat], clip([p.bound for p in unsat]), "o", mfc="none", color="tab:blue",
                        label="E[G] sample not saturated (tangent / Thm. 1)")
                ax.plot([p.x for p in unsat], clip([p.bound_plugin for p in unsat]), "x", color="tab:red",
                        label="plug-in (paper; overstates here)")
            if metric == "mse":
                if sigma > 0:
                    ax.plot(xs, clip([p.maeng for p in pts]), ":", color="tab:blue", lw=1.5,
                            label="Maeng et al. (Thm. 1)")
                ax.axhline(pts[0].ceiling, ls="--", color="grey", lw=1, label="ceiling Tr(S⁻¹)/d")
            names = list(dict.fromkeys(a for p in pts for a in p.attacks))
            for name in names:
                sub = [p for p in pts if vkey in p.attacks.get(name, {})]
                if not sub:
                    continue
                ys = np.array(clip([p.attacks[name][vkey] for p in sub]))
                err = np.array([2 * p.attacks[name][skey] if math.isfinite(p.attacks[name][skey]) else 0
                                for p in sub])
                marker, color, label = _ATTACK_STYLE.get(name, ("x", "black", name))
                ax.errorbar([p.x for p in sub], ys, yerr=np.minimum(err, ys * 0.999), fmt=marker, ms=4,
                            color=color, label=label, alpha=0.85)
            for p in pts:
                if (getattr(p, bfield) or 0.0) <= tiny:
                    ax.annotate("0", (p.x, floor), textcoords="offset points", xytext=(0, 4), ha="center",
                                fontsize=7, color="tab:blue")
            ax.set_yscale("log")
            ax.set_ylim(bottom=floor * 0.8)
            ax.set_xlabel(_AXIS_LABEL.get(pts[0].axis, pts[0].axis))
            ax.set_ylabel(ylabel)
            ax.set_title(f"{ds}, σ = {sigma:g}  (d = {pts[0].d})")
            ax.grid(True, which="both", alpha=0.25)
            ax.legend(fontsize=7)
    fig.suptitle(result.title, fontsize=11)
    return _save(fig, path)


def plot_scatter(result, path: str | Path, color_by: str = "family", metric: str = "mse") -> Path:
    """Figure-5/8/9-style: each attack's MSE (y) against the bound (x); the shaded region below the
    diagonal is where an attack would beat the bound. Colour by encoder family, k or τ."""
    fig, axes, datasets, sigmas = _grid(result)
    for r, ds in enumerate(datasets):
        for c, sigma in enumerate(sigmas):
            bfield, vkey, _, ylabel = _METRIC[metric]
            ax, pts = axes[r][c], result.select(ds, sigma)
            groups = sorted({getattr(p, color_by) if getattr(p, color_by) is not None else "—" for p in pts},
                            key=lambda v: (isinstance(v, str), v))
            cmap = plt.get_cmap("tab10")
            xs_all, ys_all = [], []
            tiny = 1e-9 * pts[0].ceiling if pts else 0.0  # exact recovery up to round-off counts as 0
            positives = [v for p in pts for v in [getattr(p, bfield)] + [a.get(vkey) for a in p.attacks.values()]
                         if v is not None and v > tiny]
            floor = min(positives) / 10 if positives else 1e-12  # zeros are drawn on the left / bottom edge
            for gi, grp in enumerate(groups):
                for name in dict.fromkeys(a for p in pts for a in p.attacks):
                    sub = [p for p in pts if (getattr(p, color_by) if getattr(p, color_by) is not None else "—") == grp
                           and vkey in p.attacks.get(name, {}) and getattr(p, bfield) is not None]
                    if not sub:
                        continue
                    xs = [max(getattr(p, bfield), floor) for p in sub]
                    ys = [max(p.attacks[name][vkey], floor) for p in sub]
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
            ax.set_xlabel(f"bound ({ylabel}; 0 drawn at the edge)")
            ax.set_ylabel(f"attack {ylabel}")
            name = ({"mse": "Cor. 1", "noiseless_mse": "Cor. 2"}.get(pts[0].bound_name if pts else "", "")
                    if metric == "mse" else ("Thm. 2" if sigma > 0 else "Cor. 3"))
            ax.set_title(f"{ds}, σ = {sigma:g}  ({name})")
            ax.grid(True, which="both", alpha=0.25)
            ax.legend(fontsize=6, ncol=2)
    fig.suptitle(result.title, fontsize=11)
    return _save(fig, path)


def plot_rtc(result, path: str | Path) -> Path:
    """RTC = ln(ceiling / bound) against the sweep axis, one line per dataset × σ (infinite RTC omitted).

    Colour = dataset, line style and marker = σ, drawn from thick to thin: series that coincide (e.g. the
    Gaussian prior at σ = 0 and 1e-3) stay visible one over the other."""
    fig, ax = plt.subplots(figsize=(6, 4))
    styles = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    series = [(i, j, ds, sigma) for i, ds in enumerate(result.datasets()) for j, sigma in enumerate(result.sigmas())]
    for n, (i, j, ds, sigma) in enumerate(series):
        pts = [p for p in result.select(ds, sigma) if math.isfinite(p.rtc)]
        if pts:
            ls, marker = styles[j % len(styles)]
            width = 1.0 + 2.5 * (len(series) - 1 - n) / max(1, len(series) - 1)
            ax.plot([p.x for p in pts], [p.rtc for p in pts], ls=ls, marker=marker, lw=width, ms=3 + width,
                    mfc="none" if n % 2 else None, color=colours[i % len(colours)], alpha=0.85,
                    label=f"{ds}, σ={sigma:g}")
    first = result.points[0]
    ax.set_xlabel(_AXIS_LABEL.get(first.axis, first.axis))
    ax.set_ylabel("RTC = ln(ceiling / bound)")
    ax.set_title("Ratio to ceiling (lower = more private; §5.5)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def _cell(img, shape=None) -> np.ndarray:
    """One image — flat (``shape`` gives its C×H×W or H×W), H×W or C×H×W (C = 1 or 3), a tensor or an array — as
    H×W or H×W×3 in [0, 1]."""
    a = img.detach().cpu().float().numpy() if hasattr(img, "detach") else np.asarray(img, dtype=np.float32)
    if a.ndim == 1:
        a = a.reshape(shape or (int(round(math.sqrt(a.size))),) * 2)
    if a.ndim == 3:
        a = a[0] if a.shape[0] == 1 else np.transpose(a, (1, 2, 0))
    return np.clip(a, 0, 1)


def image_mosaic(rows, shape=None) -> tuple[np.ndarray, int, int, int]:
    """``rows`` of images (``_cell``'s forms; None: a blank cell) as one white canvas with a ``pad``-pixel gap around
    each H×W cell (grey H×W×1 cells become H×W×3 when any image is RGB): (canvas, H, W, pad)."""
    cells = [[None if im is None else _cell(im, shape) for im in images] for images in rows]
    first = next(c for row in cells for c in row if c is not None)
    h, w = first.shape[:2]
    pad = max(1, h // 12)
    ncols = max(len(row) for row in cells)
    colour = any(c is not None and c.ndim == 3 for row in cells for c in row)
    canvas = np.ones((len(cells) * (h + pad) + pad, ncols * (w + pad) + pad) + ((3,) if colour else ()), dtype=np.float32)
    for i, row in enumerate(cells):
        for j, c in enumerate(row):
            if c is not None:
                y, x = pad + i * (h + pad), pad + j * (w + pad)
                canvas[y:y + h, x:x + w] = c[..., None] if colour and c.ndim == 2 else c
    return canvas, h, w, pad


def plot_image_grid(rows, path: str | Path, title: str = "", column_titles=None, shape=None) -> Path:
    """A grid of images — ``rows``: ``[(label, [image or None, …]), …]`` — drawn as one ``image_mosaic`` in one axes,
    each row's label on its left, ``column_titles`` above. One image call, not one axes per cell: the demo's four
    reconstruction grids took 4.9 s as 165 axes."""
    canvas, h, w, pad = image_mosaic([images for _, images in rows], shape)
    ncols = (canvas.shape[1] - pad) // (w + pad)
    fig, ax = plt.subplots(figsize=(0.9 * ncols + 1.4, 0.95 * len(rows) + 0.5))
    ax.imshow(canvas, cmap="gray" if canvas.ndim == 2 else None, vmin=0, vmax=1, interpolation="nearest")
    ax.set_axis_off()
    for i, (label, _) in enumerate(rows):
        ax.text(-pad, pad + i * (h + pad) + h / 2, label, ha="right", va="center", fontsize=7)
    for j, t in enumerate(column_titles or []):
        ax.text(pad + j * (w + pad) + w / 2, 0, t, ha="center", va="bottom", fontsize=7)
    if title:
        ax.set_title(title, fontsize=9, pad=14 if column_titles else 6)
    return _save(fig, path, tight_bbox=True)


def plot_reconstructions(example: dict, dataset: str, sigma: float, path: str | Path,
                         image_shape: tuple[int, ...] | None = None, max_rows: int = 7) -> Path:
    """Figure-10/11-style grid: the originals, then each encoder's best reconstruction, labelled with RTC."""
    originals = example["originals"].numpy()
    rows = example["rows"]
    if len(rows) > max_rows:
        keep = np.unique(np.linspace(0, len(rows) - 1, max_rows).round().astype(int))
        rows = [rows[i] for i in keep]
    table = [("original", originals)] + [(f"{label}\nRTC={rtc:.3g}", rec.numpy()) for label, rtc, rec in rows]
    return plot_image_grid([(label, list(imgs)) for label, imgs in table], path,
                           f"Reconstructions — {dataset}, σ = {sigma:g}", shape=image_shape)


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
