"""The score matrix ``S = E[s(x) s(x)ᵀ]``, ``s = ∇ₓ log π`` (spectral-bounds paper, section 5.2),
and its quality check (section 6.4.1): by the Cramér–Rao inequality ``S ⪰ Σ⁻¹``, so every
eigenvalue of ``Σ^½ S Σ^½`` is ≥ 1 for a correct S (Σ the covariance of x ~ π).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ..checks import as_samples, as_square_matrix, as_tensor, check_finite, check_positive_int
from ..errors import ParameterError, ShapeError
from ..results import Result


@dataclass(frozen=True)
class ScoreMatrix(Result):
    """``S`` (``matrix``, d×d float64) estimated from ``n`` samples, with ``groups`` partial means over
    disjoint blocks of them (``group_means``), so that a bound can carry S's Monte-Carlo error
    (:mod:`reconguard.bounds.sampling`). ``exact`` when it is a closed form (no blocks)."""

    matrix: torch.Tensor
    n: int
    exact: bool
    group_means: torch.Tensor | None = None
    group_sizes: tuple = ()
    _skip_in_dict = ("matrix", "group_means")

    @property
    def groups(self) -> int:
        return 0 if self.group_means is None else int(self.group_means.shape[0])

    def leave_out(self, b: int) -> torch.Tensor:
        """S without block ``b`` (the grouped jackknife's leave-one-out matrix)."""
        sizes = torch.tensor(self.group_sizes, dtype=torch.float64)
        keep = torch.arange(self.groups) != b
        S = (self.group_means[keep] * sizes[keep, None, None]).sum(0) / sizes[keep].sum()
        return (S + S.T) / 2


def estimate_score_matrix(source, data=None, n: int = 20000, *, groups: int = 10,
                          generator: torch.Generator | None = None, seed: int | None = 0,
                          chunk: int = 2048) -> ScoreMatrix:
    """``S = E[s(x) s(x)ᵀ]`` as a :class:`ScoreMatrix`.

    ``source`` is a prior (``reconguard.data.GaussianMixturePrior`` / ``GaussianPrior``) or any score
    function ``s(x) -> N×d``. A Gaussian prior gives its exact S (``I/eta²``, ``Σ⁻¹``). Otherwise
    ``s sᵀ`` is averaged over ``data`` (samples of π, ``N×d`` or images) or, when ``data`` is None,
    over ``n`` samples drawn from the prior, keeping ``groups`` partial means (0: none).
    """
    exact = getattr(source, "exact_score_matrix", None)
    if exact is not None and data is None:
        S = exact()
        if S is not None:
            return ScoreMatrix(S, 0, True)
    score_fn: Callable = getattr(source, "score", source)
    if isinstance(source, (torch.Tensor, np.ndarray)):
        raise ParameterError("score_matrix got a tensor of samples, not a score: S = E[s(x)s(x)ᵀ] needs the prior's "
                             "score. For your images x use score_matrix(smoothed_empirical_prior(x, sigma_s=0.1)) "
                             "(exact score), or score_matrix(score_fn, data=x) with a trained score function.")
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
    N = x.shape[0]
    groups = min(max(0, int(groups)), N) if N > 1 else 0
    edges = [round(b * N / groups) for b in range(groups + 1)] if groups else [0, N]
    parts = []
    for a, b in zip(edges[:-1], edges[1:]):
        total = None
        for xc in x[a:b].split(chunk):
            s = check_finite(as_tensor(score_fn(xc), "score", dtype=torch.float64), "score s(x)")
            s = s.reshape(xc.shape[0], -1)
            total = s.T @ s if total is None else total + s.T @ s
        parts.append(total)
    S = sum(parts) / N
    S = (S + S.T) / 2
    if not groups:
        return ScoreMatrix(S, N, False)
    sizes = tuple(b - a for a, b in zip(edges[:-1], edges[1:]))
    means = torch.stack([p / c for p, c in zip(parts, sizes)])
    return ScoreMatrix(S, N, False, means, sizes)


def score_matrix(source, data=None, n: int = 20000, *, generator: torch.Generator | None = None,
                 seed: int | None = 0, chunk: int = 2048) -> torch.Tensor:
    """``S`` as a ``d×d`` float64 tensor (:func:`estimate_score_matrix` without its blocks).

    A plain tensor is taken as exact by the bounds; pass the :class:`ScoreMatrix` of
    :func:`estimate_score_matrix` instead to have them carry S's sampling error.
    """
    return estimate_score_matrix(source, data, n, groups=0, generator=generator, seed=seed, chunk=chunk).matrix


@dataclass(frozen=True)
class ScoreQuality(Result):
    """Eigenvalues ``μ_i`` of ``Σ^½ S Σ^½`` (ascending); a correct S has all ``μ_i ≥ 1``.

    With Σ (and S) estimated from n samples, even an exact S scatters its ``μ_i = 1`` directions
    over the Marchenko–Pastur bulk, whose lower edge is ``noise_floor = (1 − √(d/n))²``;
    ``fraction_below_floor`` counts the eigenvalues below it, i.e. below 1 beyond sampling noise.
    """

    eigenvalues: torch.Tensor
    min: float
    fraction_below_one: float
    noise_floor: float
    fraction_below_floor: float
    n: int

    @property
    def ok(self) -> bool:
        """No eigenvalue below 1 beyond sampling noise."""
        return self.fraction_below_floor == 0.0

    def summary(self) -> str:
        return (f"{100 * (1 - self.fraction_below_floor):.1f}% of the eigenvalues of Σ^½SΣ^½ are ≥ 1 up to sampling "
                f"noise (floor {self.noise_floor:.3f}), {100 * (1 - self.fraction_below_one):.1f}% strictly; "
                f"min {self.min:.3g}")

    def passes(self, fraction: float = 0.95) -> bool:
        """At least ``fraction`` of the eigenvalues are ≥ 1 up to sampling noise."""
        return 1.0 - self.fraction_below_floor >= fraction


def score_quality(S, data) -> ScoreQuality:
    """Section 6.4.1's check of S against the covariance Σ of ``data`` (samples of π)."""
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
    n, d = x.shape
    floor = max(0.0, 1.0 - (d / n) ** 0.5) ** 2
    return ScoreQuality(mu, float(mu.min()), float((mu < 1).double().mean()), floor,
                        float((mu < floor).double().mean()), n)


def ddpm_timestep(scheduler, sigma_s: float, pixel_scale: float = 2.0) -> int:
    """The t whose ``sqrt((1 − ᾱ_t)/ᾱ_t)`` is closest to the smoothing σ_s in model units (σ_s · pixel_scale)."""
    acp = torch.as_tensor(scheduler.alphas_cumprod, dtype=torch.float64)
    ratio = torch.sqrt((1 - acp) / acp)
    return int(torch.argmin((ratio - sigma_s * pixel_scale).abs()))


def ddpm_score(unet, scheduler, sigma_s: float = 0.1, *, pixel_scale: float = 2.0,
               in_shape: tuple[int, int, int] | None = None, batch: int = 64) -> Callable:
    """Score of the smoothed prior from a DDPM ε-model (spectral-bounds paper, section 5.2).

    With t chosen by ``ddpm_timestep`` and images in [0, 1] mapped to the model's [−1, 1] by
    ``y = pixel_scale·x − pixel_scale/2``:  ``s_y(y) = −sqrt(ᾱ_t/(1−ᾱ_t))·ε_θ(sqrt(ᾱ_t)·y, t)`` and, in
    pixel units, ``s(x) = pixel_scale · s_y(y)``. The returned function maps ``N×d`` (or images) to
    ``N×d`` float64; ``.timestep`` and ``.sigma_t`` (the smoothing it really uses, pixel units) are set.
    """
    from ..checks import check_scalar

    sigma_s = check_scalar(sigma_s, "sigma_s (smoothing noise std)", low=0.0, low_open=True)
    t = ddpm_timestep(scheduler, sigma_s, pixel_scale)
    a = float(torch.as_tensor(scheduler.alphas_cumprod, dtype=torch.float64)[t])
    if in_shape is None:
        cfg = unet.config
        size = cfg.sample_size if isinstance(cfg.sample_size, (tuple, list)) else (cfg.sample_size, cfg.sample_size)
        in_shape = (cfg.in_channels, *size)
    p = next(unet.parameters())

    def score(x: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(x)
        x = x.reshape(x.shape[0], *in_shape)
        out = []
        for xc in x.split(batch):
            y = pixel_scale * xc.to(device=p.device, dtype=p.dtype) - pixel_scale / 2
            with torch.no_grad():
                eps = unet(a**0.5 * y, t).sample
            out.append((-pixel_scale * (a / (1 - a)) ** 0.5 * eps).reshape(xc.shape[0], -1).to(torch.float64).cpu())
        return torch.cat(out)

    score.timestep = t
    score.sigma_t = ((1 - a) / a) ** 0.5 / pixel_scale
    return score
