"""Time, peak memory and recovery of Carlini et al.'s attack against n·T (issue 15): InstaHide challenges of
scikit-learn digits (``--size 28``: resized to 28×28, d = 784; ``--size 8``: the raw 8×8) — inside k = 4 by
default, ``--mode cross --k 6``: two private digits + k − 2 scikit-image patches per mix, the patches normalised
with the private set's statistics or, ``--public-normalize own``, their own (the reference code's and the published
challenge's convention) — with the soft labels or ``--label-free`` (then the attacker trains Carlini et al.'s similarity network on its
own digits encrypted with the same scheme — it is told the scheme, normalisation included — and the attack
clusters the encryptions on its scores). The attacker's digits are disjoint from the
challenge and from its gallery of non-members.

    python benchmarks/carlini.py --mode cross --k 6 --n 100 --T 50 --public-normalize own
    python benchmarks/carlini.py --mode cross --k 6 --sizes 20x50 50x50 100x50 --solver direct

Each (n, T) runs in a fresh process (so its peak memory is its own): a challenge with fresh cryptographic masks, the
attack, its wall time and peak resident memory, and the challenge score — ``identified`` (nearest neighbour among
the n private digits and ≥ 1,000 non-member digits), 1-to-1 SSIM, and the same two for n random non-members
submitted as the recovery (the baseline). ``--json F`` appends one JSON line per size.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

OWN_IMAGES = 300  # the attacker's digits (disjoint from the challenge and its gallery)


def _data(a):
    """The private images and their labels: digits, or (``--data photos``) RGB crops of scikit-image's photographs
    (split "a", ten random labels) — the offline stand-in for CIFAR-10 — the attacker's own taken from the disjoint
    photographs of split "b" (appended last, where ``one`` takes them)."""
    from reconguard.data import load_digits
    if a.data == "digits":
        return load_digits(a.size)
    from types import SimpleNamespace
    from reconguard.data.photos import PHOTO_SPLITS, photo_crops
    rng = np.random.default_rng(a.seed)
    private = photo_crops(3000, a.size, 3, seed=a.seed, photos=PHOTO_SPLITS["a"])
    own = photo_crops(OWN_IMAGES, a.size, 3, seed=a.seed + 1, photos=PHOTO_SPLITS["b"])
    images = torch.as_tensor(np.concatenate([private, own]), dtype=torch.float32)
    labels = torch.as_tensor(np.concatenate([rng.integers(0, 10, len(private)), rng.integers(0, 10, len(own))]))
    return SimpleNamespace(images=images, labels=labels)


def one(a, n: int, T: int) -> dict:
    from reconguard.attacks.instahide import CarliniAttack, make_challenge, score_challenge
    from reconguard.encoders import InstaHide
    from reconguard.encoders.instahide import paper_c1

    pool = noise = None
    d = _data(a)
    if a.mode == "cross":
        from reconguard.experiments.instahide import public_pool
        pool = public_pool("samples", tuple(d.images.shape[1:]))
        noise = pool.get(torch.arange(min(len(pool), 2000)))
    scheme = InstaHide(a.k, c1=paper_c1(a.k), mode=a.mode, public=pool, public_normalize=a.public_normalize)
    if a.data == "digits":
        perm = torch.randperm(len(d.images), generator=torch.Generator().manual_seed(a.seed))
        challenge, own = perm[:-OWN_IMAGES], perm[-OWN_IMAGES:]
    else:  # the attacker's photographs are not the private ones'
        challenge, own = torch.arange(len(d.images) - OWN_IMAGES), torch.arange(len(d.images) - OWN_IMAGES, len(d.images))
    with tempfile.TemporaryDirectory() as tmp:
        make_challenge(scheme, d.images[challenge], d.labels[challenge], n, T, Path(tmp) / "c", Path(tmp) / "t",
                       seed=a.seed + n + T)
        enc, labels = np.load(Path(tmp) / "c" / "encryptions.npy"), np.load(Path(tmp) / "c" / "labels.npy")
        start = time.perf_counter()
        similarity = None
        if a.label_free and a.similarity_steps:  # the attacker's similarity network, trained on its own digits encrypted the same way
            from reconguard.attacks.instahide import SimilarityNetwork
            net = SimilarityNetwork(d.images.shape[1], steps=a.similarity_steps, seed=a.seed, progress=a.progress)
            net.fit(scheme, d.images[own])
            similarity = net.scores(enc)
        r = CarliniAttack(a.k, n, c1=paper_c1(a.k), mode=a.mode, solver=a.solver, seed=a.seed, restarts=a.restarts,
                          phase_starts=a.phase_starts, progress=a.progress).run(
            enc, None if a.label_free else labels, d.images[own], noise_images=noise, similarity=similarity)
        seconds = time.perf_counter() - start
        s = score_challenge(r.images, Path(tmp) / "t")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB → GiB (Linux)
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    return {"data": a.data, "cpu_seconds": round(cpu.ru_utime + cpu.ru_stime, 1), "n": n, "T": T, "nT": n * T,
            "k": a.k, "mode": a.mode, "size": a.size, "labels": not a.label_free,
            "public_normalize": a.public_normalize, "assumed": r.public_normalization, "solver": r.solver,
            "search": r.search, "restarts": len(r.restarts), "phase_starts": a.phase_starts,
            "similarity_steps": a.similarity_steps if a.label_free else 0,
            "seconds": round(seconds, 1), "peak_gib": round(peak, 2), "identified": s.identified,
            "matched_ssim": round(s.matched_ssim, 3), "baseline_identified": s.baseline.identified,
            "baseline_ssim": round(s.baseline.matched_ssim, 3), "nonmembers": s.n_nonmembers}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="*", default=None, help="n×T pairs, e.g. 20x50 50x50 100x50")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--T", type=int, default=None)
    ap.add_argument("--size", type=int, default=28, help="image side in pixels (8: the raw digits)")
    ap.add_argument("--data", choices=["digits", "photos"], default="digits",
                    help="photos: RGB crops of scikit-image's photographs, the attacker's own from other photographs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=["inside", "cross"], default="inside")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--public-normalize", choices=["private", "own"], default="own")
    ap.add_argument("--solver", choices=["auto", "lift", "direct"], default="auto")
    ap.add_argument("--restarts", type=int, default=None, help="the attack's random restarts (default: its own)")
    ap.add_argument("--phase-starts", type=int, default=None, help="inside mode's phase X-step starts per pixel "
                    "(0: the amplitude descent; default: the attack's own)")
    ap.add_argument("--label-free", action="store_true")
    ap.add_argument("--similarity-steps", type=int, default=1500, help="label-free: the similarity network's training steps "
                    "(0: no network, random starts only)")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--json", default=None, help="append one JSON line per size here")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: run one size in this process
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a, *(int(v) for v in a.one.split("x")))))
        return
    sizes = a.sizes or ([f"{a.n}x{a.T}"] if a.n and a.T else ["20x50", "50x50", "100x50"])
    print(f"{'n':>4s} {'T':>4s} {'n·T':>6s} {'solver':>6s} {'seconds':>8s} {'peak GiB':>8s} {'identified':>10s} "
          f"{'1-1 SSIM':>9s} {'baseline id.':>12s} {'baseline SSIM':>13s}", flush=True)
    for size in sizes:
        out = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--one", size], capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"{size}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else 'failed'}")
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{row['n']:4d} {row['T']:4d} {row['nT']:6d} {row['solver']:>6s} {row['seconds']:8.1f} {row['peak_gib']:8.2f} "
              f"{row['identified']:10.2f} {row['matched_ssim']:9.3f} {row['baseline_identified']:12.2f} "
              f"{row['baseline_ssim']:13.3f}", flush=True)
        if a.json:
            with open(a.json, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
