"""Metrics for reconstructions and for what a model encodes."""

from .hsic import hsic, kernel_matrix
from .lpips import LPIPS
from .mse import MSEEstimate, mse, per_sample_mse
from .ssim import ssim

__all__ = ["LPIPS", "ssim", "mse", "per_sample_mse", "MSEEstimate", "hsic", "kernel_matrix"]
