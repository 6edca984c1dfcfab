"""``carlini_sparse``: a mixing matrix of many images (n ≥ 32, few members a row) goes through compressed rows, and
the phase step — Adam and the projections — and the amplitude descent give the same images as with dense products."""

import torch

from reconguard.attacks.instahide import carlini_phase
from reconguard.attacks.instahide.carlini_model import descend, predict
from reconguard.attacks.instahide.carlini_sparse import mix, sparse_pair


def _mixing(N=400, n=40, members=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.zeros(N, n, dtype=torch.float64)
    for t in range(N):
        idx = torch.randperm(n, generator=g)[:members]
        w = torch.rand(members, generator=g, dtype=torch.float64)
        A[t, idx] = w / w.sum()
    return A, g


def test_sparse_products_give_the_dense_phase_step(monkeypatch):
    A, g = _mixing()
    n, d = A.shape[1], 24
    X = torch.randn(n, d, dtype=torch.float64, generator=g)
    B = (A @ X).abs()
    A_, AT = sparse_pair(A)
    assert A_.layout == torch.sparse_csr and AT.layout == torch.sparse_csr
    assert sparse_pair(A[:, :20])[0].layout == torch.strided  # few images: dense
    assert sparse_pair(torch.ones(10, 40))[0].layout == torch.strided  # dense rows: dense
    sparse = carlini_phase.phase_step(A, B, None, starts=2, steps=40, seed=0, polish=10)
    monkeypatch.setattr(carlini_phase, "sparse_pair", lambda M: (M, M.T))
    dense = carlini_phase.phase_step(A, B, None, starts=2, steps=40, seed=0, polish=10)
    assert torch.allclose(sparse, dense, rtol=1e-5, atol=1e-6), float((sparse - dense).abs().max())


def test_mix_gives_the_dense_product_its_gradient_and_the_dense_descent():
    """``mix`` (what ``carlini_model.predict`` uses): A X and X's gradient equal the dense ones; A that is optimised
    itself stays dense (its gradient is needed); the cross-mode amplitude descent (two private members a row, public
    noise) ends where the dense one does."""
    A, g = _mixing(members=2, seed=1)
    X = torch.randn(A.shape[1], 16, dtype=torch.float64, generator=g, requires_grad=True)
    W = torch.randn(A.shape[0], 16, dtype=torch.float64, generator=g)
    (mix(A, X) * W).sum().backward()
    grad, X.grad = X.grad.clone(), None
    (A @ X * W).sum().backward()
    assert torch.allclose(mix(A, X), A @ X, atol=1e-12) and torch.allclose(grad, X.grad, atol=1e-12)
    a = A.clone().requires_grad_(True)
    (mix(a, X) * W).sum().backward()  # the dense path: A's gradient exists
    assert a.grad is not None and torch.allclose(a.grad, W @ X.detach().T, atol=1e-10)
    mu, var = torch.full((16,), 0.1, dtype=torch.float64), torch.full((16,), 0.5, dtype=torch.float64)
    B = predict(A, X.detach(), mu, var) + 0.01 * torch.randn(A.shape[0], 16, dtype=torch.float64, generator=g)
    start = torch.zeros_like(X.detach())
    model = (lambda A_, X_: predict(A_, X_, mu, var))
    sparse = descend(start, B, 60, 0.05, lambda: A, model)[1]
    dense = descend(start, B, 60, 0.05, lambda: A, lambda A_, X_: ((A_ @ X_ + (1 - A_.sum(1, keepdim=True)) * mu) ** 2
                                                                 + (1 - A_.sum(1, keepdim=True)) ** 2 * var + 1e-12).sqrt())[1]
    assert torch.allclose(sparse, dense, atol=1e-8), float((sparse - dense).abs().max())
