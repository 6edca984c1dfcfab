"""Frozen result dataclasses and their JSON form.

Every result reconguard reports is a frozen dataclass with ``to_dict()``; the dict is plain
JSON (tensors and arrays become lists, non-finite floats become null) so that every
number a user sees can be traced to the JSON file it came from.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch


def to_jsonable(value: Any) -> Any:
    """Convert tensors, arrays, dataclasses and non-finite floats to plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return value.to_dict()
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()] if value.ndim else to_jsonable(value.item())
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON null (strict JSON has no ∞ / NaN); see the module docstring
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


class Result:
    """Mixin for frozen result dataclasses: ``to_dict()`` gives their JSON form.

    Fields whose name starts with ``_`` or that are listed in ``_skip_in_dict`` (large
    matrices) are left out of the dict.
    """

    _skip_in_dict: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name.startswith("_") or f.name in self._skip_in_dict:
                continue
            out[f.name] = to_jsonable(getattr(self, f.name))
        return out


@dataclasses.dataclass(frozen=True)
class RecipeResult(Result):
    """What every recipe run records first: which recipe, which preset, its title and its settings."""

    recipe: str
    preset: str
    title: str
    settings: dict
