"""A bound from a sample is still a bound (issue: rank-starved E[G], τ defaults, a saturation check everywhere).

1. Nonlinear encoders whose population E[G] has rank 4× the sample's k·m: over 40 seeds per setting the reported
   bound exceeds the population Corollary 1 / 2 in at most 5 % of seeds (the plug-in, which the paper's procedure
   reports, exceeds it in most of them — the test can fail); once k·m ≥ the rank the sample is saturated and the
   bound is within 10 % of the population value. The population E[G] is this test's own: 10⁵ inputs, Jacobians by
   ``vmap(jacrev)``, nothing from reconguard.
2. Every public bound function with its defaults, on a noise-free float32 ``nn.Linear`` whose singular values span
   three decades, stays at or below the Bayes MMSE, which the test derives (Gaussian posterior covariance).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from reconguard.bounds import (StructuredScore, estimate_fisher, estimate_fisher_lowrank, estimate_score_matrix,
                               maeng_bound, mse_bound, noiseless_mse_bound, noiseless_psi_bound, psi_bound, psi_terms, split_range_null)
from reconguard.data import gaussian_prior

D, M, ETA = 64, 2, 0.2
S = torch.eye(D, dtype=torch.float64) / ETA**2  # N(0.5, η²I): S = I/η² exactly
SEEDS = range(40)


def _init(net: nn.Module, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            fan_in = p[0].numel() if p.ndim > 1 else 4
            p.copy_(torch.randn(p.shape, generator=g) * (1.5 / fan_in**0.5 if p.ndim > 1 else 0.5))
    return net.eval()


ENCODERS = {
    "tanh-mlp": lambda: _init(nn.Sequential(nn.Linear(D, 96), nn.Tanh(), nn.Linear(96, M)), 0),
    "gelu-mlp": lambda: _init(nn.Sequential(nn.Linear(D, 96), nn.GELU(), nn.Linear(96, M)), 1),
    "conv": lambda: _init(nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.Tanh(),
                                        nn.Flatten(), nn.Linear(64, M)), 2),
}


def _population(net: nn.Module, n: int = 100_000) -> torch.Tensor:
    net64 = copy.deepcopy(net).double()
    f = lambda v: net64(v.unsqueeze(0)).squeeze(0)  # noqa: E731
    g = torch.Generator().manual_seed(999)
    G = torch.zeros(D, D, dtype=torch.float64)
    for _ in range(n // 10_000):
        x = 0.5 + ETA * torch.randn(10_000, D, generator=g, dtype=torch.float64)
        J = torch.func.vmap(torch.func.jacrev(f))(x).detach()
        G += torch.einsum("nmd,nme->de", J, J)
    return G / n


def _population_bounds(G: torch.Tensor) -> dict:
    """Corollary 1 at each σ > 0 and Corollary 2 (σ = 0) of the population E[G], in the test's own words."""
    evals, V = torch.linalg.eigh(G)
    null = V[:, evals <= D * 2.3e-16 * evals[-1]]
    out = {0.0: float(torch.trace(torch.linalg.inv(null.T @ S @ null))) / D if null.shape[1] else 0.0}
    for sigma in (1e-2, 1e-1):
        out[sigma] = float(torch.trace(torch.linalg.inv(G / sigma**2 + S))) / D
    return out, int((evals > D * 2.3e-16 * evals[-1]).sum())


def _reported(net, k: int, seed: int):
    g = torch.Generator().manual_seed(1000 + seed)
    data = 0.5 + ETA * torch.randn(k + max(8, k // 4), D, generator=g)  # k inputs and the default held-out count
    F = estimate_fisher(net, data, k=k, seed=seed)
    out = {0.0: noiseless_mse_bound(F, S)}
    for sigma in (1e-2, 1e-1):
        out[sigma] = mse_bound(F, S, sigma)
    return F, out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ENCODERS))
def test_rank_starved_samples_never_overstate_and_saturated_ones_are_tight(name):
    net = ENCODERS[name]()
    pop, rank = _population_bounds(_population(net))
    assert rank >= 4 * 8 * M - 1  # the population rank is ~4× the starved sample's k·m = 16
    starved, saturated = {s: [] for s in pop}, {s: [] for s in pop}
    for seed in SEEDS:
        F, b = _reported(net, 8, seed)
        assert F.saturation.status == "not saturated" and F.saturation.unseen_share > 1e-3
        for s in pop:
            starved[s].append(b[s])
        F, b = _reported(net, 256, seed)
        assert F.saturation.status == "saturated", F.saturation.describe()
        for s in pop:
            saturated[s].append(b[s])
    for s, truth in pop.items():
        tol = 1e-9 * max(truth, 1e-30)
        over = sum(b.value > truth + tol for b in starved[s])
        assert over <= 0.05 * len(SEEDS), (name, s, over, truth, max(b.value for b in starved[s]))
        assert all("not saturated" in b.kind or b.kind.startswith("theorem 1") for b in starved[s]), (name, s)
        over = sum(b.value > truth + tol for b in saturated[s])
        assert over <= 0.05 * len(SEEDS), (name, s, over, truth)
        assert min(b.value for b in saturated[s]) >= 0.9 * truth, (name, s, truth, min(b.value for b in saturated[s]))
    # the paper's plug-in on the starved sample: above the population in most seeds (what this test would catch)
    plug_over = sum(b.plugin > pop[1e-2] for b in starved[1e-2])
    assert plug_over >= 0.9 * len(SEEDS), (name, plug_over)


def test_saturation_is_reported_with_its_curve_and_unchecked_without_held_out_inputs():
    net = ENCODERS["tanh-mlp"]()
    g = torch.Generator().manual_seed(0)
    data = 0.5 + ETA * torch.randn(32, D, generator=g)
    F = estimate_fisher(net, data, k=24, groups=8)  # k·m = 48 < 64; 8 left over: the held-out inputs
    sat = F.saturation
    assert sat.heldout == 8 and sat.status == "not saturated" and "held-out energy outside" in sat.describe()
    ks = [k for k, _ in sat.curve]
    shares = [v for _, v in sat.curve]
    assert ks == sorted(ks) and ks[-1] == 24 and shares == sorted(shares, reverse=True)  # the miss shrinks with k
    assert F.to_dict()["saturation"]["saturated"] is False
    none_left = estimate_fisher(net, data, k=32)
    assert none_left.saturation.status == "unchecked"
    b = mse_bound(none_left, S, 1e-2)
    assert b.kind == "theorem 1 (sample not saturated)" and b.value == pytest.approx(
        maeng_bound(none_left, S, 1e-2, level=0.975).value)
    assert noiseless_mse_bound(none_left, S).value == 0.0  # σ = 0 without a confirmed null space
    low = estimate_fisher_lowrank(net, data, k=24, groups=8)
    assert low.saturation.status == "not saturated"
    assert low.saturation.unseen_share == pytest.approx(sat.unseen_share, rel=1e-8)
    assert noiseless_mse_bound(low, StructuredScore.isotropic(1 / ETA**2, D)).value == 0.0


def _three_decades(d: int = 64, m: int = 40) -> nn.Linear:
    g = torch.Generator().manual_seed(7)
    U, _ = torch.linalg.qr(torch.randn(m, m, generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(d, m, generator=g, dtype=torch.float64))
    lin = nn.Linear(d, m, bias=False)
    lin.weight.data = (U @ torch.diag(torch.logspace(0, -3, m, dtype=torch.float64)) @ V.T).float()
    return lin


def test_every_public_bound_with_its_defaults_stays_below_the_bayes_mmse():
    d, m = 64, 40
    lin = _three_decades(d, m)
    prior = gaussian_prior(0.5, ETA, d)
    J = lin.weight.detach().double()  # the float32 weights, exactly
    cov = prior.covariance()
    C = J @ cov @ J.T
    truth = float(torch.trace(cov - cov @ J.T @ torch.linalg.pinv(C, hermitian=True) @ J @ cov)) / d
    assert truth == pytest.approx((d - m) * ETA**2 / d, rel=1e-6)  # the null space of W: d − m directions
    slack = 1e-12
    x = prior.sample(64, generator=torch.Generator().manual_seed(1)).float()
    F = estimate_fisher(lin, x, k=48)
    Sm = estimate_score_matrix(prior)
    iso = StructuredScore.isotropic(1 / ETA**2, d)
    low = estimate_fisher_lowrank(lin, x, k=48)
    identity = lambda v: v  # noqa: E731 — Ψ = identity: the Ψ-bounds are on E‖x̂ − x‖² (a sum over d)
    reported = {
        "noiseless_mse_bound": noiseless_mse_bound(F, Sm).value,
        "maeng_bound(σ=0)": maeng_bound(F, Sm, 0.0).value,
        "lowrank_noiseless_bound": noiseless_mse_bound(low, iso).value,
        "lowrank_maeng_bound(σ=0)": maeng_bound(low, iso, 0.0).value,
        "noiseless_psi_bound / d": noiseless_psi_bound(F, identity, x.double(), prior.score).value / d,
        "psi_terms().bound(0) / d": psi_terms(F, identity, x.double(), prior.score).bound(0.0).value / d,
    }
    from reconguard.experiments import compute_bounds

    reported["compute_bounds(σ=0)"] = compute_bounds(lin, prior, sigmas=(0.0,), k=48, score_samples=2000).rows[0].bound
    for name, value in reported.items():
        assert value <= truth * (1 + 1e-6) + slack, (name, value, truth)
    assert reported["noiseless_mse_bound"] == pytest.approx(truth, rel=1e-6)  # exact here: not a vacuous test
    assert split_range_null(F).rank == m
    # the paper's τ = 1e-4, asked for explicitly: above the Bayes MMSE, and labelled a heuristic
    heuristic = noiseless_mse_bound(F, Sm, tau=1e-4)
    assert heuristic.value > 1.5 * truth and not heuristic.guarantee and heuristic.kind.startswith("heuristic")
    # with noise: Corollary 1 (defaults) stays below the Bayes MMSE too
    for sigma in (1e-3, 1e-1):
        C = J @ cov @ J.T + sigma**2 * torch.eye(m, dtype=torch.float64)
        mmse = float(torch.trace(cov - cov @ J.T @ torch.linalg.inv(C) @ J @ cov)) / d
        for b in (mse_bound(F, Sm, sigma), mse_bound(low, iso, sigma),
                  psi_bound(F, identity, x.double(), prior.score, sigma)):
            value = b.value / (d if b.name == "psi" else 1)
            assert value <= mmse * (1 + 1e-6) + slack, (b.name, sigma, value, mmse)
