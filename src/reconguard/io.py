"""Atomic writes: a failed run leaves no half-written result file or folder."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .results import to_jsonable


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path`` (else removed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` (dataclasses, tensors allowed) as indented JSON, atomically."""
    return write_text_atomic(path, json.dumps(to_jsonable(obj), indent=2) + "\n")


def save_torch_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """``torch.save`` atomically; tensors, dicts, lists and numbers only, so it loads with ``weights_only=True``."""
    import torch

    with atomic_file(path) as tmp:
        torch.save(obj, tmp)
    return Path(path)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path`` whole.

    On any exception the temporary folder is removed and ``path`` is left as it was, so a
    failed run never leaves a partial ``runs/<name>/``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if path.exists():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        os.replace(path, old)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
