"""Issue 2, item 4: bad input gets a clear reconguard error and leaves no partial output."""

import json
import math
from pathlib import Path

import pytest
import torch

from reconguard import errors
from reconguard.bounds import ceiling, estimate_fisher, mse_bound, noiseless_mse_bound, score_matrix, split_range_null
from reconguard.cli import main
from reconguard.data import gaussian_prior, load_cifar10, load_mnist
from reconguard.encoders import Noisy, SplitCNN, random_linear
from reconguard.experiments import load_recipe


@pytest.fixture
def fisher():
    return estimate_fisher(random_linear(16, 8, seed=0))


@pytest.fixture
def S():
    return score_matrix(gaussian_prior(0.5, 0.2, 16))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_data(bad):
    x = torch.rand(10, 1, 28, 28)
    x[3, 0, 5, 5] = bad
    with pytest.raises(errors.NonFiniteError, match="NaN|Inf"):
        estimate_fisher(SplitCNN("early", 16), x, k=4)
    with pytest.raises(errors.NonFiniteError):
        score_matrix(gaussian_prior(d=784), x)


def test_non_finite_score_matrix(fisher, S):
    S = S.clone()
    S[0, 0] = math.nan
    with pytest.raises(errors.NonFiniteError):
        mse_bound(fisher, S, 1e-3)


def test_wrong_shapes(fisher, S):
    with pytest.raises(errors.ShapeError, match="16×16"):
        mse_bound(fisher, torch.eye(15), 1e-3)
    with pytest.raises(errors.ShapeError, match="N×d"):
        estimate_fisher(SplitCNN("early", 16), torch.rand(4, 28, 28), k=2)
    with pytest.raises(errors.ShapeError, match="shape"):
        estimate_fisher(SplitCNN("early", 16), torch.rand(4, 1, 8, 8), k=2)
    with pytest.raises(errors.ShapeError, match="symmetric"):
        mse_bound(fisher, S + torch.triu(torch.ones(16, 16), 1), 1e-3)
    with pytest.raises(errors.ShapeError, match="dimension"):
        random_linear(16, 8)(torch.rand(3, 15))


def test_negative_sigma(fisher, S):
    with pytest.raises(errors.ParameterError, match="sigma"):
        mse_bound(fisher, S, -1e-3)
    with pytest.raises(errors.ParameterError, match="sigma"):
        Noisy(random_linear(4, 2), -0.1)
    with pytest.raises(errors.ParameterError, match="noiseless_mse_bound"):
        mse_bound(fisher, S, 0.0)


@pytest.mark.parametrize("tau", [-1e-4, 1.0, 2.0, math.nan])
def test_tau_out_of_range(fisher, S, tau):
    with pytest.raises(errors.ParameterError, match="tau"):
        noiseless_mse_bound(fisher, S, tau)
    with pytest.raises(errors.ParameterError, match="tau"):
        split_range_null(fisher, tau)


def test_k_larger_than_data():
    with pytest.raises(errors.ParameterError, match="k=50 is larger than the 10 samples"):
        estimate_fisher(SplitCNN("early", 16), torch.rand(10, 1, 28, 28), k=50)


def test_singular_score_matrix(fisher):
    with pytest.raises(errors.ParameterError, match="positive definite"):
        ceiling(torch.zeros(16, 16))
    with pytest.raises(errors.ParameterError, match="positive definite"):
        mse_bound(fisher, torch.zeros(16, 16), 1e-3)


def test_missing_mnist_folder(tmp_path):
    with pytest.raises(errors.DataFileNotFoundError) as info:
        load_mnist(tmp_path / "nowhere")
    assert "nowhere" in str(info.value) and "IDX" in str(info.value)
    (tmp_path / "mnist").mkdir()
    with pytest.raises(FileNotFoundError) as info:  # plain FileNotFoundError handlers catch it too
        load_mnist(tmp_path / "mnist", "test")
    msg = str(info.value)
    assert "t10k-images-idx3-ubyte" in msg and str(tmp_path / "mnist") in msg


def test_missing_cifar_folder(tmp_path):
    with pytest.raises(errors.DataFileNotFoundError, match="data_batch_1"):
        load_cifar10(tmp_path)


def test_unknown_options():
    with pytest.raises(errors.UnknownOptionError, match="split"):
        SplitCNN("deep", 16)
    with pytest.raises(errors.UnknownOptionError, match="method"):
        estimate_fisher(SplitCNN("early", 16), torch.rand(2, 1, 28, 28), k=1, method="magic")


def test_cli_error_is_clean_and_leaves_no_output(tmp_path, capsys):
    out = tmp_path / "runs" / "bad"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nkind: sweep\nparams: {sigmas: [-1.0], datasets: {gaussian: {}}}\n"
                   "presets: {smoke: {size: 4, encoders: [{family: linear, m: 2}], n_attack: 8}}\n")
    assert main(["run", str(bad), "--preset", "smoke", "--out", str(out), "--quiet"]) == 2
    assert "sigma" in capsys.readouterr().err
    assert not out.exists()
    leftovers = list((tmp_path / "runs").iterdir()) if (tmp_path / "runs").exists() else []
    assert leftovers == []


def test_failure_while_writing_report_leaves_previous_output(tmp_path, monkeypatch, capsys):
    from reconguard.report import pipeline

    out = tmp_path / "demo"
    out.mkdir()
    (out / "results.json").write_text("{\"old\": true}")
    (out / ".reconguard.json").write_text(json.dumps({"command": "run fig2-linear", "files": {
        "results.json": "run fig2-linear"}}))  # an earlier demo's folder, its file listed

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pipeline, "plot_rtc", boom)
    assert main(["demo", "--preset", "smoke", "--out", str(out), "--quiet"]) == 1  # the last-resort handler
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reconguard: internal error: RuntimeError: disk full; details in ")
    Path(err[0].split("details in ")[1].split(" (")[0]).unlink()
    assert (out / "results.json").read_text() == "{\"old\": true}"
    # no temp folder nor lock left behind; only the finished units, hidden, for `--resume`
    assert sorted(p.name for p in tmp_path.iterdir()) in (["demo"], [".demo.units", "demo"])


def test_unknown_recipe_and_keys(tmp_path, capsys):
    with pytest.raises(errors.UnknownOptionError, match="fig2-linear"):  # lists the built-in recipes
        load_recipe("no-such-recipe")
    assert main(["run", "no-such-recipe", "--quiet", "--out", str(tmp_path / "x")]) == 2
    assert "unknown recipe" in capsys.readouterr().err and not (tmp_path / "x").exists()
    bad = tmp_path / "typo.yaml"
    bad.write_text("name: t\nkind: sweep\nparams: {sigmass: [0]}\npresets: {smoke: {size: 4}}\n")
    with pytest.raises(errors.UnknownOptionError, match="sigmass"):
        load_recipe(bad)
    with pytest.raises(errors.DataFileNotFoundError, match="missing.yaml"):
        load_recipe(tmp_path / "missing.yaml")


def test_a_score_matrix_from_too_few_samples_says_so():
    """S averaged over fewer scores than dimensions (or than its jackknife's leave-one-group-out means need) is
    singular: each bound that needs S⁻¹ refuses with the count, the count needed and Theorem 1 (Tr S only), which
    still gives a valid number from the same sample."""
    from reconguard.bounds import estimate_score_matrix, maeng_bound

    d = 64
    prior = gaussian_prior(mu=0.5, eta=0.2, d=d)
    fisher = estimate_fisher(random_linear(d, 8, seed=0))
    for n in (32, 64):  # 64: S itself is positive definite, its leave-one-group-out means are not
        x = prior.sample(n, generator=torch.Generator().manual_seed(n))
        S = estimate_score_matrix(lambda v: -(v - 0.5) / 0.04, data=x)
        calls = [lambda: mse_bound(fisher, S, sigma=0.1)] + ([lambda: noiseless_mse_bound(fisher, S)] if n == 32 else [])
        for call in calls + ([lambda: ceiling(S)] if n == 32 else []):
            with pytest.raises(errors.ParameterError, match=rf"mean of {n} score outer products in d = 64.*at least 73"):
                call()
        exact = maeng_bound(fisher, score_matrix(prior), sigma=0.1).value
        assert 0 <= maeng_bound(fisher, S, sigma=0.1).value <= exact * 1.05
