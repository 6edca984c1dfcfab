"""Keep freed memory in the process for reuse (glibc's ``mallopt``), so that long loops over large arrays stop
paying the kernel for fresh pages on every step.

glibc hands an allocation above its *mmap threshold* its own pages (``mmap``) and gives them back when it is freed
(``munmap``), and it trims the heap's free top above its *trim threshold*. PyTorch has no caching allocator on the
CPU: an optimisation loop that builds and frees the same 5,000 × 784 float64 arrays (31 MB) thousands of times has
the kernel zero fresh 4 KB pages each time. Measured on Carlini et al.'s attack (``benchmarks/carlini.py``,
label-free Fashion-MNIST, cross k = 6, n = 100, T = 50): 429 of the process's 1,777 CPU-seconds were system time,
299 million page faults. ``keep_freed_memory`` sets the mmap threshold to glibc's largest (32 MiB; arrays above it still get
their own pages) and the trim threshold and top pad high, so freed blocks stay in the heap for the next step: the
same challenge re-run, system time 429 → 289 s, page faults 299 → 144 million, 1,766 → 1,644 CPU-seconds, peak
memory 2.93 → 3.04 GiB (five such challenges: at most 1,644 CPU-seconds, against 1,852 before). Arrays above 32 MiB
still get their own pages: RGB 32×32 crops in cross mode (n = 100, T = 50: 2,500 × 3,072 float64 arrays, 61 MB)
spent 795–880 of a run's ~1,900 CPU-seconds in system time, 636 of 1,000 at a shortened setting (profiled: 92 % of
it in ``carlini_model.descend`` at every pixel, the X-step and cross mode's refit). Turning glibc's mmap off
(``M_MMAP_MAX`` = 0) was measured and *not* kept: the same challenge took 1,199 CPU-seconds (system 14 s) but peaked
at 7.41 GiB instead of 3.42 — the heap keeps freed blocks of every size. The fix made instead is the one the
label-free assignment and ``flip_signs`` got: ``descend`` runs the pixels in blocks below the threshold (the
shortened setting: system time 636 → 12 s, 477 → 8 million page faults, the attack's CPU-seconds 997 → 481
(the first under a profiler), peak 3.46 → 2.96 GiB; ``benchmarks/carlini_blocks.py``: the descent alone 2.14× fewer
CPU-seconds, system 96.5 → 0.1 s, the same images bit for bit).

It changes where arrays land in memory, no formula: what can depend on addresses (vectorised float sums over
differently aligned inputs) differs as it already did from run to run. A no-op where the C library is not glibc (macOS,
Windows, musl); idempotent. The settings are process-wide and stay in force (``mallopt`` has no way back to glibc's
adaptive defaults), which is why only the long-running attacks call it."""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MMAP_THRESHOLD = 32 * 2 ** 20  # glibc's upper limit on 64-bit (HEAP_MAX_SIZE / 2); larger values are refused
TRIM_THRESHOLD = 2 ** 31 - 1  # mallopt takes an int: 2 GiB of free heap top kept
TOP_PAD = 256 * 2 ** 20

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's allocator to keep freed blocks (see the module's docstring); True when it took effect."""
    global _done
    if _done is None:
        _done = False
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):  # not glibc
            return False
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        _done = all(mallopt(param, value) == 1 for param, value in
                    ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD)))
    return _done
