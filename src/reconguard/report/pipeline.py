"""Run a recipe and write its report folder — results.json, PNG plots, report.html — atomically."""

from __future__ import annotations

from pathlib import Path

from ..experiments import run_recipe
from ..io import atomic_directory, write_json_atomic, write_text_atomic
from .html import render_html
from .plots import plot_reconstructions, plot_rtc, plot_sweep


def write_report(result, out_dir: str | Path) -> Path:
    """Write ``result`` into ``out_dir`` (replaced whole on success; untouched on failure)."""
    out_dir = Path(out_dir)
    with atomic_directory(out_dir) as tmp:
        write_json_atomic(tmp / "results.json", result)
        figures = [("Bounds and attack MSE per dataset and noise level", plot_sweep(result, tmp / "bounds.png").name),
                   ("Ratio to ceiling", plot_rtc(result, tmp / "rtc.png").name)]
        for (ds, sigma), ex in sorted(result.examples.items()):
            if ex["recons"]:
                name = f"recon_{ds}_sigma{sigma:g}.png"
                size = int(result.settings.get("size", 0)) or None
                plot_reconstructions(ex, ds, sigma, result.points[0].axis, tmp / name,
                                     image_shape=(size, size) if size else None)
                figures.append((f"Reconstructions, {ds}, σ = {sigma:g}", name))
        write_text_atomic(tmp / "report.html", render_html(result, figures))
    return out_dir


def run_to_report(recipe: str | Path, preset: str = "cpu", out_dir: str | Path | None = None, *,
                  progress: bool = True, overrides: dict | None = None):
    """``run_recipe`` then ``write_report``; returns ``(result, out_dir)``."""
    result = run_recipe(recipe, preset, progress=progress, overrides=overrides)
    out_dir = Path(out_dir) if out_dir is not None else Path("runs") / result.recipe
    return result, write_report(result, out_dir)
