"""Metrics for reconstructions."""

from .lpips import LPIPS
from .mse import MSEEstimate, mse, per_sample_mse

__all__ = ["LPIPS", "mse", "per_sample_mse", "MSEEstimate"]
