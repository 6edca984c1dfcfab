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
from ...results import Result

BETAS_SIGMA0 = (0.0, 2e-6, 2e-4, 2e-3, 2e-2, 2e-1)


def map_attack(encoder: nn.Module, embeddings: torch.Tensor, score_fn: Callable | None, *, beta: float,
               in_shape: tuple[int, ...] | None = None, steps: int = 500, lr: float = 0.05, init: float = 0.5,
               clamp: tuple[float, float] = (-0.5, 1.5), batch: int = 256, device=None,
               progress: bool = False) -> torch.Tensor:
    """Reconstruct inputs from ``embeddings`` (``N×m``); returns ``N×d`` float32 (flattened).

    ``score_fn`` maps ``N×d`` to ``N×d`` (``None``, or β = 0: no prior). ``in_shape`` is the
    encoder's per-sample input shape (default: ``encoder.in_shape`` or ``(encoder.in_dim,)``).
    """
    enc, _ = split_noise(encoder)
    beta = check_scalar(beta, "beta (prior weight)", low=0.0)
    steps = check_positive_int(steps, "steps")
    e_all = check_finite(as_tensor(embeddings, "embeddings", dtype=torch.float32), "embeddings")
    if e_all.ndim != 2:
        raise ShapeError(f"embeddings must be N×m, got shape {tuple(e_all.shape)}.")
    shape = tuple(in_shape or getattr(enc, "in_shape", None) or (enc.in_dim,))
    p = next(iter(list(enc.parameters()) + list(enc.buffers())), None)
    device = torch.device(device) if device is not None else (p.device if p is not None else torch.device("cpu"))
    was_training = enc.training
    enc.eval()
    frozen = [q for q in enc.parameters() if q.requires_grad]
    for q in frozen:
        q.requires_grad_(False)
    out = []
    chunks = list(e_all.split(batch))
    if progress:
        from tqdm.auto import tqdm
        chunks = tqdm(chunks, desc=f"MAP attack (β={beta:g})", leave=False)
    try:
        for e in chunks:
            e = e.to(device)
            x = torch.full((e.shape[0], *shape), float(init), device=device, requires_grad=True)
            opt = torch.optim.Adam([x], lr=lr)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=0.0)
            for _ in range(steps):
                opt.zero_grad(set_to_none=True)
                pred = enc(x).reshape(e.shape[0], -1)
                if pred.shape != e.shape:
                    raise ShapeError(f"the encoder gives {tuple(pred.shape)} but the embeddings are {tuple(e.shape)}.")
                ((pred - e) ** 2).sum().backward()
                if beta > 0 and score_fn is not None:
                    with torch.no_grad():
                        s = torch.as_tensor(score_fn(x.detach().reshape(e.shape[0], -1)))
                        x.grad -= beta * s.to(device=device, dtype=x.dtype).reshape(x.shape)
                opt.step()
                sched.step()
                with torch.no_grad():
                    x.clamp_(*clamp)
            out.append(x.detach().reshape(e.shape[0], -1).cpu())
    finally:
        enc.train(was_training)
        for q in frozen:
            q.requires_grad_(True)
    return torch.cat(out)


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
        rec = map_attack(encoder, embeddings, score_fn, beta=beta, **kwargs)
        est = mse(rec, x)
        tried[float(beta)] = est.mean
        if best is None or est.mean < best[1].mean:
            best = (beta, est, rec)
    return MapSweepResult(float(best[0]), best[1].mean, best[1].stderr, tried, best[2])
