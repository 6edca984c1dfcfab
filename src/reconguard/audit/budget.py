"""What an encoder audit will cost, said before it starts, and a preset cut to fit a budget (``--max-minutes``).

The estimate extrapolates from timings of the audit's own pieces on this machine, taken on one or a few inputs:

- **Jacobians**: ``(k + h)·t_J`` — ``t_J`` one input's m×d Jacobian (:func:`~reconguard.bounds.jacobians.
  seconds_per_jacobian`), h the held-out inputs of the saturation check — plus the path check of
  :mod:`reconguard.bounds.differentiable`, ``34 × 6 × t_step`` (34 products J·v, each a VJP of a VJP in float64: about
  six float32 forward-and-backward passes, ``t_step`` as for MAP below);
- **bounds**: the flops of the chosen representation at the measured float64 rate — low-rank: the Gram ``K = BBᵀ``
  (2n²d, n = k·m), the held-out cross products (2·h·m·n·d) and the n×n eigendecompositions of the jackknife
  (≈ 11 × 10n³); dense: ``JᵀJ`` (2(k + h)·m·d²), S (2·n_s·d²) and ≈ 24 d×d eigendecompositions (10d³ each);
- **MAP**: ``steps × |β grid| × σ's × t_step`` per attacked image, ``t_step`` one forward and backward of the model
  plus one evaluation of the prior's score;
- **decoder**: ``epochs × images × σ's × t_img``, ``t_img`` from one epoch on a slice of the images.

Memory is the representation's matrices (the count :func:`~reconguard.bounds.representation.choose_path` uses)
plus the images and what the process holds already. It is an estimate, labelled so: the benchmark
``benchmarks/audit.py`` prints it beside the measured time (within a factor of two on the cases there).
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import dataclass

import torch

from ..bounds.differentiable import PATH_PRODUCTS
from ..errors import ParameterError
from ..results import Result

MINIMUM = {"k": 8, "map_steps": 10, "decoder_epochs": 1, "n_attack": 4, "score_samples": 500}
JACOBIAN_WORK_BYTES = 3 * 8.0 * 2**24  # a chunk of Jacobian entries (bounds.jacobians) and its autograd intermediates
SCALED = ("k", "map_steps", "decoder_epochs", "n_attack", "score_samples")


def peak_rss_bytes() -> float:
    """The process's peak resident memory so far (``ru_maxrss``, KiB on Linux)."""
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024.0


def _flop_rate(n: int = 768) -> float:
    a = torch.randn(n, n, dtype=torch.float64)
    a @ a
    start = time.perf_counter()
    a @ a
    return 2.0 * n**3 / max(time.perf_counter() - start, 1e-6)


@dataclass(frozen=True)
class AuditEstimate(Result):
    """Unit costs measured on this machine and what they predict for one preset (``settings``)."""

    d: int
    m: int
    n_train: int
    n_sigmas: int
    zero_sigma: bool         # σ = 0 among them: the MAP attack tries every β of the grid
    path: str
    streamed: bool
    t_jacobian: float        # seconds per input's Jacobian
    flop_rate: float         # float64 matmul flops per second
    t_map_image: float       # seconds per MAP step per attacked image
    t_decoder_image: float   # seconds per decoder epoch per training image
    base_bytes: float        # what the process held before the audit's matrices
    settings: dict

    def seconds(self, cfg: dict | None = None) -> dict:
        cfg = cfg or self.settings
        k, m, d = cfg["k"], self.m, self.d
        h = max(8, k // 4)
        n = k * m
        if self.path == "lowrank":
            flops = 2.0 * n * n * d + 2.0 * h * m * n * d + 110.0 * n**3
        else:
            flops = 2.0 * (k + h) * m * d * d + 2.0 * cfg["score_samples"] * d * d + 240.0 * d**3
        runs = (len(cfg["betas"]) if self.zero_sigma else 0) + self.n_sigmas - int(self.zero_sigma)  # MAP runs
        path_check = PATH_PRODUCTS * 6 * self.t_map_image
        return {"Jacobians": (k + h) * self.t_jacobian + path_check, "bounds": flops / self.flop_rate,
                "MAP": cfg["map_steps"] * runs * cfg["n_attack"] * self.t_map_image,
                "decoder": cfg["decoder_epochs"] * self.n_train * self.n_sigmas * self.t_decoder_image}

    def peak_bytes(self, cfg: dict | None = None) -> float:
        cfg = cfg or self.settings
        k, m, d = cfg["k"], self.m, self.d
        n, h = k * m, max(8, k // 4)
        if self.path == "lowrank":
            matrices = 8.0 * 5 * n * n + (0.0 if self.streamed else 8.0 * (n + h * m) * d)
        else:
            matrices = 8.0 * 24 * d * d
        return self.base_bytes + matrices + JACOBIAN_WORK_BYTES

    def total(self, cfg: dict | None = None) -> float:
        return sum(self.seconds(cfg).values())

    def describe(self, cfg: dict | None = None) -> str:
        parts = ", ".join(f"{name} {s / 60:.2g}" for name, s in self.seconds(cfg).items())
        return (f"estimate: about {self.total(cfg) / 60:.2g} min ({parts}) and {self.peak_bytes(cfg) / 2**30:.2g} GiB "
                f"peak on this machine (rough: extrapolated from timings of one input)")


def estimate(wrapped, images: torch.Tensor, train: torch.Tensor, cfg: dict, *, m: int, path: str, streamed: bool,
             sigmas, score_fn, device) -> AuditEstimate:
    """Time the audit's pieces on a few inputs (see the module docstring) and return the estimate for ``cfg``."""
    from ..attacks.reconstruction import DecoderAttack
    from ..bounds.jacobians import seconds_per_jacobian

    x1 = images[:1].reshape(1, -1)
    t_jac = seconds_per_jacobian(wrapped, x1, device)
    batch = images[:min(cfg["n_attack"], 16, len(images))].reshape(-1, x1.shape[1]).to(device)
    for timed in (False, True):  # a warm-up pass, then the timed one
        start = time.perf_counter()
        v = batch.clone().requires_grad_(True)
        wrapped(v).float().square().sum().backward()
        if score_fn is not None:
            with torch.no_grad():
                score_fn(batch.double().cpu())
    t_map = (time.perf_counter() - start) / len(batch)
    piece = train[:min(16, len(train))]
    start = time.perf_counter()
    DecoderAttack(wrapped, tuple(images.shape[1:]), epochs=1, device=device).fit(piece)
    t_dec = (time.perf_counter() - start) / len(piece)
    return AuditEstimate(int(x1.shape[1]), m, len(train), len(sigmas), 0.0 in sigmas, path, streamed, t_jac,
                         _flop_rate(), t_map, t_dec, peak_rss_bytes(), dict(cfg))


def fit_budget(est: AuditEstimate, cfg: dict, minutes: float, n_images: int) -> tuple[dict, bool]:
    """``(cfg, changed)``: ``cfg`` with k, the MAP steps, the decoder's epochs, the attacked images and S's samples
    scaled by one common factor (never below :data:`MINIMUM`) so that the estimate fits ``minutes``; refused
    with the minimum's estimate when even that does not fit."""
    if not (minutes > 0 and math.isfinite(minutes)):
        raise ParameterError(f"--max-minutes must be a positive number, got {minutes}.")
    budget = 60.0 * minutes
    if est.total(cfg) <= budget:
        return cfg, False

    def scaled(r: float) -> dict:
        out = dict(cfg)
        for key in SCALED:
            out[key] = max(MINIMUM[key], int(cfg[key] * r))
        out["n_attack"] = min(out["n_attack"], max(2, n_images // 4))
        return out

    lo, hi = 0.0, 1.0
    if est.total(scaled(lo)) > budget:
        raise ParameterError(f"the audit cannot fit in {minutes:g} min on this machine: even its minimum settings "
                             f"({', '.join(f'{k}={v}' for k, v in MINIMUM.items())}) need about "
                             f"{est.total(scaled(lo)) / 60:.2g} min; raise --max-minutes, give smaller images or a "
                             "smaller m.")
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if est.total(scaled(mid)) <= budget else (lo, mid)
    return scaled(lo), True
