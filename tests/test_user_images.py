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
    assert json.loads((tmp_path / "a" / "results.json").read_text())["public"] == str(photos / "own")
    # no --public: an RGB release is attacked with natural images (crops of other photographs), not coloured digits
    assert main(["audit", "encrypted", "--data", str(c), "--truth", str(t), "--attacks", "averaging",
                 "--out", str(tmp_path / "b")]) == 0
    assert json.loads((tmp_path / "b" / "results.json").read_text())["public"] == "sample-photos"
    assert "the attacker's own images: sample-photos" in capsys.readouterr().out


def test_an_npz_with_labels_is_a_dataset_and_one_without_is_refused_for_a_challenge(tmp_path, capsys):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "mine.npz", images=rng.random((12, 1, 8, 8)).astype("float32"), labels=np.arange(12) % 3)
    np.save(tmp_path / "nolabels.npy", rng.random((12, 1, 8, 8)).astype("float32"))
    assert main(["instahide", "challenge", "--data", str(tmp_path / "mine.npz"), "--n", "6", "--T", "2", "--k", "2",
                 "--out", str(tmp_path / "c")]) == 0
    assert main(["instahide", "challenge", "--data", str(tmp_path / "nolabels.npy"), "--n", "6", "--T", "2", "--k",
                 "2", "--out", str(tmp_path / "d")]) == 2
    assert "no labels" in capsys.readouterr().err and not (tmp_path / "d").exists()
    assert main(["instahide", "challenge", "--data", "sample-photos", "--n", "6", "--T", "2", "--k", "2",  # the built-in
                 "--out", str(tmp_path / "p")]) == 2  # crops are the attacker's images: unlabelled, refused here
    assert "use it as the attacker's --public" in capsys.readouterr().err and not (tmp_path / "p").exists()
    with pytest.raises(SystemExit):
        main(["instahide", "challenge", "--data", str(tmp_path / "missing.npz"), "--out", str(tmp_path / "e")])


_NET = '''
import torch
from torch import nn

MEAN, STD = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

    def forward(self, x):
        return x + torch.tanh(self.bn(self.conv(x)))


class Net(nn.Module):
    """Expects ImageNet-normalised inputs: its first BatchNorm's running statistics are those of such inputs."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.bn0 = nn.BatchNorm2d(3)
        self.bn0.running_mean.copy_((0.45 - MEAN) / STD)
        self.bn0.running_var.copy_((0.25 / STD) ** 2)
        self.stem, self.block = nn.Conv2d(3, 4, 3, stride=2, padding=1), Block(4)
        self.head = nn.Linear(4 * 8 * 8, 24)

    def forward(self, x):
        return self.head(self.block(self.stem(self.bn0(x))).flatten(1))
'''


def test_audit_of_a_normalised_encoder_records_its_convention_and_warns_without_it(photos, tmp_path, capsys):
    (tmp_path / "net.py").write_text(_NET)
    out = tmp_path / "a"
    assert main(["audit", "encoder", "--model", str(tmp_path / "net.py") + ":Net", "--data", str(photos / "private"),
                 "--normalize", "imagenet", "--preset", "smoke", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err
    res = json.loads((out / "results.json").read_text())
    assert res["normalize"]["name"] == "imagenet" and res["normalize"]["std"] == pytest.approx([0.229, 0.224, 0.225])
    assert "imagenet" in (out / "report.html").read_text()
    for row in res["rows"]:  # bound below every attack and the guess, all in [0, 1] pixels
        assert all(a["mse"] >= row["bound"]["value"] - 3 * (a["stderr"] or 0) for a in row["attacks"])
        assert row["baseline"]["mse"] < 1.0
    # the same model fed raw [0, 1] pixels: one warning line names the likely cause
    assert main(["audit", "encoder", "--model", str(tmp_path / "net.py") + ":Net", "--data", str(photos / "private"),
                 "--preset", "smoke", "--out", str(tmp_path / "b")]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(err) == 1 and "--normalize" in err[0]
    assert main(["audit", "encoder", "--model", str(tmp_path / "net.py") + ":Net", "--data", str(photos / "private"),
                 "--normalize", "0.5,0.5:0.2", "--out", str(tmp_path / "c")]) == 2  # 2 means for 3 channels
    assert "per channel" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_audit_on_the_lowrank_path_meets_its_closed_form_and_stays_below_every_attack(photos, tmp_path):
    """The low-rank path (chosen automatically where d×d does not fit; forced here at 3×16×16) uses S̃ = I/σ_s² ⪰ S
    (conservative). This encoder's stem is linear 768 → 256, so E[G] has rank ≤ 256 < k·m = 576: the sample is
    saturated and Corollary 2 under S̃ is exactly (d − 256)·σ_s²/d."""
    from reconguard import audit

    (tmp_path / "net.py").write_text(_NET)
    low = audit.encoder(str(tmp_path / "net.py") + ":Net", str(photos / "private"), path="lowrank",
                        sigmas=(0.0, 0.01), preset="smoke", normalize="imagenet", seed=0)
    assert low.bound_path.startswith("low-rank") and "S̃ = I/σ_s²" in low.bound_path and "saturated" in low.bound_path
    assert low.normalize["name"] == "imagenet"
    zero = low.rows[0]
    assert zero.bound["kind"] == "corollary 2" and zero.bound["rank"] == 256
    assert zero.bound["value"] == pytest.approx((768 - 256) * 0.1**2 / 768, rel=1e-6)
    for row in low.rows:
        assert all(a.mse >= row.bound["value"] - 3 * a.stderr for a in row.attacks)
