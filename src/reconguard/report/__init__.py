"""Plots, the HTML report and terminal summaries."""

from .accuracy import accuracy_summary, plot_accuracy, render_accuracy_html
from .html import render_html
from .pipeline import run_to_report, summary_text, write_report
from .plots import plot_reconstructions, plot_rtc, plot_sweep



__all__ = [
    "accuracy_summary", "plot_accuracy", "render_accuracy_html", "render_html", "summary_text",
    "run_to_report", "write_report", "plot_sweep", "plot_rtc", "plot_reconstructions",
]
