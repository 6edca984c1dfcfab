"""Metrics for reconstructions and for what a model encodes."""

from .accuracy import accuracy
from .hsic import hsic, kernel_matrix
from .robustness import RobustAccuracy, robust_accuracy
from .inversion import InversionMetrics, evaluate_inversion, penultimate
from .lpips import LPIPS
from .mse import MSEEstimate, mse, per_sample_mse
from .ssim import ssim

__all__ = [
    "accuracy", "LPIPS", "ssim", "mse", "per_sample_mse", "MSEEstimate", "hsic", "kernel_matrix",
    "InversionMetrics", "evaluate_inversion", "penultimate", "RobustAccuracy", "robust_accuracy",
]
