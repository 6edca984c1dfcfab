"""One shape for every attack: built from its target and its settings, called as ``run(observation) -> Result``.

torchattacks' shape (``atk = PGD(model, eps=8/255); adv = atk(images, labels)``) and breaching's one verb
(``reconstruct(payload, shared)``) are the models::

    attack = MMSEAttack(encoder, prior, sigma=1e-3)   # the target and the attack's settings
    result = attack.run(embeddings)                   # the observation → a Result dataclass
    result = attack(embeddings)                       # the same call

Attacks that learn something before they attack (a decoder, a similarity network) have ``fit(...)`` first.
The base does once what each attack used to do by hand: it finds the target's device
(:func:`module_device`), and :meth:`Attack.frozen` puts modules in eval mode with their parameters frozen for
the attack's duration and restores both afterwards, whatever happens inside.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar, Iterator

import torch
from torch import nn

from ..results import Result


def module_device(module: nn.Module | None, default: str | torch.device = "cpu") -> torch.device:
    """The device of a module's first parameter or buffer (``default`` when it has none)."""
    if module is not None:
        for t in list(module.parameters()) + list(module.buffers()):
            return t.device
    return torch.device(default)


@dataclass(frozen=True)
class Reconstruction(Result):
    """Reconstructed inputs: ``images`` is ``N×d`` (flattened, for the embedding attacks) or ``N×C×H×W``."""

    images: torch.Tensor
    method: str
    _skip_in_dict = ("images",)


class Attack:
    """Base of every attack in :mod:`reconguard.attacks`.

    Subclasses set ``name`` and implement ``run(observation, ...) -> Result``; ``target`` is the module
    attacked (an encoder, a classifier) or ``None`` when the observation alone is attacked (an encrypted
    release). ``device`` defaults to the target's.
    """

    name: ClassVar[str] = "attack"

    def __init__(self, target: nn.Module | None = None, *, device: str | torch.device | None = None):
        self.target = target
        self.device = torch.device(device) if device is not None else module_device(target)

    def run(self, *observation, **kwargs) -> Result:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __call__(self, *observation, **kwargs) -> Result:
        return self.run(*observation, **kwargs)

    @staticmethod
    @contextmanager
    def frozen(*modules: nn.Module | None) -> Iterator[None]:
        """Eval mode and ``requires_grad=False`` for the modules' parameters; both restored on exit."""
        modules = tuple(m for m in modules if m is not None)
        modes = [m.training for m in modules]
        params = [p for m in modules for p in m.parameters() if p.requires_grad and p.is_leaf]
        for m in modules:
            m.eval()
        for p in params:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for m, mode in zip(modules, modes):
                m.train(mode)
            for p in params:
                p.requires_grad_(True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(target={type(self.target).__name__ if self.target is not None else None})"


@dataclass(frozen=True)
class Recovered(Result):
    """What a registry attack returns: reconstructions (``N×d`` for embeddings, ``N×C×H×W`` for encryptions),
    its name and options, and what it chose (``detail``: e.g. the MAP attack's β)."""

    attack: str
    images: torch.Tensor
    options: dict
    detail: dict = field(default_factory=dict)
    _skip_in_dict = ("images",)
