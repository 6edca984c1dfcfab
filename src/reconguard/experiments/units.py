"""Per-unit resume for the long recipes: every finished unit (a sweep's encoder, a model of the mia
recipes, a scheme of the attack suite) is saved as it completes, in a folder kept beside the output
until the whole run has been written; ``reconguard run … --resume`` loads the finished units instead of
recomputing them. Units are keyed by the recipe's parameters and the unit's own key, so a resumed run
with other parameters recomputes everything. Each unit is deterministic given its seed, so the final
numbers equal an uninterrupted run's. Files load with ``weights_only=True`` (plain dicts, lists,
numbers, strings and tensors)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch


class UnitCache:
    def __init__(self, folder: str | Path | None, params: dict):
        self.folder = Path(folder) if folder is not None else None
        blob = json.dumps(params, sort_keys=True, default=str)
        self.tag = hashlib.sha1(blob.encode()).hexdigest()[:12]
        self.loaded = 0

    def _path(self, key: str) -> Path:
        return self.folder / f"{self.tag}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.pt"

    def get(self, key: str):
        """The saved unit, or None (not saved, unreadable, or no folder)."""
        if self.folder is None:
            return None
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 — a unit cut short by a kill is simply recomputed
            return None
        self.loaded += 1
        return blob

    def put(self, key: str, blob) -> None:
        if self.folder is None:
            return
        from ..io import save_torch_atomic

        self.folder.mkdir(parents=True, exist_ok=True)
        save_torch_atomic(self._path(key), blob)

    def clear(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def plain(obj):
    """A result dataclass (or dict / list of them) as weights_only-loadable plain values."""
    from ..results import to_jsonable

    return to_jsonable(obj)


def restore(cls, d: dict):
    """``cls(**d)`` keeping only its fields (computed keys of ``to_dict`` are dropped)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})
