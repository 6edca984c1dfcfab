"""Defenses by name, for the CLI and the recipes: ``make_defense("atat", {"lam": 0.04, …})``.

Names: nodef, atat, at, mid, bido, tldmi, tldmi-5, negls, rolss, rolss-ssf, trapmid (α 0.007, β 0.5),
trapmid-star (α 0.02, β 0.2), unseen-pixels, permuted. ``structural`` lists the defenses that change the
architecture (so a saved model is rebuilt with them before its weights load).
"""

from __future__ import annotations

from ..errors import UnknownOptionError
from .adversarial import ATAT, AdversarialTraining
from .bido import BiDO
from .mid import MID
from .negls import NegLS
from .permuted import PermutedLabels
from .rolss import RoLSS
from .tldmi import TLDMI
from .trapmid import TrapMID
from .unseen_pixels import UnseenPixels

DEFENSES = {
    "nodef": (None, {}),
    "atat": (ATAT, {}),
    "at": (AdversarialTraining, {}),
    "mid": (MID, {}),
    "bido": (BiDO, {}),
    "tldmi": (TLDMI, {"frozen": 7}),    # the reference's freeze_layers = 6 (i <= 6): conv1 … layer3
    "tldmi-5": (TLDMI, {"frozen": 6}),  # freeze_layers = 5: conv1 … layer2
    "negls": (NegLS, {}),
    "rolss": (RoLSS, {"scale": 0.0}),
    "rolss-ssf": (RoLSS, {"scale": 0.2}),
    "trapmid": (TrapMID, {"alpha": 0.007, "beta": 0.5}),
    "trapmid-star": (TrapMID, {"alpha": 0.02, "beta": 0.2}),
    "unseen-pixels": (UnseenPixels, {}),
    "permuted": (PermutedLabels, {}),
}
STRUCTURAL = ("mid", "rolss", "rolss-ssf")


def defense_names() -> list[str]:
    return list(DEFENSES)


def make_defense(name: str, options: dict | None = None):
    """The defense object (None for nodef); ``options`` are its constructor's keyword arguments.

    ``atat`` takes ``preset`` (a Table 6 row or ``digits``) besides its own arguments.
    """
    if name not in DEFENSES:
        raise UnknownOptionError(f"unknown defense {name!r}; choose one of {', '.join(DEFENSES)}.")
    cls, defaults = DEFENSES[name]
    options = {**defaults, **(options or {})}
    if cls is None:
        if options:
            raise UnknownOptionError(f"nodef takes no options, got {sorted(options)}.")
        return None
    if cls is ATAT and "preset" in options:
        preset = options.pop("preset")
        return ATAT.preset(preset, **options)
    try:
        return cls(**options)
    except TypeError as exc:
        import inspect
        allowed = [p for p in inspect.signature(cls).parameters if p != "self"]
        raise UnknownOptionError(f"defense {name}: {exc}; its options are {allowed}.") from None
