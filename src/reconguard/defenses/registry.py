"""Defenses by name, for the CLI and the recipes: ``make_defense("atat", {"lam": 0.04, …})``.

One line per name: the class and the constructor defaults that make the variant. A new defense is one file
(a :class:`~reconguard.defenses.base.Defense` subclass) plus one line here; the CLI's flags come from
``options`` and the constructors' signatures (:func:`defense_flags`).

``NO_DEFENSE`` and ``EXPERIMENT`` name the AT-AT paper's randomised experiment (appendix H): AT-AT
(treated) against plain training (control).
"""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import UnknownOptionError
from .adversarial import ATAT, AdversarialTraining
from .base import Defense, NoDefense
from .bido import BiDO
from .dpsgd import DPSGD
from .instahide import InstaHideTraining
from .mid import MID
from .negls import NegLS
from .permuted import PermutedLabels
from .rolss import RoLSS
from .tldmi import TLDMI
from .trapmid import TrapMID
from .unseen_pixels import UnseenPixels

DEFENSES: dict[str, tuple[type[Defense], dict]] = {
    "nodef": (NoDefense, {}),
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
    "dpsgd": (DPSGD, {}),
    "instahide-training": (InstaHideTraining, {}),  # InstaHide's own training (re-encrypted every epoch)
}
NO_DEFENSE = "nodef"
EXPERIMENT = ("atat", NO_DEFENSE)  # (treated, control) of the randomised experiment
STRUCTURAL = tuple(n for n, (cls, _) in DEFENSES.items() if cls.structural)


def defense_names() -> list[str]:
    return list(DEFENSES)


def defense_class(name: str) -> type[Defense]:
    if name not in DEFENSES:
        raise UnknownOptionError(f"unknown defense {name!r}; choose one of {', '.join(DEFENSES)}.")
    return DEFENSES[name][0]


def make_defense(name: str, options: dict | None = None) -> Defense:
    """The defense object; ``options`` are its constructor's keyword arguments.

    ``atat`` takes ``preset`` (a Table 6 row or ``digits``) besides its own arguments.
    """
    cls = defense_class(name)
    options = {**DEFENSES[name][1], **(options or {})}
    if cls is NoDefense and options:
        raise UnknownOptionError(f"{name} takes no options, got {sorted(options)}.")
    if "preset" in options and hasattr(cls, "preset"):
        preset = options.pop("preset")
        return cls.preset(preset, **options)
    try:
        return cls(**options)
    except TypeError as exc:
        allowed = [p for p in inspect.signature(cls).parameters if p != "self"]
        raise UnknownOptionError(f"defense {name}: {exc}; its options are {allowed}.") from None


def defense_flags() -> dict[str, dict[str, Any]]:
    """CLI flags from the defenses' ``options`` and constructor signatures:
    ``{argument: {"flag", "type", "nargs", "help", "defenses"}}``, one entry per argument name."""
    flags: dict[str, dict[str, Any]] = {}
    for name, (cls, _) in DEFENSES.items():
        params = inspect.signature(cls).parameters
        for arg, text in cls.options.items():
            p = params.get(arg)
            default = None if p is None or p.default is inspect.Parameter.empty else p.default
            annotation = str(p.annotation) if p is not None else "str"
            kind = (float if "float" in annotation or isinstance(default, float) else
                    int if "int" in annotation or isinstance(default, int) else str)
            entry = flags.setdefault(arg, {"flag": "--" + cls.flag_names.get(arg, arg).replace("_", "-"),
                                           "type": kind, "nargs": 2 if "tuple" in annotation else None,
                                           "help": [], "defenses": []})
            if text not in entry["help"]:
                entry["help"].append(text)
            entry["defenses"].append(name)
    for entry in flags.values():
        entry["help"] = "; ".join(entry["help"])
    return flags
