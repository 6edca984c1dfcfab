"""Every MSE bound for one encoder and one prior, at several noise levels (what ``reconguard bound`` prints).

One E[G] estimate and one S serve every σ: Corollary 1 (σ > 0) or Corollary 2 (σ = 0),
Theorem 1 (Maeng et al.), the ceiling and RTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..bounds import FisherEstimate, ceiling, estimate_fisher, maeng_bound, mse_bound, noiseless_mse_bound, rtc, score_matrix
from ..checks import check_sigma, check_tau
from ..data import GaussianMixturePrior
from ..encoders import split_noise
from ..results import Result


@dataclass(frozen=True)
class BoundRow(Result):
    sigma: float
    bound_name: str
    bound: float
    maeng: float
    ceiling: float
    rtc: float
    rank: int
    tau: float | None


def bound_row(fisher: FisherEstimate, S: torch.Tensor, top, sigma: float, tau: float) -> BoundRow:
    """Corollary 1 (σ > 0) or Corollary 2 (σ = 0), Theorem 1, the ceiling ``top`` and RTC at one σ."""
    b = mse_bound(fisher, S, sigma) if sigma > 0 else noiseless_mse_bound(fisher, S, tau)
    return BoundRow(sigma, b.name, b.value, maeng_bound(fisher, S, sigma).value, top.value, rtc(b, top).value,
                    b.rank if b.rank is not None else fisher.m, tau if sigma == 0 else None)


@dataclass(frozen=True)
class BoundReport(Result):
    encoder: str
    prior: str
    d: int
    m: int
    fisher: FisherEstimate
    rows: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)


def default_tau(fisher: FisherEstimate) -> float:
    """τ = 0 (exact null space) when E[G] is exact, else the paper's 1e-4 (section 6.1)."""
    return 0.0 if fisher.exact else 1e-4


def compute_bounds(encoder: nn.Module, prior: GaussianMixturePrior, sigmas=(0.0, 1e-3), *, tau: float | None = None,
                   k: int = 256, score_samples: int = 20000, seed: int = 0, device=None,
                   progress: bool = False) -> BoundReport:
    """Bounds of ``encoder`` under ``prior`` for each σ in ``sigmas`` (a ``Noisy`` encoder's own σ is added)."""
    enc, own_sigma = split_noise(encoder)
    sigmas = sorted({check_sigma(s) for s in sigmas} | ({own_sigma} if own_sigma > 0 else set()))
    g = torch.Generator().manual_seed(int(seed))
    data = None if hasattr(enc, "exact_fisher") else prior.sample(k, generator=g)
    fisher = estimate_fisher(enc, data, k=k, seed=seed, device=device, progress=progress)
    tau = default_tau(fisher) if tau is None else check_tau(tau)
    S = score_matrix(prior, n=score_samples, seed=seed + 1)
    top = ceiling(S)
    rows = [bound_row(fisher, S, top, sigma, tau) for sigma in sigmas]
    return BoundReport(type(enc).__name__, prior.name, fisher.d, fisher.m, fisher, rows,
                       {"k": fisher.k, "tau": tau, "score_samples": score_samples, "seed": seed,
                        "fisher_method": fisher.method, "exact_fisher": fisher.exact})
