"""Issue 2, item 3: estimate_fisher against a per-sample autograd jacobian loop; range/null split."""

import pytest
import torch
from torch import nn

from reconguard.bounds import estimate_fisher, split_range_null
from reconguard.data import load_digits
from reconguard.encoders import LinearEncoder, Noisy, SplitCNN, random_linear


def reference_fisher(encoder, x):
    """The slow, obvious way: one torch.autograd.functional.jacobian per input, averaged in float64."""
    d = x[0].numel()
    G = torch.zeros(d, d, dtype=torch.float64)
    for xi in x:
        J = torch.autograd.functional.jacobian(lambda v: encoder(v.unsqueeze(0)).reshape(-1), xi)
        J = J.reshape(-1, d).to(torch.float64)
        G += J.T @ J
    return G / x.shape[0]


def rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.fixture(scope="module")
def digits28():
    return load_digits(28)


@pytest.mark.parametrize("split,m", [("early", 16), ("middle", 64), ("late", 49)])
def test_splitcnn_fisher_matches_jacobian_loop(digits28, split, m):
    enc = SplitCNN(split, m, (1, 28, 28), seed=0)
    k = 12
    est = estimate_fisher(enc, digits28, k=k, seed=3)
    idx = torch.randperm(len(digits28), generator=torch.Generator().manual_seed(3))[:k]
    ref = reference_fisher(enc, digits28.images[idx])
    assert est.method == "jacrev" and est.k == k and est.m == m and est.d == 784
    assert rel(est.matrix, ref) < 1e-6
    # eigendecomposition is of the same matrix, ascending and clipped at 0
    recon = est.eigenvectors @ torch.diag(est.eigenvalues) @ est.eigenvectors.T
    assert rel(recon, est.matrix) < 1e-9 and bool((est.eigenvalues[1:] >= est.eigenvalues[:-1]).all())


def test_jacfwd_and_loop_methods_agree(digits28):
    enc = SplitCNN("early", 32, (1, 28, 28), seed=1)
    a = estimate_fisher(enc, digits28, k=6, method="jacrev", chunk_size=4)
    b = estimate_fisher(enc, digits28, k=6, method="jacfwd", chunk_size=5)
    c = estimate_fisher(enc, digits28, k=6, method="loop")
    assert rel(a.matrix, c.matrix) < 1e-6 and rel(b.matrix, c.matrix) < 1e-6


def test_generic_path_on_linear_encoder_is_wtw():
    enc = random_linear(20, 7, seed=0)
    x = torch.randn(5, 20, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    exact = estimate_fisher(enc)
    assert exact.exact and exact.method == "exact"
    assert torch.equal(exact.matrix, enc.W.T @ enc.W)
    for method in ("jacrev", "jacfwd"):
        est = estimate_fisher(enc, x, k=5, method=method, exact=False)
        assert not est.exact and rel(est.matrix, exact.matrix) < 1e-12
    # a Noisy wrapper is unwrapped: Jacobians are of Enc_D
    assert torch.equal(estimate_fisher(Noisy(enc, 0.5)).matrix, exact.matrix)


def test_batchnorm_in_eval_mode_and_mode_restored():
    enc = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))
    with torch.no_grad():
        enc[1].running_mean.fill_(0.3)
        enc[1].running_var.fill_(2.0)
        enc[1].weight.copy_(torch.tensor([0.5, 1.0, 2.0, -1.0]))
    enc.train()
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(1))
    est = estimate_fisher(enc, x, k=8)
    assert enc.training  # restored
    with torch.no_grad():  # eval-mode BatchNorm is the affine map diag(γ/√(var+ε)) after the linear layer
        W = (enc[0].weight / torch.sqrt(enc[1].running_var + enc[1].eps)[:, None] * enc[1].weight[:, None]).double()
    assert rel(est.matrix, W.T @ W) < 1e-6


def test_k_subsample_is_seeded(digits28):
    enc = SplitCNN("early", 16, (1, 28, 28), seed=0)
    a = estimate_fisher(enc, digits28, k=5, seed=11)
    b = estimate_fisher(enc, digits28, k=5, seed=11)
    c = estimate_fisher(enc, digits28, k=5, seed=12)
    assert torch.equal(a.matrix, b.matrix) and not torch.equal(a.matrix, c.matrix)


def test_range_null_split():
    W = torch.diag(torch.tensor([1.0, 1e-1, 1e-3, 0.0], dtype=torch.float64))
    fisher = estimate_fisher(LinearEncoder(W))  # eigenvalues 1, 1e-2, 1e-6, 0
    assert split_range_null(fisher, 0.0).rank == 3
    assert split_range_null(fisher, 1e-4).rank == 2
    assert split_range_null(fisher, 0.5).rank == 1
    s = split_range_null(fisher, 1e-4)
    assert torch.allclose(s.P_r + s.P_n, torch.eye(4, dtype=torch.float64))
    assert torch.allclose(s.P_r @ s.P_n, torch.zeros(4, 4, dtype=torch.float64))
