"""Which representation of E[G] fits: ``dense`` (d×d matrices) or ``lowrank`` (the Gram of its k·m Jacobian
rows, :mod:`reconguard.bounds.lowrank`), chosen by size against the memory available, and whether the rows
should stream through a file."""

from __future__ import annotations

from ..checks import available_memory
from ..errors import ParameterError, UnknownOptionError

DENSE_MATRICES = 24  # E[G], its eigenvectors, 10 jackknife blocks, up to 10 held-out blocks, S and its blocks' peak

PATHS = ("auto", "dense", "lowrank")


def choose_path(d: int, n_rows: int, path: str = "auto", memory: int | None = None,
                max_dense_d: int | None = None) -> str:
    """``dense`` (E[G] and S as d×d matrices, with their jackknife and held-out blocks: about 24·d² float64) when that
    fits in half the memory available (and, with ``max_dense_d``, d is at most that: the d×d eigendecompositions
    cost ~240·d³ flops, minutes on 2 cores beyond d ≈ 2,000), else ``lowrank`` (:mod:`reconguard.bounds.lowrank`:
    B is n×d, n = k·m); either is refused when even it cannot fit."""
    if path not in PATHS:
        raise UnknownOptionError(f"path must be one of {PATHS}, got {path!r}.")
    have = available_memory() if memory is None else memory
    # low-rank: the n×n Grams (K, B S⁻¹Bᵀ, B S⁻²Bᵀ and a solve) in memory; B itself (n×d) too unless it
    # streams through a file (stream_rows)
    dense_bytes, low_bytes = 8.0 * DENSE_MATRICES * d * d, 8.0 * 5 * n_rows * n_rows
    if path == "auto":
        path = "dense" if dense_bytes <= have / 2 and (max_dense_d is None or d <= max_dense_d) else "lowrank"
    need = dense_bytes if path == "dense" else low_bytes
    if need > have:
        raise ParameterError(f"the {path} path at d = {d} (k·m = {n_rows}) needs about {need / 2**30:.3g} GiB but "
                             f"{have / 2**30:.3g} GiB are available; lower the size"
                             + (", k or m" if path == "lowrank" else " or use the low-rank path") + ".")
    return path


def stream_rows(d: int, n_rows: int, memory: int | None = None) -> bool:
    """Whether the n×d Jacobian rows should stream through a file rather than sit in memory (over a third of it)."""
    have = available_memory() if memory is None else memory
    return 8.0 * n_rows * d > have / 3
