"""The pixel convention a user's model expects, applied inside the model: images stay float ``[0, 1]`` everywhere
in reconguard (bounds, attacks, MSE), and ``Normalize`` maps them to the model's own inputs,
``(x − mean_c) / std_c`` per channel — ImageNet's statistics, ``symmetric`` ([−1, 1]: mean 0.5, std 0.5), or the
user's. A bound or attack on ``Sequential(Normalize(…), model)`` is a bound on the error in [0, 1] pixels."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..errors import ParameterError

CONVENTIONS = {
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "symmetric": ((0.5,), (0.5,)),
}


class Normalize(nn.Module):
    """``(x − mean) / std`` per channel (a single value applies to every channel)."""

    def __init__(self, mean, std, name: str = ""):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).reshape(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).reshape(1, -1, 1, 1))
        self.name = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean.to(x.dtype)) / self.std.to(x.dtype)

    def describe(self) -> dict:
        return {"name": self.name, "mean": self.mean.reshape(-1).tolist(), "std": self.std.reshape(-1).tolist()}


def first_batchnorm_mismatch(model: nn.Module, x: torch.Tensor) -> str | None:
    """A warning when the model's first BatchNorm sees inputs whose statistics are grossly unlike its running
    statistics (mean off by more than 3 running standard deviations on average, or variance off by 10×): the
    model is probably being fed the wrong pixel convention. None when it looks right or there is no BatchNorm."""
    bn = next((m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
               and m.track_running_stats and m.running_mean is not None), None)
    if bn is None:
        return None
    seen = {}

    def hook(_, inputs):
        z = inputs[0].detach().float()
        dims = [0] + list(range(2, z.ndim))
        seen["mean"], seen["var"] = z.mean(dims), z.var(dims)

    handle = bn.register_forward_pre_hook(hook)
    try:
        was = model.training
        model.eval()
        with torch.no_grad():
            model(x)
        model.train(was)
    finally:
        handle.remove()
    if not seen:
        return None
    rm, rv = bn.running_mean.float().cpu(), bn.running_var.float().cpu().clamp_min(1e-12)
    shift = float(((seen["mean"].cpu() - rm).abs() / rv.sqrt()).mean())
    ratio = float((seen["var"].cpu().clamp_min(1e-12) / rv).mean())
    if shift > 3 or not 0.1 <= ratio <= 10:
        return (f"the model's first BatchNorm sees inputs unlike its running statistics (mean off by {shift:.1f} "
                f"running s.d., variance ×{ratio:.3g}): is --normalize the convention it was trained with?")
    return None


def with_normalization(model: nn.Module, normalize, channels: int) -> tuple[nn.Module, dict | None]:
    """``(model, description)``: ``Sequential(Normalize, model)`` for ``--normalize`` (``none``, ``imagenet``,
    ``symmetric``, ``MEANS:STDS``; checked by :func:`check_normalize`), or the model as it is and
    None. The one place every command that runs a user's model applies the convention."""
    norm = check_normalize(normalize, int(channels))
    if norm is None:
        return model, None
    layer = Normalize(norm[1], norm[2], norm[0])
    return nn.Sequential(layer, model).eval(), layer.describe()


def check_normalize(text: Any, channels: int):
    """``--normalize``: ``none``, ``imagenet``, ``symmetric`` or ``MEANS:STDS`` (comma-separated, one value or one
    per channel) as ``(name, mean, std)``, or None for ``none``."""
    if text is None or str(text).lower() in ("", "none"):
        return None
    name = str(text).strip().lower()
    if name in CONVENTIONS:
        mean, std = CONVENTIONS[name]
    else:
        try:
            means, stds = name.split(":")
            mean = tuple(float(v) for v in means.split(","))
            std = tuple(float(v) for v in stds.split(","))
        except ValueError:
            raise ParameterError(f"--normalize {text!r}: give none, imagenet, symmetric or MEANS:STDS "
                                 "(e.g. 0.5,0.5,0.5:0.25,0.25,0.25).") from None
    if len(mean) not in (1, channels) or len(std) not in (1, channels):
        raise ParameterError(f"--normalize {text!r}: {len(mean)} mean(s) and {len(std)} std(s) for images of "
                             f"{channels} channel(s); give one value or one per channel.")
    if any(s <= 0 for s in std) or not all(map(lambda v: v == v and abs(v) < 1e6, mean + std)):
        raise ParameterError(f"--normalize {text!r}: stds must be positive and every value finite.")
    return name if name in CONVENTIONS else "custom", mean, std
