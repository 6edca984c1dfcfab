"""Training augmentations of the AT-AT paper's appendix A.2, on batches of [0, 1] images, in torch.

``Augment(crop_scale=(0.85, 1.0), brightness=0.2, contrast=0.2, saturation=0.1, flip=True)``: a random
resized crop covering 85–100 % of the area (aspect ratio 1) resized back to the input size, colour
jitter (brightness and contrast factors in [1 − b, 1 + b], saturation for RGB), and a horizontal flip
with probability ½. Hue jitter is left out (it needs an HSV round trip; at the paper's 0.1 it matters
little). Draws from the global torch RNG, which ``fit`` re-seeds every epoch. For digits use
``flip=False`` (a mirrored 2 is not a 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .checks import check_scalar


@dataclass
class Augment:
    crop_scale: tuple[float, float] | None = (0.85, 1.0)
    brightness: float = 0.2
    contrast: float = 0.2
    saturation: float = 0.1
    flip: bool = True

    def __post_init__(self):
        if self.crop_scale is not None:
            lo, hi = self.crop_scale
            check_scalar(lo, "crop_scale[0]", low=0.0, low_open=True, high=1.0)
            check_scalar(hi, "crop_scale[1]", low=lo, high=1.0)
        for name in ("brightness", "contrast", "saturation"):
            check_scalar(getattr(self, name), name, low=0.0, high=1.0)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        n, dev, dt = x.shape[0], x.device, x.dtype
        u = lambda *shape: torch.rand(*shape, dtype=dt).to(dev)  # noqa: E731
        if self.crop_scale is not None:
            lo, hi = self.crop_scale
            side = torch.sqrt(lo + (hi - lo) * u(n))  # side of the crop, as a fraction of the image
            shift = (1 - side)[:, None] * (2 * u(n, 2) - 1)  # keep the crop inside the image
            theta = torch.zeros(n, 2, 3, dtype=dt, device=dev)
            theta[:, 0, 0], theta[:, 1, 1] = side, side
            theta[:, :, 2] = shift
            grid = F.affine_grid(theta, list(x.shape), align_corners=False)
            x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
        if self.brightness:
            x = x * (1 + self.brightness * (2 * u(n, 1, 1, 1) - 1))
        if self.contrast:
            mean = x.mean(dim=(1, 2, 3), keepdim=True)
            x = (x - mean) * (1 + self.contrast * (2 * u(n, 1, 1, 1) - 1)) + mean
        if self.saturation and x.shape[1] == 3:
            gray = (0.299 * x[:, :1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3])
            x = (x - gray) * (1 + self.saturation * (2 * u(n, 1, 1, 1) - 1)) + gray
        if self.flip:
            flip = u(n) < 0.5
            x = torch.where(flip.view(n, 1, 1, 1), x.flip(-1), x)
        return x.clamp(0, 1)
