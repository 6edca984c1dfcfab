"""Time per training step of AT-AT (3 and 5 PGD steps) and classic PGD adversarial training (10 steps)
relative to vanilla training, interleaved in one run (issue 6 item 5).

    python benchmarks/atat.py [--batch 128] [--size 32] [--width 64] [--repeats 5] [--device cpu]

Each step = forward + backward + Adam on a ResNet-18 (the AT-AT paper's smaller architecture) with a
batch of random images. A PGD step costs one forward + one input-gradient backward; AT-AT adds one more
forward of the clean batch, so the goal is AT-AT ≤ (1 + steps) × vanilla + 10 %.
"""

from __future__ import annotations

import argparse
import time

import torch

from reconguard.classifiers import build_classifier
from reconguard.defenses import ATAT, AdversarialTraining
from reconguard.train import classification_loss


def step_time(model, opt, loss_fn, batch, repeats):
    times = []
    for _ in range(repeats + 1):  # the first is a warm-up
        t = time.perf_counter()
        loss, _ = loss_fn(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if batch[0].is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return min(times[1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = build_classifier("resnet18", 10, (3, a.size, a.size), a.width).to(dev).train()
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    batch = (torch.rand(a.batch, 3, a.size, a.size, device=dev), torch.randint(0, 10, (a.batch,), device=dev))
    methods = {"vanilla": (classification_loss, 0), "AT-AT 3 steps": (ATAT(0.1, 3, 1e-3, 4e-4).loss, 3),
               "AT-AT 5 steps": (ATAT(0.1, 5, 1e-3, 2.5e-4).loss, 5),
               "AT (Madry) 10 steps": (AdversarialTraining(8 / 255, 10, 2 / 255).loss, 10)}
    best = {k: float("inf") for k in methods}
    for _ in range(2):  # interleaved rounds; the best of each is kept
        for name, (fn, _) in methods.items():
            best[name] = min(best[name], step_time(model, opt, fn, batch, a.repeats))
    base = best["vanilla"]
    print(f"ResNet-18 width {a.width}, batch {a.batch} × 3×{a.size}×{a.size}, {dev}, {torch.get_num_threads()} threads")
    print(f"{'method':22s} {'s/step':>8s} {'× vanilla':>10s} {'goal ≤':>8s}")
    for name, (_, steps) in methods.items():
        ratio = best[name] / base
        goal = "" if steps == 0 else f"{(1 + steps) * 1.1:.1f}" if name.startswith("AT-AT") else ""
        print(f"{name:22s} {best[name]:8.3f} {ratio:10.2f} {goal:>8s}")


if __name__ == "__main__":
    main()
