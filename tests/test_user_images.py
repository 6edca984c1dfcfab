"""The user's own images everywhere images are taken (issue: the audit at the size and conventions of real
releases): `instahide challenge --data FOLDER|.npz`, `instahide attack --public FOLDER` (any size: resized),
`audit encrypted --public FOLDER`, on crops of scikit-image's RGB photographs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reconguard.cli import main


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    from PIL import Image
    from skimage import data as sd

    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for name in ("astronaut", "coffee", "chelsea", "rocket"):  # the owner's private photos, one class each
        img = getattr(sd, name)()
        (root / "private" / name).mkdir(parents=True)
        for i in range(4):
            y, x = rng.integers(0, img.shape[0] - 96), rng.integers(0, img.shape[1] - 96)
            Image.fromarray(img[y:y + 96, x:x + 96]).resize((16, 16)).save(root / "private" / name / f"{i}.png")
    (root / "own").mkdir()  # the attacker's own photos: other pictures, another size, some grey
    for name in ("camera", "hubble_deep_field", "immunohistochemistry", "cat"):
        img = getattr(sd, name)()
        for i in range(5):
            y, x = rng.integers(0, img.shape[0] - 64), rng.integers(0, img.shape[1] - 64)
            Image.fromarray(img[y:y + 64, x:x + 64]).save(root / "own" / f"{name}{i}.png")
    return root


def test_challenge_attack_and_audit_on_a_users_rgb_photos(photos, tmp_path, capsys):
    c, t = tmp_path / "c", tmp_path / "t"
    assert main(["instahide", "challenge", "--data", str(photos / "private"), "--n", "8", "--T", "3", "--k", "2",
                 "--out", str(c), "--truth", str(t)]) == 0
    private = np.load(t / "private.npy")
    assert private.shape == (8, 3, 16, 16) and json.loads((c / "challenge.json").read_text())["shape"] == [3, 16, 16]
    assert main(["instahide", "attack", "averaging", "--challenge", str(c), "--public", str(photos / "own"),
                 "--truth", str(t), "--out", str(tmp_path / "r.npy")]) == 0
    assert np.load(tmp_path / "r.npy").shape[1:] == (3, 16, 16)
    assert main(["audit", "encrypted", "--data", str(c), "--truth", str(t), "--public", str(photos / "own"),
                 "--attacks", "averaging", "--out", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "report.html").exists()
    out = capsys.readouterr().out
    assert "identified" in out and "baseline" in out


def test_an_npz_with_labels_is_a_dataset_and_one_without_is_refused_for_a_challenge(tmp_path, capsys):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "mine.npz", images=rng.random((12, 1, 8, 8)).astype("float32"), labels=np.arange(12) % 3)
    np.save(tmp_path / "nolabels.npy", rng.random((12, 1, 8, 8)).astype("float32"))
    assert main(["instahide", "challenge", "--data", str(tmp_path / "mine.npz"), "--n", "6", "--T", "2", "--k", "2",
                 "--out", str(tmp_path / "c")]) == 0
    assert main(["instahide", "challenge", "--data", str(tmp_path / "nolabels.npy"), "--n", "6", "--T", "2", "--k",
                 "2", "--out", str(tmp_path / "d")]) == 2
    assert "no labels" in capsys.readouterr().err and not (tmp_path / "d").exists()
    with pytest.raises(SystemExit):
        main(["instahide", "challenge", "--data", str(tmp_path / "missing.npz"), "--out", str(tmp_path / "e")])
