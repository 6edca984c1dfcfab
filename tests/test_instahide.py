"""InstaHide / Mixup scheme: property tests over many draws, exact decryption, bad input."""

import pytest
import torch

from reconguard import errors
from reconguard.data import PatchStore, load_digits, prepare_public
from reconguard.encoders import InstaHide, Mixup, sample_coefficients


@pytest.fixture(scope="module")
def digits():
    return load_digits()


@pytest.mark.parametrize("k,c1,c2", [(2, 0.65, None), (4, 0.65, None), (6, 0.65, None), (4, 0.65, 0.3), (6, 0.5, 0.45)])
def test_coefficients_respect_every_constraint(k, c1, c2):
    lam = sample_coefficients(20000, k, c1, c2, torch.Generator().manual_seed(k))
    assert lam.shape == (20000, k) and bool((lam >= 0).all())
    assert torch.allclose(lam.sum(1), torch.ones(20000), atol=1e-6)
    assert float(lam.max()) <= c1 + 1e-6
    if c2 is not None:
        assert float(lam[:, :2].sum(1).min()) >= c2 - 1e-6
    # uniform on the feasible set: the slots are exchangeable without c2
    if c2 is None:
        means = lam.mean(0)
        assert torch.allclose(means, torch.full((k,), 1 / k), atol=0.01)


def test_inside_partners_mask_and_labels(digits):
    ih = InstaHide(k=4)
    for seed in range(5):
        enc = ih.encrypt(digits.images, digits.labels, seed=seed)
        p = enc.key.partners
        assert torch.equal(p[:, 0], torch.arange(len(digits)))
        assert not bool((p[:, 1:] == p[:, :1]).any())  # never mixed with itself
        s = p.sort(1).values
        assert not bool((s[:, 1:] == s[:, :-1]).any())  # no repeats within a mix
        # the reference's permutation scheme: in one epoch every private image is in exactly k mixes
        # (independent draws per row gave 1–12 times at k = 4)
        assert torch.equal(torch.bincount(p.reshape(-1), minlength=len(digits)),
                           torch.full((len(digits),), 4, dtype=torch.long))
        m = enc.key.mask
        assert set(m.unique().tolist()) == {-1, 1} and abs(float(m.float().mean())) < 0.01
        assert torch.allclose(enc.labels.sum(1), torch.ones(len(digits)), atol=1e-5)
        assert enc.reproducible


def test_cross_mode_draws_from_the_whole_public_pool(digits):
    pool = torch.rand(5000, 1, 8, 8)
    ih = InstaHide(k=6, mode="cross", public=pool)
    enc = ih.encrypt(digits.images, digits.labels, seed=0)
    assert bool(enc.key.public[:, 2:].all()) and not bool(enc.key.public[:, :2].any())
    used = enc.key.partners[:, 2:].unique()
    private = enc.key.partners[:, :2]
    assert not bool((private[:, 1] == private[:, 0]).any())
    assert torch.equal(torch.bincount(private.reshape(-1)), torch.full((len(digits),), 2, dtype=torch.long))
    assert float(used.max()) > 4900 and used.numel() > 2500  # far beyond the first N = 1797
    assert float(enc.key.coefficients[:, :2].sum(1).min()) >= 0.3 - 1e-6
    # labels carry the private part only
    assert torch.allclose(enc.labels.sum(1), enc.key.coefficients[:, :2].sum(1), atol=1e-5)
    A = enc.key.mixing(len(digits))  # the private part's mixing matrix: the labels' mass, two images a row
    assert torch.allclose(A.sum(1), enc.labels.sum(1).double(), atol=1e-5) and bool(((A > 0).sum(1) == 2).all())


def test_the_keys_mixing_matrix_reproduces_the_encryptions_up_to_sign(digits):
    ih = InstaHide(k=4)
    enc = ih.encrypt(digits.images[:50], digits.labels[:50], seed=0)
    A = enc.key.mixing(50)
    assert A.shape == (50, 50) and bool(((A > 0).sum(1) == 4).all())
    X = InstaHide.normalize_images(digits.images[:50], enc.normalization).reshape(50, -1).double()
    assert torch.allclose((A @ X).abs(), enc.images.reshape(50, -1).abs().double(), atol=1e-5)


def test_decrypting_with_the_key_recovers_the_mix_and_keys_differ(digits):
    ih = InstaHide(k=4)
    a = ih.encrypt(digits.images, digits.labels)
    b = ih.encrypt(digits.images, digits.labels)
    assert not a.reproducible
    assert torch.allclose(ih.decrypt(a), ih.remix(digits.images, a.key, a.normalization), atol=1e-6)
    assert not torch.allclose(a.images, b.images)
    assert not torch.equal(a.key.mask, b.key.mask)
    mixup = Mixup(2).encrypt(digits.images, digits.labels, seed=0)
    assert mixup.key.mask is None and torch.equal(Mixup(2).decrypt(mixup), mixup.images)


def test_seeded_encryptions_are_reproducible(digits):
    ih = InstaHide(k=3)
    a, b = ih.encrypt(digits.images, digits.labels, seed=7), ih.encrypt(digits.images, digits.labels, seed=7)
    assert torch.equal(a.images, b.images) and torch.equal(a.key.partners, b.key.partners)


@pytest.mark.parametrize("kwargs,match", [
    ({"k": 0}, "k must be a positive integer"),
    ({"k": 4, "c1": 0.2}, "below 1/k"),
    ({"k": 4, "c2": 1.5}, "c2"),
    ({"k": 4, "mode": "sideways"}, "mode"),
    ({"k": 4, "mode": "cross"}, "public pool"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(errors.ReconguardError, match=match):
        InstaHide(**kwargs)


def test_bad_images(digits):
    ih = InstaHide(k=4)
    with pytest.raises(errors.PixelRangeError):
        ih.encrypt(digits.images * 255, digits.labels)
    with pytest.raises(errors.ShapeError):
        ih.encrypt(digits.images[:, 0], digits.labels)
    with pytest.raises(errors.ShapeError, match="public images have shape"):
        InstaHide(k=4, mode="cross", public=torch.rand(100, 1, 9, 9)).encrypt(digits.images, digits.labels)
    with pytest.raises(errors.ShapeError, match="mixed sizes"):
        ih.encrypt([torch.rand(1, 8, 8), torch.rand(1, 9, 9)] * 3)
    with pytest.raises(errors.ShapeError, match="labels"):
        ih.encrypt(digits.images, digits.labels[:5])


def test_public_patches_from_the_shipped_samples(tmp_path):
    store = prepare_public(tmp_path / "pub", size=8, channels=1, patches_per_image=20, seed=0)
    assert len(store) > 20 and store.shape == (1, 8, 8)
    x = store.get([3, 0, 3])
    assert x.shape == (3, 1, 8, 8) and 0 <= float(x.min()) and float(x.max()) <= 1 and torch.equal(x[0], x[2])
    assert len(PatchStore(tmp_path / "pub")) == len(store)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(errors.DataFileNotFoundError, match="no images"):
        prepare_public(tmp_path / "p2", folder=empty)
    with pytest.raises(errors.DataFileNotFoundError, match="prepare-public"):
        PatchStore(empty)


@pytest.mark.parametrize("n,k", [(4, 4), (5, 4), (7, 6), (2000, 4), (50, 12)])
def test_every_image_in_exactly_k_mixes_at_any_size(n, k):
    x = torch.rand(n, 1, 4, 4)
    p = InstaHide(k=k, c1=max(0.65, 1 / k)).encrypt(x, seed=n + k).key.partners
    assert torch.equal(torch.bincount(p.reshape(-1), minlength=n), torch.full((n,), k, dtype=torch.long))
    assert all(len(set(row)) == k for row in p.tolist())
