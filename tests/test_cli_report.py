"""Issue 2, item 5: the demo path end to end (smoke preset), the bound command, and the JSON."""

import json

import pytest

from reconguard.cli import main


def test_demo_smoke_writes_report(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"results.json", "report.html", "bounds.png", "rtc.png"} <= names
    assert any(n.startswith("recon_digits") for n in names)
    data = json.loads((out / "results.json").read_text())
    assert data["recipe"] == "fig2-linear" and data["preset"] == "smoke"
    pts = data["points"]
    assert {p["dataset"] for p in pts} == {"gaussian", "digits"} and {p["sigma"] for p in pts} == {0.0, 0.001}
    assert all(p["holds"] for p in pts)
    # numbers in the report trace back to the JSON
    html = (out / "report.html").read_text()
    g = next(p for p in pts if p["dataset"] == "gaussian" and p["sigma"] == 0.0 and p["x"] == 8)
    assert f"{g['bound']:.4g}" in html
    text = capsys.readouterr().out
    assert "bound held at every point" in text and "report.html" in text


def test_bound_command(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["bound", "--data", "gaussian", "--encoder", "linear", "--m", "16", "--sigma", "0", "0.001",
                 "--out", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    rows = {r["sigma"]: r for r in data["rows"]}
    assert rows[0.0]["bound"] == pytest.approx(0.04 * 48 / 64)  # η²(d − m)/d
    assert rows[0.001]["maeng"] <= rows[0.001]["bound"]
    assert "Cor 2" in capsys.readouterr().out


def test_bound_command_splitcnn_digits(tmp_path):
    out = tmp_path / "s.json"
    assert main(["bound", "--data", "digits", "--encoder", "splitcnn", "--m", "16", "--split", "early", "--k", "16",
                 "--size", "12", "--score-samples", "3000", "--sigma", "0", "0.001", "--out", str(out),
                 "--quiet"]) == 0
    data = json.loads(out.read_text())
    # τ = 0 by default (the null space up to float64 round-off): the paper's τ = 1e-4 can only raise Corollary 2
    assert data["d"] == 144 and data["m"] == 16 and data["settings"]["tau"] == 0.0
    assert data["fisher"]["k"] == 16 and data["fisher"]["method"] == "jacrev"
    for r in data["rows"]:
        assert 0 <= r["bound"] <= r["ceiling"]


def test_bound_command_on_fashion_mnist_is_the_recipes_prior(tmp_path, fashion_root):
    """`bound --data fashion-mnist` (its help named the data set while the option refused it): the smoothed empirical
    prior of --prior-n training images at 28×28, the same bound as compute_bounds on make_prior's prior with the same
    encoder; another side is refused before any work."""
    import torch

    from reconguard.encoders import random_linear
    from reconguard.experiments import compute_bounds, make_prior

    out = tmp_path / "f.json"
    assert main(["bound", "--data", "fashion-mnist", "--m", "64", "--sigma", "0", "--prior-n", "500",
                 "--score-samples", "5000", "--out", str(out), "--quiet"]) == 0
    data = json.loads(out.read_text())
    prior = make_prior("fashion-mnist", 28, sigma_s=0.1, n=500)[0]
    ref = compute_bounds(random_linear(784, 64, seed=0), prior, [0.0], score_samples=5000, seed=0)
    assert data["d"] == 784 and data["rows"][0]["bound"] == pytest.approx(ref.rows[0].bound, rel=1e-9)
    assert 0 < data["rows"][0]["bound"] <= data["rows"][0]["ceiling"]
    assert main(["bound", "--data", "fashion-mnist", "--size", "8", "--out", str(tmp_path / "g.json"), "--quiet"]) != 0
    assert not (tmp_path / "g.json").exists()
    del torch


def test_recipes_listed(capsys):
    assert main(["recipes"]) == 0
    text = capsys.readouterr().out
    assert "fig2-linear" in text and "fig4-skew" in text


def test_mixture_attack_never_beats_bound_on_digits():
    from reconguard.experiments import run_recipe

    r = run_recipe("fig4-skew", "smoke", progress=False)
    assert r.violations == 0 and len(r.points) == 6
    for ds in r.datasets():
        b = [p.bound for p in r.select(ds, 0.001)]
        assert all(y > x for x, y in zip(b, b[1:]))  # rises with α


def test_image_grid_places_every_image_and_leaves_missing_cells_blank(tmp_path):
    """The one grid that every report's image rows use (``image_mosaic`` / ``plot_image_grid``): flat, H×W and C×H×W
    images, grey and RGB in one grid, a missing cell blank (white), each image where its row and column say."""
    import matplotlib.image as mpimg
    import numpy as np
    import torch

    from reconguard.report.plots import image_mosaic, plot_image_grid

    red = torch.zeros(3, 6, 6)
    red[0] = 1.0
    ramp = torch.linspace(0, 1, 36).reshape(6, 6)
    rows = [("flat", [np.full(36, 0.25), None]), ("rgb", [red, torch.full((1, 6, 6), 2.0)]), ("hw", [ramp])]
    canvas, h, w, pad = image_mosaic([images for _, images in rows], shape=(6, 6))
    assert (h, w, pad) == (6, 6, 1) and canvas.shape == (3 * 7 + 1, 2 * 7 + 1, 3)

    def cell(i, j):
        return canvas[pad + i * (h + pad):pad + i * (h + pad) + h, pad + j * (w + pad):pad + j * (w + pad) + w]

    assert np.allclose(cell(0, 0), 0.25) and np.allclose(cell(0, 1), 1.0) and np.allclose(cell(2, 1), 1.0)
    assert np.allclose(cell(1, 0), red.permute(1, 2, 0).numpy())
    assert np.allclose(cell(1, 1), 1.0)                                  # 2.0 clipped to [0, 1]
    assert np.allclose(cell(2, 0), ramp.numpy()[..., None].repeat(3, 2))  # grey in an RGB grid
    assert canvas[0].min() == 1.0 and canvas[:, 0].min() == 1.0         # white gaps
    grey, *_ = image_mosaic([[ramp]])
    assert grey.ndim == 2
    path = plot_image_grid(rows, tmp_path / "g.png", "check", column_titles=["a", "b"], shape=(6, 6))
    assert mpimg.imread(path).ndim == 3
