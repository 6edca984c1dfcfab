"""E[G] and the bounds at d = 3×224×224 = 150,528 without a d×d matrix (the low-rank path,
``reconguard.bounds.lowrank``): a split ResNet-18 cut early (ImageNet stem, after conv1), GELU/AvgPool,
random weights, Gaussian prior N(0.5, 0.2²I) (S = I/η² exactly isotropic).

For each k (inputs) at embedding size m: the wall time of the Jacobian rows, of the Gram and of the bounds,
and the peak resident memory, each configuration in its own process so its peak is its own; the saturation
check (the share of held-out inputs' Jacobian energy outside the sampled range), the paper's plug-in
Corollaries 1 and 2 and the values reported in their place (tangent plane / Theorem 1 / 0 when k·m ≪ d).

    python benchmarks/fisher_large.py [--m 64] [--ks 2 4 8 16] [--device cpu|cuda] [--budget 600]

The dense path would need E[G] as a 150,528² float64 matrix: 181 GB. Stops before a configuration whose
predicted time (time grows about linearly in k·m for the rows, quadratically for the Gram) exceeds --budget s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

ONE = textwrap.dedent('''
    import json, resource, sys, time, torch
    from reconguard.bounds import StructuredScore, estimate_fisher_lowrank, mse_bound, noiseless_mse_bound
    from reconguard.encoders import SplitResNet18
    k, m, device = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(torch.get_num_threads())
    enc = SplitResNet18("early", m, (3, 224, 224), seed=0, stem="imagenet").to(device)
    from reconguard.bounds.fisher import default_heldout
    h = default_heldout(k)  # held-out inputs for the saturation check and the tangent-plane bound
    x = (0.5 + 0.2 * torch.randn(k + h, 3, 224, 224, generator=torch.Generator().manual_seed(0))).float()
    t0 = time.perf_counter()
    f = estimate_fisher_lowrank(enc, x, k=k, device=device)
    t1 = time.perf_counter()
    S = StructuredScore.isotropic(1 / 0.2**2, f.d)
    b1 = mse_bound(f, S, 1e-3)
    b0 = noiseless_mse_bound(f, S)
    t2 = time.perf_counter()
    print(json.dumps({"k": k, "m": m, "n": f.n, "d": f.d, "rows_and_gram_s": t1 - t0, "bounds_s": t2 - t1,
                      "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "cor1": b1.value, "cor1_plugin": b1.plugin, "cor1_rule": b1.kind, "cor2": b0.value,
                      "cor2_plugin": b0.plugin, "rank": b0.rank, "heldout": h,
                      "unseen_share": f.saturation.unseen_share, "saturation": f.saturation.describe(),
                      "device": device}))
''')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--ks", type=int, nargs="*", default=[2, 4, 8, 16, 32])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds allowed for one configuration")
    a = ap.parse_args()
    print(f"{'k':>4s} {'k·m':>6s} {'rows+Gram s':>12s} {'bounds s':>9s} {'peak GB':>8s} {'unseen':>7s} "
          f"{'Cor 1 plug-in':>14s} {'reported (σ=1e-3)':>18s} {'Cor 2 plug-in':>14s} {'reported (σ=0)':>15s} rule")
    last = None
    for k in a.ks:
        if last is not None:
            n_ratio = k / last["k"]
            predicted = (last["rows_and_gram_s"] + last["bounds_s"]) * n_ratio ** 2
            if predicted > a.budget:
                print(f"stop: k = {k} would take about {predicted:.0f} s (> --budget {a.budget:.0f} s)")
                break
        r = subprocess.run([sys.executable, "-c", ONE, str(k), str(a.m), a.device], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-2000:])
            break
        last = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"{k:4d} {last['n']:6d} {last['rows_and_gram_s']:12.1f} {last['bounds_s']:9.1f} {last['peak_gb']:8.2f} "
              f"{100 * last['unseen_share']:6.2f}% {last['cor1_plugin']:14.6g} {last['cor1']:18.6g} "
              f"{last['cor2_plugin']:14.6g} {last['cor2']:15.6g} {last['cor1_rule']}", flush=True)


if __name__ == "__main__":
    main()
