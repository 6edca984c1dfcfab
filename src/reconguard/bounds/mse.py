"""MSE bounds of the spectral-bounds paper (sections 3.1–3.3) and the no-information ceiling.

With ``E[I_e] = E[G]/σ²`` (eq. 1), for any attack ``x̂ = Att(e)``, ``E‖x̂ − x‖²/d`` is at least

* Theorem 1 (Maeng et al.), eq. 2:   ``d / (Tr(E[G])/σ² + Tr(S))``
* Corollary 1, eq. 3:                ``Tr((E[G]/σ² + S)⁻¹) / d``
* Corollary 2, eq. 6 (σ = 0):        ``Tr((Uᵀ S U)⁻¹) / d``, U an orthonormal basis of null(E[G])
* ceiling (no information, §5.5):    ``Tr(S⁻¹) / d``

Corollary 1 is evaluated through the generalised eigenproblem ``E[G] v = θ S v`` (``VᵀSV = I``),
computed once per (E[G], S) pair: ``Tr((E[G]/σ² + S)⁻¹) = Σ_i ‖v_i‖² / (θ_i/σ² + 1)`` for every σ.
Corollary 2 reuses the eigendecomposition of ``E[G]`` for every τ.

Never overstating: eigenvalues are cut at float64 round-off (``d·eps·λ_max``, eps of float64, the
precision E[G] is accumulated in; ``Bound.cut`` says which rule applied). When E[G] or S was
estimated by sampling (a ``FisherEstimate`` / ``ScoreMatrix`` with blocks) the reported ``value`` is
the one-sided lower confidence bound at ``level`` (default 95 %) from a grouped jackknife
(:mod:`reconguard.bounds.sampling`); ``point`` is the plug-in value and ``stderr`` its standard error.

A sampled E[G] carries its saturation check (:mod:`reconguard.bounds.saturation`). Corollaries 1 and 2 use
the plug-in only on a saturated (or exact) E[G]; otherwise Corollary 1 becomes the tangent-plane bound from
held-out inputs or Theorem 1, whichever is larger, and Corollary 2 becomes 0. ``Bound.kind`` names the rule
that produced ``value``; ``Bound.guarantee`` is false for the paper's τ > 0 heuristic (never the default).
"""

from __future__ import annotations

import contextlib
import hashlib
import math

import numpy as np
import scipy.linalg
import torch

from ..checks import as_square_matrix, check_sigma, check_tau
from ..errors import ParameterError
from .fisher import FisherEstimate, as_fisher, split_range_null
from .result import Bound
from .sampling import DEFAULT_LEVEL, Jackknife, with_sampling_error
from .saturation import NOT_DIFFERENTIABLE, corollary1_rule, corollary2_rule, dense_tangent, differentiable, zero_bound


def _finish(name: str, jk: Jackknife, formula: str, d: int, **kw) -> Bound:
    return Bound(name, jk.lcb, formula, d, point=jk.point, stderr=jk.stderr, level=jk.level, **kw)


def _cut(fisher: FisherEstimate) -> str:
    return f"round-off: d·eps(float64)·λ_max = {fisher.d * fisher.eps:.3g}·λ_max"


def _summary(fisher: FisherEstimate, S) -> dict:
    return {"trace_G": fisher.trace, "lambda_max_G": fisher.lambda_max,
            "trace_S": float(torch.trace(getattr(S, "matrix", S))), "k": fisher.k, "fisher_method": fisher.method,
            "fisher_exact": fisher.exact, "m": fisher.m, "jacobian_dtype": fisher.jacobian_dtype,
            "fisher_groups": fisher.groups, "score_groups": getattr(S, "groups", 0),
            "score_samples": getattr(S, "n", None)}


def _lowrank(fisher, S):
    """``(LowRankFisher, StructuredScore)`` when ``fisher`` is low-rank (S: a scalar ``s`` for ``s·I``, a diagonal, a
    ``StructuredScore``, or a d×d matrix replaced by its conservative Gershgorin diagonal), else None."""
    from .lowrank import LowRankFisher
    from .structured import StructuredScore

    if not isinstance(fisher, LowRankFisher):
        return None
    if isinstance(S, StructuredScore):
        return fisher, S
    t = torch.as_tensor(getattr(S, "matrix", S), dtype=torch.float64)
    if t.ndim == 0:
        return fisher, StructuredScore.isotropic(float(t), fisher.d)
    if t.ndim == 1:
        return fisher, StructuredScore.diagonal(t)
    return fisher, StructuredScore.diagonal_from(t)


def _dense_S(S, d: int):
    """A scalar ``s`` (``s·I``), a diagonal or a ``StructuredScore`` as the d×d matrix the dense path takes."""
    from .structured import StructuredScore

    if isinstance(S, StructuredScore):
        return S.dense()
    if isinstance(S, (int, float)) or (isinstance(S, torch.Tensor) and S.ndim <= 1):
        t = torch.as_tensor(S, dtype=torch.float64)
        return torch.diag(t) if t.ndim == 1 else float(t) * torch.eye(d, dtype=torch.float64)
    return S


def _prepare(fisher, S):
    """``(fisher, S)`` checked; S stays a ``ScoreMatrix`` (its blocks carry the sampling error)."""
    fisher = as_fisher(fisher)
    S = _dense_S(S, fisher.d)
    matrix = as_square_matrix(S, fisher.d, "S (score matrix)")
    if getattr(S, "groups", 0):
        return fisher, S
    return fisher, matrix


@contextlib.contextmanager
def _few_samples_explained(S, d: int):
    """A singular S from too few samples — a mean of fewer than d score outer products, or the jackknife's
    leave-one-group-out means — is refused with the count, the count needed and the bound that needs only Tr(S)."""
    try:
        yield
    except ParameterError as exc:
        n, groups = getattr(S, "n", None), getattr(S, "groups", 0)
        need = d + 1 if groups < 2 else math.ceil((d + 1) * groups / (groups - 1))
        if n is None or getattr(S, "exact", True) or n >= need:
            raise
        held = f" (its jackknife leaves one of {groups} groups out, ≈ {n - n // groups} samples)" if groups > 1 else ""
        raise ParameterError(f"{exc} Here S is a mean of {n} score outer products in d = {d} dimensions{held}: a mean "
                             f"of fewer than d is singular. Estimate S from at least {need} samples "
                             "(estimate_score_matrix(..., n=…) or more data=), or use maeng_bound (Theorem 1), which "
                             "needs only Tr(S).") from exc


def _generalised_eig(fisher: FisherEstimate, S: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """``(θ, ‖v_i‖²)`` of ``E[G] v = θ S v``, cached on the estimate per S."""
    S = S.contiguous()
    key = ("geig", hashlib.sha1(S.numpy().tobytes()).hexdigest())
    if key not in fisher._cache:
        try:
            theta, V = scipy.linalg.eigh(fisher.matrix.numpy(), S.numpy())
        except np.linalg.LinAlgError as exc:
            raise ParameterError("S (score matrix) must be positive definite for Corollary 1; "
                                 f"its Cholesky factorisation failed ({exc}).") from exc
        # eigenvalues within float64 round-off of zero are exactly zero (the τ = 0 rule of
        # split_range_null); otherwise 1/σ² would amplify round-off at tiny σ
        theta = np.where(theta <= fisher.d * fisher.eps * max(theta.max(), 0.0), 0.0, theta)
        fisher._cache[key] = (theta, (V * V).sum(0))
    return fisher._cache[key]


def _maeng_value(sigma: float):
    def value(f: FisherEstimate, S_m: torch.Tensor) -> float:
        if sigma == 0 and f.trace > 0:
            return 0.0
        denom = (f.trace / sigma**2 if sigma > 0 else 0.0) + float(torch.trace(S_m))
        if denom <= 0:
            raise ParameterError("Tr(E[G])/σ² + Tr(S) must be positive for Theorem 1 (S is zero?).")
        return f.d / denom
    return value


def maeng_bound(fisher, S, sigma: float, *, level: float = DEFAULT_LEVEL) -> Bound:
    """Theorem 1 (eq. 2): ``d / (Tr(E[G])/σ² + Tr(S))``; 0 as σ → 0 (the trivial limit). Valid from any sample:
    Tr(E[G]) is a mean the sample estimates without bias whatever its rank — of a differentiable encoder (else 0,
    :mod:`reconguard.bounds.differentiable`)."""
    if (low := _lowrank(fisher, S)) is not None:
        from .lowrank import lowrank_maeng_bound
        return lowrank_maeng_bound(*low, sigma, level=level)
    fisher, S = _prepare(fisher, S)
    sigma = check_sigma(sigma)
    ok = differentiable(fisher.saturation)
    return _finish("maeng", with_sampling_error(_maeng_value(sigma), fisher, S, level) if ok else zero_bound(level),
                   "d / (Tr(E[G])/sigma^2 + Tr(S))", fisher.d, sigma=sigma, inputs=_summary(fisher, S),
                   kind="theorem 1" if ok else NOT_DIFFERENTIABLE, saturation=fisher.saturation.to_dict())


def mse_bound(fisher, S, sigma: float, *, level: float = DEFAULT_LEVEL) -> Bound:
    """Corollary 1 (eq. 3): ``Tr((E[G]/σ² + S)⁻¹)/d`` for σ > 0 — the plug-in with its jackknife on an exact or
    saturated E[G]; on an unsaturated sample the larger of the tangent-plane bound from the held-out inputs and
    Theorem 1, each at level (1 + level)/2 (:mod:`reconguard.bounds.saturation`). ``fisher`` dense or low-rank."""
    if (low := _lowrank(fisher, S)) is not None:
        from .lowrank import lowrank_mse_bound
        return lowrank_mse_bound(*low, sigma, level=level)
    fisher, S = _prepare(fisher, S)
    sigma = check_sigma(sigma)
    if sigma == 0:
        raise ParameterError("mse_bound (Corollary 1) needs sigma > 0; for a noise-free encoder use "
                             "noiseless_mse_bound (Corollary 2).")

    def value(f: FisherEstimate, S_m: torch.Tensor) -> float:
        theta, weight = _generalised_eig(f, S_m)
        return float(np.sum(weight / (theta / sigma**2 + 1.0))) / f.d

    sat = fisher.saturation
    with _few_samples_explained(S, fisher.d):
        theta, _ = _generalised_eig(fisher, getattr(S, "matrix", S))
        jk, kind = corollary1_rule(sat, lambda lv: with_sampling_error(value, fisher, S, lv),
                                   (lambda lv: dense_tangent(fisher, S, sigma, lv)) if fisher.heldout else None,
                                   lambda lv: with_sampling_error(_maeng_value(sigma), fisher, S, lv), level)
    return _finish("mse", jk, "Tr((E[G]/sigma^2 + S)^-1) / d", fisher.d, sigma=sigma, rank=int(np.sum(theta > 0)),
                   inputs=_summary(fisher, S), cut=_cut(fisher), kind=kind, saturation=sat.to_dict(),
                   plugin=value(fisher, getattr(S, "matrix", S)))


def noiseless_mse_bound(fisher, S, tau: float = 0.0, *, level: float = DEFAULT_LEVEL) -> Bound:
    """Corollary 2 (eq. 6): ``Tr((UᵀSU)⁻¹)/d``, U the null space of E[G] at threshold ``tau·λ_max``.

    ``tau = 0`` (default): the null space up to float64 round-off, a guarantee on an exact or saturated E[G];
    on an unsaturated sample the population null space may be empty and the value is 0. ``tau > 0`` is the
    paper's heuristic (section 6.4.3): computed as asked, labelled ``guarantee=False``. ``fisher`` dense or low-rank."""
    if (low := _lowrank(fisher, S)) is not None:
        from .lowrank import lowrank_noiseless_bound
        return lowrank_noiseless_bound(*low, tau, level=level)
    fisher, S = _prepare(fisher, S)
    tau = check_tau(tau)
    split = split_range_null(fisher, tau)
    heuristic = tau > fisher.d * fisher.eps
    sat = fisher.saturation

    def value(f: FisherEstimate, S_m: torch.Tensor) -> float:
        U = split_range_null(f, tau).null_basis if f is not fisher else split.null_basis
        if U.shape[1] == 0:
            return 0.0
        evals = torch.linalg.eigvalsh(U.T @ S_m @ U)
        if float(evals.min()) <= 0:
            raise ParameterError("UᵀSU is singular: S has no curvature along part of the null space of E[G], "
                                 "so Corollary 2 is infinite; check S (score_quality) or lower tau.")
        return float((1.0 / evals).sum()) / f.d

    with _few_samples_explained(S, fisher.d):
        jk, kind = corollary2_rule(sat, lambda lv: with_sampling_error(value, fisher, S, lv), tau, heuristic, level)
        plugin = value(fisher, getattr(S, "matrix", S))
    return _finish("noiseless_mse", jk, "Tr((U^T S U)^-1) / d, U = null(E[G])", fisher.d, sigma=0.0, tau=split.tau,
                   rank=split.rank, inputs={**_summary(fisher, S), "threshold": split.threshold}, cut=split.cut,
                   kind=kind, saturation=sat.to_dict(), guarantee=not heuristic, plugin=plugin)


def ceiling(S, d: int | None = None) -> Bound:
    """The bound with no information (``E[G] = 0``): ``Tr(S⁻¹)/d`` (section 5.5). ``S``: a d×d matrix, a
    ``StructuredScore``, or a scalar ``s`` (``s·I``, with ``d``)."""
    from .structured import StructuredScore

    if isinstance(S, (int, float)) and d is not None:
        S = StructuredScore.isotropic(float(S), d)
    if isinstance(S, StructuredScore):
        from .lowrank import lowrank_ceiling
        return lowrank_ceiling(S)
    S_t = torch.as_tensor(getattr(S, "matrix", S))
    matrix = as_square_matrix(S_t, S_t.shape[0], "S (score matrix)")  # the plug-in value: see rtc
    evals = torch.linalg.eigvalsh(matrix)
    with _few_samples_explained(S, matrix.shape[0]):
        if float(evals.min()) <= 0:
            raise ParameterError("S (score matrix) must be positive definite to have a ceiling Tr(S^-1)/d.")
    S = matrix
    return Bound("ceiling", float((1.0 / evals).sum()) / S.shape[0], "Tr(S^-1) / d", S.shape[0],
                 rank=0, inputs={"trace_S": float(evals.sum())}, kind="ceiling")


def rtc(bound, ceiling_bound) -> Bound:
    """Ratio to ceiling (section 5.5): ``ln(ceiling / bound)``; 0 = no information, ∞ when the bound is 0.

    With the bound's lower confidence value and the ceiling's plug-in value, RTC errs high: it never
    understates how much the release can leak."""
    b, c = float(bound), float(ceiling_bound)
    if c <= 0 or b < 0:
        raise ParameterError(f"RTC needs a positive ceiling and a non-negative bound (got {c}, {b}).")
    value = math.inf if b == 0 else math.log(c / b)
    base = bound if isinstance(bound, Bound) else None
    return Bound("rtc", value, "ln(ceiling / bound)", base.d if base else 0,
                 sigma=base.sigma if base else None, tau=base.tau if base else None,
                 rank=base.rank if base else None, inputs={"bound": b, "ceiling": c},
                 kind=base.kind if base else "", saturation=base.saturation if base else None,
                 guarantee=base.guarantee if base else True)
