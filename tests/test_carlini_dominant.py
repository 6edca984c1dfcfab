"""``benchmarks/carlini_dominant.py`` (issue 31): the measures the README's crops-cross analysis rests on — the
whitening, the weighted k-means and a leave-one-out oracle that cannot score noise as structure."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _two_class_rows(N: int, K: int, signal: float, d: int = 400, seed: int = 0):
    """N rows each mixing one of K images of class 0 and one of K of class 1 (masses 0.2–0.5), features
    signal · (the two images' patterns weighted by mass) + unit noise."""
    g = torch.Generator().manual_seed(seed)
    cls = torch.tensor([0] * K + [1] * K)
    A, L = torch.zeros(N, 2 * K, dtype=torch.float64), torch.zeros(N, 10, dtype=torch.float64)
    for t in range(N):
        m = 0.2 + 0.3 * torch.rand(2, generator=g, dtype=torch.float64)
        i, j = int(torch.randint(K, (1,), generator=g)), K + int(torch.randint(K, (1,), generator=g))
        A[t, i], A[t, j], L[t, 0], L[t, 1] = m[0], m[1], m[0], m[1]
    pattern = torch.randn(2 * K, d, generator=g, dtype=torch.float64)
    return A, signal * A @ pattern + torch.randn(N, d, generator=g, dtype=torch.float64), L, cls


def test_whitening_gives_unit_covariance():
    from carlini_dominant import whiten

    g = torch.Generator().manual_seed(0)
    B = torch.randn(2000, 30, generator=g, dtype=torch.float64) @ torch.randn(30, 30, generator=g, dtype=torch.float64)
    F = whiten(B, 1e-12)
    assert torch.allclose(F.T @ F / len(F), torch.eye(30, dtype=torch.float64), atol=1e-6)


def test_kmeans_and_the_oracle_find_structure_and_only_structure():
    from carlini_dominant import separation

    A, B, L, cls = _two_class_rows(600, 6, signal=4.0)
    r = separation(A, B, L, cls, 0.0, restarts=5)
    assert r["kmeans"] > 0.9 and r["oracle"] > 0.9 and r["auc"] > 0.8, r
    A, B, L, cls = _two_class_rows(600, 6, signal=0.0)
    r = separation(A, B, L, cls, 0.0, restarts=5)
    # chance is 1/6; a centroid that kept the row itself would score pure noise near 1 in 400 dimensions
    assert r["oracle"] < 0.3 and 0.4 < r["auc"] < 0.6, r
