"""Linear encoders ``Enc_D(x) = W x`` (spectral-bounds paper, section 6.1).

* ``random_linear(d, m)``: i.i.d. ``N(0, 1/m)`` entries, so ``E[WᵀW] = I_d`` (Tr ≈ d, like the skewed ones).
* ``skewed_linear(d, alpha)``: ``W = U diag(√λ) Vᵀ`` with ``λ_i = d·i^-α / Σ_j j^-α`` and ``U, V``
  Haar-random orthogonal; ``Tr(WᵀW) = d`` for every α, and α = 0 is isotropic (all λ_i = 1).
"""

from __future__ import annotations

import torch
from torch import nn

from ..checks import as_tensor, check_finite, check_positive_int, check_scalar
from ..errors import ShapeError


class LinearEncoder(nn.Module):
    """``N×d → N×m``, ``e = x Wᵀ``; image batches ``N×C×H×W`` are flattened first."""

    def __init__(self, W):
        super().__init__()
        W = check_finite(as_tensor(W, "W"), "W")
        if W.ndim != 2:
            raise ShapeError(f"W must be an m×d matrix, got shape {tuple(W.shape)}.")
        self.register_buffer("W", W)

    @property
    def in_dim(self) -> int:
        return self.W.shape[1]

    @property
    def out_dim(self) -> int:
        return self.W.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], -1)
        if x.shape[1] != self.in_dim:
            raise ShapeError(f"LinearEncoder expects inputs of dimension d={self.in_dim}, got {x.shape[1]}.")
        return x @ self.W.to(x.dtype).T

    def exact_fisher(self) -> torch.Tensor:
        """``E[G] = WᵀW`` in float64: the Jacobian of a linear map is W everywhere."""
        W = self.W.to(torch.float64)
        return W.T @ W

    def extra_repr(self) -> str:
        return f"d={self.in_dim}, m={self.out_dim}"


def _generator(generator: torch.Generator | None, seed: int | None) -> torch.Generator | None:
    if generator is None and seed is not None:
        generator = torch.Generator().manual_seed(int(seed))
    return generator


def random_orthogonal(n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Haar-distributed ``n×n`` orthogonal matrix (QR of a Gaussian matrix with the sign fix)."""
    A = torch.randn(n, n, generator=generator, dtype=torch.float64)
    Q, R = torch.linalg.qr(A)
    return Q * torch.sign(torch.diagonal(R))


def random_linear(d: int, m: int, generator: torch.Generator | None = None, seed: int | None = None) -> LinearEncoder:
    """``W ∈ R^{m×d}`` with i.i.d. ``N(0, 1/m)`` entries (float64)."""
    d, m = check_positive_int(d, "d"), check_positive_int(m, "m")
    g = _generator(generator, seed)
    return LinearEncoder(torch.randn(m, d, generator=g, dtype=torch.float64) / m**0.5)


def skewed_eigenvalues(d: int, alpha: float) -> torch.Tensor:
    """``λ_i = d·i^-α / Σ_j j^-α`` for i = 1..d (they sum to d)."""
    i = torch.arange(1, d + 1, dtype=torch.float64)
    w = i ** (-alpha)
    return d * w / w.sum()


def skewed_linear(d: int, alpha: float, generator: torch.Generator | None = None,
                  seed: int | None = None) -> LinearEncoder:
    """``W = U diag(√λ) Vᵀ`` (d×d) with skewness α ≥ 0 of the eigenvalues of ``WᵀW``."""
    d = check_positive_int(d, "d")
    alpha = check_scalar(alpha, "alpha (eigenvalue skew)", low=0.0)
    g = _generator(generator, seed)
    U, V = random_orthogonal(d, g), random_orthogonal(d, g)
    return LinearEncoder(U @ torch.diag(skewed_eigenvalues(d, alpha).sqrt()) @ V.T)
