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
