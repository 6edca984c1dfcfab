"""What Carlini et al.'s similarity graph costs on this machine, against reconguard's similarity network, in one run.

Carlini et al.'s released attack on the InstaHide challenge (github.com/carlini/privacy, the InstaHide attack's
steps 1–4; 5,000 encryptions of 100 private 32×32 RGB images, cross k = 6) scores pairs with a WideResNet-28-6:

* step 1 runs it on |x̃_a| and |x̃_b| stacked (6 channels) for every pair of encryptions, 5,000 × 5,000 calls
  ("about an hour or so" on their GPUs, says its comment);
* step 3 runs it on three members of a cluster and a candidate stacked (12 channels), 1,000 calls per encryption
  (10 draws of 3 prototypes for each of 100 clusters);
* step 4 then assigns encryptions to clusters **with the labels**: a cluster's class is the majority label of its
  20 nearest encryptions, an encryption joins it only if its label holds that class, and its coefficient is read off
  the label. So the published attack is a labelled attack; label-free cross k = 6 on natural images is beyond it.

This script builds that network (random weights: only the cost is measured), times a batch of pair calls in
CPU-seconds on the threads given, and times reconguard's ``SimilarityNetwork.scores`` (one embedding per
encryption, a small head per pair) on ``--N`` encryptions of the same size. It prints the CPU-seconds per pair
call of each, their ratio, and what steps 1 and 3 would take at the challenge's size (unordered pairs for step 1,
half of what the released code runs), against the issue's budget of 1,800 CPU-seconds for a whole attack::

    python benchmarks/carlini_reference_cost.py               # 2 threads, N = 5,000
    python benchmarks/carlini_reference_cost.py --threads 1 --N 1000
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn


class _Block(nn.Module):
    """A pre-activation wide residual block (BatchNorm, ReLU, 3×3 conv, twice; a 1×1 conv shortcut when the shape
    changes), as in Zagoruyko and Komodakis's WideResNet."""

    def __init__(self, a: int, b: int, stride: int):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(a), nn.Conv2d(a, b, 3, stride, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(b), nn.Conv2d(b, b, 3, 1, 1, bias=False)
        self.short = None if a == b and stride == 1 else nn.Conv2d(a, b, 1, stride, bias=False)

    def forward(self, x):
        h = torch.relu(self.bn1(x))
        y = self.conv2(torch.relu(self.bn2(self.conv1(h))))
        return y + (x if self.short is None else self.short(h))


def wide_resnet(channels: int, depth: int = 28, width: int = 6, classes: int = 2) -> nn.Sequential:
    """WRN-depth-width: (depth − 4) / 6 blocks in each of three groups of 16·width, 32·width, 64·width channels."""
    per, w = (depth - 4) // 6, [16, 16 * width, 32 * width, 64 * width]
    layers = [nn.Conv2d(channels, 16, 3, 1, 1, bias=False)]
    for g in range(3):
        for b in range(per):
            layers.append(_Block(w[g] if b == 0 else w[g + 1], w[g + 1], 2 if b == 0 and g > 0 else 1))
    layers += [nn.BatchNorm2d(w[3]), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(w[3], classes)]
    return nn.Sequential(*layers)


def _cpu(fn, repeats: int) -> float:
    fn()  # warm-up
    t0 = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - t0) / repeats


def main(argv=None):
    from reconguard.attacks.instahide.similarity import SimilarityNetwork

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--N", type=int, default=5000, help="encryptions scored by reconguard's network")
    p.add_argument("--batch", type=int, default=64, help="pair calls per timed batch of the WideResNet")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--size", type=int, default=32)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        wrn = wide_resnet(6).eval()
        x = torch.randn(a.batch, 6, a.size, a.size, generator=g)
        wrn_pair = _cpu(lambda: wrn(x), a.repeats) / a.batch
        ours = SimilarityNetwork(3, steps=1)
        e = torch.randn(a.N, 3, a.size, a.size, generator=g)
        ours_all = _cpu(lambda: ours.scores(e), 1)
    pairs = a.N * a.N  # scores() fills the whole N×N matrix
    ours_pair = ours_all / pairs
    params = sum(q.numel() for q in wrn.parameters()) / 1e6
    step1 = 5000 * 4999 / 2 * wrn_pair
    step3 = 5000 * 1000 * wrn_pair  # the 12-channel input changes only the first convolution
    print(f"WideResNet-28-6 ({params:.1f} M parameters), {a.size}×{a.size}, {a.threads} thread(s): "
          f"{wrn_pair * 1e3:.2f} CPU-ms per pair call")
    print(f"reconguard SimilarityNetwork.scores on N = {a.N}: {ours_all:.1f} CPU-s for {pairs:,} pairs, "
          f"{ours_pair * 1e6:.3f} CPU-µs per pair")
    print(f"ratio (WideResNet pair call / reconguard pair): {wrn_pair / ours_pair:,.0f}×")
    print(f"at the challenge's size: step 1 (12.5 M unordered pairs) {step1:,.0f} CPU-s = {step1 / 3600:.0f} "
          f"CPU-hours; step 3 (5 M calls) {step3:,.0f} CPU-s = {step3 / 3600:.0f} CPU-hours; the issue's budget for a "
          f"whole attack: 1,800 CPU-s ({(step1 + step3) / 1800:,.0f}× less), before any training")


if __name__ == "__main__":
    main()
