"""SSIM between images in [0, 1] (scikit-image's structural_similarity), per pair."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import ShapeError


def ssim(a, b, image_shape: tuple[int, int, int] | None = None) -> torch.Tensor:
    """SSIM of each pair ``a[i]``, ``b[i]`` (``N×C×H×W`` or flat with ``image_shape``), data range 1."""
    from skimage.metrics import structural_similarity

    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    if image_shape is not None:
        a, b = a.reshape(-1, *image_shape), b.reshape(-1, *image_shape)
    if a.shape != b.shape or a.ndim != 4:
        raise ShapeError(f"ssim needs two N×C×H×W batches of one shape, got {tuple(a.shape)} and {tuple(b.shape)}.")
    side = min(a.shape[2], a.shape[3])
    win = min(7, side if side % 2 else side - 1)
    out = [structural_similarity(np.moveaxis(x.numpy(), 0, -1), np.moveaxis(y.numpy(), 0, -1), data_range=1.0,
                                 channel_axis=-1, win_size=win) for x, y in zip(a, b)]
    return torch.tensor(out, dtype=torch.float64)
