r"""Time, peak memory and recovery of Carlini et al.'s attack (issues 15, 31): InstaHide challenges of scikit-learn
digits (``--size 28``: resized to 28×28; ``--size 8``: the raw 8×8), Fashion-MNIST (``--data fashion``: Debian's
``dataset-fashion-mnist``; private images from the training split, the attacker's own from the test split) or RGB
crops of scikit-image's photographs (``--data photos``, the offline stand-in for CIFAR-10: private crops from
PHOTO_SPLITS["a"], the attacker's own from other photographs), or CIFAR-10 from a folder the user has (``--data cifar10
--root DIR``: its python batches; private images from the training batches, the attacker's own from the test batch,
the real labels) — inside k = 4 by default, ``--mode cross --k 6``: two
private images + k − 2 public ones per mix, the public ones normalised with the private set's statistics or,
``--public-normalize own``, their own (the reference code's and the published challenge's convention). **The
encryptor's public pool and the attacker's noise images come from disjoint photographs** (ENCRYPTOR_PHOTOS vs
ATTACKER_PHOTOS for photos, the two PHOTO_SPLITS otherwise). With ``--label-free`` the attacker trains Carlini et
al.'s similarity network on its own images encrypted with the same scheme (it is told the scheme) and the attack
clusters the encryptions on its scores; inside mode, ``--similarity-steps 0``, the attack scores the pairs from the
encryptions themselves (``similarity.encryption_affinity``, no network). ``--cluster-start`` (labelled) starts the
alternation from the encryptions clustered by their dominant image (``CarliniAttack(cluster_start=True)``,
``carlini_start``) instead of a random one.
The owner normalises pixels with the n private images' own channel statistics by default, which the attacker never
sees (inside, and cross on natural images, it de-normalises with the constants read off its recovery's range,
``carlini_range``; ``--denormalize own``: its own images' statistics; digits and Fashion-MNIST cross: its own images');
``--normalize published`` gives the scheme fixed constants of
the whole private source instead, recorded in the challenge and read by the attack, as InstaHide's code fixes
CIFAR-10's (the published challenge's convention).

    python benchmarks/carlini.py --mode cross --k 6 --n 100 --T 50 --public-normalize own --seeds 5
    python benchmarks/carlini.py --data photos --size 16 --k 3 --n 20 --T 25 --seeds 5 --json rows.jsonl
    python benchmarks/carlini.py --data photos --size 32 --n 100 --T 50 --normalize published --seeds 5
    python benchmarks/carlini.py --data fashion --n 100 --T 50 --label-free --similarity-steps 0 --seeds 5
    python benchmarks/carlini.py --data photos --size 32 --n 100 --T 50 --label-free --similarity-steps 0 \
        --split-patience 2 --max-rounds 60 --seeds 5
    python benchmarks/carlini.py --data cifar10 --root ~/data/cifar-10-batches-py --mode cross --k 6 --n 100 --T 50

Each challenge runs in a fresh process (so its peak memory is its own): fresh cryptographic masks, the attack, its
CPU-seconds (``attack_cpu_seconds``, every thread of the process) and wall time, peak resident memory, and the
challenge score — ``identified`` by standardised nearest neighbour and ``identified_plain`` by plain L2, among the n
private images and ≥ 1,000 non-members, 1-to-1 SSIM, and the same for n random non-members submitted as the
recovery (the guess). ``--seeds K`` runs K fresh challenges per size (other images, other keys) and prints their
mean and worst; ``--json F`` appends one JSON line per challenge and one summary per size. Each challenge is also
scored before the attack's last steps (``*_before_moves``: the recovery before cross mode's refit to the amplitudes'
mean and the prior moves, ``carlini_signs.settle``), so the two are paired on the same keys and images. ``--keep D``
writes each challenge's recovered images beside its truth under D (to look at, or score again).
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

OWN_IMAGES = 300  # the attacker's images (disjoint from the challenge and its gallery)
# Cross mode: the encryptor's public pool and the attacker's noise images come from disjoint photographs, and for
# --data photos neither from the private photographs (split "a"): the attacker's own and noise images are crops of
# ATTACKER_PHOTOS (scenes, like the private ones), the encryptor's public pool of ENCRYPTOR_PHOTOS (textures) — split
# "b" halved. The attacker's own images must be of the private kind: with the textures as its own images the sign
# prior (carlini_signs) fails and a 16×16, inside k = 3, n = 20 challenge identified 0.00 instead of 1.00.
ENCRYPTOR_PHOTOS = ("grass", "gravel", "brick", "moon")
ATTACKER_PHOTOS = ("stereo_motorcycle", "retina", "camera", "coins", "clock")


def _data(a):
    """``(private images, their labels, the attacker's own images, encryptor's public pool, attacker's noise
    images)``: digits (``--size``: resized), Fashion-MNIST (training images private, the attacker's from the test
    split) or (``--data photos``) RGB crops of scikit-image's photographs (split "a", ten random labels) — the offline
    stand-in for CIFAR-10 — the attacker's own from other photographs — or CIFAR-10 from ``--root`` (5,000 training
    images at random, the attacker's own from the test batch). The pools are None inside."""
    from reconguard.data import load_digits
    from reconguard.data.photos import PHOTO_SPLITS, photo_crops, public_pools
    rng = np.random.default_rng(a.seed)
    if a.data == "photos":
        images = torch.as_tensor(photo_crops(3000, a.size, 3, seed=a.seed, photos=PHOTO_SPLITS["a"]), dtype=torch.float32)
        labels = torch.as_tensor(rng.integers(0, 10, len(images)))
        own = torch.as_tensor(photo_crops(OWN_IMAGES, a.size, 3, seed=a.seed + 1, photos=ATTACKER_PHOTOS),
                              dtype=torch.float32)
        pools = (ENCRYPTOR_PHOTOS, ATTACKER_PHOTOS)
    elif a.data in ("fashion", "cifar10"):
        from reconguard.data import load_cifar10, load_fashion_mnist
        root = getattr(a, "root", None)  # carlini_basin._challenge passes no --root
        load = load_cifar10 if a.data == "cifar10" else load_fashion_mnist  # both (root, split)
        train, test = load(root, "train"), load(root, "test")
        pick = torch.as_tensor(rng.choice(len(train.images), min(5000, len(train.images)), replace=False))
        images, labels = train.images[pick], train.labels[pick]
        own = test.images[torch.as_tensor(rng.choice(len(test.images), min(OWN_IMAGES, len(test.images)), replace=False))]
        pools = (PHOTO_SPLITS["a"], PHOTO_SPLITS["b"])
    else:
        d = load_digits(a.size)
        perm = torch.randperm(len(d.images), generator=torch.Generator().manual_seed(a.seed))
        images, labels, own = d.images[perm[:-OWN_IMAGES]], d.labels[perm[:-OWN_IMAGES]], d.images[perm[-OWN_IMAGES:]]
        pools = (PHOTO_SPLITS["a"], PHOTO_SPLITS["b"])
    if getattr(a, "random_labels", False):  # the labels' content removed: ten classes drawn at random (the crops' kind)
        labels = torch.as_tensor(np.random.default_rng(a.seed + 5).integers(0, 10, len(images)))
    if a.mode != "cross":
        return images, labels, own, None, None
    c, size = images.shape[1], images.shape[-1]
    public, noise = (torch.as_tensor(p, dtype=torch.float32) for p in public_pools(2000, size, c, a.seed + 2, pools))
    return images, labels, own, public, noise


def one(a, n: int, T: int) -> dict:
    from reconguard.attacks.instahide import CarliniAttack, make_challenge, score_challenge
    from reconguard.attacks.instahide.carlini_options import searched_pixels
    from reconguard.encoders import InstaHide
    from reconguard.encoders.instahide import paper_c1

    images, labels_all, own, pool, noise = _data(a)
    # --normalize published: fixed channel constants of the private source (all its images, not the n picked), part
    # of the scheme's public code as InstaHide's CIFAR-10 constants are, so the attack de-normalises with them
    normalize = "dataset" if a.normalize == "dataset" else InstaHide(a.k).channel_stats(torch.as_tensor(images, dtype=torch.float32))
    scheme = InstaHide(a.k, c1=paper_c1(a.k), mode=a.mode, public=pool, public_normalize=a.public_normalize,
                       normalize=normalize)
    with tempfile.TemporaryDirectory() as tmp:
        make_challenge(scheme, images, labels_all, n, T, Path(tmp) / "c", Path(tmp) / "t", seed=a.seed + n + T)
        enc, labels = np.load(Path(tmp) / "c" / "encryptions.npy"), np.load(Path(tmp) / "c" / "labels.npy")
        start, cpu0 = time.perf_counter(), time.process_time()
        atk = CarliniAttack(a.k, n, c1=paper_c1(a.k), mode=a.mode, solver=a.solver, seed=a.seed, restarts=a.restarts,
                            phase_starts=a.phase_starts, search_pixels=a.search_pixels or None, cluster_start=a.cluster_start,
                            split_grid=a.split_grid, split_patience=a.split_patience, max_rounds=a.max_rounds,
                            normalize=normalize, denormalize=a.denormalize, progress=a.progress,
                            sign_sync={"on": True, "off": False}.get(a.sign_sync, a.sign_sync))
        if a.label_free:  # a search too large, or settings the attack refuses, fail here, before any network is trained
            atk.check_free_search(n, len(enc), int(np.prod(enc.shape[1:])), bool(a.similarity_steps))
        similarity = None
        if a.label_free and a.similarity_steps:  # the attacker's similarity network, trained on its own images encrypted the same way
            from reconguard.attacks.instahide import SimilarityNetwork
            net = SimilarityNetwork(images.shape[1], steps=a.similarity_steps, seed=a.seed, progress=a.progress)
            # its own images mixed with *its* public images (the noise images), never the encryptor's pool
            attacker = scheme if pool is None else InstaHide(a.k, c1=paper_c1(a.k), mode=a.mode, public=noise,
                                                             public_normalize=a.public_normalize, normalize=normalize)
            net.fit(attacker, own)
            similarity = net.scores(enc)
        r = atk.run(enc, None if a.label_free else labels, own, noise_images=noise, similarity=similarity)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu0
        s = score_challenge(r.images, Path(tmp) / "t")
        s0 = score_challenge(r.unrefined, Path(tmp) / "t")  # the same recovery before the last steps (refit, prior moves, contrast): paired
        if a.keep:  # the recovery beside its truth, to look at or score again
            import shutil
            folder = Path(a.keep) / f"{a.data}-{a.mode}-n{n}-T{T}-seed{a.seed}"
            shutil.copytree(Path(tmp) / "t", folder, dirs_exist_ok=True)
            np.save(folder / "recovered.npy", r.images.numpy())
            np.save(folder / "recovered_before_last_steps.npy", r.unrefined.numpy())
            for name, Z in (("recovered_normalized.npy", r.normalized), ("before_last_steps_normalized.npy", r.unrefined_normalized)):
                np.save(folder / name, Z.detach().numpy())  # unclamped, in the scheme's units: to de-normalise again
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB → GiB (Linux)
    return {"data": a.data, "seed": a.seed, "attack_cpu_seconds": round(cpu, 1), "n": n, "T": T, "nT": n * T,
            "k": a.k, "mode": a.mode, "size": int(images.shape[-1]), "labels": not a.label_free,
            "public_normalize": a.public_normalize, "normalize": a.normalize, "denormalize": a.denormalize,
            "assumed": r.public_normalization, "solver": r.solver,
            "search": r.search, "restarts": len(r.restarts), "phase_starts": a.phase_starts,
            "random_labels": a.random_labels, "search_pixels": a.search_pixels,
            "searched_pixels": searched_pixels(a.search_pixels or None, a.mode, not a.label_free), "split_grid": a.split_grid,
            "split_patience": a.split_patience, "max_rounds": a.max_rounds,
            "similarity_steps": a.similarity_steps if a.label_free else 0,
            "seconds": round(seconds, 1), "peak_gib": round(peak, 2), "identified": s.identified,
            "identified_plain": s.identified_plain, "identified_inverted": s.identified_inverted,
            "matched_ssim": round(s.matched_ssim, 3),
            "baseline_identified": s.baseline.identified, "baseline_identified_plain": s.baseline.identified_plain,
            "baseline_ssim": round(s.baseline.matched_ssim, 3), "nonmembers": s.n_nonmembers,
            "identified_before_moves": s0.identified, "identified_plain_before_moves": s0.identified_plain,
            "matched_ssim_before_moves": round(s0.matched_ssim, 3)}


def _summary(rows: list) -> dict:
    """Mean and worst over the fresh challenges of one configuration."""
    out = {"challenges": len(rows)}
    for key in ("identified", "identified_plain", "matched_ssim", "baseline_identified", "baseline_identified_plain",
                "baseline_ssim", "attack_cpu_seconds", "seconds", "peak_gib", "identified_before_moves",
                "identified_plain_before_moves", "matched_ssim_before_moves"):
        vals = [r[key] for r in rows]
        worst = max(vals) if key in ("attack_cpu_seconds", "seconds", "peak_gib") or key.startswith("baseline") else min(vals)
        out[key] = {"mean": round(float(np.mean(vals)), 3), "worst": round(float(worst), 3)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="*", default=None, help="n×T pairs, e.g. 20x50 50x50 100x50")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--T", type=int, default=None)
    ap.add_argument("--size", type=int, default=28, help="image side in pixels (8: the raw digits)")
    ap.add_argument("--data", choices=["digits", "fashion", "photos", "cifar10"], default="digits",
                    help="fashion: Fashion-MNIST (Debian's dataset-fashion-mnist, or --root); photos: RGB crops of "
                    "scikit-image's photographs, the attacker's own from other photographs; cifar10: CIFAR-10's python "
                    "batches from --root")
    ap.add_argument("--root", default=None, help="the data folder: CIFAR-10's python batches or its downloaded archive "
                    "(--data cifar10), or Fashion-MNIST's IDX files instead of the Debian package")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1, help="fresh challenges per size (seeds seed, seed+1, …): the "
                    "row is their mean and worst")
    ap.add_argument("--mode", choices=["inside", "cross"], default="inside")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--public-normalize", choices=["private", "own"], default="own")
    ap.add_argument("--normalize", choices=["dataset", "published"], default="dataset", help="the owner's pixel "
                    "normalisation: dataset — the n private images' channel statistics, which the attacker never sees "
                    "(inside, the attack reads them off its recovery's range: --denormalize); published — fixed "
                    "constants of the private source (all its images), part of the scheme's code as InstaHide's "
                    "CIFAR-10 constants are, read by the attack")
    ap.add_argument("--denormalize", choices=["own", "range"], default="range",
                    help="--normalize dataset, inside and cross on natural images: de-normalise with the constants "
                    "read off the recovery's range (cross: its 3%% quantiles against the attacker's own images'), or the "
                    "attacker's own images' statistics")
    ap.add_argument("--solver", choices=["auto", "lift", "direct"], default="auto")
    ap.add_argument("--restarts", type=int, default=None, help="the attack's random restarts, or the "
                    "sign-synchronising path's k-means starts (default: its own; 5 on that path)")
    ap.add_argument("--phase-starts", type=int, default=None, help="inside mode's phase X-step starts per pixel "
                    "(0: the amplitude descent; default: the attack's own)")
    ap.add_argument("--search-pixels", type=lambda v: v if v == "auto" else int(v), default="auto",
                    help="the assignment search's random pixel subset (0: every pixel; auto: the attack's "
                    "carlini_options.searched_pixels, 256 inside, 1,024 cross, 512 label-free)")
    ap.add_argument("--cluster-start", action="store_true", help="labelled: start the alternation from the encryptions "
                    "clustered by their dominant image (carlini_start) instead of a random assignment")
    ap.add_argument("--label-free", action="store_true")
    ap.add_argument("--sign-sync", choices=["auto", "on", "off"], default="auto", help="cross with labels: carlini_sync's "
                    "clustered start and sign-synchronising X-step (auto: when the attacker's images give pixels no sign)")
    ap.add_argument("--random-labels", action="store_true", help="replace the data's labels by ten random classes (as "
                    "--data photos has): how much the attack owes to classes whose images look alike")
    ap.add_argument("--split-grid", type=int, default=5, help="the coefficient grid's points per share (CarliniAttack's "
                    "split_grid; label-free cross: 18 coefficient pairs at 5, 12 at 4)")
    ap.add_argument("--split-patience", type=int, default=None, help="stop the split moves after this many rejected "
                    "in a row (CarliniAttack's split_patience; default: every split)")
    ap.add_argument("--max-rounds", type=int, default=None, help="at most this many rounds per start over all phases "
                    "(CarliniAttack's max_rounds; default: no cap)")
    ap.add_argument("--similarity-steps", type=int, default=1500, help="label-free: the similarity network's training steps "
                    "(0: no network, random starts only)")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--keep", default=None, help="write each challenge's recovered images and truth under this folder")
    ap.add_argument("--json", default=None, help="append one JSON line per challenge, and one summary per size, here")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: run one size in this process
    a = ap.parse_args()
    if a.data == "cifar10" and not a.root:
        ap.error("--data cifar10 needs --root DIR: the folder holding CIFAR-10's python batches (data_batch_1 … "
                 "data_batch_5, test_batch; or their cifar-10-batches-py folder), or the downloaded "
                 "cifar-10-python.tar.gz.")
    if a.one:
        print(json.dumps(one(a, *(int(v) for v in a.one.split("x")))))
        return
    sizes = a.sizes or ([f"{a.n}x{a.T}"] if a.n and a.T else ["20x50", "50x50", "100x50"])
    print(f"{'n':>4s} {'T':>4s} {'seed':>4s} {'CPU s':>7s} {'wall s':>7s} {'peak GiB':>8s} {'ident.':>6s} {'plain':>6s} "
          f"{'SSIM':>6s} {'guess id.':>9s} {'guess SSIM':>10s}  before the last steps (refit, prior moves, contrast): "
          "id. / plain / SSIM", flush=True)
    args = [v for i, v in enumerate(sys.argv[1:]) if v != "--seeds" and (i == 0 or sys.argv[i] != "--seeds")]
    for size in sizes:
        rows = []
        for seed in range(a.seed, a.seed + a.seeds):
            out = subprocess.run([sys.executable, __file__, *args, "--seed", str(seed), "--one", size],
                                 stdout=subprocess.PIPE, stderr=None if a.progress else subprocess.PIPE, text=True)
            if out.returncode:  # with --progress the challenge's bars and its error went to this terminal
                sys.exit(f"{size}: {out.stderr.strip().splitlines()[-1] if (out.stderr or '').strip() else 'failed (above)'}")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            if a.progress:  # end the bars' line before the row
                print(file=sys.stderr, flush=True)
            rows.append(row)
            print(f"{row['n']:4d} {row['T']:4d} {seed:4d} {row['attack_cpu_seconds']:7.0f} {row['seconds']:7.1f} "
                  f"{row['peak_gib']:8.2f} {row['identified']:6.2f} {row['identified_plain']:6.2f} "
                  f"{row['matched_ssim']:6.3f} {row['baseline_identified']:9.2f} {row['baseline_ssim']:10.3f}  "
                  f"{row['identified_before_moves']:.2f} / {row['identified_plain_before_moves']:.2f} / "
                  f"{row['matched_ssim_before_moves']:.3f}", flush=True)
            if a.json:
                with open(a.json, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row) + "\n")
        summary = _summary(rows)
        print("mean / worst: " + ", ".join(f"{k} {v['mean']} / {v['worst']}" for k, v in summary.items()
                                           if isinstance(v, dict)), flush=True)
        if a.json:
            with open(a.json, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"summary": True, **{k: v for k, v in rows[0].items() if k in (
                    "data", "n", "T", "k", "mode", "size", "labels", "public_normalize", "normalize", "search_pixels")}, **summary}) + "\n")


if __name__ == "__main__":
    main()
