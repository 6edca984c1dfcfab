"""Plots, the HTML report and terminal summaries."""

from .accuracy import accuracy_summary, plot_accuracy, render_accuracy_html
from .html import render_html, summary_text as _sweep_summary
from .pipeline import run_to_report, write_report
from .plots import plot_reconstructions, plot_rtc, plot_sweep



def summary_text(result, out_dir=None) -> str:
    """The terminal summary of any experiment result."""
    if hasattr(result, "analysis"):
        from .mia import mia_summary
        return mia_summary(result, out_dir)
    if not hasattr(result, "points") and hasattr(result, "examples"):
        from .attacks import attacks_summary
        return attacks_summary(result, out_dir)
    return _sweep_summary(result, out_dir) if hasattr(result, "points") else accuracy_summary(result, out_dir)


__all__ = [
    "accuracy_summary", "plot_accuracy", "render_accuracy_html", "render_html", "summary_text",
    "run_to_report", "write_report", "plot_sweep", "plot_rtc", "plot_reconstructions",
]
