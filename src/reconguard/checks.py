"""Input checks shared by every room: turn user input into tensors or fail with a clear error."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .errors import NonFiniteError, ParameterError, PixelRangeError, ShapeError


def as_tensor(x: Any, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Convert arrays / lists / tensors to a tensor; reject non-numeric input with a clear error."""
    if isinstance(x, (list, tuple)) and x and all(hasattr(v, "shape") for v in x):
        shapes = {tuple(v.shape) for v in x}
        if len(shapes) > 1:
            raise ShapeError(f"{name} have mixed sizes {sorted(shapes)[:3]}…; resize or crop them to one size first.")
        x = torch.stack([torch.as_tensor(np.asarray(v)) for v in x])
    if isinstance(x, torch.Tensor):
        t = x
    elif isinstance(x, np.ndarray) or isinstance(x, (list, tuple, float, int)):
        t = torch.as_tensor(np.asarray(x))
    else:
        raise ShapeError(f"{name} must be a tensor or array, got {type(x).__name__}.")
    if not (t.is_floating_point() or t.dtype in (torch.uint8, torch.int32, torch.int64)):
        raise ShapeError(f"{name} must hold numbers, got dtype {t.dtype}.")
    if dtype is not None:
        t = t.to(dtype)
    elif not t.is_floating_point():
        t = t.to(torch.float32)
    return t


def check_finite(t: torch.Tensor, name: str) -> torch.Tensor:
    """Raise NonFiniteError naming how many NaN / Inf entries ``t`` holds."""
    # one cheap reduction first: the sum is non-finite whenever an entry is (a finite overflow only
    # costs the exact check below)
    if t.is_floating_point() and t.numel() and not bool(torch.isfinite(t.sum())) and not bool(torch.isfinite(t).all()):
        n_nan = int(torch.isnan(t).sum())
        n_inf = int(torch.isinf(t).sum())
        raise NonFiniteError(
            f"{name} holds {n_nan} NaN and {n_inf} Inf values; clean or drop those samples first."
        )
    return t


def as_samples(data: Any, name: str = "data") -> torch.Tensor:
    """Return a finite float tensor of samples, ``N×d`` or ``N×C×H×W``.

    Accepts a tensor / array, or any dataset exposing ``.images`` (reconguard's datasets)
    or ``.tensors[0]`` (``torch.utils.data.TensorDataset``).
    """
    if hasattr(data, "images"):
        data = data.images
    elif hasattr(data, "tensors"):
        data = data.tensors[0]
    t = as_tensor(data, name)
    if t.ndim not in (2, 4):
        raise ShapeError(
            f"{name} must be N×d (flat vectors) or N×C×H×W (images); got shape {tuple(t.shape)}."
        )
    if t.shape[0] == 0:
        raise ShapeError(f"{name} is empty (shape {tuple(t.shape)}).")
    return check_finite(t, name)


def check_images(x: torch.Tensor, name: str = "images", tol: float = 1e-6) -> torch.Tensor:
    """Images are float N×C×H×W in [0, 1]; say how to convert when they are not."""
    if x.ndim != 4:
        raise ShapeError(f"{name} must be N×C×H×W, got shape {tuple(x.shape)}.")
    check_finite(x, name)
    lo, hi = (float(v) for v in torch.aminmax(x)) if x.numel() else (0.0, 0.0)
    if lo < -tol or hi > 1 + tol:
        hint = " (uint8 0..255? divide by 255)" if hi > 1.5 else ""
        raise PixelRangeError(f"{name} must lie in [0, 1]; found range [{lo:.3g}, {hi:.3g}]{hint}.")
    return x


def check_scalar(
    value: Any, name: str, *, low: float | None = None, high: float | None = None,
    low_open: bool = False, high_open: bool = False,
) -> float:
    """A finite float within [low, high] (open ends where asked)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(v):
        raise ParameterError(f"{name} must be finite, got {v}.")
    if low is not None and (v < low or (low_open and v == low)):
        raise ParameterError(f"{name} must be {'>' if low_open else '>='} {low}, got {v}.")
    if high is not None and (v > high or (high_open and v == high)):
        raise ParameterError(f"{name} must be {'<' if high_open else '<='} {high}, got {v}.")
    return v


def _int_at_least(value: Any, name: str, low: int, what: str) -> int:
    """``value`` as an int when it is an integer (not a bool) ≥ ``low``; else the error "``name`` must be ``what``"."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ParameterError(f"{name} must be {what}, got {value!r}.")
    return int(value)


def check_int_at_least(value: Any, name: str, low: int, hint: str = "") -> int:
    """An integer (not a bool) ≥ ``low``; ``hint`` (what it is, its default) goes into the error."""
    return _int_at_least(value, name, low, f"an integer ≥ {low}{f' ({hint})' if hint else ''}")


def check_positive_int(value: Any, name: str) -> int:
    return _int_at_least(value, name, 1, "a positive integer")


def check_nonnegative_int(value: Any, name: str) -> int:
    return _int_at_least(value, name, 0, "a non-negative integer")


def check_sigma(sigma: Any) -> float:
    """Encoder noise standard deviation: sigma >= 0."""
    return check_scalar(sigma, "sigma (encoder noise std)", low=0.0)


def check_tau(tau: Any) -> float:
    """Null-space threshold, relative to the largest eigenvalue: tau in [0, 1)."""
    return check_scalar(tau, "tau (null-space threshold)", low=0.0, high=1.0, high_open=True)


def as_square_matrix(S: Any, d: int, name: str = "S") -> torch.Tensor:
    """A finite, symmetric d×d float64 matrix."""
    S = check_finite(as_tensor(getattr(S, "matrix", S), name, dtype=torch.float64), name)
    if S.ndim != 2 or S.shape != (d, d):
        raise ShapeError(f"{name} must be a {d}×{d} matrix to match the input dimension d={d}; "
                         f"got shape {tuple(S.shape)}.")
    asym = float((S - S.T).abs().max())
    scale = float(S.abs().max()) or 1.0
    if asym > 1e-8 * scale:
        raise ShapeError(f"{name} must be symmetric (max |S - Sᵀ| = {asym:.3g}).")
    return (S + S.T) / 2


def load_array(path, name: str, *, ndim: tuple[int, ...] | None = None, finite: bool = True):
    """A ``.npy`` file as a tensor, or a clear error: missing, unreadable, wrong number of dimensions, NaN/Inf."""
    from pathlib import Path

    from .errors import CorruptDataError, DataFileNotFoundError

    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"{name}: {path} does not exist.")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptDataError(f"{name}: {path} is not a readable .npy array ({exc}).") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiub":
        raise CorruptDataError(f"{name}: {path} must hold a numeric array, got {getattr(arr, 'dtype', type(arr))}.")
    t = torch.from_numpy(np.ascontiguousarray(arr))
    if ndim is not None and t.ndim not in ndim:
        raise ShapeError(f"{name}: {path} has shape {tuple(t.shape)}; expected {' or '.join(f'{n}-D' for n in ndim)}.")
    if finite and t.is_floating_point():
        check_finite(t, f"{name} ({path})")
    return t


def channels_first(x: torch.Tensor) -> torch.Tensor:
    """N×H×W×C, as image libraries write arrays (C ∈ {1, 3} last and not second), as N×C×H×W; else ``x`` as it is."""
    if x.ndim == 4 and x.shape[1] not in (1, 3) and x.shape[-1] in (1, 3):
        return x.permute(0, 3, 1, 2).contiguous()
    return x


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable``; 8 GiB when it cannot be read)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 8 << 30


def check_fits(n_bytes: float, what: str, fix: str) -> None:
    """Refuse work whose arrays cannot fit in the memory available, before any of it is allocated."""
    have = available_memory()
    if n_bytes > have:
        raise ParameterError(f"{what} needs about {n_bytes / 2**30:.3g} GiB but {have / 2**30:.3g} GiB are available; "
                             f"{fix}.")
