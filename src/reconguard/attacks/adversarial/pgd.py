"""Projected gradient descent in the L∞ ball, with ε and the step in **pixel [0, 1] units**.

Untargeted (Madry et al. 2017): ``δ ← Π(δ + α·sign ∇_δ CE(f(x+δ), y))`` — push away from ``y``.
Targeted (AT-AT, eq. 3): ``δ ← Π(δ − α·sign ∇_δ CE(f(x+δ), y′))`` — pull toward ``y′``.
``Π`` clips ``δ`` to ``[−ε, ε]`` and ``x + δ`` to ``[0, 1]``. With ``random_start`` the first ``δ`` is
uniform in the ball. When the model takes normalised inputs ``(x − mean)/std``, give
``normalization=(mean, std)``: the attack works on pixels and returns normalised inputs, so ε means
the same thing whatever the normalisation (the reference AT-AT code mixed the two units).

BatchNorm during the attack: ``bn_mode="eval"`` (default) runs the model in eval mode and restores
its mode after; ``"train"`` leaves it in train mode (batch statistics, and running statistics updated).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...checks import check_positive_int, check_scalar
from ...errors import ShapeError, UnknownOptionError
from ...results import Result
from ..base import Attack


def _norm_tensors(normalization, x: torch.Tensor):
    if normalization is None:
        return None, None
    mean, std = (torch.as_tensor(v, dtype=x.dtype, device=x.device).reshape(1, -1, *([1] * (x.ndim - 2)))
                 for v in normalization)
    return mean, std


def pgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float, steps: int, step_size: float, *,
        targeted: bool = False, random_start: bool = True, normalization=None, bn_mode: str = "eval",
        generator: torch.Generator | None = None) -> torch.Tensor:
    """Adversarial inputs (same units as ``x``) for labels ``y`` (the target labels when ``targeted``)."""
    eps = check_scalar(eps, "eps (pixel units)", low=0.0)
    step_size = check_scalar(step_size, "step_size (pixel units)", low=0.0)
    steps = check_positive_int(steps, "steps") if steps != 0 else 0
    if bn_mode not in ("eval", "train"):
        raise UnknownOptionError(f"bn_mode must be 'eval' or 'train', got {bn_mode!r}.")
    if y.shape[0] != x.shape[0]:
        raise ShapeError(f"{x.shape[0]} inputs but {y.shape[0]} labels.")
    mean, std = _norm_tensors(normalization, x)
    pixels = x.detach() if mean is None else (x.detach() * std + mean)
    if random_start and eps > 0:
        u = torch.rand(pixels.shape, generator=generator, dtype=pixels.dtype, device="cpu").to(pixels.device)
        delta = (2 * u - 1) * eps
        delta = (pixels + delta).clamp(0, 1) - pixels
    else:
        delta = torch.zeros_like(pixels)
    was_training = model.training
    if bn_mode == "eval":
        model.eval()
    try:
        sign = -1.0 if targeted else 1.0
        for _ in range(steps):
            delta.requires_grad_(True)
            inp = pixels + delta
            if mean is not None:
                inp = (inp - mean) / std
            loss = nn.functional.cross_entropy(model(inp), y)
            (grad,) = torch.autograd.grad(loss, delta)
            with torch.no_grad():
                delta = (delta + sign * step_size * grad.sign()).clamp(-eps, eps)
                delta = (pixels + delta).clamp(0, 1) - pixels
    finally:
        model.train(was_training)
    adv = (pixels + delta).detach()
    return adv if mean is None else (adv - mean) / std


@dataclass(frozen=True)
class AdversarialExamples(Result):
    """PGD's output: ``images`` in the units of the input (normalised when ``normalization`` was given)."""

    images: torch.Tensor
    method: str
    _skip_in_dict = ("images",)


class PGD(Attack):
    """L∞ PGD as an :class:`~reconguard.attacks.base.Attack` (ε and the step in pixel [0, 1] units).

    Args:
        model: the classifier attacked.
        eps: the L∞ radius (8/255); steps: iterations (10); step_size: α (2/255).
        targeted: step toward ``y`` instead of away from it; random_start: start uniform in the ball.
        normalization: ``(mean, std)`` when the model takes normalised inputs; bn_mode: ``"eval"`` / ``"train"``.

    ``run(x, y, generator=None)`` returns :class:`AdversarialExamples`.

    Example::

        adv = PGD(model, eps=8 / 255, steps=10).run(images, labels).images
    """

    name = "pgd"

    def __init__(self, model: nn.Module, eps: float = 8 / 255, steps: int = 10, step_size: float = 2 / 255, *,
                 targeted: bool = False, random_start: bool = True, normalization: tuple | None = None,
                 bn_mode: str = "eval"):
        super().__init__(model)
        self.eps, self.steps, self.step_size, self.targeted = eps, steps, step_size, targeted
        self.random_start, self.normalization, self.bn_mode = random_start, normalization, bn_mode

    def run(self, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator | None = None) -> AdversarialExamples:
        adv = pgd(self.target, x, y, self.eps, self.steps, self.step_size, targeted=self.targeted,
                  random_start=self.random_start, normalization=self.normalization, bn_mode=self.bn_mode,
                  generator=generator)
        return AdversarialExamples(adv, self.name)
