"""Bounds vs. attack for linear encoders on priors with exact scores (spectral-bounds paper,
section 6.2: Figure 2 sweeps the embedding size m of random encoders, Figure 4 the skew α of
full-rank ones).

For each encoder: E[G] = WᵀW exactly, S exactly (Gaussian) or averaged over prior samples
(smoothed digits), Corollary 1 for σ > 0 and Corollary 2 for σ = 0, Theorem 1 (Maeng), the
ceiling and RTC; then the Bayes-optimal MMSE attack on ``n_attack`` fresh samples.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from ..attacks.reconstruction import mixture_mmse_attack
from ..bounds import ceiling, estimate_fisher, score_matrix
from ..data import GaussianMixturePrior
from ..encoders import Noisy, random_linear, skewed_linear
from ..errors import UnknownOptionError
from ..metrics import mse
from ..results import Result
from .bound import BoundRow, bound_row

AXES = ("m", "alpha")


@dataclass(frozen=True)
class SweepPoint(BoundRow):
    """One encoder × noise level: the bounds (``BoundRow``) and the attack's achieved MSE/d."""

    dataset: str
    axis: str
    x: float
    m: int
    d: int
    attack_mse: float | None = None
    attack_stderr: float | None = None
    n_attack: int = 0

    @property
    def holds(self) -> bool | None:
        """Attack MSE ≥ bound, allowing 3 standard errors of Monte-Carlo noise (None without attack)."""
        if self.attack_mse is None:
            return None
        return self.attack_mse + 3 * (self.attack_stderr or 0.0) >= self.bound * (1 - 1e-9)

    def to_dict(self):
        return {**super().to_dict(), "holds": self.holds}


@dataclass(frozen=True)
class SweepResult(Result):
    recipe: str
    preset: str
    title: str
    settings: dict
    points: list = field(default_factory=list)
    elapsed_s: float = 0.0
    examples: dict = field(default_factory=dict)  # (dataset, sigma) -> {"x", "originals", "recons"}
    _skip_in_dict = ("examples",)

    def datasets(self) -> list[str]:
        return list(dict.fromkeys(p.dataset for p in self.points))

    def sigmas(self) -> list[float]:
        return sorted(set(p.sigma for p in self.points))

    def select(self, dataset: str, sigma: float) -> list[SweepPoint]:
        return sorted((p for p in self.points if p.dataset == dataset and p.sigma == sigma), key=lambda p: p.x)

    @property
    def violations(self) -> int:
        return sum(1 for p in self.points if p.holds is False)


def make_encoder(axis: str, value: float, d: int, seed: int):
    if axis == "m":
        return random_linear(d, int(value), seed=seed)
    if axis == "alpha":
        return skewed_linear(d, float(value), seed=seed)
    raise UnknownOptionError(f"sweep axis must be one of {AXES}, got {axis!r}.")


def linear_sweep(prior: GaussianMixturePrior, dataset: str, axis: str, values, sigmas, *, tau: float = 0.0,
                 n_attack: int = 4096, score_samples: int = 20000, seed: int = 0, n_examples: int = 8,
                 progress=None, examples: dict | None = None) -> list[SweepPoint]:
    """Sweep ``axis`` ("m" or "alpha") over ``values`` for every σ in ``sigmas``.

    When ``examples`` is a dict, the attack's reconstructions of ``n_examples`` fixed prior samples
    are stored in it under ``(dataset, sigma)`` for the report's image grids.
    """
    d = prior.dim
    S = score_matrix(prior, n=score_samples, seed=seed)
    top = ceiling(S)
    points = []
    shown = prior.sample(n_examples, generator=torch.Generator().manual_seed(seed + 17)) if n_examples else None
    if examples is not None and shown is not None:
        for sigma in sigmas:
            examples[(dataset, float(sigma))] = {"x": [], "originals": shown, "recons": []}
    for i, value in enumerate(values):
        enc = make_encoder(axis, value, d, seed + 1000 * i + 1)
        fisher = estimate_fisher(enc)
        for j, sigma in enumerate(sigmas):
            row = bound_row(fisher, S, top, float(sigma), tau)
            point = dict(dataclasses.asdict(row), dataset=dataset, axis=axis, x=float(value), m=enc.out_dim, d=d)
            if n_attack > 0:
                g = torch.Generator().manual_seed(seed + 7919 * i + 31 * j)
                x = prior.sample(n_attack, generator=g)
                e = Noisy(enc, sigma, generator=g)(x)
                attack = mixture_mmse_attack(enc, prior, sigma)
                est = mse(attack(e), x)
                point.update(attack_mse=est.mean, attack_stderr=est.stderr, n_attack=est.n)
                if examples is not None and shown is not None:
                    slot = examples[(dataset, float(sigma))]
                    slot["x"].append(float(value))
                    slot["recons"].append(attack(Noisy(enc, sigma, generator=g)(shown)))
            points.append(SweepPoint(**point))
            if progress is not None:
                progress.update(1)
    return points
