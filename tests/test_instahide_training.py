"""InstaHide training plug-in, encrypted inference, DP-SGD baseline, and the accuracy recipe."""

import json

import pytest
import torch
from torch.utils.data import TensorDataset

from reconguard.cli import main
from reconguard.data import load_digits
from reconguard.defenses import DPSGD, InstaHideTraining, predict_encrypted, predict_plain
from reconguard.metrics import accuracy
from reconguard.encoders import InstaHide
from reconguard.nn import mnist_cnn, seeded
from reconguard.train import fit


@pytest.fixture(scope="module")
def split():
    ds = load_digits()
    perm = torch.randperm(len(ds), generator=torch.Generator().manual_seed(0))
    return ds.subset(perm[:1300]), ds.subset(perm[1300:1500]), ds.subset(perm[1500:])


def test_training_re_encrypts_every_epoch_and_learns(split):
    train, val, test = split
    scheme = InstaHide(k=2)
    defense = InstaHideTraining(scheme, seed=0)
    seen = []
    orig = defense.on_epoch
    defense.on_epoch = lambda data, epoch: seen.append(orig(data, epoch)) or seen[-1]
    with seeded(0):
        model = mnist_cnn((1, 8, 8))
    res = fit(model, train, val, epochs=6, defense=defense, progress=False)
    assert len(seen) == 6 and not torch.equal(seen[0].tensors[0], seen[1].tensors[0])  # fresh keys each epoch
    assert res.history[-1]["train_loss"] < res.history[0]["train_loss"]
    stats = defense.stats
    p1 = predict_encrypted(model, scheme, test.images, stats, T=1, own_floor=0.5)
    p10 = predict_encrypted(model, scheme, test.images, stats, T=10, own_floor=0.5)
    assert torch.allclose(p10.sum(1), torch.ones(len(test)), atol=1e-5)
    assert accuracy(p10, test.labels) > 0.3 and accuracy(p1, test.labels) > 0.15  # chance is 0.1
    assert accuracy(p10, test.labels) > accuracy(p1, test.labels)  # averaging encryptions helps
    assert accuracy(predict_plain(model, test.images, stats), test.labels) > 0.1


def test_dpsgd_reports_opacus_epsilon(split):
    train, val, _ = split
    train = train.subset(torch.arange(400))  # per-sample gradients are slow; 400 images suffice for the accountant
    stats = InstaHide().channel_stats(train.images)
    norm = lambda d: TensorDataset(InstaHide.normalize_images(d.images, stats), d.labels)  # noqa: E731
    with seeded(0):
        model = mnist_cnn((1, 8, 8))
    dp = DPSGD(target_epsilon=8.0)
    res = fit(model, norm(train), norm(val), epochs=2, batch_size=64, defense=dp, progress=False)
    eps = [h["epsilon"] for h in res.history]
    assert eps[0] < eps[1] <= 8.0 * 1.05 and eps[1] > 4.0
    assert dp.noise_multiplier > 0
    # the sampling rate is the loader fit really uses (as Opacus' make_private: 1 / len(data_loader)),
    # not DPSGD's own default batch size
    from torch.utils.data import DataLoader
    assert dp.batch_size == 64 and dp.sample_rate == pytest.approx(1 / len(DataLoader(norm(train), batch_size=64)))
    # a batch size that disagrees with fit's is refused before any step (it would misreport ε)
    from reconguard.errors import ParameterError
    with seeded(0):
        model = mnist_cnn((1, 8, 8))
    with pytest.raises(ParameterError, match="batch_size"):
        fit(model, norm(train), norm(val), epochs=1, batch_size=32, defense=DPSGD(batch_size=128), progress=False)


def test_accuracy_recipe_smoke(tmp_path):
    out = tmp_path / "acc"
    assert main(["run", "instahide-accuracy", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    data = json.loads((out / "results.json").read_text())
    methods = {(r["method"], r["mode"]) for r in data["rows"]}
    assert ("vanilla", "inside") in methods and ("instahide", "cross") in methods
    row = next(r for r in data["rows"] if r["method"] == "instahide")
    assert row["acc_T1"] is not None and row["acc_T"] is not None and row["T"] == 2
    assert (out / "accuracy.png").exists() and "T = 1" in (out / "report.html").read_text()
