"""``carlini_phase.sparse_pair``: a mixing matrix of many images (n ≥ 32, few members a row) goes through compressed
rows, and the phase step — Adam and the projections — gives the same images as with dense products."""

import torch

from reconguard.attacks.instahide import carlini_phase


def test_sparse_products_give_the_dense_phase_step(monkeypatch):
    g = torch.Generator().manual_seed(0)
    N, n, d = 400, 40, 24
    A = torch.zeros(N, n, dtype=torch.float64)
    for t in range(N):
        idx = torch.randperm(n, generator=g)[:4]
        w = torch.rand(4, generator=g, dtype=torch.float64)
        A[t, idx] = w / w.sum()
    X = torch.randn(n, d, dtype=torch.float64, generator=g)
    B = (A @ X).abs()
    A_, AT = carlini_phase.sparse_pair(A)
    assert A_.layout == torch.sparse_csr and AT.layout == torch.sparse_csr
    assert carlini_phase.sparse_pair(A[:, :20])[0].layout == torch.strided  # few images: dense
    assert carlini_phase.sparse_pair(torch.ones(10, 40))[0].layout == torch.strided  # dense rows: dense
    sparse = carlini_phase.phase_step(A, B, None, starts=2, steps=40, seed=0, polish=10)
    monkeypatch.setattr(carlini_phase, "sparse_pair", lambda M: (M, M.T))
    dense = carlini_phase.phase_step(A, B, None, starts=2, steps=40, seed=0, polish=10)
    assert torch.allclose(sparse, dense, rtol=1e-5, atol=1e-6), float((sparse - dense).abs().max())
