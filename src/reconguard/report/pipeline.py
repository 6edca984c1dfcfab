"""Run a recipe and write its report folder — results.json, PNG plots, report.html — atomically."""

from __future__ import annotations

from pathlib import Path

from ..experiments import run_recipe
from ..io import atomic_directory, write_json_atomic, write_text_atomic
from .html import embed_images, render_html
from .plots import plot_reconstructions, plot_rtc, plot_scatter, plot_score_quality, plot_sweep


def write_report(result, out_dir: str | Path, *, command: str | None = None, force: bool = False) -> Path:
    """Write ``result`` into ``out_dir`` (replaced whole on success; untouched on failure). ``out_dir`` must be
    new or hold an earlier report of the same ``command`` (default ``run <recipe>``), unless ``force``."""
    out_dir = Path(out_dir)
    command = command or f"run {result.recipe}"
    if hasattr(result, "analysis"):  # a model-inversion experiment
        from .mia import render_mia_html, write_mia_report

        with atomic_directory(out_dir, command, force) as tmp:
            write_json_atomic(tmp / "results.json", result)
            figures = write_mia_report(result, tmp, _private_examples(result))
            _write_page(tmp, render_mia_html(result, figures))
        return out_dir
    if not hasattr(result, "points") and hasattr(result, "examples"):  # the attack suite on challenges
        from .attacks import plot_attack_grid, render_attacks_html

        with atomic_directory(out_dir, command, force) as tmp:
            write_json_atomic(tmp / "results.json", result)
            figures = []
            for i, (label, ex) in enumerate(result.examples.items()):
                figures.append((f"{label}: original | reconstructions",
                                plot_attack_grid(label, ex, tmp / f"grid_{i}.png").name))
            _write_page(tmp, render_attacks_html(result, figures))
        return out_dir
    if not hasattr(result, "points"):  # an accuracy experiment
        from .accuracy import plot_accuracy, render_accuracy_html

        with atomic_directory(out_dir, command, force) as tmp:
            write_json_atomic(tmp / "results.json", result)
            figures = [("Test accuracy against k", plot_accuracy(result, tmp / "accuracy.png").name)]
            _write_page(tmp, render_accuracy_html(result, figures))
        return out_dir
    kind = result.settings.get("plot", "axis")
    with atomic_directory(out_dir, command, force) as tmp:
        write_json_atomic(tmp / "results.json", result)
        if kind == "axis":
            figures = [("Bounds and attacks per dataset and noise level", plot_sweep(result, tmp / "bounds.png").name),
                       ("Ratio to ceiling", plot_rtc(result, tmp / "rtc.png").name)]
        color_by = {"axis": "family", "scatter": "family", "k": "k", "tau": "tau"}[kind]
        if kind != "axis":
            figures = [(f"Attack MSE against the bound, coloured by {color_by}",
                        plot_scatter(result, tmp / "bounds.png", color_by).name)]
        if any(p.lpips_bound is not None for p in result.points):
            trunk = result.extras.get("lpips_trunk", "random")
            caption = f"LPIPS bound and attack LPIPS (Figures 3/6; VGG trunk: {trunk})"
            if kind == "axis":
                figures.append((caption, plot_sweep(result, tmp / "bounds_lpips.png", metric="lpips").name))
            else:
                figures.append((caption, plot_scatter(result, tmp / "bounds_lpips.png", color_by, "lpips").name))
        quality = result.extras.get("score_quality") or {}
        if quality:
            figures.append(("Score-matrix quality (Figure 7)", plot_score_quality(quality, tmp / "score_quality.png").name))
        for (ds, sigma), ex in sorted(result.examples.items()):
            if ex["rows"]:
                name = f"recon_{ds}_sigma{sigma:g}.png"
                plot_reconstructions(ex, ds, sigma, tmp / name, image_shape=_image_shape(result, ex))
                figures.append((f"Reconstructions with RTC, {ds}, σ = {sigma:g} (Figures 10/11)", name))
        _write_page(tmp, render_html(result, figures))
    return out_dir


def _write_page(folder: Path, page: str) -> None:
    """report.html, self-contained: every figure is embedded (the PNGs stay beside it as well)."""
    write_text_atomic(folder / "report.html", embed_images(page, folder))


def _image_shape(result, example) -> tuple[int, ...] | None:
    d = example["originals"].shape[1]
    size = int(result.settings.get("size", 0))
    if size and d % (size * size) == 0:
        c = d // (size * size)
        return (c, size, size) if c > 1 else (size, size)
    return None


def run_to_report(recipe: str | Path, preset: str = "cpu", out_dir: str | Path | None = None, *,
                  progress: bool = True, overrides: dict | None = None, device=None, command: str | None = None,
                  force: bool = False, resume: bool = False):
    """``run_recipe`` then ``write_report``; returns ``(result, out_dir)``. The output folder is checked
    before the run starts (``reconguard.io.check_output``), so a refused folder costs no compute. Finished
    units are kept in ``.<out>.units/`` beside it until the report is written; ``resume`` loads them
    (without it they are cleared first, so a run starts fresh)."""
    import shutil

    from ..io import check_output

    out_dir = Path(out_dir) if out_dir is not None else Path("runs") / Path(str(recipe)).stem
    check_output(out_dir, command or f"run {Path(str(recipe)).stem}", force=force)
    units = out_dir.parent / f".{out_dir.name}.units"
    if not resume:
        shutil.rmtree(units, ignore_errors=True)
    result = run_recipe(recipe, preset, progress=progress, overrides=overrides, device=device, units=units)
    written = write_report(result, out_dir, command=command, force=force)
    shutil.rmtree(units, ignore_errors=True)
    return result, written


def _private_examples(result):
    """Real private training images for the reconstruction grid's first row (digits only; None otherwise)."""
    if result.settings.get("dataset", "digits") != "digits":
        return None
    from ..data.splits import digits_mia_split

    split = digits_mia_split(int(result.settings.get("size", 16)), int(result.settings.get("split_seed", 0)))
    return split.train.images, split.train.labels
