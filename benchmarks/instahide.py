"""Encryption throughput of reconguard's InstaHide against a faithful re-implementation of the
reference code's per-batch loop (Hazelsuko07/InstaHide, `mixup_data`), side by side in one run.

    python benchmarks/instahide.py [--n 20000] [--k 4] [--batch 128] [--size 32]

The reference draws |N(0, 1)| coefficients per image in a Python loop, rejecting until max ≤ c1,
mixes each batch with k − 1 random permutations of itself (so an image can meet itself and only
batch-mates are partners) and flips signs with torch.randint. Ours draws all coefficients and
partners vectorised and takes mask bits from os.urandom.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from reconguard.encoders import InstaHide


def reference_mixup_data(x: torch.Tensor, y: torch.Tensor, klam: int, upper: float, rng: np.random.Generator):
    lams = rng.normal(0, 1, size=(x.size(0), klam))
    for i in range(x.size(0)):
        lams[i] = np.abs(lams[i]) / np.sum(np.abs(lams[i]))
        if klam > 1:
            while lams[i].max() > upper:
                lams[i] = rng.normal(0, 1, size=(1, klam))
                lams[i] = np.abs(lams[i]) / np.sum(np.abs(lams[i]))
    lams = torch.from_numpy(lams).float()
    mixed_x = lams[:, 0].reshape(-1, 1, 1, 1) * x
    ys = [y]
    for i in range(1, klam):
        index = torch.randperm(x.size(0))
        mixed_x += lams[:, i].reshape(-1, 1, 1, 1) * x[index, :]
        ys.append(y[index])
    sign = torch.randint(2, size=list(x.shape)) * 2.0 - 1
    return mixed_x * sign, ys, lams


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    x = torch.rand(args.n, 3, args.size, args.size)
    y = torch.randint(0, 10, (args.n,))
    rng = np.random.default_rng(0)
    scheme = InstaHide(k=args.k)
    stats = scheme.channel_stats(x)
    xn = InstaHide.normalize_images(x, stats)  # the reference normalises in its loader; both get normalised input
    scheme.encrypt(x[:256], y[:256], stats=stats)  # warm-up
    t_ref = t_ours = float("inf")
    for _ in range(args.repeats):  # interleaved, best of each: the machine's noise hits both alike
        t = time.perf_counter()
        for i in range(0, args.n, args.batch):
            reference_mixup_data(xn[i:i + args.batch], y[i:i + args.batch], args.k, 0.65, rng)
        t_ref = min(t_ref, time.perf_counter() - t)
        t = time.perf_counter()
        scheme.encrypt(x, y, stats=stats)
        t_ours = min(t_ours, time.perf_counter() - t)
    print(f"{args.n} images {args.size}×{args.size}×3, k={args.k}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"reference per-batch loop (batch {args.batch}): {args.n / t_ref:10.0f} images/s  ({t_ref:.2f} s)")
    print(f"reconguard InstaHide.encrypt (vectorised):   {args.n / t_ours:10.0f} images/s  ({t_ours:.2f} s)")
    print(f"speed-up: {t_ref / t_ours:.1f}x")


if __name__ == "__main__":
    main()
