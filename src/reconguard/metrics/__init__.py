"""Metrics for reconstructions."""

from .mse import MSEEstimate, mse, per_sample_mse

__all__ = ["mse", "per_sample_mse", "MSEEstimate"]
