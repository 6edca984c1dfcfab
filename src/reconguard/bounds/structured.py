"""A score matrix with structure, for the low-rank path at sizes where S cannot be a d×d matrix:
``S = diag(D) + LLᵀ`` (``D`` positive, ``L`` d×p or none; a scalar ``s·I`` is the isotropic case).

Which way a structured S errs: every bound *decreases* as S grows in the Loewner order, so an ``S̃ ⪰ S`` gives
bounds that are lower than the true ones — valid, only looser. ``isotropic_from(S)`` (``λ_max(S)·I``) and
``diagonal_from(S)`` (Gershgorin row sums ``D_ii = Σ_j |S_ij|``; ``D − S`` is diagonally dominant, hence ⪰ 0)
are conservative; an S̃ fit to data is not guaranteed to be.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import check_positive_int
from ..errors import ParameterError, ShapeError


@dataclass(frozen=True)
class StructuredScore:
    """``S = diag(diag) + L Lᵀ`` (``lowrank``: ``d×p`` or None); see the module docstring."""

    diag: torch.Tensor
    lowrank: torch.Tensor | None = None
    kind: str = "diagonal"

    def __post_init__(self):
        if self.diag.ndim != 1 or not bool((self.diag > 0).all()) or not bool(torch.isfinite(self.diag).all()):
            raise ParameterError("a structured S needs a finite, positive diagonal.")
        if self.lowrank is not None and (self.lowrank.ndim != 2 or self.lowrank.shape[0] != self.diag.shape[0]):
            raise ShapeError(f"the low-rank part of S must be d×p with d = {self.diag.shape[0]}.")

    @property
    def d(self) -> int:
        return int(self.diag.shape[0])

    @classmethod
    def isotropic(cls, s: float, d: int) -> "StructuredScore":
        """``s·I`` (exact for N(μ, η²I): s = 1/η²)."""
        return cls(torch.full((check_positive_int(d, "d"),), float(s), dtype=torch.float64), None, "isotropic")

    @classmethod
    def diagonal(cls, diag) -> "StructuredScore":
        return cls(torch.as_tensor(diag, dtype=torch.float64).reshape(-1).clone(), None, "diagonal")

    @classmethod
    def diagonal_plus_lowrank(cls, diag, lowrank) -> "StructuredScore":
        return cls(torch.as_tensor(diag, dtype=torch.float64).reshape(-1).clone(),
                   torch.as_tensor(lowrank, dtype=torch.float64), "diagonal+lowrank")

    @classmethod
    def isotropic_from(cls, S) -> "StructuredScore":
        """``λ_max(S)·I ⪰ S``: conservative (bounds can only come out lower)."""
        S = torch.as_tensor(getattr(S, "matrix", S), dtype=torch.float64)
        return cls.isotropic(float(torch.linalg.eigvalsh(S)[-1]), S.shape[0])

    @classmethod
    def diagonal_from(cls, S) -> "StructuredScore":
        """Gershgorin row sums ``D_ii = Σ_j |S_ij| ⪰ S``: conservative."""
        S = torch.as_tensor(getattr(S, "matrix", S), dtype=torch.float64)
        return cls.diagonal(S.abs().sum(1))

    def dense(self) -> torch.Tensor:
        """The d×d matrix (for checks at small d)."""
        S = torch.diag(self.diag)
        if self.lowrank is not None:
            S = S + self.lowrank @ self.lowrank.T
        return S

    def _core(self) -> torch.Tensor | None:
        """``(I + LᵀD⁻¹L)⁻¹`` (p×p), cached."""
        if self.lowrank is None or self.lowrank.shape[1] == 0:
            return None
        Ld = self.lowrank / self.diag[:, None]
        return torch.linalg.inv(torch.eye(self.lowrank.shape[1], dtype=torch.float64) + self.lowrank.T @ Ld)

    def solve(self, X: torch.Tensor, core=None) -> torch.Tensor:
        """``S⁻¹X`` for ``X``: d×c (Woodbury)."""
        Y = X / self.diag[:, None]
        if self.lowrank is None or self.lowrank.shape[1] == 0:
            return Y
        core = self._core() if core is None else core
        return Y - (self.lowrank / self.diag[:, None]) @ (core @ (self.lowrank.T @ Y))

    def trace(self) -> float:
        t = float(self.diag.sum())
        return t + (float((self.lowrank ** 2).sum()) if self.lowrank is not None else 0.0)

    def inverse_trace(self) -> float:
        """``Tr(S⁻¹) = Tr(D⁻¹) − Tr((I + LᵀD⁻¹L)⁻¹ LᵀD⁻²L)``."""
        t = float((1.0 / self.diag).sum())
        core = self._core()
        if core is None:
            return t
        L2 = self.lowrank / self.diag[:, None]
        return t - float(torch.trace(core @ (L2.T @ L2)))
