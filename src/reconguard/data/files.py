"""Loaders for benchmark datasets from a local folder (nothing downloads).

* MNIST: the four IDX files (``train-images-idx3-ubyte`` …, optionally ``.gz``), in the folder
  given or in its ``MNIST/raw`` subfolder (torchvision's layout).
* Fashion-MNIST: the same four IDX files (Zalando's 70,000 28×28 product images, 10 classes); by default from
  Debian's ``dataset-fashion-mnist`` package (``/usr/share/datasets/fashion-mnist``), else the folder given (or
  its ``FashionMNIST/raw`` subfolder).
* CIFAR-10: the python batches (``data_batch_1`` … ``data_batch_5``, ``test_batch``) in the folder
  given or in its ``cifar-10-batches-py`` subfolder, or read straight from the archive as downloaded
  (``cifar-10-python.tar.gz``: the path given, or that name in the folder; nothing is extracted to
  disk). The batches are pickles; they are read with
  an unpickler that only builds dicts, lists, bytes and numpy arrays, so a tampered file cannot
  run code.
"""

from __future__ import annotations

import gzip
import io
import pickle
import struct
import tarfile
import zlib
from pathlib import Path

import numpy as np
import torch

from ..errors import CorruptDataError, DataFileNotFoundError, UnknownOptionError
from .datasets import ImageDataset

MNIST_FORMAT = ("MNIST IDX files: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                "t10k-labels-idx1-ubyte (optionally .gz), from http://yann.lecun.com/exdb/mnist/")
CIFAR_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR_FORMAT = ("CIFAR-10 python batches: data_batch_1 … data_batch_5 and test_batch "
                f"(the 'CIFAR-10 python version' archive {CIFAR_ARCHIVE}, extracted or as downloaded)")


def _check_split(split: str) -> str:
    if split not in ("train", "test"):
        raise UnknownOptionError(f"split must be 'train' or 'test', got {split!r}.")
    return split


def _find(root: Path, names: list[str], subdirs: list[str], what: str, fmt: str) -> Path:
    if not root.is_dir():
        raise DataFileNotFoundError(f"{what}: folder {root} does not exist. Expected {fmt}.")
    searched = [root / s for s in subdirs]
    for folder in searched:
        for name in names:
            if (folder / name).is_file():
                return folder / name
    raise DataFileNotFoundError(
        f"{what}: no file named {' or '.join(names)} in {', '.join(str(s) for s in searched)}. Expected {fmt}."
    )


def _read_idx(path: Path, expect_magic: int, expect_ndim: int) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError) as exc:
        raise CorruptDataError(f"{path}: cannot read ({exc}). Expected {MNIST_FORMAT}.") from exc
    if len(raw) < 4 + 4 * expect_ndim:
        raise CorruptDataError(f"{path}: file too short for an IDX header. Expected {MNIST_FORMAT}.")
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != expect_magic:
        raise CorruptDataError(f"{path}: IDX magic number 0x{magic:08x}, expected 0x{expect_magic:08x}. "
                               f"Expected {MNIST_FORMAT}.")
    dims = struct.unpack(f">{expect_ndim}I", raw[4:4 + 4 * expect_ndim])
    body = raw[4 + 4 * expect_ndim:]
    if len(body) != int(np.prod(dims)):
        raise CorruptDataError(f"{path}: header says {dims} ({int(np.prod(dims))} bytes) but the file holds "
                               f"{len(body)} bytes; the file is truncated or corrupt.")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)


FASHION_ROOT = Path("/usr/share/datasets/fashion-mnist")  # Debian's dataset-fashion-mnist
FASHION_FORMAT = ("Fashion-MNIST IDX files (train-images-idx3-ubyte.gz …): install them with "
                  "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu, as root; they land in "
                  f"{FASHION_ROOT}), or give --root FOLDER holding the four files from "
                  "github.com/zalandoresearch/fashion-mnist")
_IDX_SETS = {  # name → (title, subfolders searched, format the error names)
    "mnist": ("MNIST", [".", "MNIST/raw", "raw"], MNIST_FORMAT),
    "fashion-mnist": ("Fashion-MNIST", [".", "FashionMNIST/raw", "raw"], FASHION_FORMAT),
}


def load_idx_set(name: str, root: str | Path, split: str = "train") -> ImageDataset:
    """An MNIST-format data set (``mnist`` or ``fashion-mnist``) from local IDX files as ``N×1×28×28`` float32 in
    [0, 1] (pixels / 255)."""
    title, subdirs, fmt = _IDX_SETS[name]
    root, prefix = Path(root), {"train": "train", "test": "t10k"}[_check_split(split)]
    img_path = _find(root, [f"{prefix}-images-idx3-ubyte", f"{prefix}-images.idx3-ubyte",
                            f"{prefix}-images-idx3-ubyte.gz"], subdirs, f"{title} {split} images", fmt)
    lab_path = _find(root, [f"{prefix}-labels-idx1-ubyte", f"{prefix}-labels.idx1-ubyte",
                            f"{prefix}-labels-idx1-ubyte.gz"], subdirs, f"{title} {split} labels", fmt)
    images = _read_idx(img_path, 0x00000803, 3)
    labels = _read_idx(lab_path, 0x00000801, 1)
    if images.shape[0] != labels.shape[0]:
        raise CorruptDataError(f"{img_path} holds {images.shape[0]} images but {lab_path} {labels.shape[0]} labels.")
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return ImageDataset(x, torch.from_numpy(labels.astype(np.int64)), name=f"{name}-{split}")


def load_mnist(root: str | Path, split: str = "train") -> ImageDataset:
    """MNIST from local IDX files as ``N×1×28×28`` float32 in [0, 1] (pixels / 255)."""
    return load_idx_set("mnist", root, split)


def load_fashion_mnist(root: str | Path | None = None, split: str = "train") -> ImageDataset:
    """Fashion-MNIST (60,000 training / 10,000 test 28×28 images of 10 product classes) from ``root``, by default
    Debian's ``dataset-fashion-mnist`` folder; a missing install is one error that says how to get it."""
    return load_idx_set("fashion-mnist", FASHION_ROOT if root is None else root, split)


class _SafeUnpickler(pickle.Unpickler):
    """Builds only what a CIFAR-10 batch holds: dicts, lists, bytes, strings and numpy arrays."""

    _allowed = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"), ("builtins", "bytearray"),
    }

    def find_class(self, module, name):
        if (module, name) in self._allowed:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} (not part of a CIFAR-10 batch)")


def _parse_cifar_batch(raw: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = _SafeUnpickler(io.BytesIO(raw), encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        labels = np.asarray(batch.get(b"labels", batch.get(b"fine_labels")), dtype=np.int64)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptDataError(f"{where}: not a CIFAR-10 python batch ({exc}). Expected {CIFAR_FORMAT}.") from exc
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or data.shape[0] != labels.shape[0]:
        raise CorruptDataError(f"{where}: data of shape {data.shape} with {labels.shape[0]} labels; "
                               f"expected N×3072 uint8 and N labels.")
    return data, labels


def _read_cifar_archive(archive: Path, names: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The batches ``names`` read from the downloaded archive's members (matched by file name), never extracted."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            missing = [n for n in names if n not in members]
            if missing:
                raise CorruptDataError(f"{archive}: the archive holds no {', '.join(missing)}. Expected {CIFAR_FORMAT}.")
            return [_parse_cifar_batch(tar.extractfile(members[n]).read(), f"{archive}:{members[n].name}") for n in names]
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:  # gzip's errors are OSErrors
        why = "not a tar archive, plain or compressed" if isinstance(exc, tarfile.ReadError) else f"{exc}".splitlines()[0]
        raise CorruptDataError(f"{archive}: not a readable CIFAR-10 archive ({why}). Expected {CIFAR_FORMAT}.") from exc


def load_cifar10(root: str | Path, split: str = "train") -> ImageDataset:
    """CIFAR-10 from local python batches (a folder, or the downloaded archive) as ``N×3×32×32`` float32 in [0, 1]
    (pixels / 255)."""
    root = Path(root)
    names = [f"data_batch_{i}" for i in range(1, 6)] if _check_split(split) == "train" else ["test_batch"]
    subdirs = [".", "cifar-10-batches-py"]
    archive = root if root.is_file() else root / CIFAR_ARCHIVE
    extracted = root.is_dir() and any((root / d / names[0]).is_file() for d in subdirs)
    if archive.is_file() and not extracted:
        parts = _read_cifar_archive(archive, names)
    else:
        paths = [_find(root, [n], subdirs, f"CIFAR-10 {split} batch {n}", CIFAR_FORMAT) for n in names]
        parts = [_parse_cifar_batch(path.read_bytes(), str(path)) for path in paths]
    data = np.concatenate([p[0] for p in parts]).reshape(-1, 3, 32, 32)
    labels = np.concatenate([p[1] for p in parts])
    x = torch.from_numpy(data.astype(np.float32) / 255.0)
    return ImageDataset(x, torch.from_numpy(labels), name=f"cifar10-{split}")


NAMED = ("digits", "sample-photos", "mnist", "fashion-mnist", "cifar10")
PHOTO_COUNT = 1000  # ``sample-photos``: crops of scikit-image's photographs (no labels), the offline natural images


def auto_public(public, channels: int):
    """The attacker's own images for ``--public auto``: ``sample-photos`` for an RGB (3-channel) release, ``digits`` for a
    grey one; any other value is returned as given. Digits resized and coloured are a weak prior for natural images
    (the sign step learns what the private images look like from them)."""
    if isinstance(public, str) and public == "auto":
        return "sample-photos" if channels == 3 else "digits"
    return public


def load_named(name: str, size: int | None = None, root: str | Path | None = None,
               split: str = "train") -> ImageDataset:
    """A labelled data set by name: ``digits`` (ships with scikit-learn, resized to ``size``), ``sample-photos``
    (``PHOTO_COUNT`` RGB crops of scikit-image's photographs of ``PHOTO_SPLITS["b"]``, unlabelled), ``fashion-mnist``
    (Debian's package, or ``root``), or ``mnist`` / ``cifar10`` from the local folder ``root``."""
    from ..errors import ParameterError
    from .digits import load_digits

    if name == "digits":
        return load_digits(size)
    if name == "sample-photos":  # not "photos": a name users give their own folders
        from .datasets import ImageDataset
        from .photos import PHOTO_SPLITS, photo_crops

        return ImageDataset(photo_crops(PHOTO_COUNT, size or 32, 3, photos=PHOTO_SPLITS["b"]), name="sample-photos")
    if name not in NAMED:
        raise ParameterError(f"unknown data set {name!r}; choose one of {NAMED}.")
    if name == "fashion-mnist":
        return load_fashion_mnist(root, split)
    if root is None:
        raise ParameterError(f"data {name} needs a root folder (--root / --public-root) holding its files.")
    return (load_mnist if name == "mnist" else load_cifar10)(root, split)
