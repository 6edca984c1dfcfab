"""Averaging several encryptions of one image (InstaHide paper, section 5.3).

Strong version: the attacker knows which encryptions share the private image and averages them
(after demasking); the partners average out towards the data mean while the shared image stays.
Weak version: for each encryption, the top-m most similar others (SSIM of |x̃|, as in the paper, or
a faster cosine of |x̃|) are averaged with it. ``debias``: remove the expected partner contribution,
x̂ = (mean − (1 − λ̄)·μ) / λ̄ with λ̄ the mean own coefficient (from soft labels, or 1/k) and μ the
mean of all encryptions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...errors import ParameterError, ShapeError
from ..base import Attack
from ...results import Result


@dataclass(frozen=True)
class AveragingResult(Result):
    estimates: torch.Tensor      # one per group (strong) or per encryption (weak)
    groups: torch.Tensor | None  # strong: group ids in order of ``estimates``
    _skip_in_dict = ("estimates", "groups")


class AveragingAttack(Attack):
    name = "averaging"

    def __init__(self, strong: bool = True, m: int = 5, similarity: str = "cosine", debias: bool = True,
                 own_coefficient: float | None = None):
        super().__init__(None)
        if similarity not in ("cosine", "ssim"):
            raise ParameterError(f"similarity must be 'cosine' or 'ssim', got {similarity!r}.")
        self.strong, self.m, self.similarity, self.debias, self.own = strong, int(m), similarity, debias, own_coefficient

    def _finish(self, avg: torch.Tensor, mu: torch.Tensor, lam: float) -> torch.Tensor:
        return (avg - (1 - lam) * mu) / lam if self.debias else avg

    def run(self, encryptions: torch.Tensor, groups: torch.Tensor | None = None, k: int | None = None) -> AveragingResult:
        e = torch.as_tensor(encryptions, dtype=torch.float64)
        if e.ndim != 4 or e.shape[0] < 2:
            raise ShapeError(f"encryptions must be N×C×H×W with N ≥ 2, got {tuple(e.shape)}.")
        lam = self.own if self.own is not None else (1.0 / k if k else 1.0)
        mu = e.mean(0)
        if self.strong:
            if groups is None:
                raise ParameterError("the strong averaging attack needs the grouping (groups=).")
            groups = torch.as_tensor(groups)
            ids = groups.unique()
            est = torch.stack([self._finish(e[groups == g].mean(0), mu, lam) for g in ids])
            return AveragingResult(est, ids)
        flat = e.abs().flatten(1)
        if self.similarity == "cosine":
            f = flat - flat.mean(0)
            f = f / f.norm(dim=1, keepdim=True).clamp_min(1e-12)
            sim = f @ f.T
        else:
            from ...metrics import ssim
            a = e.abs()
            sim = torch.stack([ssim(a, a[i].expand_as(a)) for i in range(a.shape[0])])
        sim.fill_diagonal_(-torch.inf)
        top = sim.topk(min(self.m, e.shape[0] - 1), dim=1).indices
        est = torch.stack([self._finish(torch.cat([e[i:i + 1], e[top[i]]]).mean(0), mu, lam)
                           for i in range(e.shape[0])])
        return AveragingResult(est, None)
