"""Input Jacobians of an encoder, the pieces both representations of E[G] share (:mod:`reconguard.bounds.fisher`,
dense; :mod:`reconguard.bounds.lowrank`, the Gram of the rows): a float64 copy of the encoder in eval mode, batched
Jacobians by reverse or forward mode, the choice of the k inputs and the held-out ones, and the blocks of the
jackknife. Precision and chunking are explained in :mod:`reconguard.bounds.fisher`."""

from __future__ import annotations

import contextlib
import copy
import warnings

import torch
from torch import nn

from ..checks import check_nonnegative_int
from ..encoders.noisy import split_noise
from ..errors import ParameterError

ACCUMULATION_EPS = float(torch.finfo(torch.float64).eps)  # E[G] is always accumulated in float64
DEFAULT_GROUPS = 10  # partial means kept for the jackknife of the sampling error
_JACOBIAN_BUDGET = 2**24  # Jacobian entries held at once per chunk (64 MiB in float32)


def _param_dtype(module: nn.Module) -> torch.dtype:
    for t in list(module.parameters()) + list(module.buffers()):
        if t.is_floating_point():
            return t.dtype
    return torch.float32


def _param_device(module: nn.Module) -> torch.device:
    for t in list(module.parameters()) + list(module.buffers()):
        return t.device
    return torch.device("cpu")


def _float64_copy(enc: nn.Module, precision: str) -> tuple[nn.Module, bool]:
    """``(module, converted)``: a float64 copy of ``enc`` (the user's module is left as it is)."""
    if precision == "native":
        return enc, False
    try:
        return copy.deepcopy(enc).to(torch.float64), True
    except Exception as exc:  # a module that cannot be copied or cast: fall back, conservatively
        warnings.warn(f"could not make a float64 copy of the encoder ({exc}); its Jacobians are taken in "
                      f"{_param_dtype(enc)} and accumulated in float64 (the bounds can only come out lower).",
                      stacklevel=3)
        return enc, False


def group_edges(k: int, groups: int) -> tuple[int, list[int]]:
    """``(groups, edges)``: at most ``k`` contiguous blocks of the k inputs (0 groups when k = 1)."""
    groups = min(max(0, int(groups)), k) if k > 1 else 0
    return groups, ([round(b * k / groups) for b in range(groups + 1)] if groups else [0, k])


@contextlib.contextmanager
def jacobian_ready(encoder: nn.Module, x: torch.Tensor, precision: str = "float64", device=None):
    """Yield ``(enc, x, d, m)`` ready for input Jacobians: a float64 copy of the encoder (``precision``) on
    ``device`` in eval mode with its parameters frozen (else autograd also prepares weight gradients, about
    2x slower), ``x`` in its dtype; the user's module is restored after."""
    enc, _ = split_noise(encoder)
    device = torch.device(device) if device is not None else _param_device(enc)
    enc, converted = _float64_copy(enc, precision)
    if converted:
        enc.to(device)
    x = x.to(device=device, dtype=torch.float64 if converted else _param_dtype(enc))
    was_training = enc.training
    frozen = [p for p in enc.parameters() if p.requires_grad and p.is_leaf]
    enc.eval()
    for p in frozen:
        p.requires_grad_(False)
    try:
        with torch.no_grad():
            m = int(enc(x[:1]).numel())
        yield enc, x, int(x[0].numel()), m
    finally:
        enc.train(was_training)
        for p in frozen:
            p.requires_grad_(True)


def _default_chunk(k: int, m: int, d: int, device: torch.device) -> int:
    """Inputs per chunk: bounded by the Jacobian budget; on a CPU small chunks stay in cache and run faster."""
    limit = max(1, _JACOBIAN_BUDGET // max(1, m * d))
    return max(1, min(k, limit, 16 if device.type == "cpu" else limit))


def _batched_jacobian(enc: nn.Module, xc: torch.Tensor, m: int, d: int, forward: bool) -> torch.Tensor:
    """``c×m×d`` Jacobians of a chunk in one batched pass.

    Reverse: one forward of the whole chunk, then its VJP vmapped over the m one-hot cotangents
    (cotangent e_j for every sample gives row j of each J_i). Forward: the JVP vmapped over the d
    one-hot tangents (columns). Valid because an encoder in eval mode maps each sample on its own. A forward that
    torch.func cannot trace (NumPy inside, a tensor without storage) falls back to the reference loop, one
    ``torch.autograd.functional.jacobian`` per sample, which gives 0 where autograd loses the input (and the path check
    of :mod:`reconguard.bounds.differentiable` then zeroes the bounds).
    """
    try:
        return _traced_jacobian(enc, xc, m, d, forward)
    except RuntimeError:
        return loop_jacobian(enc, xc, m, d)


def loop_jacobian(enc: nn.Module, xc: torch.Tensor, m: int, d: int) -> torch.Tensor:
    """``c×m×d`` Jacobians, one ``torch.autograd.functional.jacobian`` per sample: the reference (``method="loop"``)
    and the fallback wherever torch.func cannot trace the forward."""
    return torch.stack([torch.autograd.functional.jacobian(lambda v: enc(v.unsqueeze(0)).reshape(m), xi).reshape(m, d)
                        for xi in xc])


def _traced_jacobian(enc: nn.Module, xc: torch.Tensor, m: int, d: int, forward: bool) -> torch.Tensor:
    c, shape = xc.shape[0], xc.shape[1:]
    if not forward:
        _, vjp_fn = torch.func.vjp(lambda v: enc(v).reshape(c, m), xc)
        eye = torch.eye(m, dtype=xc.dtype, device=xc.device).unsqueeze(1).expand(m, c, m)
        (rows,) = torch.func.vmap(vjp_fn)(eye)  # m×c×shape
        return rows.reshape(m, c, d).transpose(0, 1)
    eye = torch.eye(d, dtype=xc.dtype, device=xc.device).reshape(d, 1, *shape).expand(d, c, *shape)
    cols = torch.func.vmap(lambda t: torch.func.jvp(lambda v: enc(v).reshape(c, m), (xc,), (t,))[1])(eye)
    return cols.permute(1, 2, 0)  # d×c×m → c×m×d


def seconds_per_jacobian(encoder: nn.Module, x: torch.Tensor, device=None, repeats: int = 2) -> float:
    """Wall seconds one input's m×d Jacobian takes (reverse mode, float64, as both representations compute it):
    the best of ``repeats`` timings on ``x[:1]`` after one warm-up — what a time estimate extrapolates from."""
    import time

    with jacobian_ready(encoder, x[:1], "float64", device) as (enc, xs, d, m):
        _batched_jacobian(enc, xs, m, d, forward=False)
        best = float("inf")
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            _batched_jacobian(enc, xs, m, d, forward=False)
            best = min(best, time.perf_counter() - start)
    return best


def default_heldout(k: int) -> int:
    """Held-out inputs drawn beside the k for the saturation check: a quarter of k, at least 8."""
    return max(8, k // 4)


def select_inputs(x: torch.Tensor, k: int, heldout: int | None,
                  generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sample, held_out)``: k inputs and up to ``heldout`` others, drawn without replacement (the held-out
    inputs are what is left when the data has fewer than ``k + heldout``)."""
    n = x.shape[0]
    if k > n:
        raise ParameterError(f"k={k} is larger than the {n} samples given; lower k or pass more data.")
    h = min(default_heldout(k) if heldout is None else check_nonnegative_int(heldout, "heldout"), n - k)
    idx = torch.arange(n) if k + h == n and h == 0 else torch.randperm(n, generator=generator)[:k + h]
    return x[idx[:k]], x[idx[k:]]
