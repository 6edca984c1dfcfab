"""Bounds without a d×d matrix (issue: bounds at the size real encoders have).

1. Agreement with the dense path to 1e-8 relative wherever both fit, for every S structure, σ > 0 and
   σ = 0, rank-deficient (k·m < d) and full-rank E[G].
2. d = 3×128×128 = 49,152 with k·m = 128: the bounds equal an independent closed form built from this
   test's own per-sample Jacobians, in a subprocess whose peak memory stays under 4 GB.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from reconguard.bounds import estimate_fisher, maeng_bound, mse_bound, noiseless_mse_bound
from reconguard.bounds.lowrank import StructuredScore, estimate_fisher_lowrank
from reconguard.bounds.mse import ceiling


def _net(c: int, m: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)  # the test's own weights
    return nn.Sequential(nn.Conv2d(c, 4, 3, padding=1), nn.GELU(), nn.AvgPool2d(2), nn.Flatten(),
                         nn.LazyLinear(m)).eval()


def _scores(d: int):
    g = torch.Generator().manual_seed(3)
    diag = 5.0 + 20.0 * torch.rand(d, generator=g, dtype=torch.float64)
    L = torch.randn(d, 4, generator=g, dtype=torch.float64)
    return {"isotropic": StructuredScore.isotropic(25.0, d), "diagonal": StructuredScore.diagonal(diag),
            "diagonal+lowrank": StructuredScore.diagonal_plus_lowrank(diag, L)}


@pytest.mark.parametrize("shape,m,k", [((3, 8, 8), 8, 12), ((1, 6, 6), 6, 12)],
                         ids=["rank-deficient d=192 km=96", "full-rank d=36 km=72"])
def test_lowrank_path_equals_the_dense_path(shape, m, k):
    net = _net(shape[0], m, seed=1)
    x = torch.rand(k + 8, *shape, generator=torch.Generator().manual_seed(0))  # k inputs + 8 held out
    net(x[:1])  # materialise the lazy layer
    dense = estimate_fisher(net, x, k=k, groups=4)
    low = estimate_fisher_lowrank(net, x, k=k, groups=4)
    assert low.n == k * m and low.d == dense.d and low.heldout == dense.heldout == 8
    assert low.saturation.status == dense.saturation.status
    assert low.saturation.unseen_share == pytest.approx(dense.saturation.unseen_share, rel=1e-8, abs=1e-12)
    for name, S in _scores(dense.d).items():
        Sd = S.dense()
        for sigma in (1e-3, 0.1):
            a, b = mse_bound(dense, Sd, sigma), mse_bound(low, S, sigma)
            assert b.kind == a.kind, (name, sigma)
            assert b.plugin == pytest.approx(a.plugin, rel=1e-8), (name, sigma)
            assert b.point == pytest.approx(a.point, rel=1e-8), (name, sigma)
            assert b.value == pytest.approx(a.value, rel=1e-8, abs=1e-14), (name, sigma)  # the jackknife too
            assert maeng_bound(low, S, sigma).value == pytest.approx(maeng_bound(dense, Sd, sigma).value,
                                                                             rel=1e-8)
        a, b = noiseless_mse_bound(dense, Sd, tau=0.0), noiseless_mse_bound(low, S, tau=0.0)
        assert b.plugin == pytest.approx(a.plugin, rel=1e-8, abs=1e-14), name
        assert b.value == pytest.approx(a.value, rel=1e-8, abs=1e-14) and b.kind == a.kind, name
        assert b.rank == a.rank
        assert ceiling(S).value == pytest.approx(ceiling(Sd).value, rel=1e-10)


def test_conservative_structures_never_raise_the_bound():
    """λ_max(S)·I and the Gershgorin diagonal are ⪰ S: bounds from them are ≤ the bounds from S itself."""
    net = _net(1, 6, seed=2)
    x = torch.rand(10, 1, 6, 6, generator=torch.Generator().manual_seed(1))
    net(x[:1])
    dense = estimate_fisher(net, x, k=10, groups=0)
    low = estimate_fisher_lowrank(net, x, k=10, groups=0)
    A = torch.randn(36, 36, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    S = A @ A.T / 36 + 5 * torch.eye(36, dtype=torch.float64)
    for structured in (StructuredScore.isotropic_from(S), StructuredScore.diagonal_from(S)):
        for sigma in (1e-3, 0.1):
            assert mse_bound(low, structured, sigma).value <= mse_bound(dense, S, sigma).value * (1 + 1e-9)
        assert noiseless_mse_bound(low, structured).value <= noiseless_mse_bound(dense, S, 0.0).value + 1e-15


_LARGE = textwrap.dedent('''
    import resource, sys, json
    import numpy as np, torch
    from torch import nn
    from reconguard.bounds import StructuredScore, estimate_fisher_lowrank, mse_bound, noiseless_mse_bound
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 5, stride=4, padding=2), nn.GELU(), nn.Conv2d(4, 1, 5, stride=4, padding=2),
                        nn.Flatten(), nn.Linear(64, 16)).double().eval()
    k, d = 8, 3 * 128 * 128
    x = torch.rand(k, 3, 128, 128, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    f = estimate_fisher_lowrank(net, x, k=k, groups=4)
    # the test's own Jacobians, one input at a time (autograd.functional), and the closed forms in numpy
    J = np.concatenate([torch.autograd.functional.jacobian(lambda v: net(v[None]).reshape(-1), xi).reshape(16, d).numpy()
                        for xi in x]) / np.sqrt(k)
    lam = np.linalg.eigvalsh(J @ J.T)
    out = {"n": f.n, "rank": int((lam > d * 2.2e-16 * lam.max()).sum())}
    s, sigma = 25.0, 1e-2
    iso = StructuredScore.isotropic(s, d)
    out["iso"] = [mse_bound(f, iso, sigma).plugin,
                  (np.sum(1 / (lam / sigma**2 + s)) + (d - len(lam)) / s) / d]
    out["iso0"] = [noiseless_mse_bound(f, iso).plugin, (d - out["rank"]) / s / d]
    diag = 5.0 + 20.0 * np.random.default_rng(0).random(d)
    D = StructuredScore.diagonal(torch.from_numpy(diag))
    C = k * 0 + sigma**2 * np.eye(J.shape[0]) + (J / diag) @ J.T      # Woodbury, independently in numpy
    corr = np.trace(np.linalg.solve(C, (J / diag**2) @ J.T))
    out["diag"] = [mse_bound(f, D, sigma).plugin, (np.sum(1 / diag) - corr) / d]
    # one bound API: estimate_fisher chooses the low-rank representation at this size, mse_bound takes a scalar S
    from reconguard.bounds import estimate_fisher, maeng_bound, mse_bound, noiseless_mse_bound
    from reconguard.bounds.lowrank import LowRankFisher
    auto = estimate_fisher(net, x, k=k, groups=4)
    out["auto_lowrank"] = isinstance(auto, LowRankFisher)
    out["api"] = [[mse_bound(auto, s, sigma).value, mse_bound(f, iso, sigma).value],
                  [noiseless_mse_bound(auto, s).value, noiseless_mse_bound(f, iso).value],
                  [maeng_bound(auto, s, sigma).point, d / (float(lam.sum()) / sigma**2 + s * d)]]
    out["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps(out))
''')


@pytest.mark.slow
def test_d_49152_equals_an_independent_closed_form_under_4gb():
    import json

    r = subprocess.run([sys.executable, "-c", _LARGE], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["n"] == 128 and out["rank"] == 128
    for key in ("iso", "iso0", "diag"):
        ours, theirs = out[key]
        assert ours == pytest.approx(theirs, rel=1e-8), (key, ours, theirs)
    assert out["auto_lowrank"]  # the dense d×d path would need 464 GB here
    for ours, theirs in out["api"]:
        assert ours == pytest.approx(theirs, rel=1e-8)
    assert out["peak_gb"] < 4.0, out["peak_gb"]


def test_jacobian_rows_streamed_through_a_file_give_the_same_bounds(tmp_path):
    net = _net(3, 8, seed=4)
    x = torch.rand(6, 3, 8, 8, generator=torch.Generator().manual_seed(5))
    net(x[:1])
    mem = estimate_fisher_lowrank(net, x, k=6, groups=3)
    disk = estimate_fisher_lowrank(net, x, k=6, groups=3, store=str(tmp_path), chunk_size=2)
    assert not isinstance(disk.B, torch.Tensor) and len(list(tmp_path.glob("*.npy"))) == 1
    S = _scores(mem.d)["diagonal+lowrank"]
    for sigma in (0.0, 1e-2):
        a = mse_bound(mem, S, sigma) if sigma else noiseless_mse_bound(mem, S)
        b = mse_bound(disk, S, sigma) if sigma else noiseless_mse_bound(disk, S)
        assert b.value == pytest.approx(a.value, rel=1e-10)


def test_bound_command_chooses_and_names_its_path(tmp_path):
    import json

    from reconguard.cli import main
    from reconguard.experiments.bound import choose_path, stream_rows

    # the anchor, k = 256, m = 64 at 3×224×224, on a 24 GB machine: low-rank, rows streamed through a file
    assert choose_path(150_528, 16_384, "auto", memory=24 << 30) == "lowrank"
    assert stream_rows(150_528, 16_384, memory=24 << 30) and not stream_rows(150_528, 1024, memory=24 << 30)
    assert choose_path(784, 64, "auto", memory=24 << 30) == "dense"
    out = tmp_path / "b.json"
    assert main(["bound", "--data", "gaussian", "--channels", "3", "--size", "32", "--encoder", "resnet18", "--split",
                 "early", "--m", "8", "--k", "4", "--path", "lowrank", "--sigma", "0", "0.01", "--out", str(out),
                 "--quiet"]) == 0
    data = json.loads(out.read_text())
    assert data["d"] == 3072 and data["settings"]["path"].startswith("low-rank")
    assert all(0 <= r["bound"] <= r["ceiling"] for r in data["rows"])
