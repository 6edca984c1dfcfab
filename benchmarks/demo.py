"""The newcomer's first minute: ``reconguard demo`` (the cpu preset of fig2-linear) as a whole process — wall
time, CPU-seconds and peak memory of each fresh run, mean and worst — against its 90 s budget on 2 cores, and
the MAP attack's mixture-prior score (what the demo spends most in) against a per-component loop, side by side
in one run.

    python benchmarks/demo.py [--runs 2]

The score of the smoothed-digits prior π = (1/K) Σ_k N(m_k, σ_s²I) is ``(Σ_k w_k(x) m_k − x)/σ_s²`` with the
posterior weights w_k(x); the loop computes w_k one component at a time (as a first implementation would),
reconguard with one matrix product per batch.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import torch


def loop_score(prior, x: torch.Tensor) -> torch.Tensor:
    """The same score, one mixture component at a time (the reference it is measured against)."""
    logw = torch.stack([-((x - m) ** 2).sum(1) / (2 * prior.std**2) for m in prior.means], 1)
    w = torch.softmax(logw, 1)
    return (sum(w[:, k:k + 1] * prior.means[k] for k in range(prior.n_components)) - x) / prior.std**2


def score_ratio(repeats: int = 20) -> tuple[float, float, float]:
    from reconguard.data import load_digits, smoothed_empirical_prior

    prior = smoothed_empirical_prior(load_digits(8), 0.1)
    x = prior.sample(32, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(loop_score(prior, x), prior.score(x), rtol=1e-9, atol=1e-9)
    t = time.perf_counter()
    for _ in range(repeats):
        prior.score(x)
    ours = (time.perf_counter() - t) / repeats
    t = time.perf_counter()
    for _ in range(max(1, repeats // 10)):
        loop_score(prior, x)
    loop = (time.perf_counter() - t) / max(1, repeats // 10)
    return ours, loop, loop / ours


def one_demo() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "reconguard", "demo", "--out", os.path.join(tmp, "d"), "--quiet"],
                           capture_output=True, text=True)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise SystemExit(r.stderr[-2000:])
        held = "bound held at every point" in r.stdout
        return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                "peak_gb": after.ru_maxrss / 2**20, "held": held}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    ours, loop, ratio = score_ratio()
    print(f"mixture score, 32 inputs, K = 1,797 components, d = 64: vectorised {1e3 * ours:.2f} ms, "
          f"per-component loop {1e3 * loop:.2f} ms — loop / vectorised = {ratio:.1f}×")
    runs = [one_demo() for _ in range(a.runs)]
    for i, r in enumerate(runs):
        print(f"demo run {i + 1}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, peak {r['peak_gb']:.2f} GB, "
              f"bound held: {r['held']}")
    walls = [r["wall_s"] for r in runs]
    print(f"demo: mean wall {sum(walls) / len(walls):.1f} s, worst {max(walls):.1f} s (budget 90 s on 2 cores) — "
          + ("within" if max(walls) <= 90 else "OVER") + " budget")
    print(json.dumps({"score_ms": 1e3 * ours, "loop_ms": 1e3 * loop, "ratio": ratio, "runs": runs}))


if __name__ == "__main__":
    main()
