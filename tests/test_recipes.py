"""Issue 3, items 1, 4, 5: every built-in recipe runs at its smoke preset and no attack beats its bound."""

import json

import pytest

from reconguard.cli import main
from reconguard.experiments import list_recipes, load_recipe, run_recipe

RECIPES = ["fig2-linear", "fig3-lpips", "fig4-skew", "fig5-dnn", "fig6-lpips-dnn", "fig8-k", "fig9-tau"]


FASHION = {"fig2-linear", "fig5-dnn", "instahide-accuracy", "instahide-attacks", "mia-instances", "mia-atat-lambda"}


def test_all_figures_have_recipes_with_three_presets_and_fashion_where_asked():
    from reconguard.experiments.runner import parse_params, recipe_params

    others = ["instahide-accuracy", "instahide-attacks", "mia-atat-lambda", "mia-defenses", "mia-instances",
              "mia-tradeoff"]
    assert sorted(list_recipes()) == sorted(RECIPES + others)
    for name in RECIPES + others:
        recipe = load_recipe(name)
        assert set(recipe["presets"]) == {"smoke", "cpu", "paper"} | ({"fashion"} if name in FASHION else set())
        if name in FASHION:  # the preset validates, and names Fashion-MNIST
            params = recipe_params(recipe, "fashion", None)
            parse_params(recipe["kind"], params, name)
            assert "fashion" in str(params.get("datasets", params.get("dataset")))


@pytest.mark.parametrize("name", [r for r in RECIPES if r != "fig9-tau"])
def test_smoke_recipe_bounds_hold(name):
    r = run_recipe(name, "smoke", progress=False)
    assert r.points and r.violations == 0
    assert all(p.attacks for p in r.points)
    if "lpips" in name:
        assert all(p.lpips_bound is not None and p.lpips_bound >= 0 for p in r.points)
        assert all("lpips" in a for p in r.points for a in p.attacks.values())


def test_k_and_tau_sweeps_cover_their_grids(tmp_path):
    r = run_recipe("fig9-tau", "smoke", progress=False)
    assert sorted({p.tau for p in r.points if p.sigma == 0}) == [0.0, 1e-6, 1e-4, 1e-2]
    # a larger τ calls more directions null: Corollary 2 can only grow with τ
    b = {p.tau: p.bound for p in r.points if p.sigma == 0}
    assert b[0.0] <= b[1e-6] <= b[1e-4] <= b[1e-2]
    out = tmp_path / "k"
    assert main(["run", "fig8-k", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    data = json.loads((out / "results.json").read_text())
    assert sorted({p["k"] for p in data["points"]}) == [4, 16]
    html = (out / "report.html").read_text()
    assert "<th>k</th>" in html and (out / "bounds.png").is_file()
    # the page stands alone: every figure is embedded, none is linked
    assert "src='data:image/png;base64," in html and ".png'" not in html


def test_user_recipe_by_path_with_a_trained_encoder_file(tmp_path):
    enc_path = tmp_path / "enc.pt"
    assert main(["train-encoder", "--size", "8", "--m", "8", "--epochs", "1", "--out", str(enc_path), "--quiet"]) == 0
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(f"""name: mine
kind: sweep
params:
  datasets: {{digits: {{sigma_s: 0.1}}}}
  sigmas: [0.001]
  attacks: [map]
  plot: scatter
presets:
  smoke: {{size: 8, encoders: [{{family: splitcnn, m: 8, weights: "{enc_path}"}}], n_attack: 4, map_steps: 30,
           ks: [32], score_samples: 2000}}
""")
    out = tmp_path / "out"
    assert main(["run", str(recipe), "--preset", "smoke", "--out", str(out), "--quiet"]) == 0
    pts = json.loads((out / "results.json").read_text())["points"]
    assert pts[0]["encoder"].endswith("(loaded)") and pts[0]["holds"]


def test_recipe_with_a_trained_score_model_reports_its_quality(tmp_path):
    """score: model:PATH — S and the MAP attack's prior come from a `reconguard score train` model."""
    model = tmp_path / "score.pt"
    assert main(["score", "train", "--epochs", "2", "--width", "16", "--depth", "2", "--n", "3000",
                 "--out", str(model), "--quiet"]) == 0
    assert model.with_suffix(".png").exists() and model.with_suffix(".json").exists()
    out = tmp_path / "run"
    assert main(["run", "fig2-linear", "--preset", "smoke", "--out", str(out), "--quiet"]) == 0  # exact prior
    r = run_recipe("fig2-linear", "smoke", progress=False,
                   overrides={"score": f"model:{model}", "datasets": {"digits": {"sigma_s": 0.1}},
                              "attacks": ["map"], "n_attack": 4, "map_steps": 20,
                              "encoders": [{"family": "linear", "m": [16]}]})
    q = r.extras["score_quality"]["digits"]
    assert 0 < q.noise_floor < 1 and len(q.eigenvalues) == 64
    assert all("map" in p.attacks for p in r.points)
