"""Image folders read lazily (FaceScrub / CelebA / Stanford Dogs at paper scale): ``root/<class>/<image>``.

Each image is read with scikit-image when it is asked for, converted to RGB (or kept grey with
``channels=1``), resized to ``size × size`` and returned as float32 in [0, 1] with its class index
(classes sorted by folder name). Nothing is downloaded: point it at a folder you have.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..checks import check_positive_int
from ..errors import DataFileNotFoundError

EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")


class ImageFolder(Dataset):
    def __init__(self, root: str | Path, size: int = 224, channels: int = 3, files=None, labels=None, classes=None):
        self.root, self.size, self.channels = Path(root), check_positive_int(size, "size"), channels
        if files is None:
            if not self.root.is_dir():
                raise DataFileNotFoundError(f"image folder {self.root} does not exist (expected root/<class>/<image>).")
            classes = sorted(d.name for d in self.root.iterdir() if d.is_dir())
            files, labels = [], []
            for i, c in enumerate(classes):
                for f in sorted((self.root / c).iterdir()):
                    if f.suffix.lower() in EXTENSIONS:
                        files.append(f)
                        labels.append(i)
            if not files:
                raise DataFileNotFoundError(f"no images ({', '.join(EXTENSIONS)}) found in class folders under {self.root}.")
        self.files, self.classes = list(files), list(classes)
        self.labels = torch.as_tensor(labels, dtype=torch.int64)
        self.name = self.root.name

    def __len__(self) -> int:
        return len(self.files)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.channels, self.size, self.size)

    def __getitem__(self, i):
        from skimage import transform
        from skimage.color import gray2rgb, rgb2gray

        from .imagefile import read_image

        img = read_image(self.files[i])  # 8-bit RGB or greyscale, whatever the file's mode
        if self.channels == 3 and img.ndim == 2:
            img = gray2rgb(img)
        if self.channels == 1 and img.ndim == 3:
            img = rgb2gray(img)
        img = transform.resize(img, (self.size, self.size), anti_aliasing=True, preserve_range=False)
        arr = np.asarray(img, dtype=np.float32)
        arr = arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)
        return torch.from_numpy(np.clip(arr, 0, 1).copy()), self.labels[i]

    def subset(self, idx) -> "ImageFolder":
        idx = [int(i) for i in idx]
        return ImageFolder(self.root, self.size, self.channels, [self.files[i] for i in idx],
                           self.labels[idx].tolist(), self.classes)

    @property
    def images(self) -> torch.Tensor:
        """All images stacked (reads every file: only for small folders)."""
        return torch.stack([self[i][0] for i in range(len(self))])
