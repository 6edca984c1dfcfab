"""Demasking (InstaHide paper, section 5.3, "Demask using GAN"): the attacker sees |x̃| but not the
signs. It makes its own mixes z (of images it has), and trains a network on (|z|, sign z) to predict
signs; applied to an encryption, ``|x̃| · predicted sign`` estimates the unmasked mix. The paper's GAN
recovered about half of the flipped signs. Here a small convolutional classifier per pixel (binary
cross-entropy) stands in for the colourisation GAN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ...checks import check_positive_int
from ...errors import ShapeError
from ...nn.init import seeded
from ..base import Attack
from ...results import Result


class _SignNet(nn.Module):
    def __init__(self, channels: int, width: int = 32, depth: int = 4):
        super().__init__()
        layers, c = [], channels
        for _ in range(depth):
            layers += [nn.Conv2d(c, width, 3, padding=1), nn.GELU()]
            c = width
        layers.append(nn.Conv2d(c, channels, 3, padding=1))
        self.net = nn.Sequential(*layers)

    def forward(self, a):
        return self.net(a)  # logits of "sign is +"


@dataclass(frozen=True)
class DemaskResult(Result):
    demasked: torch.Tensor
    sign_accuracy: float | None = None         # fraction of pixels whose sign is right
    flipped_recovered: float | None = None     # of the pixels the mask flipped, the fraction set right
    history: list = field(default_factory=list)
    _skip_in_dict = ("demasked",)


class Demasker(Attack):
    """``fit(mixes)`` on the attacker's own unmasked mixes, then ``run(encryptions, truth=None)``."""

    name = "demask"

    def __init__(self, channels: int, width: int = 32, depth: int = 4, epochs: int = 10, lr: float = 2e-3,
                 batch_size: int = 128, seed: int = 0):
        super().__init__(None)
        with seeded(seed):
            self.net = _SignNet(channels, width, depth)
        self.epochs, self.lr, self.batch_size, self.seed = check_positive_int(epochs, "epochs"), lr, batch_size, seed

    def fit(self, mixes: torch.Tensor) -> list:
        z = torch.as_tensor(mixes, dtype=torch.float32)
        if z.ndim != 4:
            raise ShapeError(f"mixes must be N×C×H×W, got {tuple(z.shape)}.")
        g = torch.Generator().manual_seed(self.seed)
        opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        history = []
        for _ in range(self.epochs):
            total = 0.0
            for idx in torch.randperm(z.shape[0], generator=g).split(self.batch_size):
                zb = z[idx]
                loss = nn.functional.binary_cross_entropy_with_logits(self.net(zb.abs()), (zb > 0).float())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * zb.shape[0]
            history.append(total / z.shape[0])
        self.net.eval()
        return history

    def run(self, encryptions: torch.Tensor, truth: torch.Tensor | None = None,
            mask: torch.Tensor | None = None) -> DemaskResult:
        """``truth``: the unmasked mixes (for scoring); ``mask``: the ±1 masks (to score the flipped pixels)."""
        e = torch.as_tensor(encryptions, dtype=torch.float32)
        with torch.no_grad():
            sign = torch.where(self.net(e.abs()) > 0, 1.0, -1.0)
        demasked = e.abs() * sign
        acc = flipped = None
        if truth is not None:
            t = torch.as_tensor(truth, dtype=torch.float32)
            right = (torch.sign(t) == sign) | (t == 0)
            acc = float(right.float().mean())
            if mask is not None:
                was_flipped = torch.as_tensor(mask) < 0
                flipped = float(right[was_flipped].float().mean())
        return DemaskResult(demasked, acc, flipped)
