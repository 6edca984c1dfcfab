"""What every defense carries besides its training hooks: the knowledge the pipeline around it needs.

A defense is a plain object of hooks for :func:`reconguard.train.fit`, each optional: the names are declared
once in :data:`reconguard.train.HOOKS`, ``fit`` asks only for those, and a subclass method whose name is a near miss of one
(``on_epcoh``, ``prepre``) fails when the class is created — a misspelled override cannot silently do nothing.
This base adds, with defaults that fit most defenses, what the recipes, the CLI and the saved-model loader used
to know by the defense's name:

- ``options``: the constructor arguments offered as CLI flags, ``{argument: help}`` (the flag's type and
  default come from the constructor's signature; ``flag_names`` renames a flag, e.g. ``lam`` → ``--lambda``);
- ``needs_public_model``: it starts from a classifier pre-trained on the public split (``pretrained=``);
- ``augmentation``: ``"crop"`` (random crops, the default), ``"no-crop"`` (its own input mask must line up
  with the pixels) or ``None`` (trains on the exact images);
- ``labels_meaningful``: ``False`` when the labels it trains on are not the classes (AttAcc is then undefined);
- ``checkpoints``: ``False`` when its training cannot be resumed from a checkpoint;
- ``structure()`` / ``structural``: the architecture change a saved model must be rebuilt with before its
  weights load; ``report()``: extra numbers for the results row; ``train_labels(labels)``: the labels
  the model was trained to give; ``saved_module(model)``: the module to save (without a deploy-time wrapper).

Adding a defense is one file with a subclass and one line in :mod:`reconguard.defenses.registry`.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ..train import HOOKS


BASE_METHODS = frozenset({"structure", "report", "train_labels", "deploy", "saved_module"})


def _near_miss(name: str) -> str | None:
    import difflib

    if name.startswith("_") or name in HOOKS or name in BASE_METHODS:
        return None
    close = difflib.get_close_matches(name, sorted(HOOKS | BASE_METHODS), n=1, cutoff=0.8)
    return close[0] if close else None


class Defense:
    options: ClassVar[dict[str, str]] = {}
    flag_names: ClassVar[dict[str, str]] = {}
    needs_public_model: ClassVar[bool] = False
    augmentation: ClassVar[str | None] = "crop"
    labels_meaningful: ClassVar[bool] = True
    checkpoints: ClassVar[bool] = True
    structural: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, value in vars(cls).items():
            hook = _near_miss(name) if callable(value) else None
            if hook is not None:
                raise TypeError(f"{cls.__name__}.{name}: not a defense hook — did you mean {hook!r}? The hooks are "
                                f"{', '.join(sorted(HOOKS | BASE_METHODS))}.")

    def structure(self) -> dict:
        return {}

    def report(self) -> dict:
        return {}

    def train_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return labels

    def deploy(self, model: nn.Module) -> nn.Module:
        return model

    def saved_module(self, model: nn.Module) -> nn.Module:
        return model


class NoDefense(Defense):
    """Plain training (the paper's NoDef): no hooks."""

