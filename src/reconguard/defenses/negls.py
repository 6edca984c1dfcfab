"""NegLS — negative label smoothing (Struppek et al. 2024): train on targets
``(1 − α) · onehot(y) + α / C`` with α < 0 (overconfident), α following its schedule:

    α(epoch) = α_final · s(epoch),   s = 0 before ``start`` (half the epochs),
    then rising linearly to 1 at ``end`` (three quarters of the epochs), 1 after.

The reference code's schedule (α = 0 for epochs < 50, ramp to 75, for 100 epochs) was never applied in
the AT-AT code base (the issue this fixes); here fit sets ``defense.epoch`` and the loss reads it.
Unlike that code, the ramp here is continuous (theirs jumps from ½ to 1 at epoch 75).
"""

from __future__ import annotations

import torch
from torch import nn

from ..checks import check_positive_int, check_scalar
from .base import Defense


class NegLS(Defense):
    options = {"alpha": "NegLS: final (negative) smoothing"}
    def __init__(self, alpha: float = -0.05, epochs: int | None = None, start: float = 0.5, end: float = 0.75):
        self.alpha_final = check_scalar(alpha, "alpha (label smoothing)", high=1.0)
        self.epochs = check_positive_int(epochs, "epochs") if epochs is not None else None  # None: fit's epochs
        self.start = check_scalar(start, "start (fraction of the epochs)", low=0.0, high=1.0)
        self.end = check_scalar(end, "end (fraction of the epochs)", low=self.start, high=1.0)
        self.epoch = 0

    def alpha(self, epoch: int) -> float:
        total = self.epochs or getattr(self, "total_epochs", None) or 100
        s0, s1 = self.start * total, self.end * total
        if epoch < s0:
            return 0.0
        if epoch + 1 >= s1 or s1 <= s0:
            return self.alpha_final
        return self.alpha_final * (epoch + 1 - s0) / (s1 - s0)

    def loss(self, model: nn.Module, batch) -> tuple[torch.Tensor, dict]:
        x, y = batch[0], batch[1]
        logits = model(x)
        a = self.alpha(self.epoch)
        c = logits.shape[1]
        target = (1 - a) * nn.functional.one_hot(y, c).to(logits.dtype) + a / c
        loss = -(target * torch.log_softmax(logits, 1)).sum(1).mean()
        return loss, {"correct": float((logits.argmax(1) == y).float().sum())}

    def after_epoch(self, epoch: int, record: dict) -> None:
        record["label_smoothing"] = self.alpha(epoch)
