import pytest
import torch

from reconguard.encoders import Noisy, SplitCNN, random_linear, skewed_linear
from reconguard.nn import compression_plan


@pytest.mark.parametrize("m", [1, 7, 16, 49, 64, 98, 200, 784])
def test_compression_plan_gives_exact_m(m):
    c, s = compression_plan(m, 64, 7, 7)
    assert c * (s * s if s else 49) == m


@pytest.mark.parametrize("split", ["early", "middle", "late"])
@pytest.mark.parametrize("m", [10, 64])
def test_splitcnn_output_size_and_downstream(split, m):
    enc = SplitCNN(split, m, (1, 28, 28), seed=0)
    x = torch.rand(3, 1, 28, 28)
    e = enc(x)
    assert e.shape == (3, m)
    assert torch.equal(enc(x.reshape(3, -1)), e)
    assert enc.downstream()(e).shape == (3, 10)
    assert SplitCNN(split, m, (1, 8, 8))(torch.rand(2, 1, 8, 8)).shape == (2, m)  # works on 8×8 digits too


def test_splitcnn_seed_does_not_touch_global_rng():
    state = torch.random.get_rng_state()
    a, b = SplitCNN("middle", 16, seed=5), SplitCNN("middle", 16, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_linear_encoders():
    enc = random_linear(64, 16, seed=0)
    assert enc.W.shape == (16, 64) and enc(torch.rand(5, 64)).shape == (5, 16)
    assert enc(torch.rand(5, 1, 8, 8)).shape == (5, 16)
    W = skewed_linear(32, 1.0, seed=0).W
    assert float(torch.trace(W.T @ W)) == pytest.approx(32.0)
    iso = skewed_linear(32, 0.0, seed=0).W
    assert torch.allclose(iso.T @ iso, torch.eye(32, dtype=torch.float64), atol=1e-12)


def test_noisy_is_reproducible_with_generator():
    enc = random_linear(8, 4, seed=0)
    x = torch.rand(10, 8, dtype=torch.float64)
    a = Noisy(enc, 0.1, generator=torch.Generator().manual_seed(0))(x)
    b = Noisy(enc, 0.1, generator=torch.Generator().manual_seed(0))(x)
    assert torch.equal(a, b)
    assert float((a - enc(x)).std()) == pytest.approx(0.1, rel=0.4)
    assert torch.equal(Noisy(enc, 0.0)(x), enc(x))
