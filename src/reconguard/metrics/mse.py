"""Reconstruction MSE per dimension, ``‖x̂ − x‖²/d``, the quantity the MSE bounds constrain."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..checks import as_tensor, check_finite
from ..errors import ShapeError
from ..results import Result


def per_sample_mse(x_hat, x) -> torch.Tensor:
    """``‖x̂_i − x_i‖²/d`` for each sample (float64); images are flattened."""
    x_hat = check_finite(as_tensor(x_hat, "x_hat", dtype=torch.float64), "x_hat")
    x = check_finite(as_tensor(x, "x", dtype=torch.float64), "x")
    x_hat, x = x_hat.reshape(x_hat.shape[0], -1), x.reshape(x.shape[0], -1)
    if x_hat.shape != x.shape:
        raise ShapeError(f"reconstructions {tuple(x_hat.shape)} and originals {tuple(x.shape)} differ in shape.")
    return ((x_hat - x) ** 2).mean(1)


@dataclass(frozen=True)
class MSEEstimate(Result):
    """Mean of ``‖x̂ − x‖²/d`` over n samples with its standard error."""

    mean: float
    stderr: float
    n: int

    def __float__(self) -> float:
        return self.mean


def mse(x_hat, x) -> MSEEstimate:
    v = per_sample_mse(x_hat, x)
    n = v.shape[0]
    se = float(v.std(unbiased=True)) / math.sqrt(n) if n > 1 else math.nan
    return MSEEstimate(float(v.mean()), se, n)
