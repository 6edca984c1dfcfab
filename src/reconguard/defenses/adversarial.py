"""Training against (or toward) PGD perturbations: AT-AT and classic adversarial training, one mechanism.

Loss per batch: ``w_clean · CE(f(x), y) + w_adv · CE(f(x + δ), y_adv)`` with ``δ`` an L∞ PGD in pixel units
(:func:`reconguard.attacks.adversarial.pgd`).

* **AT-AT** (AT-AT paper section 5, eq. 3): ``w_clean = 1``, ``w_adv = λ``, ``y_adv = y′`` drawn uniformly
  from the classes ≠ y (:meth:`ATAT.target_classes`), ``δ`` a *targeted* PGD toward ``y′``: the model is
  rewarded for the non-robust features that carry ``x`` to ``y′``. Presets: the rows of Table 6
  (:meth:`ATAT.preset`); checkpoint by a validation-accuracy window (appendix B) when ``acc_window`` is set.
* **Classic AT** (Madry et al. 2017): ``w_clean = 0``, ``w_adv = 1``, ``y_adv = y``, ``δ`` untargeted.
"""

from __future__ import annotations

import torch
from torch import nn

from ..attacks.adversarial.pgd import pgd
from ..checks import check_positive_int, check_scalar
from ..errors import UnknownOptionError
from .base import Defense


class PGDTraining(Defense):
    """The shared mechanism; use :class:`ATAT` or :class:`AdversarialTraining`."""

    targeted = False

    def __init__(self, eps: float, steps: int, step_size: float, clean_weight: float, adv_weight: float, *,
                 random_start: bool = True, bn_mode: str = "eval", normalization=None, seed: int = 0):
        self.eps = check_scalar(eps, "eps (pixel units)", low=0.0)
        self.steps = check_positive_int(steps, "steps")
        self.step_size = check_scalar(step_size, "step_size (pixel units)", low=0.0, low_open=True)
        self.clean_weight = check_scalar(clean_weight, "clean weight", low=0.0)
        self.adv_weight = check_scalar(adv_weight, "lambda (adversarial weight)", low=0.0)
        if bn_mode not in ("eval", "train"):
            raise UnknownOptionError(f"bn_mode must be 'eval' or 'train', got {bn_mode!r}.")
        self.random_start, self.bn_mode, self.normalization, self.seed = random_start, bn_mode, normalization, seed

    def adversarial_labels(self, y: torch.Tensor, num_classes: int) -> torch.Tensor:
        return y

    def loss(self, model: nn.Module, batch) -> tuple[torch.Tensor, dict]:
        x, y = batch[0], batch[1]
        logits = model(x)
        y_adv = self.adversarial_labels(y, logits.shape[1])
        x_adv = pgd(model, x, y_adv, self.eps, self.steps, self.step_size, targeted=self.targeted,
                    random_start=self.random_start, normalization=self.normalization, bn_mode=self.bn_mode)
        adv_logits = model(x_adv)
        loss = self.adv_weight * nn.functional.cross_entropy(adv_logits, y_adv)
        if self.clean_weight:
            loss = loss + self.clean_weight * nn.functional.cross_entropy(logits, y)
        hit = (adv_logits.argmax(1) == y_adv).float().sum()
        return loss, {"correct": float((logits.argmax(1) == y).float().sum()), "adv_hit": float(hit)}


class ATAT(PGDTraining):
    """Anti-adversarial training: ``CE(x, y) + λ·CE(x + δ, y′)``, δ a targeted PGD toward y′ ≠ y."""
    options = {"lam": "AT-AT weight λ of CE(x + δ, y′)", "steps": "PGD steps", "eps": "L∞ radius (pixel units)",
               "step_size": "PGD step (pixel units)", "preset": "a Table 6 row (facescrub-rn152, …) or digits",
               "acc_window": "keep the latest epoch whose validation accuracy is in [LO, HI] (appendix B)"}
    flag_names = {"lam": "lambda", "preset": "atat-preset"}

    targeted = True
    # Table 6 as printed (ε, step size and LR are ×1e−4 there; here in plain units). gamma: MultiStepLR decay.
    # The reference runs PGD on inputs normalised to [−1, 1], so its ε and step size are in those units:
    # twice pixel units. ``preset`` converts them (REFERENCE_SCALE); LR is unit-free.
    TABLE6 = {
        "facescrub-rn152": dict(lam=0.040, steps=3, gamma=0.4, eps=1.5e-4, step_size=0.5e-4, lr=4e-4),
        "facescrub-rn18": dict(lam=0.125, steps=5, gamma=0.1, eps=5e-4, step_size=1e-4, lr=1e-4),
        "facescrub-dn169": dict(lam=0.100, steps=3, gamma=0.4, eps=2e-4, step_size=0.7e-4, lr=4e-4),
        "celeba-rn152": dict(lam=0.020, steps=3, gamma=0.4, eps=1e-4, step_size=0.34e-4, lr=5e-4),
        "celeba-rn18-b": dict(lam=0.040, steps=4, gamma=0.4, eps=3e-4, step_size=0.75e-4, lr=10e-4),
        "celeba-rn18-a": dict(lam=0.010, steps=5, gamma=0.1, eps=50e-4, step_size=10e-4, lr=10e-4),
        "celeba-dn169": dict(lam=0.020, steps=3, gamma=0.4, eps=3e-4, step_size=1e-4, lr=5e-4),
        "dogs-rn152": dict(lam=0.080, steps=3, gamma=0.1, eps=5e-4, step_size=2e-4, lr=1e-4),
    }
    REFERENCE_SCALE = 2.0  # [−1, 1] units per pixel unit: ε_pixels = ε_table / 2
    # small scale (not in the paper), already in pixel units: digits 0–4 at 16×16, small ResNet-18; chosen so
    # the targeted PGD reaches y′ on most of a batch (measured in tests/test_defenses.py)
    SMALL = {"digits": dict(lam=0.5, steps=3, gamma=0.1, eps=0.05, step_size=0.02, lr=1e-3)}

    def __init__(self, lam: float = 0.04, steps: int = 3, eps: float = 1.5e-4, step_size: float = 0.5e-4, *,
                 random_start: bool = True, bn_mode: str = "eval", normalization=None,
                 acc_window: tuple[float, float] | None = None, seed: int = 0):
        super().__init__(eps, steps, step_size, 1.0, lam, random_start=random_start, bn_mode=bn_mode,
                         normalization=normalization, seed=seed)
        self.lam = self.adv_weight
        self.acc_window = acc_window
        self.select = "val_acc_window" if acc_window is not None else None
        self.fit_options: dict = {}

    @classmethod
    def preset(cls, name: str, **overrides) -> "ATAT":
        """A Table 6 row (ε and step size converted from the reference's [−1, 1] units to pixels) or
        ``digits``; ``.fit_options`` carries its ``lr`` and ``gamma`` for ``fit``."""
        if name in cls.TABLE6:
            row = dict(cls.TABLE6[name])
            row["eps"] /= cls.REFERENCE_SCALE
            row["step_size"] /= cls.REFERENCE_SCALE
        elif name in cls.SMALL:
            row = dict(cls.SMALL[name])
        else:
            raise UnknownOptionError(f"unknown AT-AT preset {name!r}; choose one of "
                                     f"{', '.join([*cls.TABLE6, *cls.SMALL])}.")
        fit_options = {"lr": row.pop("lr"), "gamma": row.pop("gamma")}
        row.update(overrides)
        obj = cls(**row)
        obj.fit_options = fit_options
        return obj

    @staticmethod
    def target_classes(y: torch.Tensor, num_classes: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """y′ uniform over the ``num_classes − 1`` classes other than y: ``(y + U{1..C−1}) mod C``."""
        num_classes = check_positive_int(num_classes, "num_classes")
        if num_classes < 2:
            raise UnknownOptionError("AT-AT needs at least 2 classes.")
        shift = torch.randint(1, num_classes, y.shape, generator=generator).to(y.device)
        return (y + shift) % num_classes

    def adversarial_labels(self, y, num_classes):
        return self.target_classes(y, num_classes)


class AdversarialTraining(PGDTraining):
    """Madry et al.'s PGD adversarial training: ``CE(x + δ, y)``, δ the untargeted PGD maximising the loss."""
    options = {"steps": "PGD steps", "eps": "L∞ radius (pixel units)", "step_size": "PGD step (pixel units)"}

    def __init__(self, eps: float = 8 / 255, steps: int = 10, step_size: float = 2 / 255, *, clean_weight: float = 0.0,
                 random_start: bool = True, bn_mode: str = "eval", normalization=None, seed: int = 0):
        super().__init__(eps, steps, step_size, clean_weight, 1.0, random_start=random_start, bn_mode=bn_mode,
                         normalization=normalization, seed=seed)
