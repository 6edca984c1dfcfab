"""Model inversion, robust accuracy and the mia recipes (issue 7)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from reconguard.attacks.adversarial import pgd
from reconguard.attacks.inversion import GenerativeInversion, GradientInversion, poincare_loss
from reconguard.classifiers import build_classifier
from reconguard.data.splits import digits_mia_split
from reconguard.errors import ParameterError, ShapeError, UnknownOptionError
from reconguard.experiments.mia_eval import layer_hsic
from reconguard.metrics import evaluate_inversion, robust_accuracy
from reconguard.train import fit


@pytest.fixture(scope="module")
def split():
    return digits_mia_split(16)


@pytest.fixture(scope="module")
def target(split):
    model = build_classifier("resnet18", 5, (1, 16, 16), 8, seed=1)
    fit(model, split.train, split.val, epochs=12, progress=False, seed=1)
    return model.eval()


def test_poincare_loss_closed_form():
    logits = torch.tensor([[2.0, -1.0, 1.0]])
    u = logits / logits.abs().sum()
    v = torch.tensor([[1 - 1e-5, 0.0, 0.0]])
    delta = 2 * ((u - v) ** 2).sum() / ((1 - (u ** 2).sum()) * (1 - (v ** 2).sum()))
    assert poincare_loss(logits, torch.tensor([0])).item() == pytest.approx(math.acosh(1 + delta.item()), rel=1e-5)
    # a confident correct prediction has a smaller loss than a wrong one
    assert poincare_loss(torch.tensor([[9.0, 0.1, 0.1]]), torch.tensor([0])) < poincare_loss(
        torch.tensor([[0.1, 9.0, 0.1]]), torch.tensor([0]))


class _Decoder(nn.Module):
    """A fixed 'generator': z ↦ sigmoid(Wz) reshaped to an image."""

    latent_dim = 8

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 256)

    def forward(self, z):
        return torch.sigmoid(self.lin(z)).view(-1, 1, 16, 16)


def test_generative_inversion_raises_target_confidence(target, split):
    from reconguard.attacks.inversion import train_generator

    gen = train_generator(split.public, epochs=5)
    attack = GenerativeInversion(target, gen, candidates=64, keep=8, steps=40, lr=0.1, finals=4, n_transforms=2)
    res = attack.run(classes=[1, 3])
    assert res.images.shape == (8, 1, 16, 16) and res.targets.tolist() == [1] * 4 + [3] * 4
    assert 0 <= res.images.min() and res.images.max() <= 1
    before = GenerativeInversion(target, gen, candidates=64, keep=8, steps=0, finals=4, n_transforms=2).run(classes=[1, 3])
    assert res.target_confidence.mean() > before.target_confidence.mean() + 0.1
    assert all(p.requires_grad for p in target.parameters())  # restored
    with pytest.raises(ParameterError, match="outside"):
        attack.run(classes=[7])
    with pytest.raises(ParameterError, match="latent_dim"):
        GenerativeInversion(target, nn.Identity())
    assert _Decoder()(torch.zeros(2, 8)).shape == (2, 1, 16, 16)  # any module with latent_dim is a generator
    GenerativeInversion(target, _Decoder(), candidates=8, keep=2, steps=1, finals=1, space="latent").run(classes=[0])
    with pytest.raises(ParameterError, match="features"):  # the default also searches intermediate features
        GenerativeInversion(target, _Decoder())
    with pytest.raises(UnknownOptionError):
        GenerativeInversion(target, gen, space="w")
    with pytest.raises(UnknownOptionError):
        GenerativeInversion(target, gen, loss="hinge")


def test_gradient_inversion_reaches_target_class(target):
    res = GradientInversion(target, (1, 16, 16), steps=60, per_class=3).run()
    assert res.images.shape == (15, 1, 16, 16)
    with torch.no_grad():
        pred = target(res.images).argmax(1)
    assert (pred == res.targets).float().mean() >= 0.8


def test_evaluate_inversion_on_real_images(split, target):
    imgs, labels = split.train.images[:40], split.train.labels[:40]
    met = evaluate_inversion(target, imgs, labels, split.train.images, split.train.labels)
    with torch.no_grad():
        acc = (target(imgs).argmax(1) == labels).float().mean().item()
    assert met.att_acc1 == pytest.approx(acc)
    assert met.feature_l2 < 0.01  # each "reconstruction" is a training image
    assert met.att_acc1_ci[0] <= met.att_acc1 <= met.att_acc1_ci[1]
    assert met.att_acc5 is None  # 5 classes: top-5 is trivially 1, not reported
    with pytest.raises(ShapeError):
        evaluate_inversion(target, imgs, labels[:3], split.train.images, split.train.labels)


def test_robust_accuracy_ensemble(split, target):
    pytest.importorskip("torchattacks")
    x, y = split.test.images[:32], split.test.labels[:32]
    results = [robust_accuracy(target, x, y, e, steps=5, n_queries=20) for e in (0.0, 0.03, 0.1)]
    clean = results[0].clean
    assert results[0].worst == pytest.approx(clean)  # ε = 0 changes nothing
    for r in results:
        assert r.worst <= min(r.per_attack.values()) + 1e-12
        assert set(r.per_attack) == {"apgd-ce", "apgd-t", "fab-t", "square"}
    assert results[2].worst <= results[1].worst <= clean
    # the ensemble is at least as strong as our own PGD at the same ε
    adv = pgd(target, x, y, 0.1, 10, 0.02)
    with torch.no_grad():
        pgd_acc = (target(adv).argmax(1) == y).float().mean().item()
    assert results[2].worst <= pgd_acc + 1e-9
    with pytest.raises(ParameterError, match="pixel units"):
        robust_accuracy(target, x * 2 - 1, y, 0.01)
    with pytest.raises(UnknownOptionError):
        robust_accuracy(target, x, y, 0.01, attacks=["cw"])


def test_layer_hsic_reports_each_stage(split, target):
    values = layer_hsic(target, split.train.images[:64])
    assert list(values) == ["layer1", "layer2", "layer3", "layer4"]
    assert all(v > 0 for v in values.values())


def test_mia_tradeoff_smoke_recipe(tmp_path):
    from reconguard.report import run_to_report, summary_text

    result, out = run_to_report("mia-tradeoff", "smoke", tmp_path / "mt", progress=False)
    labels = [r.label for r in result.rows]
    assert labels.count("atat") == 2 and labels.count("nodef") == 2 and "mid" in labels
    for r in result.rows:
        assert {"attack", "baseline", "robust", "hsic"} <= set(r.evaluation)
    assert "treatment" in result.analysis
    for f in ("report.html", "results.json", "accuracy.png", "leakage.png", "robust.png", "reconstructions.png"):
        assert (out / f).is_file(), f
    data = json.loads((out / "results.json").read_text())
    assert data["rows"][0]["evaluation"]["attack"]["att_acc1"] == result.rows[0].evaluation["attack"]["att_acc1"]
    assert "randomised AT-AT vs NoDef" in summary_text(result, out)


def test_mia_defenses_smoke_recipe(tmp_path):
    from reconguard.report import run_to_report

    result, out = run_to_report("mia-defenses", "smoke", tmp_path / "md", progress=False)
    assert [r.defense for r in result.rows] == ["nodef", "atat", "mid", "unseen-pixels"]
    assert "pixels_deleted" in result.rows[-1].extras
    assert (out / "report.html").is_file() and (out / "accuracy.png").is_file()


def test_cli_evaluate_and_analyze(tmp_path, capsys):
    from reconguard.cli import main

    models = []
    for defense, seed in (("nodef", 0), ("nodef", 1), ("atat", 2), ("atat", 3)):
        out = tmp_path / f"{defense}{seed}"
        extra = ["--atat-preset", "digits"] if defense == "atat" else []
        assert main(["train", "--defense", defense, "--epochs", "1", "--seed", str(seed), "--quiet", "--out", str(out)]
                    + extra) == 0
        models.append(str(out / "model.pt"))
    res = tmp_path / "ev.json"
    assert main(["evaluate", *models, "--candidates", "10", "--steps", "2", "--finals", "2", "--eval-epochs", "1",
                 "--eps", "0.03", "--n", "8", "--robust-steps", "2", "--n-queries", "5", "--out", str(res)]) == 0
    assert main(["analyze", str(res), "--out", str(tmp_path / "an.json")]) == 0
    text = capsys.readouterr().out
    assert "AttAcc@1" in text
    # one-epoch models sit near chance, so their AttAcc@1 may all be equal (package versions move it): the line then
    # gives the reason instead of numbers, and either way it says what the JSON holds
    analysis = json.loads((tmp_path / "an.json").read_text())
    line = next(x for x in text.splitlines() if x.startswith("AT-AT vs NoDef"))
    if "treatment" in analysis:
        assert f"→ {analysis['treatment']['mu_treated']:.3f}" in line
    else:
        assert line == f"AT-AT vs NoDef: not estimated — {analysis['treatment_error']}"
    assert main(["analyze", str(tmp_path / "missing.json")]) == 2


def test_mia_instances_smoke_recipe(tmp_path):
    """Issue 16: the instance-identity recipe runs end to end; every model reports the selection-only attack beside
    the generative and gradient ones, and the analysis carries the gate and the treatment effect."""
    from reconguard.data.instances import digits_instance_split
    from reconguard.report import run_to_report, summary_text

    split = digits_instance_split(32, instances=2, copies=8)
    assert split.num_classes == 10 and split.train.shape == (1, 32, 32)
    assert set(split.train.labels.tolist()) == set(range(10)) == set(split.test.labels.tolist())
    assert len(split.public) > 3000 and int(split.public.labels.max()) == 9  # every other digit image, all ten digits
    result, out = run_to_report("mia-instances", "smoke", tmp_path / "mi", progress=False)
    labels = [r.label for r in result.rows]
    assert labels.count("atat") == 2 and labels.count("nodef") == 2
    data = json.loads((out / "results.json").read_text())
    for row in data["rows"]:
        ev = row["evaluation"]
        assert {"attack", "selection_only", "baseline", "robust"} <= set(ev)
        assert 0 <= ev["selection_only"]["att_acc1"] <= 1 and ev["attack"]["att_acc5"] is not None  # 10 classes
    gate = data["analysis"]["gate"]
    assert gate["defense"] == "nodef" and gate["eps"] == 0.031 and gate["n"] == 2
    assert "treatment" in data["analysis"] and "treatment_selection_only" in data["analysis"]
    assert "selection only" in (out / "report.html").read_text()
    assert "gate" in summary_text(result, out)
