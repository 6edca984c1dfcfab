"""The optimisation (MAP) attack of the spectral-bounds paper (section 6.1, appendix A.1.2):

    x̂(e) = argmin_x ‖e − Enc_D(x)‖² − β log π(x)

Adam (lr 0.05) for 500 steps with a cosine schedule to 0, started at 0.5 everywhere and clamped to
[−0.5, 1.5] after each step. The prior enters through its score: the gradient of −β log π is
−β·s(x), so any score function (exact, trained, DDPM) serves. β = 2σ² gives the exact MAP estimate
for σ > 0; for σ = 0, β is a hyper-parameter swept over ``BETAS_SIGMA0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from ...checks import as_tensor, check_finite, check_positive_int, check_scalar, check_sigma
from ...encoders.noisy import split_noise
from ...errors import ShapeError
from ...metrics import mse
from ...progress import progress
from ...results import Result
from ..base import Attack, Reconstruction

BETAS_SIGMA0 = (0.0, 2e-6, 2e-4, 2e-3, 2e-2, 2e-1)


def _input_shape(enc: nn.Module, in_shape) -> tuple[int, ...]:
    shape = in_shape or getattr(enc, "in_shape", None) or ((enc.in_dim,) if hasattr(enc, "in_dim") else None)
    if shape is None:
        raise ShapeError(f"the MAP attack needs the encoder's input shape: pass in_shape=(C, H, W) "
                         f"({type(enc).__name__} has no in_shape or in_dim attribute).")
    return tuple(int(v) for v in shape)


class MapAttack(Attack):
    """The MAP attack (spectral-bounds paper §6.1, A.1.2): ``argmin_x ‖e − Enc_D(x)‖² − β log π(x)``.

    Args:
        encoder: any ``nn.Module`` (a ``Noisy`` wrapper is removed: the attack matches the deterministic part).
        score_fn: ``N×d → N×d`` score ``∇ log π`` (``None`` or β = 0: no prior).
        beta: the prior's weight (2σ² is the exact MAP for σ > 0).
        in_shape: the encoder's per-sample input shape (default ``encoder.in_shape`` or ``(encoder.in_dim,)``).
        steps, lr, init, clamp: Adam for ``steps`` (500) at ``lr`` (0.05), cosine to 0, started at ``init``
            (0.5) everywhere, clamped to ``clamp`` ([−0.5, 1.5]) after each step.

    ``run(embeddings)`` (``N×m``; any dtype, any device, with or without a graph) returns a
    :class:`Reconstruction` with ``N×d`` float32 ``images`` (flattened).

    Example::

        x_hat = MapAttack(enc, score_fn, beta=2e-6, in_shape=(1, 16, 16)).run(e).images
    """

    name = "map"

    def __init__(self, encoder: nn.Module, score_fn: Callable | None = None, *, beta: float,
                 in_shape: tuple[int, ...] | None = None, steps: int = 500, lr: float = 0.05, init: float = 0.5,
                 clamp: tuple[float, float] = (-0.5, 1.5), batch: int = 256, device=None, progress: bool = False):
        enc, _ = split_noise(encoder)
        super().__init__(enc, device=device)
        self.score_fn = score_fn
        self.beta = check_scalar(beta, "beta (prior weight)", low=0.0)
        self.steps = check_positive_int(steps, "steps")
        self.in_shape = _input_shape(enc, in_shape)
        self.lr, self.init, self.clamp, self.batch, self.progress = lr, float(init), clamp, int(batch), progress

    def run(self, embeddings: torch.Tensor) -> Reconstruction:
        enc, device = self.target, self.device
        dtype = next((p.dtype for p in enc.parameters() if p.is_floating_point()), torch.float32)
        e_all = check_finite(as_tensor(embeddings, "embeddings", dtype=torch.float32).detach(), "embeddings")
        if e_all.ndim != 2:
            raise ShapeError(f"embeddings must be N×m, got shape {tuple(e_all.shape)}.")
        out = []
        chunks = progress(list(e_all.split(self.batch)), f"MAP attack (β={self.beta:g})", enabled=self.progress)
        with self.frozen(enc):
            for e in chunks:
                e = e.to(device)
                x = torch.full((e.shape[0], *self.in_shape), self.init, device=device, requires_grad=True)
                opt = torch.optim.Adam([x], lr=self.lr)
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=self.steps, eta_min=0.0)
                for _ in range(self.steps):
                    opt.zero_grad(set_to_none=True)
                    pred = enc(x.to(dtype))
                    if not isinstance(pred, torch.Tensor):
                        raise ShapeError(f"the encoder returned a {type(pred).__name__}, not a tensor.")
                    pred = pred.reshape(e.shape[0], -1).to(torch.float32)
                    if pred.shape != e.shape:
                        raise ShapeError(f"the encoder gives {tuple(pred.shape)} but the embeddings are {tuple(e.shape)}.")
                    ((pred - e) ** 2).sum().backward()
                    if self.beta > 0 and self.score_fn is not None:
                        with torch.no_grad():
                            s = torch.as_tensor(self.score_fn(x.detach().reshape(e.shape[0], -1)))
                            x.grad -= self.beta * s.to(device=device, dtype=x.dtype).reshape(x.shape)
                    opt.step()
                    sched.step()
                    with torch.no_grad():
                        x.clamp_(*self.clamp)
                out.append(x.detach().reshape(e.shape[0], -1).cpu())
        return Reconstruction(torch.cat(out), self.name)


@dataclass(frozen=True)
class MapSweepResult(Result):
    """The best β (lowest MSE against the originals: an oracle choice, as the paper reports) and all tried."""

    beta: float
    mse: float
    stderr: float
    tried: dict = field(default_factory=dict)  # β → MSE/d
    reconstructions: torch.Tensor | None = None
    _skip_in_dict = ("reconstructions",)


def map_attack_sweep(encoder: nn.Module, x: torch.Tensor, embeddings: torch.Tensor, score_fn: Callable | None,
                     sigma: float, betas=BETAS_SIGMA0, **kwargs) -> MapSweepResult:
    """β = 2σ² when σ > 0; otherwise every β in ``betas``, keeping the one with the lowest MSE to ``x``."""
    sigma = check_sigma(sigma)
    candidates = [2 * sigma**2] if sigma > 0 else list(betas)
    best, tried = None, {}
    for beta in candidates:
        rec = MapAttack(encoder, score_fn, beta=beta, **kwargs).run(embeddings).images
        est = mse(rec, x)
        tried[float(beta)] = est.mean
        if best is None or est.mean < best[1].mean:
            best = (beta, est, rec)
    return MapSweepResult(float(best[0]), best[1].mean, best[1].stderr, tried, best[2])
