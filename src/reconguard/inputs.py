"""The one edge: every external input that is not a tensor (argv values, recipes, JSON files) is read and checked
here, before any work; past this layer, anything unexpected is an internal error.

* **Text files** are UTF-8; another encoding is refused by name (:func:`read_text`).
* **YAML** (recipes): PyYAML's safe loader, with duplicate keys refused (the last would silently win) and at most
  ``MAX_ALIASES`` alias expansions (an alias bomb would take minutes and gigabytes) (:func:`load_yaml`).
* **JSON**: a mapping, with a typed schema where reconguard reads fields (:func:`check_fields`,
  :data:`CHALLENGE_FIELDS` for ``challenge.json``).
* **Seeds**: integers ``0 ≤ seed < 2⁶³`` (torch's generator takes a signed 64-bit seed) (:func:`check_seed`).
* **Devices**: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``, checked against what this torch build has
  (:func:`check_device`).

Arrays, images, user modules and checkpoints are checked where they are read, by the same rule: a user's
mistake is one :mod:`reconguard.errors` error naming the input and the fix (``checks.load_array``,
``data.imagefile.read_image``, ``audit.loading``, ``train.fit``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .errors import CorruptDataError, DataFileNotFoundError, ParameterError, UnknownOptionError

MAX_ALIASES = 20  # a recipe needs few; each alias can multiply what a walk over the data visits
SEED_LIMIT = 2**63


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of ``path``, or one clear error (missing, unreadable, not UTF-8)."""
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"{what} {path} does not exist.")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorruptDataError(f"{what} {path} cannot be read ({exc.strerror}).") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"{what} {path} is not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start}); "
                               "save it as UTF-8.") from None


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML with the safe loader, refusing duplicate keys and capping alias expansions."""
    import yaml

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                Loader.aliases += 1
                if Loader.aliases > MAX_ALIASES:
                    raise CorruptDataError(f"{source}: more than {MAX_ALIASES} YAML aliases (*name); write the values "
                                           "out instead.")
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise CorruptDataError(f"{source}: the key {key!r} appears twice (line {key_node.start_mark.line + 1}); "
                                           "keep one.")
                seen.add(key)
            return super().construct_mapping(node, deep)

    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 — a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise CorruptDataError(f"{source} is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise CorruptDataError(f"{source}: YAML nested too deeply.") from None


def load_json(path: str | Path, what: str) -> dict:
    """A JSON file holding a mapping, or one clear error."""
    text = read_text(path, what)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CorruptDataError(f"{what} {path} is not valid JSON ({exc}).") from None
    if not isinstance(data, dict):
        raise CorruptDataError(f"{what} {path} must hold a JSON object, not a {type(data).__name__}.")
    return data


def _int(low: int | None = None):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int) or (low is not None and v < low):
            return f"an integer ≥ {low}" if low is not None else "an integer"
    return check


def _number(low: float, high: float, low_open: bool = False):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > low if low_open else v >= low) or v > high:
            return f"a number in {'(' if low_open else '['}{low:g}, {high:g}]"
    return check


def _choice(*options):
    def check(v):
        if v not in options:
            return f"one of {list(options)}"
    return check


def _optional(inner):
    def check(v):
        return None if v is None else inner(v)
    return check


def _shape(v):
    if not (isinstance(v, list) and len(v) == 3 and all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                                         for n in v)):
        return "a list of three positive integers [C, H, W]"


def _normalization(v):
    if v in ("dataset", "symmetric") or v is None:
        return None
    if (isinstance(v, list) and len(v) == 2 and all(isinstance(p, list) and p and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in p) for p in v)):
        return None
    return "'dataset', 'symmetric' or [mean per channel, std per channel]"


def _string(v):
    if not isinstance(v, str):
        return "a string"


CHALLENGE_FIELDS = {  # what `instahide challenge` writes; every field optional, each typed when present
    "k": _int(2), "n": _int(1), "T": _int(1), "mode": _choice("inside", "cross"),
    "c1": _optional(_number(0.0, 1.0, low_open=True)), "c2": _optional(_number(0.0, 1.0)),
    "masked": _choice(True, False), "shape": _optional(_shape), "normalization": _normalization,
    "labels": _optional(_string), "public_normalize": _optional(_choice("private", "own")),
}


def check_fields(data: dict, fields: dict, source: str,
                 fix: str = "write it again with `reconguard instahide challenge`, or fix the field") -> dict:
    """Check each known field of ``data`` against its rule (unknown fields are left for the reader)."""
    for key, rule in fields.items():
        if key in data:
            want = rule(data[key])
            if want:
                raise CorruptDataError(f"{source}: {key} = {data[key]!r} must be {want}; {fix}.")
    return data


def check_seed(value: Any, name: str = "seed") -> int:
    """An integer seed ``0 ≤ seed < 2⁶³``."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ParameterError(f"{name} must be a whole number, got {value!r}.") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise ParameterError(f"{name} must be a whole number from 0 to 2^63 − 1, got {value!r}.")
    return int(value)


_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+|mps)$")


def check_device(name: Any):
    """``auto`` (CUDA when present), ``cpu``, ``cuda`` or ``cuda:N`` as a ``torch.device``; a device this build or
    machine does not have is one clear error."""
    import torch

    text = str(name).strip().lower()
    if not _DEVICE.match(text):
        raise UnknownOptionError(f"--device {name!r}: give auto, cpu, cuda or cuda:N.")
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if text.startswith("cuda"):
        if not torch.cuda.is_available():
            why = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA device is visible"
            raise ParameterError(f"--device {name}: {why}; use --device cpu (or auto).")
        index = int(text.split(":")[1]) if ":" in text else 0
        if index >= torch.cuda.device_count():
            raise ParameterError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) here "
                                 f"(cuda:0 … cuda:{torch.cuda.device_count() - 1}).")
    if text == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ParameterError("--device mps: not available here; use --device cpu (or auto).")
    return torch.device(text)
