"""``benchmarks/carlini.py --data cifar10 --root DIR`` (issue 31: "any CIFAR-10 folder a user has"): the user's python
batches become the challenge (32×32 RGB, their labels), and a missing folder or --root is a clear error; --progress
shows the challenge's bars."""

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "carlini.py"


def _cifar(folder: Path, per_batch: int = 240):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072)).astype(np.uint8),
                 b"labels": list(rng.integers(0, 10, per_batch))}
        (folder / name).write_bytes(pickle.dumps(batch))


def _run(*args, cwd):
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_carlini_benchmark_runs_on_a_users_cifar10_folder(tmp_path):
    _cifar(tmp_path / "cifar-10-batches-py")
    out = _run("--data", "cifar10", "--root", str(tmp_path), "--k", "2", "--n", "6", "--T", "4",
               "--json", str(tmp_path / "rows.jsonl"), "--progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "carlini restarts" in out.stderr  # --progress: the challenge's bars reach the user (they were swallowed)
    row = json.loads((tmp_path / "rows.jsonl").read_text().splitlines()[0])
    # the user's images, not a stand-in: 32×32 (the photos' default side is 28), the training batches' 1,200 images
    # minus the 6 private ones as the gallery's non-members
    assert row["data"] == "cifar10" and row["size"] == 32 and row["n"] == 6 and row["nonmembers"] == 1194
    assert 0.0 <= row["identified"] <= 1.0 and row["attack_cpu_seconds"] > 0
    assert row["search_pixels"] == "auto" and row["searched_pixels"] == 256  # inside: the attack's default subset


def test_carlini_benchmark_cifar10_needs_its_folder(tmp_path):
    out = _run("--data", "cifar10", "--n", "6", "--T", "4", cwd=tmp_path)
    assert out.returncode != 0 and "--root DIR" in out.stderr
    out = _run("--data", "cifar10", "--root", str(tmp_path / "nowhere"), "--n", "6", "--T", "4", cwd=tmp_path)
    assert out.returncode != 0 and "CIFAR-10" in out.stderr and "Traceback" not in out.stderr.splitlines()[-1]


def test_carlini_benchmark_refuses_what_the_attack_refuses_before_training_the_network(monkeypatch):
    """Settings the attack refuses (cross mode with k = 2 mixes no public image) fail before the label-free run trains
    its similarity network: they took 156 s of training to be told."""
    import importlib.util

    import pytest

    from reconguard.attacks.instahide import SimilarityNetwork
    from reconguard.errors import ParameterError

    def never(*_, **__):
        raise AssertionError("the similarity network was trained before the attack's settings were checked")

    monkeypatch.setattr(SimilarityNetwork, "fit", never)
    spec = importlib.util.spec_from_file_location("bench_carlini", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(sys, "argv", [str(BENCH), "--data", "digits", "--size", "8", "--mode", "cross", "--k", "2",
                                      "--label-free", "--one", "12x4"])
    with pytest.raises(ParameterError, match="mixes no public image"):
        bench.main()


def test_reference_cost_benchmark_builds_carlinis_wide_resnet_and_prints_the_ratio(tmp_path):
    """``benchmarks/carlini_reference_cost.py`` (the README's "What the published attack uses"): the network timed is
    a WideResNet-28-6 with two logits — 13.1 M parameters, as Zagoruyko and Komodakis's width 6 at depth 28 has — and
    the script prints both costs and their ratio at a small N."""
    sys.path.insert(0, str(BENCH.parent))
    from carlini_reference_cost import wide_resnet

    net = wide_resnet(6)
    assert abs(sum(q.numel() for q in net.parameters()) / 1e6 - 13.1) < 0.1
    import torch
    assert net.eval()(torch.zeros(2, 6, 32, 32)).shape == (2, 2)
    out = subprocess.run([sys.executable, str(BENCH.parent / "carlini_reference_cost.py"), "--threads", "1", "--N", "40",
                          "--batch", "2", "--repeats", "1"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "CPU-ms per pair call" in out.stdout and "ratio" in out.stdout and "CPU-hours" in out.stdout
