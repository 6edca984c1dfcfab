"""The fault suite: the real CLI, run the way users get it wrong — a subprocess where the process itself matters
(signals, kills, locks between two runs, the first refusal of each kind), ``main()`` in this process for the many
refusals of bad input that follow (the same code path, without 2 s of interpreter start each).

Every case ends with exit 2 (130 for Ctrl-C, 143 for SIGTERM), exactly one line ``reconguard: error: …`` (or
``reconguard: interrupted; …`` / ``reconguard: terminated; …``) on stderr that names the problem, no traceback, no partial output, and
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
import torch

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
    prefix = {130: "reconguard: interrupted", 143: "reconguard: terminated"}.get(code, "reconguard: error:")
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
    assert_refused(cli("bound", "--out", "afile", "--quiet", cwd=work), "afile", "not written by reconguard")
    assert_refused(cli("bound", "--out", "afile", "--quiet", "--force", cwd=work), "afile", "even with --force")
    assert_refused(cli("instahide", "challenge", "--n", "4", "--T", "2", "--k", "2", "--out", "user", cwd=work), "user")
    assert snapshot(work) == before
    # --force writes beside the user's files: it never removes or replaces them
    assert rg("run", "fig2-linear", "--preset", "smoke", "--out", "user", "--quiet", "--force", cwd=work).returncode == 0
    assert (work / "user" / "report.html").exists()
    assert {k: v for k, v in snapshot(work).items() if k in before} == before
    # a rerun of the same command replaces its own listed files; a file the user put into the result survives
    (work / "user" / "notes-on-the-run.txt").write_text("kept")
    kept = {k: v for k, v in snapshot(work).items() if not k.startswith("user/") or "notes" in k or k in before}
    assert cli("run", "fig2-linear", "--preset", "smoke", "--out", "user", "--quiet", "--force", cwd=work).returncode == 0
    assert {k: v for k, v in snapshot(work).items() if k in kept} == kept
    # another command's results are not replaced without --force
    assert_refused(cli("run", "fig4-skew", "--preset", "smoke", "--out", "user", "--quiet", cwd=work))
    assert {k: v for k, v in snapshot(work).items() if k in kept} == kept


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
                                       ("size: 100000", "size"), ("seed: 99999999999999999999", "seed"),
                                       ("seed: -1", "seed")])
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
    # in this process: test_recipe_files_that_are_wrong refuses a recipe in a subprocess
    assert_refused(cli("run", recipe, "--preset", "smoke", "--quiet", cwd=work), word)
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
    assert_refused(cli("instahide", "attack", "carlini", "--challenge", "c", "--split-patience", "0", "--quiet", cwd=work),
                   "split_patience")  # 0 would end the splits before any
    assert_refused(cli("instahide", "attack", "carlini", "--challenge", "c", "--max-rounds", "0", "--quiet", cwd=work),
                   "max_rounds")  # a cap of no rounds would run nothing
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


def _demo_until_its_first_unit(work, out: str, seconds: float):
    """``demo --out OUT`` slowed by ``seconds`` after each finished unit, returned once the first unit is saved."""
    proc = subprocess.Popen(_slowed("reconguard.experiments.units", "UnitCache.put", seconds,
                                    ["demo", "--preset", "smoke", "--out", out, "--quiet"]),
                            cwd=work, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
                            preexec_fn=_sigint_default)
    start, units = time.time(), work / f".{out}.units"
    while not (units.exists() and list(units.glob("*.pt"))):
        assert proc.poll() is None and time.time() - start < 240
        time.sleep(0.1)
    return proc


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
    proc = _demo_until_its_first_unit(work, "cut", 1.0)
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


# --- the cases: the real CLI as a subprocess; exit 2 (130 / 143), one line, no traceback, nothing lost ---


def _planted(work) -> dict:
    """A user's files in and around the output paths the cases below use."""
    (work / "mine").mkdir(exist_ok=True)
    (work / "mine" / "keep.txt").write_text("mine")
    return snapshot(work)


def _same_user_files(work, before):
    after = snapshot(work)
    assert {k: after.get(k) for k in before} == before


def test_out_home_with_force_never_touches_home(work, monkeypatch):
    home = work / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    (home / "thesis.tex").write_text("mine")
    before = snapshot(work)
    env = {**ENV, "HOME": str(home)}
    args = ["run", "fig2-linear", "--preset", "smoke", "--force", "--quiet"]
    r = subprocess.run([sys.executable, "-m", "reconguard", *args, "--out", str(home)], cwd=work, capture_output=True,
                       text=True, env=env, timeout=300)
    assert_refused(r, "never writes its results there")
    monkeypatch.setenv("HOME", str(home))  # the rest in this process, under the same home
    for out in ("/", str(work), str(work.parent)):
        assert_refused(cli(*args, "--out", out, cwd=work), "never writes its results there")
    _same_user_files(work, before)  # every pre-existing file, byte for byte (matplotlib may add its font cache)


def test_a_users_folder_named_like_the_units_folder_survives(work):
    units = work / ".d.units"
    units.mkdir()
    (units / "mine.pt").write_text("not a unit")
    before = snapshot(work)
    assert_refused(rg("demo", "--preset", "smoke", "--out", "d", "--quiet", cwd=work), ".d.units", "not written")
    assert_refused(cli("demo", "--preset", "smoke", "--out", "d", "--quiet", "--force", cwd=work), ".d.units")
    (work / ".e.lock").write_text("my lock-looking notes")
    before = snapshot(work)
    assert_refused(cli("demo", "--preset", "smoke", "--out", "e", "--quiet", cwd=work), ".e.lock", "not a reconguard lock")
    assert snapshot(work) == before


@pytest.mark.parametrize("seed,word", [("99999999999999999999999", "2^63"), ("-1", "2^63"), ("1.5", "whole number")])
def test_seeds_out_of_range(work, seed, word):
    assert_refused(cli("bound", "--seed", seed, "--quiet", "--out", "b.json", cwd=work), "--seed", word)
    assert not (work / "b.json").exists()


@pytest.mark.parametrize("device,word", [("cuda", "cuda"), ("cuda:3", "cuda"), ("foo", "auto, cpu, cuda")])
def test_devices_this_machine_does_not_have(work, device, word):
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert_refused(cli("bound", "--device", device, "--encoder", "splitcnn", "--size", "8", "--m", "4", "--k", "4",
                      "--quiet", "--out", "b.json", cwd=work), "--device", word)


def test_recipe_files_that_are_wrong(work):
    before = _planted(work)
    (work / "latin.yaml").write_bytes("name: x\nkind: sweep\n# caf\xe9\n".encode("latin-1"))
    (work / "dup.yaml").write_text("name: x\nkind: sweep\nparams: {seed: 1}\nparams: {seed: 2}\n")
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefgh", "bcdefghi")]
    (work / "bomb.yaml").write_text("name: x\nkind: sweep\nparams:\n  " + "\n  ".join(levels) + "\n")
    before = snapshot(work)
    assert_refused(rg("run", "latin.yaml", "--preset", "smoke", "--quiet", cwd=work), "not UTF-8")
    assert_refused(cli("run", "dup.yaml", "--preset", "smoke", "--quiet", cwd=work), "appears twice")
    start = time.time()
    assert_refused(rg("run", "bomb.yaml", "--preset", "smoke", "--quiet", cwd=work, timeout=60), "aliases")
    assert time.time() - start < 30
    assert snapshot(work) == before


def test_arrays_and_labels_that_are_wrong(work):
    x = np.random.default_rng(0).random((20, 1, 8, 8)).astype("float32")
    np.savez(work / "obj.npz", images=np.array([object()] * 4, dtype=object))
    np.savez(work / "objlab.npz", images=x, labels=np.array([object()] * 20, dtype=object))
    np.savez(work / "outside.npz", images=x, labels=np.arange(20) - 1)
    np.savez(work / "fraction.npz", images=x, labels=np.arange(20) * 0.5)
    (work / "net.py").write_text("import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
                                 "        super().__init__(); self.f = torch.nn.Linear(64, 4)\n"
                                 "    def forward(self, x):\n        return self.f(x.flatten(1))\n")
    before = snapshot(work)
    for data, word in (("obj.npz", "numeric"), ("objlab.npz", "numeric"), ("outside.npz", "0 …"),
                       ("fraction.npz", "whole")):
        assert_refused(rg("audit", "encoder", "--model", "net.py:Net", "--data", data, "--preset", "smoke",
                          "--out", "a", cwd=work), word)
    assert snapshot(work) == before


def test_user_modules_that_exit_or_fail(work):
    (work / "exit0.py").write_text("import sys\nsys.exit(0)\n")
    (work / "exit3.py").write_text("import sys\nsys.exit(3)\n")
    (work / "raises.py").write_text("raise ImportError('needs a package you do not have')\n")
    (work / "builds.py").write_text("import sys, torch\ndef make():\n    sys.exit('no')\n")
    np.save(work / "x.npy", np.random.default_rng(0).random((20, 1, 8, 8)).astype("float32"))
    before = snapshot(work)
    for spec, word in (("exit0.py:Net", "sys.exit(0)"), ("exit3.py:Net", "sys.exit(3)"), ("raises.py:Net", "ImportError"),
                       ("builds.py:make", "sys.exit")):
        assert_refused(rg("audit", "encoder", "--model", spec, "--data", "x.npy", "--out", "a", cwd=work),
                       spec.split(":")[0], word)
    assert snapshot(work) == before


def test_challenge_descriptions_that_are_wrong(work):
    _challenge(work)
    info = json.loads((work / "c" / "challenge.json").read_text())
    cases = {"k0": {"k": 0}, "kword": {"k": "four"}, "nlist": {"n": [6]}, "mode": {"mode": "sideways"},
             "c1": {"c1": "0.65"}, "shape": {"shape": "1x8x8"}}
    for name, change in cases.items():
        (work / name).mkdir()
        for f in ("encryptions.npy", "labels.npy"):
            (work / name / f).write_bytes((work / "c" / f).read_bytes())
        (work / name / "challenge.json").write_text(json.dumps({**info, **change}))
    (work / "notjson").mkdir()
    for f in ("encryptions.npy", "labels.npy"):
        (work / "notjson" / f).write_bytes((work / "c" / f).read_bytes())
    (work / "notjson" / "challenge.json").write_text("{k: 2")
    before = snapshot(work)
    for i, (name, change) in enumerate(cases.items()):  # the first refusal in a subprocess, the rest in this one
        key = next(iter(change))
        assert_refused((rg if i == 0 else cli)("instahide", "attack", "averaging", "--challenge", name, "--out", "r.npy",
                                               cwd=work), f"{key} =", "challenge.json")
    assert_refused(cli("instahide", "attack", "averaging", "--challenge", "notjson", "--out", "r.npy", cwd=work), "JSON")
    assert_refused(cli("instahide", "attack", "averaging", "--challenge", "c", "--k", "0", "--out", "r.npy", cwd=work),
                   "k = 0")
    assert snapshot(work) == before


def test_images_in_every_mode_are_converted_not_blamed_on_the_model(work):
    from PIL import Image

    rng = np.random.default_rng(0)
    folder = work / "photos"
    folder.mkdir()
    for i in range(6):
        rgb = (rng.random((8, 8, 3)) * 255).astype(np.uint8)
        mode = ("RGBA", "CMYK", "P", "LA", "RGB", "1")[i]
        img = Image.fromarray(rgb).convert(mode)
        img.save(folder / f"{i}.{'jpg' if mode == 'CMYK' else 'png'}")
    from reconguard.data.imagefile import read_image

    shapes = {read_image(f).shape[-1] if read_image(f).ndim == 3 else 1 for f in folder.iterdir()}
    assert shapes <= {1, 3}
    Image.fromarray((rng.random((8, 8)) * 65535).astype(np.uint16)).save(folder / "deep.png")
    (work / "mine").mkdir()
    (work / "net.py").write_text("import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
                                 "        super().__init__(); self.f = torch.nn.LazyLinear(4)\n"
                                 "    def forward(self, x):\n        return self.f(x.flatten(1))\n")
    assert_refused(rg("audit", "encoder", "--model", "net.py:Net", "--data", "photos", "--out", "a", cwd=work),
                   "deep.png", "mode")


def test_train_resume_with_another_model_or_other_settings(work):
    base = [sys.executable, "-m", "reconguard", "train", "--model", "cnn", "--width", "4", "--epochs", "3",
            "--batch-size", "64", "--out", "m", "--quiet"]
    proc = subprocess.Popen(_slowed("reconguard.io", "save_torch_atomic", 30, base[3:]), cwd=work, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    _wait_for(work / ".m.checkpoint.pt", proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert_refused(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), "terminated", "--resume", code=143)
    assert ".venv/bin/reconguard" in err or "-m reconguard" in err or "resume with: reconguard" in err
    assert not (work / ".m.lock").exists() and (work / ".m.checkpoint.pt").exists()
    before = snapshot(work)  # the refusals that follow run main() in this process (the kill above was a subprocess)
    assert_refused(cli(*base[3:], "--resume", "--lr", "0.01", cwd=work), "lr", "--resume")
    wider = [a if a != "4" else "8" for a in base[3:]]
    assert_refused(cli(*wider, "--resume", cwd=work), "width")
    assert snapshot(work) == before
    # a user's file at the checkpoint's path is never taken for one, nor removed
    (work / ".n.checkpoint.pt").write_text("my file")
    before = snapshot(work)
    assert_refused(cli(*[a if a != "m" else "n" for a in base[3:]], cwd=work), ".n.checkpoint.pt", "not written by reconguard")
    assert snapshot(work) == before


def test_recipe_resume_with_other_settings_is_refused(work):
    proc = _demo_until_its_first_unit(work, "d", 60)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert_refused(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), "terminated", code=143)
    before = snapshot(work)
    assert_refused(rg("demo", "--preset", "cpu", "--out", "d", "--quiet", "--resume", cwd=work), "preset", "--resume")
    assert snapshot(work) == before


def test_an_internal_error_is_one_line_and_a_file(work, monkeypatch):
    import reconguard.cli.bounds as bounds

    def broken(args, run):
        raise ZeroDivisionError("a bug, not the user's mistake")

    monkeypatch.setattr(bounds, "_cmd_bound", broken)
    r = cli("bound", "--quiet", cwd=work)
    assert r.returncode == 1
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("reconguard: internal error: ZeroDivisionError") and "Traceback" not in r.stderr
    path = Path(lines[0].split("details in ")[1].split(" (")[0])
    assert "Traceback" in path.read_text() and "a bug" in path.read_text()
    path.unlink()


# --- property: a random tree of user files in and around every output survives every run ---

_COMMANDS = {  # a fast run of each command that takes --out, and the kind of output
    "bound": (["bound", "--encoder", "linear", "--size", "4", "--m", "4", "--quiet"], "file"),
    "run": (["run", "fig2-linear", "--preset", "smoke", "--quiet"], "dir"),
    "challenge": (["instahide", "challenge", "--n", "4", "--T", "2", "--k", "2", "--size", "8"], "dir"),
    "gradients": (["attack", "gradients", "--steps", "2", "--quiet"], "file"),
}


def _user_tree(root: Path, out: str, rng) -> None:
    """Files a user may keep in and around ``out``: beside it, inside it, named like reconguard's own files."""
    names = ["notes.txt", "report.html", "results.json", ".reconguard.json.bak", "sub/deep.txt", "b.json"]
    for _ in range(int(rng.integers(3, 7))):
        place = [root, root / out, root / out / "sub", root / f".{out}.units.mine"][int(rng.integers(0, 4))]
        f = place / names[int(rng.integers(0, len(names)))]
        if f.parent.exists() and not f.parent.is_dir() or f.is_dir():
            continue
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(rng.bytes(int(rng.integers(1, 64))))


@pytest.mark.parametrize("name", list(_COMMANDS))
def test_random_user_trees_survive_every_run(work, name):
    argv, kind = _COMMANDS[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for trial in range(3):
        root = work / f"t{trial}"
        root.mkdir()
        out = "res.json" if kind == "file" else "res"
        if trial == 2:  # an earlier result of this command, with the user's files put into it afterwards
            assert cli(*argv, "--out", out, cwd=root).returncode == 0
        _user_tree(root, out if kind == "dir" else "around", rng)
        mine = snapshot(root)
        if trial == 2:  # its files, and its markers (they record each file's digest as written, so they change)
            ours = {k for k in mine if (k.split("/")[0] == out or k.endswith(".reconguard.json")) and _listed_by_reconguard(root, k)}
            mine = {k: v for k, v in mine.items() if k not in ours}
        for force in ([], ["--force"]):
            r = cli(*argv, "--out", out, *force, cwd=root)
            assert r.returncode in (0, 2), r.stderr
            if r.returncode == 2:
                assert_refused(r)
            after = snapshot(root)
            assert {k: after.get(k) for k in mine} == mine, (name, trial, force)


def _listed_by_reconguard(root: Path, rel: str) -> bool:
    from reconguard.io import owner

    return owner(root / rel) is not None or rel.endswith(".reconguard.json")


def test_a_result_the_user_edited_is_theirs(work):
    """The marker records each file's size, time and SHA-256 as written: a result file the user changed afterwards is
    never replaced or removed by a rerun (with or without --force); a byte-identical copy of a result folder (times
    not kept) is still reconguard's; a marker of an earlier version (no digests) is trusted by name, as before."""
    import json
    import shutil

    run = ["run", "fig2-linear", "--preset", "smoke", "--quiet"]
    assert cli(*run, "--out", "r", cwd=work).returncode == 0
    shutil.copytree(work / "r", work / "copy", copy_function=shutil.copyfile)  # the bytes, not the times
    with open(work / "r" / "report.html", "a") as fh:
        fh.write("<p>my notes on this run</p>")
    (work / "r" / "rtc.png").unlink()  # a result the user removed is simply written again
    before = snapshot(work)
    assert_refused(cli(*run, "--out", "r", cwd=work), "report.html")
    assert_refused(cli(*run, "--out", "r", "--force", cwd=work), "report.html", "changed since reconguard wrote it")
    after = snapshot(work)  # (the refused run keeps its finished units beside, to resume once the file is moved)
    assert {k: after.get(k) for k in before} == before and all(k.startswith(".r.units/") for k in set(after) - set(before))
    assert cli(*run, "--out", "copy", cwd=work).returncode == 0  # the copy's files are unchanged: replaced as ours
    # a file result: bound --out b.json, edited, then the same command again
    bound = ["bound", "--encoder", "linear", "--size", "4", "--m", "4", "--quiet", "--out", "b.json"]
    assert cli(*bound, cwd=work).returncode == 0
    (work / "b.json").write_text((work / "b.json").read_text().replace("{", '{"mine": 1, ', 1))
    before = snapshot(work)
    for force in ([], ["--force"]):
        assert_refused(cli(*bound, *force, cwd=work), "b.json", "changed since reconguard wrote it")
    assert snapshot(work) == before
    # a marker without digests (an earlier version's): its files are reconguard's by name
    mark = json.loads((work / "copy" / ".reconguard.json").read_text())
    mark.pop("digests")
    (work / "copy" / ".reconguard.json").write_text(json.dumps(mark))
    (work / "copy" / "results.json").write_text("{}")
    assert cli(*run, "--out", "copy", cwd=work).returncode == 0
    assert json.loads((work / "copy" / "results.json").read_text()) != {}


def test_a_unit_saved_but_not_yet_recorded_is_still_reconguards(tmp_path, monkeypatch):
    """A run killed between a unit's save and its digest in the marker (what made
    ``test_recipe_killed_then_resumed…`` leave ``.cut.units`` behind once, in a fresh clone under load): the resumed
    run uses the unit and its clean-up removes the folder, because the unit was listed before it was written."""
    import reconguard.io as io
    from reconguard.experiments.units import UnitCache

    real = io.record_file

    def killed_after_the_save(path, command, *, written=True):
        if written:
            raise KeyboardInterrupt  # the kill lands once the file is there, before its digest is recorded
        return real(path, command, written=written)

    monkeypatch.setattr(io, "record_file", killed_after_the_save)
    with pytest.raises(KeyboardInterrupt):
        UnitCache(tmp_path / ".u.units", {"a": 1}).put("unit", {"x": torch.ones(2)})
    monkeypatch.setattr(io, "record_file", real)
    resumed = UnitCache(tmp_path / ".u.units", {"a": 1})
    assert resumed.get("unit") is not None
    resumed.clear()
    assert not (tmp_path / ".u.units").exists()
