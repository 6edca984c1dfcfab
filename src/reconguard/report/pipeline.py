"""Run a recipe and write its report folder — results.json, PNG plots, report.html — atomically."""

from __future__ import annotations

from pathlib import Path

from ..experiments import run_recipe
from ..io import atomic_directory, write_json_atomic, write_text_atomic
from .html import embed_images, render_html
from .plots import plot_reconstructions, plot_rtc, plot_scatter, plot_score_quality, plot_sweep


def _sweep_figures(result, tmp: Path) -> list:
    kind = result.settings.get("plot", "axis")
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
    return figures


def _mia_figures(result, tmp: Path) -> list:
    from .mia import write_mia_report
    return write_mia_report(result, tmp, _private_examples(result))


def _attack_figures(result, tmp: Path) -> list:
    from .attacks import plot_attack_grid
    return [(f"{label}: original | reconstructions", plot_attack_grid(label, ex, tmp / f"grid_{i}.png").name)
            for i, (label, ex) in enumerate(result.examples.items())]


def _accuracy_figures(result, tmp: Path) -> list:
    from .accuracy import plot_accuracy
    return [("Test accuracy against k", plot_accuracy(result, tmp / "accuracy.png").name)]


def _writers() -> dict:
    """Result kind → (figures(result, folder), page(result, figures), summary(result, out_dir))."""
    from ..experiments.instahide import AccuracyResult
    from ..experiments.instahide_attacks import AttackSuiteResult
    from ..experiments.mia import MIAResult
    from ..audit import ClassifierAudit, EncoderAudit, EncryptedAudit
    from ..experiments.sweep import SweepResult
    from .accuracy import accuracy_summary, render_accuracy_html
    from .audit import (classifier_audit_summary, classifier_figures, encoder_audit_summary, encoder_figures,
                        encrypted_audit_summary, encrypted_figures, render_classifier_audit, render_encoder_audit,
                        render_encrypted_audit)
    from .attacks import attacks_summary, render_attacks_html
    from .html import summary_text as sweep_summary
    from .mia import mia_summary, render_mia_html

    return {SweepResult: (_sweep_figures, render_html, sweep_summary),
            MIAResult: (_mia_figures, render_mia_html, mia_summary),
            AttackSuiteResult: (_attack_figures, render_attacks_html, attacks_summary),
            AccuracyResult: (_accuracy_figures, render_accuracy_html, accuracy_summary),
            EncoderAudit: (encoder_figures, render_encoder_audit, encoder_audit_summary),
            ClassifierAudit: (classifier_figures, render_classifier_audit, classifier_audit_summary),
            EncryptedAudit: (encrypted_figures, render_encrypted_audit, encrypted_audit_summary)}


def _writer(result) -> tuple:
    for kind, writer in _writers().items():
        if isinstance(result, kind):
            return writer
    raise TypeError(f"no report writer for {type(result).__name__}")


def summary_text(result, out_dir=None) -> str:
    """The terminal summary of any experiment result."""
    return _writer(result)[2](result, out_dir)


def write_report(result, out_dir: str | Path, *, command: str | None = None, force: bool = False) -> Path:
    """Write ``result`` into ``out_dir`` (replaced whole on success; untouched on failure). ``out_dir`` must be
    new or hold an earlier report of the same ``command`` (default ``run <recipe>``), unless ``force``."""
    out_dir = Path(out_dir)
    figures_of, page, _ = _writer(result)
    kind = getattr(result, "kind", None)
    with atomic_directory(out_dir, command or (f"audit {kind}" if kind else f"run {result.recipe}"), force) as tmp:
        write_json_atomic(tmp / "results.json", result)
        _write_page(tmp, page(result, figures_of(result, tmp)))
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
    from ..io import check_output, remove_owned

    out_dir = Path(out_dir) if out_dir is not None else Path("runs") / Path(str(recipe)).stem
    check_output(out_dir, command or f"run {Path(str(recipe)).stem}", force=force)
    units = out_dir.parent / f".{out_dir.name}.units"
    if not resume:
        remove_owned(units)  # reconguard's own units only: a user's folder at that path is refused, never removed
    result = run_recipe(recipe, preset, progress=progress, overrides=overrides, device=device, units=units)
    written = write_report(result, out_dir, command=command, force=force)
    remove_owned(units)
    return result, written


def _private_examples(result):
    """Real private training images for the reconstruction grid's first row (the shipped data sets; None for a
    user's folder)."""
    if result.settings.get("dataset", "digits") == "folder":
        return None
    from ..experiments.mia import load_split
    from ..experiments.params import MIAParams

    split = load_split(MIAParams.from_dict(result.settings))
    return split.train.images, split.train.labels
