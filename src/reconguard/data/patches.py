"""The public pool for cross-dataset InstaHide (InstaHide paper, section 3.2 and "Best practice"):
random patches cut from a folder of public images, keeping only those with more than 40 SIFT
keypoints (OpenCV), stored so that training draws from them without loading them all.

``prepare_public(out, folder=None)`` cuts ``crop×crop`` patches (keypoints are counted there, at a
size where SIFT finds structure), resizes them to the private images' size and writes
``patches.npy`` (``N×C×H×W`` uint8) with ``meta.json``; ``PatchStore(out)`` memory-maps it.
With no folder, the natural images that ship inside scikit-image are used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import CorruptDataError, DataFileNotFoundError, ParameterError
from ..progress import progress as progress_bar

_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}
SKIMAGE_SAMPLES = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field",
                   "coins", "camera", "page", "text", "grass", "gravel", "brick", "colorwheel", "moon")


def _read_images(folder: Path | None):
    if folder is None:
        import skimage.data as sd
        for name in SKIMAGE_SAMPLES:
            try:
                img = getattr(sd, name)()
            except Exception:  # noqa: BLE001 — a sample missing from this scikit-image version is skipped
                continue
            yield name, np.asarray(img)
        return
    files = sorted(p for p in Path(folder).rglob("*") if p.suffix.lower() in _EXTENSIONS)
    if not files:
        raise DataFileNotFoundError(f"no images ({', '.join(sorted(_EXTENSIONS))}) found under {folder}.")
    from .imagefile import read_image

    for f in files:
        yield f.name, read_image(f)  # 8-bit RGB or greyscale, whatever the file's mode


def prepare_public(out: str | Path, folder: str | Path | None = None, *, size: int = 32, channels: int = 3,
                   crop: int = 96, patches_per_image: int = 200, min_keypoints: int = 40, seed: int = 0,
                   progress: bool = False) -> "PatchStore":
    """Cut, filter (SIFT keypoints > ``min_keypoints``) and store public patches; returns the store."""
    import cv2

    if folder is not None and not Path(folder).is_dir():
        raise DataFileNotFoundError(f"public image folder {folder} does not exist.")
    if channels not in (1, 3):
        raise ParameterError(f"channels must be 1 or 3, got {channels}.")
    rng = np.random.default_rng(seed)
    sift = cv2.SIFT_create()
    kept, seen = [], 0
    images = list(_read_images(Path(folder) if folder is not None else None))
    for name, img in progress_bar(images, "public patches", enabled=progress):
        if img.dtype != np.uint8:
            img = np.clip(img.astype(np.float64) / max(float(img.max()), 1e-9) * 255, 0, 255).astype(np.uint8)
        gray = img if img.ndim == 2 else cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
        h, w = gray.shape
        c = min(crop, h, w)
        for _ in range(patches_per_image):
            top, left = int(rng.integers(0, h - c + 1)), int(rng.integers(0, w - c + 1))
            seen += 1
            if len(sift.detect(gray[top:top + c, left:left + c], None)) <= min_keypoints:
                continue
            patch = img[top:top + c, left:left + c]
            if channels == 1:
                patch = patch if patch.ndim == 2 else cv2.cvtColor(patch, cv2.COLOR_RGB2GRAY)
                patch = cv2.resize(patch, (size, size), interpolation=cv2.INTER_AREA)[None]
            else:
                patch = np.repeat(patch[..., None], 3, 2) if patch.ndim == 2 else patch
                patch = cv2.resize(patch, (size, size), interpolation=cv2.INTER_AREA).transpose(2, 0, 1)
            kept.append(patch)
    if not kept:
        raise ParameterError(f"no patch had more than {min_keypoints} SIFT keypoints ({seen} tried); use larger "
                             "crops, more textured images or a lower min_keypoints.")
    from ..io import atomic_file, write_json_atomic

    out = Path(out)
    arr = np.stack(kept).astype(np.uint8)
    with atomic_file(out / "patches.npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, arr)
    write_json_atomic(out / "meta.json", {"n": int(arr.shape[0]), "shape": list(arr.shape[1:]), "seen": seen,
                                               "min_keypoints": min_keypoints, "crop": crop,
                                          "source": str(folder) if folder else "scikit-image samples"})
    return PatchStore(out)


class PatchStore:
    """A memory-mapped pool of public patches: ``len(store)``, ``store.get(indices) -> float N×C×H×W in [0, 1]``."""

    def __init__(self, folder: str | Path):
        path = Path(folder) / "patches.npy"
        if not path.is_file():
            raise DataFileNotFoundError(f"no patches.npy in {folder}; make one with "
                                        "`reconguard instahide prepare-public`.")
        self.array = np.load(path, mmap_mode="r")
        if self.array.ndim != 4 or self.array.dtype != np.uint8:
            raise CorruptDataError(f"{path}: expected an N×C×H×W uint8 array, got {self.array.shape} {self.array.dtype}.")
        self.folder = Path(folder)

    def __len__(self) -> int:
        return int(self.array.shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.array.shape[1:])

    def get(self, idx) -> torch.Tensor:
        idx = np.asarray(torch.as_tensor(idx).reshape(-1).numpy())
        order = np.argsort(idx)  # sorted reads are kinder to the memory map
        out = np.empty((len(idx), *self.shape), dtype=np.uint8)
        out[order] = self.array[idx[order]]
        return torch.from_numpy(out).float() / 255.0
