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
    sparse = descend(start, B, 60, 0.05, lambda: A, (mu, var))[1]
    dense = descend(start, B, 60, 0.05, lambda: A, (mu, var), model=lambda A_, X_, m, v: (
        (A_ @ X_ + (1 - A_.sum(1, keepdim=True)) * m) ** 2 + (1 - A_.sum(1, keepdim=True)) ** 2 * v + 1e-12).sqrt())[1]
    assert torch.allclose(sparse, dense, atol=1e-8), float((sparse - dense).abs().max())


def test_the_descent_in_pixel_blocks_gives_the_descent_on_all_pixels(monkeypatch):
    """``descend`` sums each step's error and gradient over blocks of ``BLOCK`` values (each below glibc's mmap
    threshold), then takes one Adam step: the images equal the all-at-once descent's — under cross mode's noise model
    with one variance per encryption and pixel, per-row weights, the box, the unbiased model, and with the rows'
    coefficients optimised too (the label-free polish, whose gradient sums over every pixel)."""
    from reconguard.attacks.instahide import carlini_model

    A, g = _mixing(N=300, n=40, members=2, seed=3)
    A = A * 0.6  # cross mode: the private part's mass, the rest public noise
    d = 50
    X = torch.randn(40, d, dtype=torch.float64, generator=g)
    mu, var = 0.2 * torch.randn(d, dtype=torch.float64, generator=g), 0.3 + torch.rand(300, d, dtype=torch.float64,
                                                                                          generator=g)
    B = predict(A, X, mu, var) + 0.01 * torch.randn(300, d, dtype=torch.float64, generator=g)
    box = (torch.full((d,), -1.5, dtype=torch.float64), torch.full((d,), 1.5, dtype=torch.float64))
    w = torch.rand(300, 1, dtype=torch.float64, generator=g)
    start = torch.zeros(40, d, dtype=torch.float64)
    runs, widths = {}, []

    def polished(block):  # the coefficients scaled by one shared factor, optimised with X
        a = torch.ones(1, dtype=torch.float64, requires_grad=True)
        R, Z = descend(start, B, 40, 0.05, lambda: 0.8 * A * a.clamp(0.5, 2.0), (mu, var), box, extra=(a,))
        assert float(a.detach()) > 1.05  # the shared factor moved towards the true 1.25
        return [Z, R]

    for block in (10 ** 9, 300 * 7):  # every pixel at once; blocks of 7 pixels (the last one 1)
        monkeypatch.setattr(carlini_model, "BLOCK", block)
        runs[block] = [descend(start, B, 40, 0.05, lambda: A, (mu, var), box, weights=w,
                               model=lambda A_, X_, m, v: widths.append(X_.shape[1]) or model(A_, X_, m, v))[1]
                       for model in (carlini_model.predict, carlini_model.expected)] + polished(block)
    for whole, blocks in zip(runs[10 ** 9], runs[300 * 7]):
        assert torch.allclose(whole, blocks, atol=1e-10), float((whole - blocks).abs().max())
    for whole in runs[10 ** 9][:3]:
        assert float((whole - start).abs().max()) > 0.1  # it moved
    assert set(widths) == {d, 7, 1}  # the blocked runs did run in blocks
