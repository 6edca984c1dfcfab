"""The result every bound function returns (:class:`Bound`), in a module of its own so that each representation of
E[G] (dense, low-rank) and the Ψ-bounds can return it without importing one another."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..results import Result


@dataclass(frozen=True)
class Bound(Result):
    """A lower bound on ``E‖x̂ − x‖²/d`` (``value``, a Python float) and what it was computed from.

    ``value`` is what to compare an attack with: when an input was sampled, the lower confidence
    bound at ``level``; ``point`` is then the plug-in value and ``stderr`` its jackknife s.e.
    (``point == value`` and ``stderr == 0`` when E[G] and S are exact). ``cut`` names the rule that
    set the spectrum's zero threshold.
    """

    name: str
    value: float
    formula: str
    d: int
    sigma: float | None = None
    tau: float | None = None
    rank: int | None = None  # rank of E[G] used (None when the bound does not use it)
    inputs: dict = field(default_factory=dict)
    point: float | None = None
    stderr: float | None = None
    level: float | None = None
    cut: str | None = None
    kind: str = ""  # the rule that produced ``value`` (e.g. "corollary 1", "theorem 1 (sample not saturated)")
    saturation: dict | None = None  # the E[G] sample's saturation check (Saturation.to_dict())
    guarantee: bool = True  # False for a heuristic (τ > 0): never counted as a bound that held
    plugin: float | None = None  # the formula at the estimates as they stand (the paper's procedure); on an
    #                              unsaturated sample it overstates, and ``value`` comes from another rule

    def __float__(self) -> float:
        return self.value
