"""Issue 2, items 1–2: exact agreement of bounds and the MMSE attack on Gaussian + linear encoders."""

import pytest
import torch

from reconguard.attacks.reconstruction import MMSEAttack, mixture_posterior_mean
from reconguard.bounds import (ceiling, estimate_fisher, maeng_bound, mse_bound, noiseless_mse_bound, rtc,
                               score_matrix)
from reconguard.data import gaussian_prior
from reconguard.encoders import Noisy, random_linear, skewed_eigenvalues, skewed_linear
from reconguard.metrics import mse

MU, ETA, D = 0.5, 0.2, 64
MS = [8, 16, 32, 48, 64, 96, 128]


@pytest.fixture(scope="module")
def prior():
    return gaussian_prior(MU, ETA, D)


@pytest.fixture(scope="module")
def samples(prior):
    return prior.sample(20000, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("m", MS)
def test_mmse_attack_meets_corollary_1(prior, samples, m):
    enc = random_linear(D, m, seed=100 + m)
    fisher = estimate_fisher(enc)
    S = score_matrix(prior)
    sigma = 1e-3
    e = Noisy(enc, sigma, generator=torch.Generator().manual_seed(m))(samples)
    achieved = mse(MMSEAttack(enc, MU, ETA, sigma=sigma).run(e).images, samples).mean
    bound = mse_bound(fisher, S, sigma).value
    assert achieved == pytest.approx(bound, rel=0.02)


@pytest.mark.parametrize("m", MS)
def test_mmse_attack_meets_corollary_2(prior, samples, m):
    enc = random_linear(D, m, seed=100 + m)
    fisher = estimate_fisher(enc)
    S = score_matrix(prior)
    achieved = mse(MMSEAttack(enc, MU, ETA, sigma=0.0)(enc(samples)).images, samples).mean
    bound = noiseless_mse_bound(fisher, S, tau=0.0)
    assert bound.rank == min(m, D)
    if m >= D:  # full rank: exact inversion, bound 0
        assert bound.value == 0.0
        assert achieved < 1e-20
    else:
        assert bound.value == pytest.approx(ETA**2 * (D - m) / D, rel=1e-9)  # closed form η²(d−r)/d
        assert achieved == pytest.approx(bound.value, rel=0.02)
    if m != D:  # away from m = d the spectrum has a gap, so the paper's τ = 1e-4 finds the same null space
        assert noiseless_mse_bound(fisher, S).value == pytest.approx(bound.value, abs=1e-15)


@pytest.mark.parametrize("m", MS)
def test_maeng_below_corollary_1(prior, m):
    fisher = estimate_fisher(random_linear(D, m, seed=100 + m))
    S = score_matrix(prior)
    for sigma in (1e-4, 1e-3, 1e-2, 1.0):
        assert maeng_bound(fisher, S, sigma).value <= mse_bound(fisher, S, sigma).value * (1 + 1e-12)
    assert maeng_bound(fisher, S, 0.0).value == 0.0


@pytest.mark.parametrize("m", [64, 96, 128])
def test_isotropic_encoder_maeng_equals_corollary_1(prior, m):
    # columns orthonormal, scaled: WᵀW = c·I, all singular values equal
    Q = torch.linalg.qr(torch.randn(m, D, dtype=torch.float64, generator=torch.Generator().manual_seed(m)))[0]
    fisher = estimate_fisher(random_linear(D, m).__class__(3.0 * Q))
    S = score_matrix(prior)
    for sigma in (1e-3, 0.1):
        a, b = maeng_bound(fisher, S, sigma).value, mse_bound(fisher, S, sigma).value
        assert a == pytest.approx(b, rel=1e-9)


def test_skewed_bound_rises_with_alpha_and_maeng_is_flat(prior):
    S = score_matrix(prior)
    alphas = [0.0, 0.5, 1.0, 2.0]
    fishers = [estimate_fisher(skewed_linear(D, a, seed=7)) for a in alphas]
    for a, f in zip(alphas, fishers):
        assert torch.allclose(f.eigenvalues, skewed_eigenvalues(D, a).sort().values, rtol=1e-9, atol=1e-12)
    ours = [mse_bound(f, S, 1e-3).value for f in fishers]
    maeng = [maeng_bound(f, S, 1e-3).value for f in fishers]
    assert all(b > a for a, b in zip(ours, ours[1:])), ours
    assert max(maeng) - min(maeng) <= 1e-12 * max(maeng)
    assert ours[0] == pytest.approx(maeng[0], rel=1e-9)  # α = 0 is isotropic


def test_mixture_attack_with_one_component_is_eq_8_and_9(prior, samples):
    enc = random_linear(D, 24, seed=3)
    W = enc.W
    x = samples[:50]
    mu1 = torch.full((D,), MU, dtype=torch.float64)
    for sigma in (0.0, 1e-2):
        e = Noisy(enc, sigma, generator=torch.Generator().manual_seed(5))(x)
        if sigma > 0:
            R = W.T @ W / sigma**2 + torch.eye(D, dtype=torch.float64) / ETA**2
            expected = mu1 + torch.linalg.solve(R, (W.T @ (e - W @ mu1).T) / sigma**2).T
        else:
            expected = mu1 + (torch.linalg.pinv(W) @ (e - W @ mu1).T).T
        got = mixture_posterior_mean(enc, prior, sigma)(e)
        assert torch.allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_ceiling_and_rtc(prior):
    S = score_matrix(prior)
    top = ceiling(S)
    assert top.value == pytest.approx(ETA**2)
    b = noiseless_mse_bound(estimate_fisher(random_linear(D, 32, seed=1)), S, tau=0.0)
    assert rtc(b, top).value == pytest.approx(torch.log(torch.tensor(2.0)).item())  # ceiling / bound = d/(d−r) = 2
    assert rtc(0.0, top).value == float("inf")


def test_corollary_1_tends_to_corollary_2(prior):
    fisher = estimate_fisher(random_linear(D, 40, seed=2))
    S = score_matrix(prior)
    limit = noiseless_mse_bound(fisher, S, tau=0.0).value
    assert mse_bound(fisher, S, 1e-7).value == pytest.approx(limit, rel=1e-6)
    assert mse_bound(fisher, S, 1e-3).value >= limit


def test_plain_tensors_accepted(prior):
    """API contract: fisher may be a plain d×d tensor and S a d×d tensor."""
    enc = random_linear(D, 16, seed=9)
    G = enc.W.T @ enc.W
    S = torch.eye(D, dtype=torch.float64) / ETA**2
    assert mse_bound(G, S, 1e-3).value == pytest.approx(mse_bound(estimate_fisher(enc), S, 1e-3).value, rel=1e-12)
    assert noiseless_mse_bound(G, S.float(), tau=0.0).value == pytest.approx(ETA**2 * 48 / 64, rel=1e-9)
    # a float32 E[G]: its round-off eigenvalues (~1e-7·λ_max) cannot be told from real ones, so they are
    # kept as range (cut at float64's eps): the bound comes out lower, never higher, than the exact one
    b32 = noiseless_mse_bound(G.float(), S.float(), tau=0.0)
    assert 0 <= b32.value <= ETA**2 * 48 / 64 * (1 + 1e-9)
    assert "float64" in b32.cut
    assert isinstance(mse_bound(G, S, 1e-3).value, float)
