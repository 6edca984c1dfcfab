"""Speed of estimate_fisher (vmap'd torch.func Jacobians, chunked) against the per-sample
torch.autograd.functional.jacobian loop, measured side by side in one run.

    python benchmarks/fisher.py [--k 256] [--m 64] [--split middle] [--repeats 1]

Prints the time of each and their ratio (goal: >= 20x at k = 256), and checks that both give
the same E[G] (relative difference).
"""

from __future__ import annotations

import argparse
import time

import torch

from reconguard.bounds import estimate_fisher
from reconguard.data import load_digits
from reconguard.encoders import SplitCNN


def timed(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--split", default="middle")
    ap.add_argument("--repeats", type=int, default=2, help="best of this many runs of each")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    data = load_digits(28)
    enc = SplitCNN(args.split, args.m, (1, 28, 28), seed=0).to(args.device)
    print(f"SplitCNN({args.split}, m={args.m}) on digits 28×28 (d=784), k={args.k}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, device {args.device}")
    estimate_fisher(enc, data, k=8, seed=0)  # warm-up: first calls pay for allocator / oneDNN set-up
    estimate_fisher(enc, data, k=2, seed=0, method="loop")
    t_fast, fast = timed(lambda: estimate_fisher(enc, data, k=args.k, seed=0), args.repeats)
    t_loop, loop = timed(lambda: estimate_fisher(enc, data, k=args.k, seed=0, method="loop"), args.repeats)
    rel = float((fast.matrix - loop.matrix).norm() / loop.matrix.norm())
    print(f"estimate_fisher ({fast.method}, chunked): {t_fast:8.3f} s")
    print(f"per-sample autograd.functional.jacobian loop: {t_loop:8.3f} s")
    print(f"speed-up: {t_loop / t_fast:.1f}x   (relative difference of E[G]: {rel:.2e})")


if __name__ == "__main__":
    main()
