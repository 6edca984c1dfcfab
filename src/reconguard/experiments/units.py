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
from pathlib import Path

import torch

from ..errors import ParameterError


class UnitCache:
    """The units folder carries reconguard's marker with the run's parameters: a folder at its path that reconguard
    did not write is refused (never used, never removed), and a resumed run whose parameters differ from the
    interrupted one's is refused with the first setting that differs."""

    def __init__(self, folder: str | Path | None, params: dict):
        from ..io import _marker
        from ..errors import OutputError

        self.folder = Path(folder) if folder is not None else None
        blob = json.dumps(params, sort_keys=True, default=str)
        self.params = json.loads(json.dumps(params, default=str))  # as given (order kept for the message)
        self.tag = hashlib.sha1(blob.encode()).hexdigest()[:12]
        self.loaded = 0
        if self.folder is not None and self.folder.exists():
            mark = _marker(self.folder) if self.folder.is_dir() else None
            if mark is None or mark.get("command") != UNITS:
                raise OutputError(f"{self.folder} is in the way and was not written by reconguard; move it, or "
                                  "choose another --out.")
            saved = mark.get("params")
            if saved is not None and saved != self.params:
                key, old, new = first_difference(saved, self.params)
                raise ParameterError(f"--resume: the interrupted run used {key} = {old!r}, this run asks for "
                                     f"{new!r}; resume with the same settings, or run without --resume to start over.")

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
        from ..io import mark_folder, save_torch_atomic

        if not self.folder.exists():
            self.folder.mkdir(parents=True)
            mark_folder(self.folder, UNITS, params=self.params)
        # listed before it exists (as train.py lists its checkpoint): a run killed between the save and the digest
        # leaves a unit its resume may use and remove, never one that keeps the folder as the user's
        save_torch_atomic(self._path(key), blob, record=UNITS)

    def clear(self) -> None:
        if self.folder is not None:
            from ..io import remove_owned

            remove_owned(self.folder)


UNITS = "units"


def first_difference(old, new, key: str = "") -> tuple[str, object, object]:
    """The first setting (dotted path) where two JSON-like values differ, with both values."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in list(old) + [k for k in new if k not in old]:  # in the order the settings were given
            if old.get(k) != new.get(k):
                return first_difference(old.get(k), new.get(k), f"{key}.{k}" if key else str(k))
    return key or "settings", old, new


def plain(obj):
    """A result dataclass (or dict / list of them) as weights_only-loadable plain values."""
    from ..results import to_jsonable

    return to_jsonable(obj)


def restore(cls, d: dict):
    """``cls(**d)`` keeping only its fields (computed keys of ``to_dict`` are dropped)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})
