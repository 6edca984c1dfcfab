"""Model inversion at an equal time budget (issue 7 item 1): the generative-prior attack (PPA-style,
VAE on public digits 5–9) vs plain gradient inversion vs ART's MIFace (the peer implementation), all
against the same NoDef target (ResNet-18 on private digits 0–4), scored by the same evaluation CNN.

    python benchmarks/inversion.py [--per-class 10] [--seed 0]

The generative attack runs first; its wall time is the budget. Gradient inversion and MIFace get their
iteration counts calibrated to the same budget from a short timed run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from reconguard.attacks.inversion import GenerativeInversion, GradientInversion, train_generator
from reconguard.augment import Augment
from reconguard.classifiers import build_classifier
from reconguard.data.splits import digits_mia_split
from reconguard.experiments.mia import train_defended
from reconguard.metrics import evaluate_inversion
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
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    split = digits_mia_split(16)
    target, row, _ = train_defended(split, "nodef", epochs=20, seed=a.seed)
    evaluator = build_classifier("cnn", 5, split.train.shape, seed=11)
    fit(evaluator, split.train, split.val, epochs=20, seed=11, progress=False, augment=Augment(flip=False))
    gen = train_generator(split.public, epochs=60, seed=13)
    print(f"target test accuracy {row.test_acc:.3f}; generator trained on {len(split.public)} public images")

    def score(images, targets):
        return evaluate_inversion(evaluator, images, targets, split.train.images, split.train.labels)

    t0 = time.perf_counter()
    res = GenerativeInversion(gen, candidates=500, keep=20, steps=60, lr=0.2, finals=a.per_class, seed=a.seed).run(target)
    budget = time.perf_counter() - t0
    rows = [("generative prior (ours)", budget, score(res.images, res.targets))]

    targets = torch.arange(5).repeat_interleave(a.per_class)
    t0 = time.perf_counter()
    GradientInversion(steps=10, per_class=a.per_class).run(target, split.train.shape, 5)
    per_step = (time.perf_counter() - t0) / 10
    steps = max(1, int(budget / per_step))
    t0 = time.perf_counter()
    g = GradientInversion(steps=steps, per_class=a.per_class, seed=a.seed).run(target, split.train.shape, 5)
    rows.append((f"gradient inversion ({steps} steps)", time.perf_counter() - t0, score(g.images, g.targets)))

    t0 = time.perf_counter()
    miface(target, split.train.shape, targets, 10)
    per_iter = (time.perf_counter() - t0) / 10
    iters = max(1, int(budget / per_iter))
    t0 = time.perf_counter()
    m = miface(target, split.train.shape, targets, iters)
    rows.append((f"ART MIFace ({iters} iterations)", time.perf_counter() - t0, score(m, targets)))

    print(f"{'attack':34s} {'seconds':>8s} {'AttAcc@1':>9s} {'95% CI':>14s} {'EvalConf':>9s} {'feat. L2':>9s}")
    for name, secs, met in rows:
        lo, hi = met.att_acc1_ci
        print(f"{name:34s} {secs:8.1f} {met.att_acc1:9.3f}   [{lo:.2f}, {hi:.2f}] {met.eval_conf:9.3f} {met.feature_l2:9.2f}")


if __name__ == "__main__":
    main()
