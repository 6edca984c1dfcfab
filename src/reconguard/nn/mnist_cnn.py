"""The 3-block MNIST CNN of the spectral-bounds paper (appendix A.1.1), differentiable (GELU, AvgPool).

    Block 0: Conv2d(1 → 32, k=5, stride=2, pad=2) + GELU
    Block 1: Conv2d(32 → 64, k=3, stride=1, pad=1) + GELU + AvgPool2d(2)
    Block 2: Conv2d(64 → 128, k=3, stride=1, pad=1) + GELU
    Head:    Linear(128·7·7 → 10)          (for 28×28 inputs)

The paper lists stride 2 for block 1, which would leave 3×3 maps and contradict its
Linear(128·7·7) head; we follow the head (stride 1), so a 28×28 input gives 7×7 maps.
"""

from __future__ import annotations

from torch import nn


def mnist_cnn_blocks(in_channels: int = 1) -> nn.ModuleList:
    return nn.ModuleList([
        nn.Sequential(nn.Conv2d(in_channels, 32, 5, stride=2, padding=2), nn.GELU()),
        nn.Sequential(nn.Conv2d(32, 64, 3, stride=1, padding=1), nn.GELU(), nn.AvgPool2d(2)),
        nn.Sequential(nn.Conv2d(64, 128, 3, stride=1, padding=1), nn.GELU()),
    ])


def mnist_cnn(in_shape: tuple[int, int, int] = (1, 28, 28), num_classes: int = 10) -> nn.Sequential:
    """The whole 3-block CNN with its linear head: a small classifier for digits / MNIST."""
    import torch

    blocks = mnist_cnn_blocks(in_shape[0])
    with torch.no_grad():
        feat = nn.Sequential(*blocks)(torch.zeros(1, *in_shape)).numel()
    return nn.Sequential(*blocks, nn.Flatten(1), nn.Linear(feat, num_classes))
