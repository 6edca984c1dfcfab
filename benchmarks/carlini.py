"""Running time of the Carlini-style attack against n·T (issue 5 item 3), InstaHide on 8×8 digits
(inside k = 4 by default; ``--mode cross --k 6``: two private digits + k − 2 scikit-image patches per
mix), with the soft labels or ``--label-free``; the attacker's digits are disjoint from the challenge.

    python benchmarks/carlini.py [--sizes 10x25 20x25 20x50 30x50] [--mode cross --k 6] [--label-free]

For each (n, T): a fresh challenge (cryptographic masks), the attack, its wall time, and the challenge
score: ``identified`` (nearest neighbour among the private digits and the non-member digits), 1-to-1 SSIM,
and the same two for n random non-member digits submitted as the recovery (the baseline).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from reconguard.attacks.instahide import CarliniAttack, make_challenge, score_challenge
from reconguard.data import load_digits
from reconguard.encoders import InstaHide
from reconguard.encoders.instahide import paper_c1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="*", default=["10x25", "20x25", "20x50", "30x50"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=["inside", "cross"], default="inside")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--label-free", action="store_true")
    a = ap.parse_args()
    pool = noise = None
    if a.mode == "cross":
        from reconguard.experiments.instahide import public_pool
        pool = public_pool("samples", (1, 8, 8))
        noise = pool.get(torch.arange(min(len(pool), 2000)))
    scheme = InstaHide(a.k, c1=paper_c1(a.k), mode=a.mode, public=pool)
    d = load_digits()
    perm = torch.randperm(len(d), generator=torch.Generator().manual_seed(a.seed))
    private, public = perm[:1000], perm[1000:]
    print(f"{'n':>4s} {'T':>4s} {'n·T':>6s} {'seconds':>8s} {'identified':>10s} {'1-1 SSIM':>9s} "
          f"{'baseline id.':>12s} {'baseline SSIM':>13s}")
    for size in a.sizes:
        n, T = (int(v) for v in size.split("x"))
        with tempfile.TemporaryDirectory() as tmp:
            make_challenge(scheme, d.images[private], d.labels[private], n, T, Path(tmp) / "c", Path(tmp) / "t",
                           seed=a.seed + n + T, nonmembers=d.images[public])
            enc, labels = np.load(Path(tmp) / "c" / "encryptions.npy"), np.load(Path(tmp) / "c" / "labels.npy")
            r = CarliniAttack(a.k, n, c1=paper_c1(a.k), mode=a.mode).run(
                enc, None if a.label_free else labels, d.images[public], noise_images=noise)
            s = score_challenge(r.images, Path(tmp) / "t")
        print(f"{n:4d} {T:4d} {n * T:6d} {r.seconds:8.1f} {s.identified:10.2f} {s.matched_ssim:9.3f} "
              f"{s.baseline.identified:12.2f} {s.baseline.matched_ssim:13.3f}", flush=True)


if __name__ == "__main__":
    main()
