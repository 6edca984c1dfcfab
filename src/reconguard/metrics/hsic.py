"""HSIC(X, Z) as the BiDO code computes it (Peng et al. 2022; AT-AT paper section 3, Table 1).

Kernels on flattened batches (rows = samples): Gaussian ``K = exp(−‖a − b‖² / (2σ²·d))`` with ``d`` the
feature dimension (σ = 5 in BiDO), or linear ``K = A Aᵀ`` (BiDO's default for one-hot labels).
With ``K_c = K H`` (``H = I − 11ᵀ/m``):

* ``estimator="nocca"`` (BiDO's ``hsic_normalized_cca``, the number Table 1 reports):
  ``R_x = K_xc (K_xc + ε m I)⁻¹``, ``HSIC = Σ_ij (R_x)_ij (R_z)_ji`` with ε = 1e−5;
* ``estimator="biased"`` (Gretton et al. 2005): ``tr(K_x H K_z H) / (m − 1)²``.

Everything stays on the inputs' device (the BiDO code moved kernels to the CPU).
"""

from __future__ import annotations

import torch

from ..errors import ParameterError, ShapeError, UnknownOptionError


def _flat(a: torch.Tensor) -> torch.Tensor:
    return a.reshape(a.shape[0], -1)


def kernel_matrix(a: torch.Tensor, kernel: str = "gaussian", sigma: float = 5.0) -> torch.Tensor:
    a = _flat(a)
    if kernel == "linear":
        return a @ a.T
    if kernel != "gaussian":
        raise UnknownOptionError(f"kernel must be 'gaussian' or 'linear', got {kernel!r}.")
    sq = (a * a).sum(1, keepdim=True)
    d = (sq - 2 * a @ a.T + sq.T).abs()
    return torch.exp(-d / (2 * sigma * sigma * a.shape[1]))


def hsic(x: torch.Tensor, z: torch.Tensor, *, kernel_x: str = "gaussian", kernel_z: str = "gaussian",
         sigma: float = 5.0, estimator: str = "nocca", eps: float = 1e-5) -> torch.Tensor:
    """HSIC between two batches (same number of rows; any trailing shape). Differentiable."""
    if x.shape[0] != z.shape[0]:
        raise ShapeError(f"hsic needs paired samples: {x.shape[0]} rows in x, {z.shape[0]} in z.")
    m = x.shape[0]
    if m < 2:
        raise ParameterError(f"hsic needs at least 2 samples, got {m}.")
    kx, kz = kernel_matrix(x, kernel_x, sigma), kernel_matrix(z.to(x.dtype), kernel_z, sigma)
    h = torch.eye(m, dtype=kx.dtype, device=kx.device) - 1.0 / m
    kxc, kzc = kx @ h, kz @ h
    if estimator == "biased":
        return torch.trace(kxc @ kzc) / (m - 1) ** 2
    if estimator != "nocca":
        raise UnknownOptionError(f"estimator must be 'nocca' or 'biased', got {estimator!r}.")
    reg = eps * m * torch.eye(m, dtype=kx.dtype, device=kx.device)
    rx = torch.linalg.solve(kxc + reg, kxc)  # = K_xc (K_xc + εmI)⁻¹: the two commute
    rz = torch.linalg.solve(kzc + reg, kzc)
    return (rx * rz.T).sum()
