"""The score matrix ``S = E[s(x) s(x)ᵀ]``, ``s = ∇ₓ log π`` (spectral-bounds paper, section 5.2),
and its quality check (section 6.4.1): by the Cramér–Rao inequality ``S ⪰ Σ⁻¹``, so every
eigenvalue of ``Σ^½ S Σ^½`` is ≥ 1 for a correct S (Σ the covariance of x ~ π).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..checks import as_samples, as_square_matrix, as_tensor, check_finite, check_positive_int
from ..errors import ParameterError, ShapeError
from ..results import Result


def score_matrix(source, data=None, n: int = 20000, *, generator: torch.Generator | None = None,
                 seed: int | None = 0, chunk: int = 2048) -> torch.Tensor:
    """``S`` as a ``d×d`` float64 tensor.

    ``source`` is a prior (``reconguard.data.GaussianMixturePrior``) or any score function
    ``s(x) -> N×d``. A Gaussian prior gives ``I/eta²`` exactly. Otherwise ``s sᵀ`` is averaged
    over ``data`` (samples of π, ``N×d`` or images) or, when ``data`` is None, over ``n``
    samples drawn from the prior.
    """
    exact = getattr(source, "exact_score_matrix", None)
    if exact is not None and data is None:
        S = exact()
        if S is not None:
            return S
    score_fn: Callable = getattr(source, "score", source)
    if not callable(score_fn):
        raise ParameterError("score_matrix needs a prior with .score(x) or a score function s(x).")
    if data is None:
        if not hasattr(source, "sample"):
            raise ParameterError("score_matrix needs data (samples of the prior) when given a bare score function.")
        if generator is None and seed is not None:
            generator = torch.Generator().manual_seed(int(seed))
        x = source.sample(check_positive_int(n, "n"), generator=generator)
    else:
        x = as_samples(data)
    total, count = None, 0
    for xc in x.split(chunk):
        s = check_finite(as_tensor(score_fn(xc), "score", dtype=torch.float64), "score s(x)")
        s = s.reshape(xc.shape[0], -1)
        total = s.T @ s if total is None else total + s.T @ s
        count += xc.shape[0]
    S = total / count
    return (S + S.T) / 2


@dataclass(frozen=True)
class ScoreQuality(Result):
    """Eigenvalues ``μ_i`` of ``Σ^½ S Σ^½`` (ascending); a correct S has all ``μ_i ≥ 1``."""

    eigenvalues: torch.Tensor
    min: float
    fraction_below_one: float
    n: int

    @property
    def ok(self) -> bool:
        return self.fraction_below_one == 0.0


def score_quality(S, data, tol: float = 0.0) -> ScoreQuality:
    """Section 6.4.1's check of S against the data covariance Σ; ``tol`` relaxes the ≥ 1 test."""
    x = as_samples(data)
    x = x.reshape(x.shape[0], -1).to(torch.float64)
    if x.shape[0] < 2:
        raise ShapeError("score_quality needs at least 2 samples to estimate the covariance.")
    S = as_square_matrix(S, x.shape[1], "S (score matrix)")
    xc = x - x.mean(0)
    cov = xc.T @ xc / (x.shape[0] - 1)
    evals, evecs = torch.linalg.eigh(cov)
    root = evecs @ torch.diag(evals.clamp_min(0).sqrt()) @ evecs.T
    mu = torch.linalg.eigvalsh(root @ S @ root)
    return ScoreQuality(mu, float(mu.min()), float((mu < 1 - tol).double().mean()), x.shape[0])
