"""The owner's published pixel normalisation (issue 31): InstaHide's code fixes CIFAR-10's channel constants, so an
attacker of the published challenge de-normalises with them. A challenge made with fixed constants records them in
``challenge.json``; ``load_challenge`` / ``attack_challenge`` pass them to the attack, whose images are then as bright
as the private ones. Under the default rule (the n private images' own statistics, never published) the attack uses
the owner's constants off the recovery's range (``denormalize="range"``, ``carlini_range``: [0, 1] maps to
[−m/s, (1 − m)/s]), or with ``denormalize="own"`` uses its own images' statistics (brighter photographs here)."""

import numpy as np
import pytest
import torch

from reconguard.attacks.instahide import make_challenge, score_challenge
from reconguard.attacks.instahide.carlini_range import owner_stats, pixel_quantiles, range_stats
from reconguard.data.photos import PHOTO_SPLITS, photo_crops
from reconguard.encoders import InstaHide
from reconguard.experiments.challenge import attack_challenge, load_challenge

ATTACKER_PHOTOS = ("stereo_motorcycle", "retina", "camera", "coins", "clock")  # as benchmarks/carlini.py


def test_published_constants_reach_the_attack_and_fix_the_recoverys_brightness(tmp_path):
    """RGB 16×16 crops, inside k = 3, n = 20, T = 25, two starts. Measured: with the published constants identified
    1.00, plain 1.00, SSIM 0.999, set brightness 0.0003 from the truth's; the same recovery de-normalised with the
    attacker's own statistics instead: brightness +0.075, plain 0.75, SSIM 0.874 — exactly what the attack gives when
    it is not told the constants (``CarliniAttack(normalize="dataset")`` on this challenge: +0.075, plain 0.75)."""
    source = torch.as_tensor(photo_crops(1000, 16, 3, seed=5, photos=PHOTO_SPLITS["a"]), dtype=torch.float32)
    own = torch.as_tensor(photo_crops(300, 16, 3, seed=6, photos=ATTACKER_PHOTOS), dtype=torch.float32)
    labels = torch.as_tensor(np.random.default_rng(5).integers(0, 10, len(source)))
    published = InstaHide(3).channel_stats(source)  # the whole source's constants, not the n images'
    make_challenge(InstaHide(3, normalize=published), source, labels, 20, 25, tmp_path / "c", tmp_path / "t",
                   seed=1, key_seed=1)
    ch = load_challenge(tmp_path / "c")
    assert np.allclose(np.array(ch.normalization, dtype=float), np.array(published), atol=1e-6)
    r = attack_challenge(ch, "carlini", own, restarts=2)
    truth = torch.as_tensor(np.load(tmp_path / "t" / "private.npy"))
    s = score_challenge(r.images, tmp_path / "t")
    assert abs(float(r.images.mean() - truth.mean())) < 0.03, float(r.images.mean() - truth.mean())
    assert s.identified >= 0.9 and s.identified_plain >= 0.9, s.summary()
    # the same recovery de-normalised with the attacker's own statistics: brighter, and plain NN suffers
    (m_pub, s_pub), (m_own, s_own) = ((torch.tensor(v).reshape(1, -1, 1, 1) for v in st)
                                      for st in (published, InstaHide(3).channel_stats(own)))
    own_view = ((r.images - m_pub) / s_pub * s_own + m_own).clamp(0, 1)
    assert float(own_view.mean() - truth.mean()) > 0.05, float(own_view.mean() - truth.mean())
    assert score_challenge(own_view, tmp_path / "t").identified_plain < 0.9


def test_challenge_command_publishes_the_data_sets_constants(tmp_path):
    """``instahide challenge --normalization published`` records the whole data set's channel statistics (not the n
    picked images') in challenge.json, and ``instahide attack`` reads them back."""
    import json

    from reconguard.cli import main
    from reconguard.data import load_digits

    c, t = tmp_path / "c", tmp_path / "t"
    assert main(["instahide", "challenge", "--data", "digits", "--n", "10", "--T", "12", "--k", "3",
                 "--normalization", "published", "--out", str(c), "--truth", str(t)]) == 0
    recorded = json.loads((c / "challenge.json").read_text())["normalization"]
    expected = InstaHide(3).channel_stats(torch.as_tensor(load_digits().images, dtype=torch.float32))
    assert np.allclose(np.array(recorded, dtype=float), np.array(expected), atol=1e-6)
    picked = InstaHide(3).channel_stats(torch.as_tensor(np.load(t / "private.npy")))
    assert not np.allclose(np.array(recorded, dtype=float), np.array(picked), atol=1e-3)  # not the n images' own
    assert load_challenge(c).normalization == recorded
    assert main(["instahide", "attack", "carlini", "--challenge", str(c), "--out", str(tmp_path / "rec.npy"),
                 "--restarts", "1", "--quiet"]) == 0


def test_an_unpublished_normalisation_is_read_off_the_recoverys_range(tmp_path):
    """The same kind of challenge under the default rule (the 20 private images' own statistics, never published).
    Measured (seed 5): read off the recovery's range (the default), brightness +0.031 from the truth's, plain 0.90, SSIM
    0.970; the same recovery de-normalised with the attacker's own statistics (``denormalize="own"``): +0.093, plain
    0.55, SSIM 0.864 (seed 7: +0.012 / 1.00 against +0.076 / 0.85)."""
    source = torch.as_tensor(photo_crops(1000, 16, 3, seed=5, photos=PHOTO_SPLITS["a"]), dtype=torch.float32)
    own = torch.as_tensor(photo_crops(300, 16, 3, seed=6, photos=ATTACKER_PHOTOS), dtype=torch.float32)
    labels = torch.as_tensor(np.random.default_rng(5).integers(0, 10, len(source)))
    make_challenge(InstaHide(3), source, labels, 20, 25, tmp_path / "c", tmp_path / "t", seed=1, key_seed=1)
    ch = load_challenge(tmp_path / "c")
    assert ch.normalization == "dataset"
    r = attack_challenge(ch, "carlini", own, restarts=2)  # the default: the recovery's range
    truth = torch.as_tensor(np.load(tmp_path / "t" / "private.npy"))
    s = score_challenge(r.images, tmp_path / "t")
    assert abs(float(r.images.mean() - truth.mean())) < 0.05, float(r.images.mean() - truth.mean())
    assert s.identified >= 0.9 and s.identified_plain >= 0.85, s.summary()
    r_own = attack_challenge(ch, "carlini", own, restarts=2, denormalize="own")  # the same recovery, own statistics
    assert float(r_own.images.mean() - truth.mean()) > 0.06, float(r_own.images.mean() - truth.mean())
    assert score_challenge(r_own.images, tmp_path / "t").identified_plain <= s.identified_plain - 0.2


def test_range_stats_gives_back_the_owners_constants_and_keeps_the_fallback_where_the_range_is_implausible():
    """A set that reaches black and white in every channel, normalised with constants (m, s): the range gives them
    back; a channel whose values cannot come from [0, 1] images (constant, or all above the mean) keeps the fallback."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(50, 3, 8, 8, generator=g)
    x[0, :, 0, 0], x[1, :, 0, 0] = 0.0, 1.0
    m, s = torch.tensor([0.4, 0.5, 0.3]), torch.tensor([0.25, 0.2, 0.3])
    z = ((x - m.reshape(1, 3, 1, 1)) / s.reshape(1, 3, 1, 1)).reshape(50, -1)
    means, stds = range_stats(z, 3, ((0.0,) * 3, (1.0,) * 3), q=0.0)
    assert np.allclose(means, m, atol=1e-6) and np.allclose(stds, s, atol=1e-6)
    bad = z.clone()
    bad[:, :64] = 1.0  # channel 0 constant
    bad[:, 64:128] = bad[:, 64:128].abs() + 0.5  # channel 1 entirely above its mean: −lo/(hi − lo) < 0
    means, stds = range_stats(bad, 3, ((0.1, 0.2, 0.3), (0.5, 0.6, 0.7)), q=0.0)
    assert means[:2] == (0.1, 0.2) and stds[:2] == (0.5, 0.6)
    assert means[2] == pytest.approx(0.3, abs=1e-6) and stds[2] == pytest.approx(0.3, abs=1e-6)


def test_the_range_is_read_off_the_final_recovery_not_the_one_before_its_signs_settle(monkeypatch):
    """The phase step's recovery (before ``carlini_signs.settle``) still holds pixels whose sign is wrong, and a bright
    pixel negated lies far below the set's range: read there, one 32×32 challenge (seed 2) put channel 2's mean at 0.412
    instead of 0.287 (plain 0.79); read off the final recovery, 0.298 (plain 1.00). The attack reads the final one."""
    from reconguard.attacks.instahide import CarliniAttack

    seen = []
    import reconguard.attacks.instahide.carlini_range as range_module

    monkeypatch.setattr(range_module, "range_stats", lambda Z, *a, **kw: seen.append(Z.clone()) or range_stats(Z, *a, **kw))
    source = torch.as_tensor(photo_crops(200, 8, 3, seed=3, photos=PHOTO_SPLITS["a"]), dtype=torch.float32)
    own = torch.as_tensor(photo_crops(100, 8, 3, seed=4, photos=ATTACKER_PHOTOS), dtype=torch.float32)
    labels = torch.as_tensor(np.random.default_rng(3).integers(0, 10, len(source)))
    x, y = source[:12], labels[:12]
    enc = [InstaHide(3).encrypt(x, y, seed=t) for t in range(12)]
    E, L = torch.cat([e.images for e in enc]), torch.cat([e.labels for e in enc])
    r = CarliniAttack(3, 12, restarts=1, seed=0).run(E, L, own)
    assert len(seen) == 1 and torch.equal(seen[0], r.normalized)
    assert not torch.equal(r.unrefined_normalized, r.normalized)  # the two differ here, so the check can tell them apart
    m, s = (torch.tensor(v, dtype=torch.float64).reshape(1, 3, 1, 1) for v in range_stats(r.normalized, 3, ((0.5,) * 3, (0.25,) * 3)))
    assert torch.allclose(r.images, (r.normalized.reshape(12, 3, 8, 8) * s + m).clamp(0, 1).float(), atol=1e-6)


@pytest.mark.parametrize("white", [False, True])
def test_a_background_level_is_the_sets_black_not_the_noise_below_it(white):
    """Half of every image a background, recovered as the attack does on Fashion-MNIST: a third of it set exactly to
    one level (the prior moves' box end), the rest scattered around it. The 0.2 % quantile measures the scatter (the
    background de-normalised to ≈ 0.02, not 0); the level gives the owner's constants back. A white background is the
    high end."""
    g = torch.Generator().manual_seed(1)
    x = torch.rand(100, 1, 16, 16, generator=g)
    x[:, :, :8] = 0.0
    if white:
        x = 1 - x
    m, s = float(x.mean()), float(x.std())
    z = ((x - m) / s).reshape(100, -1)
    back = (x.reshape(100, -1) == (1.0 if white else 0.0))
    scatter = back & (torch.rand(z.shape, generator=g) < 0.66)
    z = torch.where(scatter, z + 0.03 * torch.randn(z.shape, generator=g) / s, z)
    t = 1.3  # the attacker's statistics: off from the owner's, but its box end is where the prior moves set the level
    box = ((1 - (1 - m) * t,), (s * t,)) if white else ((m * t,), (s * t,))
    quantile_only = range_stats(z, 1, box, level=1.1)
    with_level = range_stats(z, 1, box)
    assert abs(with_level[0][0] - m) < 2e-3 and abs(with_level[1][0] - s) < 2e-3, (with_level, m, s)
    assert abs(quantile_only[0][0] - m) > 0.01, (quantile_only, m)


def test_a_grey_level_is_not_taken_for_black():
    """A flat grey background (0.3, a third of every image) recovered as one exact value, in the lower half of the range:
    it is not the box end the attack clamps to, so the quantiles stand and the grey stays grey. Taken as the low end
    (as when the box's end happens to be there: the control) it would be de-normalised to black."""
    g = torch.Generator().manual_seed(2)
    x = torch.rand(100, 1, 24, 24, generator=g)
    x[:, :, :8] = 0.3
    m, s = float(x.mean()), float(x.std())
    z = ((x - m) / s).reshape(100, -1)
    means, stds = range_stats(z, 1, ((0.5,), (0.25,)))
    grey = float((z[0, 0] * stds[0] + means[0]))
    assert abs(grey - 0.3) < 0.01 and abs(means[0] - m) < 0.01, (grey, means, m)
    control = ((m - 0.3,), (s,))  # a box whose low end is the grey level: −m_f/s_f = (0.3 − m)/s
    means_c, stds_c = range_stats(z, 1, control)
    assert abs(float(z[0, 0] * stds_c[0] + means_c[0])) < 1e-6, (means_c, stds_c)


def test_range_stats_maps_its_quantiles_to_the_targets_given():
    """The q and 1 − q quantiles of a recovery map to the targets: given the set's own pixel quantiles as targets, any
    q gives its constants back (the default targets, black and white, need q = 0)."""
    g = torch.Generator().manual_seed(3)
    x = torch.rand(40, 3, 8, 8, generator=g) ** 1.5
    m, s = torch.tensor([0.3, 0.45, 0.5]), torch.tensor([0.2, 0.3, 0.25])
    z = ((x - m.reshape(1, 3, 1, 1)) / s.reshape(1, 3, 1, 1)).reshape(40, -1)
    for q in (0.01, 0.03, 0.1):
        means, stds = range_stats(z, 3, ((0.5,) * 3, (0.25,) * 3), q=q, targets=pixel_quantiles(x, q))
        assert np.allclose(means, m, atol=1e-5) and np.allclose(stds, s, atol=1e-5), (q, means, stds)
    lows, highs = pixel_quantiles(x, 0.03)
    assert len(lows) == 3 and all(0 <= lo < hi <= 1 for lo, hi in zip(lows, highs))


def test_cross_mode_reads_a_darker_owners_constants_off_a_noisy_recovery_against_its_own_photographs():
    """Cross mode on natural images (``owner_stats(..., "cross", own)``): the owner's 16×16 crops are darker than the
    attacker's photographs (means 0.07–0.11 apart), and a cross recovery is noisy at its tails — 5 % of the pixels'
    signs wrong, noise of 0.2 — so the inside rule (0.2 % quantiles to black and white) reads the noise. The 3 %
    quantiles mapped to the attacker's own images' read the owner's constants: the worst channel's mean off by 0.009–0.028
    (seeds 0–3) against the own statistics' 0.070–0.106, the standard deviation 0.013–0.031 against 0.035–0.042."""
    for seed in range(4):
        private = torch.as_tensor(photo_crops(100, 16, 3, seed=seed, photos=PHOTO_SPLITS["a"]), dtype=torch.float32)
        own = torch.as_tensor(photo_crops(300, 16, 3, seed=seed + 1, photos=ATTACKER_PHOTOS), dtype=torch.float32)
        truth, mine = (InstaHide(6).channel_stats(images) for images in (private, own))
        z = InstaHide.normalize_images(private, truth).reshape(100, -1).double()
        g = torch.Generator().manual_seed(seed)
        z = torch.where(torch.rand(z.shape, generator=g) < 0.05, -z, z) + 0.2 * torch.randn(z.shape, generator=g, dtype=torch.float64)
        read, inside = owner_stats(z, 3, mine, "cross", own), owner_stats(z, 3, mine, "inside", own)
        off = {name: (np.abs(np.subtract(st[0], truth[0])).max(), np.abs(np.subtract(st[1], truth[1])).max())
               for name, st in (("read", read), ("own", mine), ("inside", inside))}
        assert off["read"][0] < 0.4 * off["own"][0] and off["read"][1] < off["own"][1], (seed, off)
        assert off["read"][0] < off["inside"][0], (seed, off)
