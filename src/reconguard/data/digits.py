"""scikit-learn's handwritten digits: 1,797 real 8×8 images that ship with scikit-learn (no download)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..checks import check_positive_int
from .datasets import ImageDataset


def load_digits(size: int | None = None) -> ImageDataset:
    """Digits as ``1797×1×H×W`` float32 in [0, 1] with labels 0–9.

    The raw pixels are 0..16 and are divided by 16. ``size`` resizes bilinearly (e.g. 28 for
    the MNIST-shaped encoders of the spectral-bounds paper); ``None`` keeps 8×8 (d = 64).
    """
    from sklearn.datasets import load_digits as _sk_load_digits

    bunch = _sk_load_digits()
    images = torch.as_tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    if size is not None:
        size = check_positive_int(size, "size")
        if size != 8:
            images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
            images = images.clamp(0.0, 1.0)
    labels = torch.as_tensor(bunch.target, dtype=torch.int64)
    return ImageDataset(images, labels, name=f"digits{size or 8}")
