"""The fault suite: the real CLI, run the way users get it wrong — a subprocess where the process itself matters
(signals, kills, locks between two runs, the first refusal of each kind), ``main()`` in this process for the many
refusals of bad input that follow (the same code path, without 2 s of interpreter start each).

Every case ends with exit 2 (130 for Ctrl-C), exactly one line ``reconguard: error: …`` (or
``reconguard: interrupted; …``) on stderr that names the problem, no traceback, no partial output, and
every file already in the way untouched, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def rg(*args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "reconguard", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=ENV)


def cli(*args, cwd):
    """``main(args)`` in this process from ``cwd``, with the subprocess result's shape (returncode, stdout, stderr)."""
    import contextlib
    import io
    from types import SimpleNamespace

    from reconguard.cli import main

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse's own refusals exit from inside main
                code = exc.code
    finally:
        os.chdir(here)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def snapshot(root: Path) -> dict:
    """Every file under ``root`` (hidden ones too) → its SHA-1."""
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def assert_refused(r, *words, code=2):
    assert r.returncode == code, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    prefix = "reconguard: interrupted" if code == 130 else "reconguard: error:"
    assert len(lines) == 1 and lines[0].startswith(prefix), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    for w in words:
        assert w.lower() in lines[0].lower(), (w, lines[0])


@pytest.fixture()
def work(tmp_path):
    """A folder with a user's own files in the way."""
    (tmp_path / "user" / "sub").mkdir(parents=True)
    (tmp_path / "user" / "precious.txt").write_text("my notes")
    (tmp_path / "user" / "sub" / "thesis.tex").write_text("\\chapter{One}")
    (tmp_path / "afile").write_text("mine")
    return tmp_path


def test_out_never_deletes_or_replaces_a_users_files(work):
    before = snapshot(work)
    assert_refused(rg("run", "fig2-linear", "--preset", "smoke", "--out", "user", "--quiet", cwd=work),
                   "user", "--force")
    assert_refused(cli("demo", "--preset", "smoke", "--out", "afile", "--quiet", cwd=work), "existing file")
    assert_refused(cli("bound", "--out", "afile", "--quiet", cwd=work), "afile", "--force")
    assert_refused(cli("instahide", "challenge", "--n", "4", "--T", "2", "--k", "2", "--out", "user", cwd=work), "user")
    assert snapshot(work) == before
    # --force is the explicit way through
    assert rg("run", "fig2-linear", "--preset", "smoke", "--out", "user", "--quiet", "--force", cwd=work).returncode == 0
    assert not (work / "user" / "precious.txt").exists() and (work / "user" / "report.html").exists()
    # a previous run of the same command may be replaced; another command's results may not
    assert cli("run", "fig2-linear", "--preset", "smoke", "--out", "user", "--quiet", cwd=work).returncode == 0
    kept = snapshot(work)
    assert_refused(cli("run", "fig4-skew", "--preset", "smoke", "--out", "user", "--quiet", cwd=work), "fig2-linear")
    assert snapshot(work) == kept


def test_result_names_carry_their_parameters(work):
    for alpha in ("1", "3"):
        assert cli("bound", "--encoder", "skewed", "--alpha", alpha, "--quiet", cwd=work).returncode == 0
    assert len(list((work / "runs" / "bound").glob("[!.]*.json"))) == 2
    for k in ("0", "4"):
        assert cli("attack", "gradients", "--instahide-k", k, "--steps", "2", "--quiet", cwd=work).returncode == 0
    assert len(list((work / "runs" / "attacks").glob("[!.]*.json"))) == 2


def test_unwritable_out(work):
    assert_refused(rg("bound", "--out", "/proc/reconguard/b.json", "--quiet", cwd=work), "/proc")
    assert_refused(rg("run", "fig2-linear", "--preset", "smoke", "--out", "/proc/reconguard-run", "--quiet", cwd=work),
                   "/proc")


def test_corrupt_model_files(work):
    rng = np.random.default_rng(0)
    (work / "random.pt").write_bytes(rng.bytes(300))
    (work / "empty.pt").write_bytes(b"")
    assert rg("train-encoder", "--size", "8", "--m", "4", "--epochs", "1", "--out", "enc.pt", "--quiet",
              cwd=work).returncode == 0
    (work / "truncated.pt").write_bytes((work / "enc.pt").read_bytes()[:200])
    before = snapshot(work)
    assert_refused(rg("bound", "--encoder-file", "random.pt", "--size", "8", "--quiet", cwd=work), "random.pt")
    for f in ("random.pt", "empty.pt", "truncated.pt"):
        assert_refused(cli("bound", "--encoder-file", f, "--size", "8", "--quiet", cwd=work), f)
        assert_refused(cli("score", "check", "--model", f, "--quiet", cwd=work), f)
    assert snapshot(work) == before


def test_corrupt_images_in_a_folder(work):
    for cls in ("a", "b"):
        (work / "faces" / cls).mkdir(parents=True)
        for i in range(3):
            (work / "faces" / cls / f"{i}.png").write_bytes(b"not a png at all")
    assert_refused(rg("train", "--data", "folder", "--root", "faces", "--public-root", "faces", "--size", "8",
                      "--epochs", "1", "--quiet", cwd=work), "png")
    assert not (work / "runs").exists()


@pytest.mark.parametrize("line,word", [("seed: zero", "seed"), ("sigmas: 0.001", "sigmas"),
                                       ("n_attack: many", "n_attack"), ("size: -8", "size"),
                                       ("size: 100000", "size")])
def test_recipe_values_of_the_wrong_type(work, line, word):
    recipe = work / "mine.yaml"
    recipe.write_text(f"""name: mine
kind: sweep
params:
  datasets: {{gaussian: {{}}}}
  encoders: [{{family: linear, m: [4]}}]
presets:
  smoke: {{{line}}}
""")
    assert_refused(rg("run", recipe, "--preset", "smoke", "--quiet", cwd=work), word)
    assert not (work / "runs").exists()


def _challenge(work):
    assert rg("instahide", "challenge", "--n", "6", "--T", "8", "--k", "2", "--size", "8", "--out", "c", "--truth", "t",
              cwd=work).returncode == 0
    info = json.loads((work / "c" / "challenge.json").read_text())
    assert info["k"] == 2 and info["n"] == 6 and info["T"] == 8 and info["mode"] == "inside"


def test_bad_arrays_for_the_instahide_commands(work):
    _challenge(work)
    enc = np.load(work / "c" / "encryptions.npy")
    labels = np.load(work / "c" / "labels.npy")
    for name, e, lab in (("nan", np.where(np.arange(enc.size).reshape(enc.shape) == 5, np.nan, enc), labels),
                         ("flat", enc.reshape(len(enc), -1), labels),
                         ("nanlab", enc, np.full_like(labels, np.nan)), ("plain", enc, labels)):
        (work / name).mkdir()
        np.save(work / name / "encryptions.npy", e)
        np.save(work / name / "labels.npy", lab)
    before = snapshot(work)
    assert_refused(rg("instahide", "attack", "carlini", "--challenge", "nan", "--n", "6", "--k", "2", "--quiet",
                      cwd=work))
    for folder in ("nan", "flat", "nanlab"):
        for method in ("carlini", "averaging"):
            assert_refused(cli("instahide", "attack", method, "--challenge", folder, "--n", "6", "--k", "2", "--quiet",
                               cwd=work))
    np.save(work / "rec-nan.npy", np.full((6, 1, 8, 8), np.nan))
    np.save(work / "rec-shape.npy", np.zeros((6, 5)))
    before = snapshot(work)
    for f in ("rec-nan.npy", "rec-shape.npy", "missing.npy"):
        assert_refused(cli("instahide", "score", "--recovered", f, "--truth", "t", cwd=work), f.split(".")[0])
    # the challenge says what it is: a wrong --k is refused instead of running silently
    assert_refused(cli("instahide", "attack", "carlini", "--challenge", "c", "--k", "4", "--quiet", cwd=work),
                   "challenge.json")
    assert_refused(cli("instahide", "attack", "carlini", "--challenge", "c", "--c1", "0.9", "--quiet", cwd=work),
                   "challenge.json")  # c1 too: the attack's coefficient cap is the scheme's
    assert_refused(cli("instahide", "attack", "carlini", "--challenge", "plain", "--n", "6", "--k", "3", "--c1", "0.1",
                       "--quiet", cwd=work), "1/k")  # no three coefficients ≤ 0.1 sum to 1
    assert_refused(cli("instahide", "challenge", "--k", "0", "--out", "c0", cwd=work), "k")
    assert snapshot(work) == before


def test_sizes_that_cannot_fit(work):
    assert_refused(rg("bound", "--m", "1000000000", "--quiet", cwd=work), "GiB")
    assert_refused(cli("bound", "--size", "100000", "--quiet", cwd=work), "GiB")
    assert_refused(cli("bound", "--m", "1e9", "--quiet", cwd=work), "--m")
    assert_refused(cli("instahide", "search", "--k", "1000000000", "--quiet", cwd=work), "k")
    import torch

    from reconguard.classifiers import build_classifier, save_classifier
    save_classifier(work / "m.pt", build_classifier("cnn", 5, (1, 16, 16), 8),
                    {"arch": "cnn", "num_classes": 5, "in_shape": [1, 16, 16], "width": 8, "defense": "nodef",
                     "data": "digits", "size": 16})
    del torch
    assert_refused(cli("evaluate", "m.pt", "--candidates", "1000000000", "--out", "e.json", cwd=work), "candidates")
    assert not (work / "runs").exists() and not (work / "e.json").exists()


def _wait_for(path: Path, proc, timeout=240):
    start = time.time()
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() - start < timeout
        time.sleep(0.2)


def _sigint_default():
    """In the child before exec: SIGINT back to its default. A shell's background job (``make test &``, ``nohup``)
    starts with SIGINT ignored, Python then installs no KeyboardInterrupt handler, and Ctrl-C did nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _slowed(module: str, attr: str, seconds: float, args: list) -> list:
    """The CLI (``main(args)``, as ``python -m reconguard`` runs it) with ``module.attr`` followed by a sleep: a signal
    sent once its first call has happened lands mid-run, and a second run started then finds the first still
    running, however fast the machine."""
    code = (f"import importlib, sys, time\nobj = importlib.import_module({module!r})\n*path, name = {attr!r}.split('.')\n"
            "for part in path:\n    obj = getattr(obj, part)\nf = getattr(obj, name)\n"
            f"def slow(*a, **k):\n    r = f(*a, **k)\n    time.sleep({seconds!r})\n    return r\n"
            f"setattr(obj, name, slow)\nfrom reconguard.cli import main\nsys.exit(main({[str(a) for a in args]!r}))")
    return [sys.executable, "-c", code]


def test_ctrl_c_exits_130_and_leaves_nothing(work):
    proc = subprocess.Popen(_slowed("reconguard.experiments.units", "UnitCache.put", 1.5,
                                    ["demo", "--preset", "smoke", "--out", "d", "--quiet"]),
                            cwd=work, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
                            preexec_fn=_sigint_default)
    _wait_for(work / ".d.lock", proc)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert_refused(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), "--resume", code=130)
    # no output and no lock; only the finished units are kept (for --resume)
    assert not (work / "d").exists() and not (work / ".d.lock").exists()
    assert [p.name for p in work.glob(".d*")] in ([], [".d.units"])


@pytest.mark.slow
def test_recipe_killed_then_resumed_skips_finished_units_and_equals_a_full_run(work):
    assert rg("demo", "--preset", "smoke", "--out", "full", "--quiet", cwd=work).returncode == 0
    proc = subprocess.Popen(_slowed("reconguard.experiments.units", "UnitCache.put", 1.0,
                                    ["demo", "--preset", "smoke", "--out", "cut", "--quiet"]),
                            cwd=work, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
                            preexec_fn=_sigint_default)
    start = time.time()
    while not list((work / ".cut.units").glob("*.pt")) if (work / ".cut.units").exists() else True:
        assert proc.poll() is None and time.time() - start < 240
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    done = len(list((work / ".cut.units").glob("*.pt")))
    assert done >= 1 and not (work / "cut").exists()
    r = rg("demo", "--preset", "smoke", "--out", "cut", "--quiet", "--resume", cwd=work)
    assert r.returncode == 0, r.stderr
    a = json.loads((work / "full" / "results.json").read_text())
    b = json.loads((work / "cut" / "results.json").read_text())
    assert a["points"] == b["points"]
    assert not (work / ".cut.units").exists()


def test_two_runs_into_one_out(work):
    first = subprocess.Popen(_slowed("reconguard.experiments.units", "UnitCache.put", 1.5,
                                     ["demo", "--preset", "smoke", "--out", "d", "--quiet"]),
                             cwd=work, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
                            preexec_fn=_sigint_default)
    _wait_for(work / ".d.lock", first)
    second = rg("demo", "--preset", "smoke", "--out", "d", "--quiet", cwd=work)
    assert_refused(second, "another reconguard run")
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    data = json.loads((work / "d" / "results.json").read_text())
    assert data["recipe"] == "fig2-linear" and not (work / ".d.lock").exists()


def _train(work, out, *extra):
    return [sys.executable, "-m", "reconguard", "train", "--model", "cnn", "--width", "4", "--epochs", "6",
            "--batch-size", "64", "--out", out, "--quiet", *extra]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """One uninterrupted training run, the reference both interrupted ones must equal."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    assert subprocess.run(_train(folder, "full"), cwd=folder, env=ENV, capture_output=True).returncode == 0
    return folder / "full"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_train_killed_then_resumed_equals_an_uninterrupted_run(work, sig, uninterrupted):
    import torch

    proc = subprocess.Popen(_slowed("reconguard.io", "save_torch_atomic", 0.5, _train(work, "cut")[3:]), cwd=work, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    ckpt = work / ".cut.checkpoint.pt"
    _wait_for(ckpt, proc)
    time.sleep(0.5)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "--resume" in err and "Traceback" not in err
    assert ckpt.exists() and not (work / "cut").exists()
    r = subprocess.run(_train(work, "cut", "--resume"), cwd=work, env=ENV, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    a = torch.load(uninterrupted / "model.pt", weights_only=True)["state_dict"]
    b = torch.load(work / "cut" / "model.pt", weights_only=True)["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda h: [{k: v for k, v in e.items() if k != "seconds"} for e in h]  # noqa: E731
    ha = json.loads((uninterrupted / "result.json").read_text())["result"]["history"]
    hb = json.loads((work / "cut" / "result.json").read_text())["result"]["history"]
    assert strip(ha) == strip(hb) and len(ha) == 6
    assert not ckpt.exists()
