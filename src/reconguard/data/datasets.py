"""The in-memory image dataset every loader returns."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from ..checks import check_images
from ..errors import ShapeError


class ImageDataset(Dataset):
    """Images (float32 ``N×C×H×W`` in [0, 1]) with integer labels.

    A plain ``torch.utils.data.Dataset``: ``ds[i]`` is ``(image, label)``. ``.images`` and
    ``.labels`` are the whole tensors; ``.flat`` is ``N×d`` with ``d = C·H·W``.
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor | None = None, name: str = "images"):
        images = check_images(torch.as_tensor(images, dtype=torch.float32), name)
        if labels is None:
            labels = torch.full((images.shape[0],), -1, dtype=torch.int64)
        labels = torch.as_tensor(labels, dtype=torch.int64)
        if labels.shape != (images.shape[0],):
            raise ShapeError(f"{name}: {images.shape[0]} images but labels of shape {tuple(labels.shape)}.")
        self.images, self.labels, self.name = images, labels, name

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, i):
        return self.images[i], self.labels[i]

    @property
    def shape(self) -> tuple[int, int, int]:
        """Per-image shape ``(C, H, W)``."""
        return tuple(self.images.shape[1:])  # type: ignore[return-value]

    @property
    def dim(self) -> int:
        """Input dimension d = C·H·W."""
        return int(self.images[0].numel())

    @property
    def flat(self) -> torch.Tensor:
        return self.images.reshape(len(self), -1)

    def subset(self, idx) -> "ImageDataset":
        return ImageDataset(self.images[idx], self.labels[idx], self.name)

    def __repr__(self) -> str:
        return f"ImageDataset({self.name!r}, n={len(self)}, shape={self.shape})"


def resize_images(images: torch.Tensor, size: int | None = None, channels: int | None = None) -> torch.Tensor:
    """``N×C×H×W`` images resized to ``size×size`` (bilinear, antialiased, kept in [0, 1]) and converted to
    ``channels`` (grey → RGB by repetition, RGB → grey by the mean), each only where it differs."""
    import torch.nn.functional as F

    if size is not None and tuple(images.shape[-2:]) != (size, size):
        images = F.interpolate(images, size=(size, size), mode="bilinear", antialias=True,
                               align_corners=False).clamp(0, 1)
    if channels is not None and images.shape[1] != channels:
        images = images.mean(1, keepdim=True) if channels == 1 else images[:, :1].expand(-1, channels, -1, -1)
    return images.contiguous()
