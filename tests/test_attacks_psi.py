"""Issue 3, items 1–2: MAP and decoder attacks against the bounds; Ψ-bounds (identity, LPIPS)."""

import pytest
import torch

from reconguard.attacks.reconstruction import DecoderAttack, map_attack_sweep, mixture_posterior_mean
from reconguard.bounds import (estimate_fisher, mse_bound, noiseless_mse_bound, psi_terms, score_matrix,
                               split_range_null)
from reconguard.data import gaussian_prior, load_digits, smoothed_empirical_prior
from reconguard.encoders import Noisy, random_linear
from reconguard.metrics import LPIPS, mse

D = 64


@pytest.fixture(scope="module")
def gauss():
    return gaussian_prior(0.5, 0.2, D)


@pytest.mark.parametrize("m", [96, 128])
def test_map_attack_reaches_the_bound_when_m_exceeds_d(gauss, m):
    """Gaussian prior: MAP = MMSE, so with β = 2σ² the optimisation attack lands on Corollary 1."""
    enc = random_linear(D, m, seed=m)
    x = gauss.sample(128, generator=torch.Generator().manual_seed(0))
    e = Noisy(enc, 1e-3, generator=torch.Generator().manual_seed(1))(x.float())
    r = map_attack_sweep(enc, x, e, gauss.score, 1e-3, in_shape=(D,))
    bound = mse_bound(estimate_fisher(enc), score_matrix(gauss), 1e-3).value
    assert r.beta == pytest.approx(2e-6)
    assert r.mse == pytest.approx(bound, rel=0.10)


def test_map_sweep_at_sigma_0_never_beats_the_bound(gauss):
    enc = random_linear(D, 32, seed=1)
    x = gauss.sample(64, generator=torch.Generator().manual_seed(0))
    r = map_attack_sweep(enc, x, enc(x.float()), gauss.score, 0.0, in_shape=(D,), steps=200)
    bound = noiseless_mse_bound(estimate_fisher(enc), score_matrix(gauss), tau=0.0).value
    assert len(r.tried) == 6 and r.beta in r.tried
    assert r.mse >= bound * 0.95 and r.mse <= 1.3 * bound


def test_decoder_attack_learns_and_respects_the_bound():
    prior = smoothed_empirical_prior(load_digits(), 0.1)
    g = torch.Generator().manual_seed(0)
    train, test = prior.sample(3000, generator=g).float(), prior.sample(256, generator=g)
    enc = random_linear(64, 24, seed=2)
    attack = DecoderAttack(enc, (1, 8, 8), epochs=15, width=32, sigma=0.0)
    hist = attack.fit(train)
    achieved = mse(attack.run(enc(test.float())).images, test).mean
    bound = noiseless_mse_bound(estimate_fisher(enc), score_matrix(prior, n=20000), tau=0.0).value
    trivial = mse(prior.mean.expand(256, 64), test).mean  # guessing the mean image
    assert hist.losses[-1] < hist.losses[0]
    assert bound <= achieved < 0.5 * trivial


@pytest.mark.parametrize("m", [16, 48, 96])
def test_identity_psi_bound_matches_closed_form_and_is_below_corollary_1(gauss, m):
    enc = random_linear(D, m, seed=m)
    fisher, S = estimate_fisher(enc), score_matrix(gauss)
    x = gauss.sample(64, generator=torch.Generator().manual_seed(0))
    terms = psi_terms(fisher, lambda v: v, x, gauss.score, tau=0.0, probes=64, n_inputs=16, dtype=torch.float64)
    sp = split_range_null(fisher, 0.0)
    for sigma in (1e-3, 0.1):
        # Ψ = identity: J_Ψ = I, Δ = 0, so n_g = Tr P_g and D = diag(Tr(P_g E[G])/σ² + Tr(P_g S))
        n = torch.tensor([float(torch.trace(sp.P_r)), float(torch.trace(sp.P_n))], dtype=torch.float64)
        Dm = torch.diag(torch.tensor([float(torch.trace(sp.P_r @ fisher.matrix)) / sigma**2 + float(torch.trace(sp.P_r @ S)),
                                      float(torch.trace(sp.P_n @ S))], dtype=torch.float64))
        keep = n > 0
        exact = float(n[keep] @ torch.linalg.solve(Dm[keep][:, keep], n[keep]))
        est = terms.bound(sigma)
        assert est.point == pytest.approx(exact, rel=0.1)  # the plug-in estimate
        assert est.value <= est.point and est.value <= exact  # the reported lower confidence bound
        assert est.value / D <= mse_bound(fisher, S, sigma).value * 1.02  # Ψ = identity: valid, ≤ Corollary 1
    assert terms.noiseless().point / D == pytest.approx(noiseless_mse_bound(fisher, S, tau=0.0).value, rel=0.1,
                                                        abs=1e-12)


def test_lpips_feature_map_matches_the_lpips_formula():
    """‖Ψ(x₀) − Ψ(x₁)‖² equals LPIPS computed the torchmetrics way from the same trunk features."""
    from torchmetrics.functional.image.lpips import _normalize_tensor, _spatial_average

    lp = LPIPS()
    x0, x1 = torch.rand(3, 3, 32, 32), torch.rand(3, 3, 32, 32)
    scale = lambda x: ((2 * x - 1) - lp.shift) / lp.scale  # noqa: E731
    f0, f1 = lp.trunk(scale(x0)), lp.trunk(scale(x1))
    ref = 0
    for i, (a, b) in enumerate(zip(f0, f1)):
        w = getattr(lp, f"sqrt_w{i}") ** 2
        diff = (_normalize_tensor(a) - _normalize_tensor(b)) ** 2
        ref = ref + _spatial_average((diff * w.reshape(1, -1, 1, 1)).sum(1, keepdim=True)).reshape(-1)
    assert torch.allclose(lp(x0, x1), ref, rtol=1e-5)
    assert lp.trunk_weights == "random"


def test_lpips_bound_holds_for_the_mmse_attack():
    prior = smoothed_empirical_prior(load_digits(), 0.1)
    x = prior.sample(256, generator=torch.Generator().manual_seed(0))
    lp = LPIPS()
    enc = random_linear(64, 16, seed=16)
    fisher = estimate_fisher(enc)
    terms = psi_terms(fisher, lp.psi((1, 8, 8)), x, prior.score, tau=0.0, probes=8, n_inputs=4)
    rec = mixture_posterior_mean(enc, prior, 0.0)(enc(x))
    achieved = float(lp(rec.float().reshape(-1, 1, 8, 8), x.float().reshape(-1, 1, 8, 8)).mean())
    b = terms.noiseless()
    assert 0 < b.value <= achieved + 3 * b.inputs["stderr"]
