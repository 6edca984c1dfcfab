"""Datasets and priors without a network: digits, MNIST IDX and CIFAR-10 batches written here, scores."""

import gzip
import pickle
import struct

import numpy as np
import pytest
import torch

from reconguard import errors
from reconguard.bounds import score_matrix, score_quality
from reconguard.data import (ImageDataset, gaussian_prior, load_cifar10, load_digits, load_mnist, smooth,
                             smoothed_empirical_prior)


def test_digits_shapes_and_range():
    ds = load_digits()
    assert len(ds) == 1797 and ds.shape == (1, 8, 8) and ds.dim == 64
    assert float(ds.images.min()) == 0.0 and float(ds.images.max()) == 1.0
    assert set(ds.labels.tolist()) == set(range(10))
    big = load_digits(28)
    assert big.shape == (1, 28, 28) and 0 <= float(big.images.min()) and float(big.images.max()) <= 1
    img, label = big[5]
    assert img.shape == (1, 28, 28) and int(label) == int(ds.labels[5])


def _write_idx(path, array, magic, compress=False):
    header = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    (gzip.open if compress else open)(path, "wb").write(data)


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_idx_roundtrip(tmp_path, compress):
    rng = np.random.default_rng(0)
    imgs, labels = rng.integers(0, 256, (5, 28, 28)), rng.integers(0, 10, 5)
    sfx = ".gz" if compress else ""
    _write_idx(tmp_path / f"t10k-images-idx3-ubyte{sfx}", imgs, 0x803, compress)
    _write_idx(tmp_path / f"t10k-labels-idx1-ubyte{sfx}", labels, 0x801, compress)
    ds = load_mnist(tmp_path, "test")
    assert ds.images.shape == (5, 1, 28, 28)
    assert torch.allclose(ds.images[:, 0] * 255, torch.tensor(imgs, dtype=torch.float32))
    assert ds.labels.tolist() == labels.tolist()


def test_mnist_corrupt(tmp_path):
    _write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((2, 28, 28)), 0x803)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(2), 0x999)
    with pytest.raises(errors.CorruptDataError, match="magic"):
        load_mnist(tmp_path)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(2), 0x801)
    (tmp_path / "train-images-idx3-ubyte").write_bytes((tmp_path / "train-images-idx3-ubyte").read_bytes()[:-10])
    with pytest.raises(errors.CorruptDataError, match="truncated"):
        load_mnist(tmp_path)


def _write_cifar(folder, names, n=3):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for name in names:
        batch = {b"data": rng.integers(0, 256, (n, 3072)).astype(np.uint8), b"labels": list(rng.integers(0, 10, n))}
        (folder / name).write_bytes(pickle.dumps(batch))


def test_cifar_batches(tmp_path):
    _write_cifar(tmp_path / "cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"])
    train, test = load_cifar10(tmp_path), load_cifar10(tmp_path, "test")
    assert train.images.shape == (15, 3, 32, 32) and test.images.shape == (3, 3, 32, 32)
    assert 0 <= float(train.images.min()) and float(train.images.max()) <= 1


def test_cifar_refuses_code_in_pickle(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (tmp_path / "test_batch").write_bytes(pickle.dumps({b"data": Evil(), b"labels": [0]}))
    with pytest.raises(errors.CorruptDataError, match="refusing"):
        load_cifar10(tmp_path, "test")


def test_image_dataset_rejects_bad_range():
    with pytest.raises(errors.PixelRangeError, match="255"):
        ImageDataset(torch.full((2, 1, 4, 4), 200.0))


def test_gaussian_score_is_exact():
    p = gaussian_prior(0.5, 0.2, 10)
    x = p.sample(7, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    auto = torch.autograd.grad(p.log_prob(x).sum(), x)[0]
    assert torch.allclose(p.score(x.detach()), auto, atol=1e-10)
    assert torch.allclose(score_matrix(p), torch.eye(10, dtype=torch.float64) / 0.2**2, rtol=1e-15)
    # Monte-Carlo S from samples agrees with the exact one
    S_mc = score_matrix(p.score, p.sample(50000, generator=torch.Generator().manual_seed(1)))
    assert float((S_mc - score_matrix(p)).abs().max()) < 0.05 * 25


def test_mixture_score_matches_autograd_and_quality():
    ds = load_digits()
    p = smoothed_empirical_prior(ds, 0.1)
    x = p.sample(5, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    auto = torch.autograd.grad(p.log_prob(x).sum(), x)[0]
    assert torch.allclose(p.score(x.detach()), auto, rtol=1e-8, atol=1e-8)
    samples = p.sample(20000, generator=torch.Generator().manual_seed(2))
    S = score_matrix(p, samples)
    q = score_quality(S, samples)
    # Cramér–Rao: Σ^½ S Σ^½ ⪰ I for the true S. Directions where the digits never vary (corner
    # pixels) sit at exactly 1, so sampling noise in S and Σ (20,000 samples) scatters them over
    # the Marchenko–Pastur bulk, down to (1 − √(64/20000))² ≈ 0.89, but not below it.
    assert q.noise_floor == pytest.approx((1 - (64 / 20000) ** 0.5) ** 2)
    assert q.fraction_below_one > 0 and q.ok
    assert float(q.eigenvalues[-1]) > 10


def test_score_quality_flags_a_wrong_score():
    p = gaussian_prior(0.5, 0.2, 8)
    x = p.sample(20000, generator=torch.Generator().manual_seed(0))
    good, bad = score_quality(score_matrix(p), x), score_quality(score_matrix(p) / 4, x)
    assert good.min == pytest.approx(1.0, abs=0.06) and good.ok
    assert bad.fraction_below_floor == 1.0 and not bad.ok and not bad.passes(0.05)


def test_smoothing_is_seeded_and_sized():
    x = load_digits().images[:4]
    a = smooth(x, 0.1, torch.Generator().manual_seed(0))
    b = smooth(x, 0.1, torch.Generator().manual_seed(0))
    assert torch.equal(a, b) and a.shape == x.shape
    assert float((a - x).std()) == pytest.approx(0.1, rel=0.1)


# --- Fashion-MNIST (Debian's dataset-fashion-mnist; `make test` installs it where apt is available) ---

def test_fashion_mnist_loads_from_the_debian_package(fashion_root):
    import gzip

    import numpy as np

    from reconguard.data import load_fashion_mnist, load_named

    root = fashion_root
    train, test = load_fashion_mnist(split="train"), load_named("fashion-mnist", split="test")
    assert tuple(train.images.shape) == (60000, 1, 28, 28) and tuple(test.images.shape) == (10000, 1, 28, 28)
    assert sorted(train.labels.unique().tolist()) == list(range(10)) and train.images.dtype == torch.float32
    raw = np.frombuffer(gzip.open(root / "train-images-idx3-ubyte.gz").read()[16:], np.uint8)
    assert torch.equal(train.images[123, 0], torch.from_numpy(raw.reshape(-1, 28, 28)[123].astype(np.float32) / 255))


def test_fashion_mnist_missing_is_one_clear_error(tmp_path):
    from reconguard.data import load_fashion_mnist
    from reconguard.errors import DataFileNotFoundError

    with pytest.raises(DataFileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_fashion_mnist(tmp_path)


def test_instahide_challenge_draws_exact_fashion_mnist_images(tmp_path, fashion_root):
    import numpy as np

    from reconguard.cli import main
    from reconguard.data import load_fashion_mnist

    out = tmp_path / "c"
    assert main(["instahide", "challenge", "--data", "fashion-mnist", "--n", "6", "--T", "2", "--k", "2",
                 "--out", str(out)]) == 0
    private = torch.from_numpy(np.load(tmp_path / "c-truth" / "private.npy"))
    train = load_fashion_mnist().images.reshape(60000, -1)
    for img in private.reshape(6, -1):
        assert float(((train - img) ** 2).sum(1).min()) < 1e-10  # each private image is one training image, exactly


def test_cifar_read_from_the_downloaded_archive(tmp_path):
    """The official ``cifar-10-python.tar.gz`` as downloaded — the path itself or in the folder given — reads the same
    images as its extracted batches, without extracting anything; a truncated archive or one without a batch is a
    clear error."""
    import tarfile

    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    _write_cifar(tmp_path / "x" / "cifar-10-batches-py", names)
    archive = tmp_path / "dl" / "cifar-10-python.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "x" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    for split in ("train", "test"):
        ref = load_cifar10(tmp_path / "x", split)
        for root in (archive, archive.parent):
            got = load_cifar10(root, split)
            assert torch.equal(got.images, ref.images) and torch.equal(got.labels, ref.labels)
    assert sorted(p.name for p in archive.parent.iterdir()) == ["cifar-10-python.tar.gz"]  # nothing extracted
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(archive.read_bytes()[:200])
    with pytest.raises(errors.CorruptDataError, match="broken.tar.gz"):
        load_cifar10(broken)
    partial = tmp_path / "partial.tar.gz"
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(tmp_path / "x" / "cifar-10-batches-py" / "test_batch", arcname="cifar-10-batches-py/test_batch")
    assert load_cifar10(partial, "test").images.shape == (3, 3, 32, 32)
    with pytest.raises(errors.CorruptDataError, match="data_batch_1"):
        load_cifar10(partial, "train")
