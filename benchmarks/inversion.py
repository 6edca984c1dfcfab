"""Model inversion at an equal time budget (issue 7 item 1): the generative-prior attack (PPA-style,
VAE on public digits 5–9; latent + intermediate features with the CE or PPA's Poincaré loss, and latent
only) vs plain gradient inversion vs ART's MIFace (the peer implementation), all against the same NoDef
target (ResNet-18 on private digits 0–4), scored by the same evaluation CNN.

    python benchmarks/inversion.py [--per-class 5] [--seeds 4]

Per attack seed, the generative attack (intermediate, CE — the cpu recipe's setting) runs first; its wall
time is the budget. Gradient
inversion and MIFace get their iteration counts calibrated to the same budget from a short timed run.
AttAcc@1 is pooled over the seeds (n = 5 classes × per-class × seeds) with a Wilson 95 % interval.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
import torch

from reconguard.attacks.inversion import GenerativeInversion, GradientInversion, train_generator
from reconguard.augment import Augment
from reconguard.classifiers import build_classifier
from reconguard.data.splits import digits_mia_split
from reconguard.experiments.mia import train_defended
from reconguard.metrics import evaluate_inversion
from reconguard.stats import wilson_interval
from reconguard.train import fit


def miface(target, shape, targets, max_iter):
    from art.attacks.inference.model_inversion import MIFace
    from art.estimators.classification import PyTorchClassifier

    clf = PyTorchClassifier(target, loss=torch.nn.CrossEntropyLoss(), input_shape=shape, nb_classes=5,
                            clip_values=(0.0, 1.0))
    attack = MIFace(clf, max_iter=max_iter, window_length=max_iter + 1, threshold=1.0, learning_rate=0.1,
                    batch_size=len(targets), verbose=False)
    x0 = np.full((len(targets),) + tuple(shape), 0.5, dtype=np.float32)
    return torch.from_numpy(attack.infer(x0, y=targets.numpy()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-class", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=4)
    a = ap.parse_args()
    split = digits_mia_split(16)
    target, row, _ = train_defended(split, "nodef", epochs=20, seed=0)
    evaluator = build_classifier("cnn", 5, split.train.shape, seed=11)
    fit(evaluator, split.train, split.val, epochs=20, seed=11, progress=False, augment=Augment(flip=False))
    gen = train_generator(split.public, epochs=60, seed=13)
    print(f"target test accuracy {row.test_acc:.3f}; generator trained on {len(split.public)} public images")

    hits, secs = defaultdict(list), defaultdict(float)

    def record(name, seconds, images, targets):
        met = evaluate_inversion(evaluator, images, targets, split.train.images, split.train.labels)
        hits[name].append((round(met.att_acc1 * len(targets)), len(targets)))
        secs[name] += seconds

    targets = torch.arange(5).repeat_interleave(a.per_class)
    for seed in range(a.seeds):
        common = dict(candidates=500, keep=20, steps=60, lr=0.2, finals=a.per_class, seed=seed)
        res = GenerativeInversion(target, gen, loss="ce", **common).run()
        budget = res.seconds
        record("generative, intermediate, CE", budget, res.images, res.targets)
        res = GenerativeInversion(target, gen, loss="poincare", **common).run()
        record("generative, intermediate, Poincaré", res.seconds, res.images, res.targets)
        res = GenerativeInversion(target, gen, loss="ce", space="latent", **common).run()
        record("generative, latent only, CE", res.seconds, res.images, res.targets)

        t0 = time.perf_counter()
        GradientInversion(target, split.train.shape, steps=10, per_class=a.per_class).run(num_classes=5)
        steps = max(1, int(budget / ((time.perf_counter() - t0) / 10)))
        g = GradientInversion(target, split.train.shape, steps=steps, per_class=a.per_class, seed=seed).run(num_classes=5)
        record("gradient inversion (equal time)", g.seconds, g.images, g.targets)

        t0 = time.perf_counter()
        miface(target, split.train.shape, targets, 10)
        iters = max(1, int(budget / ((time.perf_counter() - t0) / 10)))
        t0 = time.perf_counter()
        m = miface(target, split.train.shape, targets, iters)
        record("ART MIFace (equal time)", time.perf_counter() - t0, m, targets)
        print(f"seed {seed}: budget {budget:.1f} s, gradient inversion {steps} steps, MIFace {iters} iterations")

    print(f"{'attack':42s} {'s/seed':>7s} {'AttAcc@1':>9s} {'95% CI':>14s}  per seed")
    for name, hs in hits.items():
        k, n = sum(h for h, _ in hs), sum(n for _, n in hs)
        lo, hi = wilson_interval(k, n)
        per = " ".join(f"{h / n_:.2f}" for h, n_ in hs)
        print(f"{name:42s} {secs[name] / a.seeds:7.1f} {k / n:9.3f}   [{lo:.2f}, {hi:.2f}]  {per}")


if __name__ == "__main__":
    main()
