"""Robust accuracy under the AutoAttack ensemble (Croce & Hein 2020), ε in pixel [0, 1] units
(AT-AT paper section 4, appendix F.3).

The attacks come from an established implementation — torchattacks (installed with ``--no-deps``;
``make`` does it): APGD-CE, APGD-T (targeted DLR), FAB-T (multi-targeted) and Square. For each ε the
per-attack robust accuracy is the fraction of the (fixed) subset still classified correctly under that
attack; the worst case ("AutoAttack robust accuracy") counts a sample as robust only when it is clean-
correct and survives every attack, run in sequence on the survivors as AutoAttack does.
``steps`` / ``n_queries`` trade strength for time (the paper used AutoAttack's defaults: 100 / 5000).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..checks import check_scalar
from ..errors import ParameterError, ShapeError, UnknownOptionError
from ..results import Result

ATTACKS = ("apgd-ce", "apgd-t", "fab-t", "square")
PAPER_EPS = (0.031, 0.0025, 0.0005, 1e-5)


def _torchattacks():
    try:
        import torchattacks
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ParameterError("robust_accuracy needs torchattacks: pip install --no-deps torchattacks "
                             "(its listed requirements would replace torch with a CUDA build).") from exc
    return torchattacks


def make_attack(name: str, model: nn.Module, eps: float, num_classes: int, steps: int, n_queries: int, seed: int):
    ta = _torchattacks()
    if name == "apgd-ce":
        return ta.APGD(model, norm="Linf", eps=eps, steps=steps, n_restarts=1, seed=seed, loss="ce")
    if name == "apgd-t":
        return ta.APGDT(model, norm="Linf", eps=eps, steps=steps, n_restarts=1, seed=seed, n_classes=num_classes)
    if name == "fab-t":
        return ta.FAB(model, norm="Linf", eps=eps, steps=steps, n_restarts=1, seed=seed, multi_targeted=True,
                      n_classes=num_classes)
    if name == "square":
        return ta.Square(model, norm="Linf", eps=eps, n_queries=n_queries, n_restarts=1, seed=seed)
    raise UnknownOptionError(f"unknown attack {name!r}; choose from {', '.join(ATTACKS)}.")


@dataclass(frozen=True)
class RobustAccuracy(Result):
    eps: float
    n: int
    clean: float
    per_attack: dict = field(default_factory=dict)  # name → robust accuracy (that attack alone)
    worst: float = float("nan")  # robust under every attack (the AutoAttack number)


@torch.no_grad()
def _correct(model, x, y, batch=256):
    return torch.cat([model(x[i:i + batch]).argmax(1) == y[i:i + batch] for i in range(0, len(x), batch)])


def robust_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float, *, attacks=ATTACKS,
                    steps: int = 100, n_queries: int = 5000, seed: int = 0) -> RobustAccuracy:
    """Robust accuracy of ``model`` on ``(x, y)`` (pixels in [0, 1]) at L∞ radius ``eps``."""
    eps = check_scalar(eps, "eps (pixel units)", low=0.0)
    if x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ShapeError(f"robust_accuracy needs a non-empty batch with one label per image: {x.shape[0]} vs {y.shape[0]}.")
    if x.min() < 0 or x.max() > 1:
        raise ParameterError("robust_accuracy works in pixel units: inputs must lie in [0, 1] (put any normalisation "
                             "inside the model).")
    bad = [a for a in attacks if a not in ATTACKS]
    if bad:
        raise UnknownOptionError(f"unknown attacks {bad}; choose from {', '.join(ATTACKS)}.")
    model = model.eval()
    device = next(model.parameters()).device
    x, y = x.to(device), y.to(device)
    with torch.no_grad():
        num_classes = int(model(x[:1]).shape[1])
    clean = _correct(model, x, y)
    robust_all = clean.clone()
    per = {}
    for name in attacks:
        attack = make_attack(name, model, eps, num_classes, steps, n_queries, seed)
        idx = torch.nonzero(clean).squeeze(1)
        ok = torch.zeros_like(clean)
        if len(idx):
            with torch.enable_grad():
                adv = attack(x[idx], y[idx])
            ok[idx] = _correct(model, adv, y[idx])
        per[name] = float(ok.float().mean())
        robust_all &= ok
    return RobustAccuracy(eps, len(x), float(clean.float().mean()), per, float(robust_all.float().mean()))
