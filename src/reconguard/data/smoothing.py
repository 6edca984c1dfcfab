"""Smoothing noise (section 6.1): natural images are not absolutely continuous, so the bounds are
stated for ``x = x_0 + N(0, sigma_s²·I_d)`` with sigma_s = 0.1 by default."""

from __future__ import annotations

import torch

from ..checks import as_samples, check_scalar
from .priors import DEFAULT_SIGMA_S


def smooth(data, sigma_s: float = DEFAULT_SIGMA_S, generator: torch.Generator | None = None) -> torch.Tensor:
    """Return ``data + N(0, sigma_s²)`` (same shape; no clamping: the smoothed prior lives on R^d)."""
    x = as_samples(data, "data")
    sigma_s = check_scalar(sigma_s, "sigma_s (smoothing noise std)", low=0.0)
    return x + sigma_s * torch.randn(x.shape, generator=generator, dtype=x.dtype)
