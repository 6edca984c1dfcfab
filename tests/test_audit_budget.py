"""Issue 30: the audit says what it will cost before it starts and fits a budget (``--max-minutes``); one model
loader for every command that takes a user's model; ``--normalize`` wherever a user's model runs."""

import json
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

from reconguard.cli import main
from reconguard.errors import ParameterError

ENCODER = textwrap.dedent('''
    import torch
    from torch import nn

    class RGBEnc(nn.Module):
        """conv + BatchNorm (running statistics of ImageNet-normalised inputs) + linear on 3×12×12."""
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4 * 6 * 6, 16)

        def forward(self, x):
            return self.fc(torch.tanh(self.bn(self.conv(x))).flatten(1))
''')


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    from reconguard.data.photos import photo_crops

    root = tmp_path_factory.mktemp("budget")
    (root / "rgbenc.py").write_text(ENCODER)
    np.save(root / "crops.npy", photo_crops(48, 12, 3, seed=3).astype(np.float32))
    return root


def test_estimate_is_printed_first_and_max_minutes_cuts_the_preset(user, tmp_path, capsys):
    """The cpu preset (k = 256, 500 MAP steps, 6 β's) under a 0.1-minute budget: the estimate line comes before the
    report's summary, the settings it ran with are smaller than the preset's and recorded, the stages measured."""
    out = tmp_path / "cut"
    assert main(["audit", "encoder", "--model", f"{user / 'rgbenc.py'}:RGBEnc", "--data", str(user / "crops.npy"),
                 "--preset", "cpu", "--max-minutes", "0.1", "--normalize", "imagenet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.index("estimate: about") < text.index(str(out))
    assert "--max-minutes 0.1: k = " in text
    res = json.loads((out / "results.json").read_text())
    ran = res["budget"]["settings"]
    assert ran["k"] < 256 and ran["map_steps"] < 500 and res["budget"]["max_minutes"] == 0.1
    assert sum(res["budget"]["estimate_seconds"].values()) <= 6.0 + 1e-9
    assert {"E[G] and bounds", "MAP", "decoder"} <= set(res["stages"])
    assert all(v["seconds"] >= 0 and v["peak_gib"] > 0 for v in res["stages"].values())
    assert res["normalize"]["name"] == "imagenet"


def test_a_budget_too_small_is_refused_and_writes_nothing(user, tmp_path, capsys):
    out = tmp_path / "none"
    assert main(["audit", "encoder", "--model", f"{user / 'rgbenc.py'}:RGBEnc", "--data", str(user / "crops.npy"),
                 "--preset", "smoke", "--max-minutes", "1e-6", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot fit in 1e-06 min" in err and "raise --max-minutes" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_fit_budget_scales_every_knob_together_and_never_below_the_minimum():
    from reconguard.audit.budget import MINIMUM, AuditEstimate, fit_budget
    from reconguard.audit.encoder import PRESETS

    est = AuditEstimate(d=784, m=16, n_train=500, n_sigmas=1, zero_sigma=True, path="lowrank", streamed=False,
                        t_jacobian=0.01, flop_rate=1e10, t_map_image=1e-3, t_decoder_image=1e-3, base_bytes=0.0,
                        settings=dict(PRESETS["cpu"]))
    full = est.total(PRESETS["cpu"])
    cut, changed = fit_budget(est, PRESETS["cpu"], full / 60 / 4, n_images=600)
    assert changed and est.total(cut) <= full / 4 + 1e-9
    assert all(MINIMUM[k] <= cut[k] < PRESETS["cpu"][k] for k in ("k", "map_steps", "decoder_epochs"))
    same, changed = fit_budget(est, PRESETS["cpu"], 2 * full / 60, n_images=600)
    assert not changed and same["k"] == PRESETS["cpu"]["k"]
    with pytest.raises(ParameterError, match="positive"):
        fit_budget(est, PRESETS["cpu"], float("nan"), n_images=600)


def test_auto_path_is_lowrank_beyond_the_dense_limit():
    from reconguard.audit.encoder import DENSE_MAX_D
    from reconguard.bounds.representation import choose_path

    big = 2**40
    assert choose_path(DENSE_MAX_D, 100, "auto", memory=big, max_dense_d=DENSE_MAX_D) == "dense"
    assert choose_path(DENSE_MAX_D + 1, 100, "auto", memory=big, max_dense_d=DENSE_MAX_D) == "lowrank"
    assert choose_path(DENSE_MAX_D + 1, 100, "dense", memory=big, max_dense_d=DENSE_MAX_D) == "dense"


def test_one_loader_reads_every_kind_of_model_file(user, tmp_path):
    from reconguard.audit.loading import load_model
    from reconguard.encoders import SplitCNN, save_encoder

    enc = SplitCNN("early", 8, (1, 8, 8), seed=0)
    save_encoder(enc, tmp_path / "enc.pt")
    loaded = load_model(str(tmp_path / "enc.pt"))
    x = torch.rand(3, 1, 8, 8)
    assert torch.allclose(loaded(x), enc.eval()(x))
    scripted = torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(64, 4)))
    scripted.save(str(tmp_path / "ts.pt"))
    assert load_model(str(tmp_path / "ts.pt"))(x).shape == (3, 4)
    torch.save(nn.Linear(64, 4).state_dict(), tmp_path / "weights.pt")
    with pytest.raises(ParameterError, match="--model path/to/file.py:NAME --weights"):
        load_model(str(tmp_path / "weights.pt"))
    from reconguard.nn.normalize import with_normalization
    model, norm = with_normalization(load_model(f"{user / 'rgbenc.py'}:RGBEnc"), "symmetric", 3)
    assert norm["name"] == "symmetric" and isinstance(model[0], nn.Module)
    with pytest.raises(ParameterError, match="one value or one per channel"):
        with_normalization(model, "0.1,0.2:0.3,0.4", 3)


def test_bound_takes_the_users_model_with_its_normalisation(user, tmp_path):
    out = tmp_path / "b.json"
    assert main(["bound", "--data", "gaussian", "--channels", "3", "--size", "12", "--model",
                 f"{user / 'rgbenc.py'}:RGBEnc", "--normalize", "imagenet", "--k", "16", "--sigma", "0", "0.01",
                 "--quiet", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["normalize"]["name"] == "imagenet" and res["m"] == 16 and res["d"] == 3 * 12 * 12
    assert all(r["bound"] >= 0 for r in res["rows"])


def test_the_decoder_stays_small_at_224():
    """Issue 30 item 2's memory: the learned decoder at 3×224×224 had a 411 M-parameter first layer (6.6 GB with
    Adam); the capped projection keeps every size up to 88×88 as it was."""
    from reconguard.attacks.reconstruction.decoder import DecoderNet

    assert sum(p.numel() for p in DecoderNet(16, (3, 224, 224)).parameters()) < 80e6
    assert DecoderNet(16, (1, 28, 28)).first_channels == 128 and DecoderNet(16, (3, 64, 64)).first_channels == 128


def test_score_check_takes_the_users_score_model(tmp_path, capsys):
    """The same loader for ``score check --model``: the score of N(0.5, 0.1²I) as a user's module; S = I/0.01 is
    the exact score matrix of that Gaussian, so the check against the data's covariance runs and reports."""
    (tmp_path / "sc.py").write_text("from torch import nn\nclass Gauss(nn.Module):\n"
                                    "    def forward(self, x):\n        return (0.5 - x) / 0.01\n")
    out = tmp_path / "q.png"
    assert main(["score", "check", "--data", "digits", "--size", "8", "--model", f"{tmp_path / 'sc.py'}:Gauss",
                 "--n", "400", "--quiet", "--out", str(out)]) == 0
    assert out.is_file() and "score model" in json.loads(out.with_suffix(".json").read_text())


def test_evaluate_takes_the_users_classifier_through_the_same_loader(tmp_path):
    from types import SimpleNamespace

    from reconguard.cli.mia import _classifier
    from reconguard.errors import DataFileNotFoundError

    (tmp_path / "cls.py").write_text("from torch import nn\nclass Small(nn.Module):\n    def __init__(self):\n"
                                     "        super().__init__()\n        self.f = nn.Sequential(nn.Flatten(), "
                                     "nn.Linear(144, 5))\n    def forward(self, x):\n        return self.f(x)\n")
    args = SimpleNamespace(weights=None, size=12, normalize="symmetric")
    model, spec = _classifier(f"{tmp_path / 'cls.py'}:Small", args)
    assert spec["in_shape"] == [1, 12, 12] and spec["normalize"]["name"] == "symmetric"
    assert model(torch.rand(2, 1, 12, 12)).shape == (2, 5)
    with pytest.raises(DataFileNotFoundError):
        _classifier(str(tmp_path / "missing.pt"), args)
