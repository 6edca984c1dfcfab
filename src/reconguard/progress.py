"""One progress-bar helper: ``for x in progress(items, "what"):`` (tqdm when enabled, the plain iterable when not).

Long work shows progress (DESIGN.md) and can be silenced (``--quiet``): every loop that may take more than a
few seconds wraps its iterable here instead of importing tqdm itself. ``progress(total=n, …)`` without an
iterable gives a bar to ``update()`` by hand (a no-op object when disabled), closed by ``with``.
"""

from __future__ import annotations

from typing import Iterable


class _Silent:
    """What ``progress(total=…)`` returns when disabled: the bar's methods, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def set_postfix(self, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def progress(items: Iterable | None = None, desc: str = "", *, enabled: bool = True, total: int | None = None,
             unit: str = "it", leave: bool = False):
    """``items`` wrapped in a tqdm bar (or returned as they are when ``enabled`` is false)."""
    if not enabled:
        return items if items is not None else _Silent()
    from tqdm.auto import tqdm
    return tqdm(items, desc=desc, total=total, unit=unit, leave=leave)
