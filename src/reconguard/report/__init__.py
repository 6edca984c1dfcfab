"""Plots, the HTML report and terminal summaries."""

from .html import render_html, summary_text
from .pipeline import run_to_report, write_report
from .plots import plot_reconstructions, plot_rtc, plot_sweep

__all__ = ["render_html", "summary_text", "run_to_report", "write_report", "plot_sweep", "plot_rtc",
           "plot_reconstructions"]
