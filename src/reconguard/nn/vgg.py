"""The VGG-16 convolutional trunk with torchvision's parameter names (``features.{i}.weight``),
made twice-differentiable for the LPIPS Ψ-bound (spectral-bounds paper, section 6.1): ReLU → GELU,
MaxPool → AvgPool. ``tap_indices`` are the layers LPIPS reads (relu1_2, relu2_2, relu3_3, relu4_3,
relu5_3 in torchvision's numbering).
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from .resnet import load_state_dict_file
from ..errors import CorruptDataError

_CFG = [64, 64, "P", 128, 128, "P", 256, 256, 256, "P", 512, 512, 512, "P", 512, 512, 512]
TAPS = (3, 8, 15, 22, 29)  # outputs after these indices of `features`
CHANNELS = (64, 128, 256, 512, 512)


class VGG16Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for v in _CFG:
            if v == "P":
                layers.append(nn.AvgPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.GELU()]
                c = v
        self.features = nn.Sequential(*layers)

    def forward(self, x) -> list:
        """The five tapped feature maps."""
        out = []
        for i, layer in enumerate(self.features):
            x = layer(x)
            if i in TAPS:
                out.append(x)
        return out

    def load_torchvision(self, path: str | Path) -> None:
        """Load ``features.*`` from a torchvision VGG-16 state dict (the classifier is ignored)."""
        state = {k: v for k, v in load_state_dict_file(path).items() if k.startswith("features.")}
        own = self.state_dict()
        missing = [k for k in own if k not in state]
        bad = [k for k in state if k in own and state[k].shape != own[k].shape]
        if missing or bad or any(k not in own for k in state):
            raise CorruptDataError(f"{path}: not a torchvision VGG-16 state dict (missing {missing[:3]}, "
                                   f"mis-shaped {bad[:3]}).")
        self.load_state_dict(state)
