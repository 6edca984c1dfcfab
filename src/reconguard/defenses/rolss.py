"""RoLSS / RoLSS-SSF (Koh et al. 2024): remove (``scale=0``) or scale (RoLSS-SSF, ``scale=0.2``) the skip
connections of the last stage of a residual network, ``out = act(F(x) + scale · shortcut(x))``.

Works on any model whose residual blocks have a ``skip_scale`` attribute (:class:`reconguard.nn.ResNet`
blocks do); ``stage`` names the module holding them (``layer4`` by default).
"""

from __future__ import annotations

from torch import nn

from ..checks import check_scalar
from ..errors import ParameterError
from ._modules import submodule
from .base import Defense


class RoLSS(Defense):
    options = {"scale": "RoLSS: last-stage skip factor (0 removes, 0.2 = SSF)"}
    structural = True

    def structure(self) -> dict:
        return {"scale": self.scale, "stage": self.stage}

    def report(self) -> dict:
        return {"skips_scaled": len(self.blocks)}
    def __init__(self, scale: float = 0.0, stage: str = "layer4"):
        self.scale = check_scalar(scale, "scale (skip-connection factor)", low=0.0, high=1.0)
        self.stage = stage
        self.blocks: list[str] = []

    def prepare(self, model: nn.Module) -> nn.Module:
        stage = submodule(model, self.stage)
        blocks = [(n, m) for n, m in stage.named_modules() if hasattr(m, "skip_scale")]
        if not blocks:
            raise ParameterError(f"{self.stage!r} has no residual blocks with a 'skip_scale' attribute; RoLSS needs "
                                 "reconguard.nn.ResNet blocks or blocks that define skip_scale.")
        for _, m in blocks:
            m.skip_scale = self.scale
        self.blocks = [f"{self.stage}.{n}" if n else self.stage for n, _ in blocks]
        return model


def RoLSS_SSF(scale: float = 0.2, stage: str = "layer4") -> RoLSS:  # noqa: N802 — the paper's name
    """RoLSS with the skip connections scaled instead of removed (k = 0.2 by default)."""
    return RoLSS(scale, stage)
