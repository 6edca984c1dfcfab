"""LPIPS as a feature map Ψ, so that ``LPIPS(x₀, x₁) = ‖Ψ(x₀) − Ψ(x₁)‖²`` (spectral-bounds paper,
section 4; Zhang et al. 2018, VGG variant):

    Ψ(x) = concat_l  √w_l ⊙ f̂_l(x) / √(H_l W_l),     f̂_l = f_l / √(ε + ‖f_l‖²_channels)

with f_l the VGG-16 trunk's five tapped layers on ``(2x − 1 − shift)/scale`` and w_l the linear
heads shipped with torchmetrics (``lpips_models/vgg.pth``). The trunk is twice-differentiable
(GELU, AvgPool). Its weights come from a local torchvision VGG-16 file; without one the trunk is
random and ``trunk_weights`` says ``"random"`` — every output that uses it should say so.
Grayscale images are repeated over 3 channels; images smaller than ``min_size`` are first
upsampled bilinearly (a fixed linear map, part of Ψ).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import DataFileNotFoundError
from ..nn.init import seeded
from ..nn.vgg import CHANNELS, VGG16Trunk

_SHIFT = (-0.030, -0.088, -0.188)
_SCALE = (0.458, 0.448, 0.450)


HEADS_PACKAGE, HEADS_FILE = "torchmetrics.functional.image", "lpips_models/vgg.pth"


def lpips_heads_path(heads: str | Path | None = None) -> Path:
    """The LPIPS (VGG) linear heads: ``heads`` when given, else the file torchmetrics ships as package data,
    found through ``importlib.resources`` (the supported route to a package's data files)."""
    if heads is not None:
        path = Path(heads)
        where = "the heads= path given"
    else:
        from importlib import resources

        try:
            path = Path(str(resources.files(HEADS_PACKAGE).joinpath(HEADS_FILE)))
        except ModuleNotFoundError:
            path = Path(HEADS_PACKAGE.replace(".", "/")) / HEADS_FILE
        where = f"the package data of {HEADS_PACKAGE}"
    if not path.is_file():
        raise DataFileNotFoundError(
            f"LPIPS linear heads {HEADS_FILE!r} not found at {path} ({where}). Install torchmetrics >= 1.0 "
            "(it ships the file), or pass heads='path/to/vgg.pth' (the LPIPS v0.1 VGG linear layers).")
    return path


class LPIPS(nn.Module):
    """``features(x)`` is Ψ (``N×k``); ``forward(x0, x1)`` the LPIPS distance per pair. Inputs in [0, 1]."""

    def __init__(self, trunk_weights: str | Path | None = None, min_size: int = 32, seed: int = 0,
                 heads: str | Path | None = None):
        super().__init__()
        with seeded(seed):
            self.trunk = VGG16Trunk()
        self.trunk_weights = "random"
        if trunk_weights is not None:
            self.trunk.load_torchvision(trunk_weights)
            self.trunk_weights = str(trunk_weights)
        heads = torch.load(lpips_heads_path(heads), map_location="cpu", weights_only=True)
        for i, c in enumerate(CHANNELS):
            w = heads[f"lin{i}.model.1.weight"].reshape(c)
            self.register_buffer(f"sqrt_w{i}", w.clamp_min(0).sqrt())
        self.register_buffer("shift", torch.tensor(_SHIFT).reshape(1, 3, 1, 1))
        self.register_buffer("scale", torch.tensor(_SCALE).reshape(1, 3, 1, 1))
        self.min_size = int(min_size)
        for p in self.parameters():
            p.requires_grad_(False)
        self.eval()

    def features(self, x: torch.Tensor, image_shape: tuple[int, int, int] | None = None) -> torch.Tensor:
        if x.ndim == 2:
            x = x.reshape(x.shape[0], *image_shape)
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if min(x.shape[2:]) < self.min_size:
            x = F.interpolate(x, size=(self.min_size, self.min_size), mode="bilinear", align_corners=False)
        x = ((2 * x - 1) - self.shift) / self.scale
        out = []
        for i, f in enumerate(self.trunk(x)):
            f = f / torch.sqrt(1e-8 + (f * f).sum(1, keepdim=True))
            f = f * getattr(self, f"sqrt_w{i}").reshape(1, -1, 1, 1) / (f.shape[2] * f.shape[3]) ** 0.5
            out.append(f.flatten(1))
        return torch.cat(out, 1)

    def forward(self, x0: torch.Tensor, x1: torch.Tensor) -> torch.Tensor:
        return ((self.features(x0) - self.features(x1)) ** 2).sum(1)

    def psi(self, image_shape: tuple[int, int, int]):
        """Ψ as a function of flat ``N×d`` inputs (for the Ψ-bounds)."""
        return lambda v: self.features(v, image_shape)
