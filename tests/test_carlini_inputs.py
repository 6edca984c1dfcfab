"""What users hand ``CarliniAttack.run`` wrong (issue 31): each is refused before any work, naming the problem and the
fix — not an IndexError deep in the search, and not a silent run on pixels in 0..255."""

import pytest
import torch

from reconguard import errors
from reconguard.attacks.instahide import CarliniAttack
from reconguard.data import load_digits
from reconguard.encoders import InstaHide


@pytest.fixture(scope="module")
def challenge():
    d = load_digits(8)
    e = InstaHide(2).encrypt(d.images[:10], d.labels[:10], seed=0)
    return e.images, e.labels, d.images[100:200]


def test_carlini_refuses_bad_inputs_clearly(challenge):
    E, L, own = challenge
    attack = CarliniAttack(2, 10, max_iter=2)
    holes = torch.where(torch.arange(E.numel()).reshape(E.shape) % 97 == 0, torch.nan, E)
    with pytest.raises(errors.NonFiniteError, match="encryptions holds 7 NaN"):
        attack.run(holes, L, own)
    with pytest.raises(errors.ShapeError, match="N ≥ 1"):
        attack.run(E[:0], L[:0], own)
    with pytest.raises(errors.PixelRangeError, match="divide by 255"):  # 0..255: the normalisation would be wrong
        attack.run(E, L, own * 255)
    with pytest.raises(errors.PixelRangeError, match="noise_images"):
        attack.run(E, L, own, noise_images=own - 0.5)
    with pytest.raises(errors.ParameterError, match="≥ 0"):
        attack.run(E, torch.where(L > 0, -L, L), own)
    with pytest.raises(errors.ParameterError, match="finite"):
        attack.run(E, torch.where(L > 0, torch.inf, L), own)
    with pytest.raises(errors.ParameterError, match="at most 20 distinct images, fewer than n = 30"):
        CarliniAttack(2, 30).run(E, L, own)  # 10 encryptions × 2 members cannot hold 30 images
    r = attack.run(E.numpy(), L.numpy(), own.numpy())  # arrays are fine
    assert r.images.shape == (10, 1, 8, 8) and bool(torch.isfinite(r.images).all())


@pytest.mark.parametrize("grid", [0, 1, -3, 2.5, True])
def test_carlini_refuses_a_coefficient_grid_of_no_points(grid):
    """``split_grid`` below 2 (or not an integer) gave no rows or numpy's own error, not one naming the setting."""
    with pytest.raises(errors.ParameterError, match="split_grid must be an integer ≥ 2"):
        CarliniAttack(6, 10, mode="cross", split_grid=grid)


def test_carlini_refuses_a_label_free_grid_that_c1_empties():
    """A 2-point grid puts 0.1 and 0.9 on an inside pair: both above c1 = 0.65, so no label-free row is left."""
    with pytest.raises(errors.ParameterError, match="raise split_grid"):
        CarliniAttack(2, 10, split_grid=2).grid.free_splits()
    assert len(CarliniAttack(2, 10, split_grid=3).grid.free_splits()) == 1  # (0.5, 0.5)


@pytest.mark.parametrize("patience", [0, -1, 1.5, True, "2"])
def test_carlini_refuses_a_split_patience_that_is_not_a_positive_integer(patience):
    """``split_patience`` 0 would stop before any split, a float or a string would compare oddly: refused by name."""
    with pytest.raises(errors.ParameterError, match="split_patience must be a positive integer"):
        CarliniAttack(6, 10, mode="cross", split_patience=patience)
    assert CarliniAttack(6, 10, mode="cross", split_patience=2).split_patience == 2


@pytest.mark.parametrize("name, value, says", [("max_rounds", 0, "max_rounds must be a positive integer"),
                                               ("max_rounds", 2.5, "max_rounds must be a positive integer"),
                                               ("max_rounds", True, "max_rounds must be a positive integer"),
                                               ("splits", -1, "splits must be an integer ≥ 0"),
                                               ("splits", 1.5, "splits must be an integer ≥ 0"),
                                               ("prior_moves", -2, "prior_moves must be an integer ≥ 0"),
                                               ("noise_rank", "20", "noise_rank must be an integer ≥ 0")])
def test_carlini_refuses_round_and_move_counts_that_are_not_integers_in_range(name, value, says):
    """A cap of 0 rounds would run nothing; 2.5 or a string would compare or count oddly: refused by name."""
    with pytest.raises(errors.ParameterError, match=says):
        CarliniAttack(6, 10, mode="cross", **{name: value})
    assert CarliniAttack(6, 10, mode="cross", max_rounds=100, splits=0, prior_moves=0, noise_rank=0).max_rounds == 100


def test_a_challenge_folder_written_channels_last_reads_as_channels_first(tmp_path):
    """``encryptions.npy`` saved N×H×W×C, as image libraries write arrays (grey: C = 1 last), is the same challenge
    as N×C×H×W — it was read as C = 16 channels of 16×1 pixels and refused with a shape message about public images."""
    import numpy as np

    from reconguard.attacks.instahide import make_challenge
    from reconguard.experiments.challenge import load_challenge

    d = load_digits(16)
    make_challenge(InstaHide(4), d.images[:200], d.labels[:200], 8, 4, tmp_path / "c", tmp_path / "t", seed=0)
    (tmp_path / "mine").mkdir()
    enc = np.load(tmp_path / "c" / "encryptions.npy")
    assert enc.shape[1:] == (1, 16, 16)
    np.save(tmp_path / "mine" / "encryptions.npy", np.ascontiguousarray(enc.transpose(0, 2, 3, 1)))
    np.save(tmp_path / "mine" / "labels.npy", np.load(tmp_path / "c" / "labels.npy"))
    ours, theirs = load_challenge(tmp_path / "c"), load_challenge(tmp_path / "mine", k=4, n=8)
    assert torch.equal(ours.encryptions, theirs.encryptions)
