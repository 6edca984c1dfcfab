"""Metrics for reconstructions."""

from .lpips import LPIPS
from .mse import MSEEstimate, mse, per_sample_mse
from .ssim import ssim

__all__ = ["LPIPS", "ssim", "mse", "per_sample_mse", "MSEEstimate"]
