"""Whether a sampled ``E[G]`` saw every direction the encoder uses, and a bound that stays valid when it did not.

**The problem.** ``Ĝ = (1/k) Σ J_iᵀJ_i`` has rank ≤ k·m. When the Jacobian's rows turn with the input (every
nonlinear encoder) the population ``E[G]`` has a far larger range. Corollary 1, ``f(G) = Tr((G/σ² + S)⁻¹)/d``,
is convex and decreasing in G, so the plug-in ``f(Ĝ)`` is biased upward, and by a factor, not by noise: every
direction no input sampled counts as carrying no information. No jackknife sees a direction that no block
sampled. Corollary 2 is worse: null(E[G]) ⊆ null(Ĝ) almost surely, and ``Tr((UᵀSU)⁻¹)`` only grows with U.

**The check.** ``h`` held-out inputs, drawn apart from the k, give ``Ĥ = (1/h) Σ J_jᵀJ_j``, an unbiased
estimate of E[G] independent of Ĝ. With ``N`` an orthonormal basis of null(Ĝ) (float64 round-off cut),

    unseen share  ρ = Tr(Nᵀ Ĥ N) / Tr(Ĥ)

is the share of the held-out inputs' Jacobian energy that the sampled range misses. The sample is
*saturated* when ρ ≤ ``SATURATION_TOL`` (round-off; a linear encoder, or k·m ≥ the encoder's rank): the
held-out Jacobians lie in the sampled range, and the plug-in bound with its jackknife applies as before.
``curve`` is ρ for the range of the first 1/4, 1/2, … of the sample's blocks: how the miss shrinks as k grows.
With no held-out input the status is ``unchecked``, treated as not saturated.

**The valid bound when not saturated (σ > 0).** ``f`` is convex on the PSD cone (the matrix inverse is
operator convex), so for *any* anchor ``G₀ ⪰ 0`` and every PSD G

    f(G) ≥ f(G₀) + ⟨∇f(G₀), G − G₀⟩ = [Tr(M⁻¹) + Tr(M⁻²G₀)/σ² − Tr(M⁻²G)/σ²] / d,   M = G₀/σ² + S.

The right side is *linear* in G, and ``Tr(M⁻²G) = E_x ‖J(x) M⁻¹‖²_F`` is a mean over inputs: the held-out
``Ĥ`` estimates it without bias, in every direction, sampled or not, as long as G₀ does not depend on the
held-out inputs. The one-sided lower confidence bound then needs only the standard error of a mean (blocks of
the held-out inputs; S's blocks by the jackknife as before). The anchor only sets tightness:
``G₀ = Ĝ + γ·NNᵀ``, the sample's estimate plus the energy it is expected to miss spread evenly over its null
space. γ comes from the sample alone (leave-one-block-out: the energy of each block outside the range of the
others, per null direction), never from the held-out inputs. Theorem 1 (``d / (Tr G/σ² + Tr S)``) rests on
the trace alone, a mean the sample estimates without bias whatever its rank, so it is valid too; the
reported value is the larger of the two, each at level ``(1 + level)/2`` (Bonferroni: both hold together
with probability ≥ level).

**σ = 0 when not saturated.** Held-out energy outside the sampled range means the population null space is
smaller than the sample's, possibly empty, and any direction with energy is read exactly by a noise-free
attacker: the only valid bound is Theorem 1's σ → 0 limit, 0.

**Not differentiable.** Everything above trusts autograd's Jacobian. A sampled estimate also carries the path check of
:mod:`reconguard.bounds.differentiable` (does ∫ J v dt match the output's change between two inputs?); when it fails,
the status is ``"not differentiable"`` and every rule gives 0, the one bound that holds for any encoder.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ..errors import ParameterError
from ..results import Result
from .differentiable import PATH_TOL
from .sampling import DEFAULT_LEVEL, Jackknife, block_jackknife

SATURATION_TOL = 1e-6  # unseen share below this is float64 round-off of the projection

STATUSES = ("exact", "saturated", "not saturated", "unchecked", "not differentiable")


@dataclass(frozen=True)
class Saturation(Result):
    """Whether the sample behind an estimated E[G] covers the encoder's range (module docstring)."""

    status: str
    unseen_share: float | None  # share of held-out Jacobian energy outside the sampled range
    heldout: int
    rank: int
    d: int
    curve: tuple = ()  # ((k_j, unseen share of the first k_j inputs' range), …)
    tolerance: float = SATURATION_TOL
    path_error: float | None = None  # reconguard.bounds.differentiable: autograd's Jacobian against the output's change

    @property
    def saturated(self) -> bool:
        return self.status in ("exact", "saturated")

    def describe(self) -> str:
        if self.status == "not differentiable":
            return (f"not differentiable: autograd's Jacobian, integrated between two inputs, misses the output's change "
                    f"by {min(self.path_error, 1.0):.2f} of its size (path check; at most {PATH_TOL} passes)")
        if self.status == "exact":
            return "exact E[G] (no sampling)"
        if self.status == "unchecked":
            return "unchecked: no held-out inputs (treated as not saturated)"
        share = f"{100 * self.unseen_share:.3g} %" if self.unseen_share >= 1e-4 else f"{self.unseen_share:.2g}"
        return f"{self.status}: {share} of held-out energy outside the sample's range ({self.heldout} held-out inputs)"

    def to_dict(self):
        return {**super().to_dict(), "saturated": self.saturated, "description": self.describe()}


class Sampled:
    """What a sampled E[G] (dense or low-rank) shares: its held-out count and its cached saturation check; the
    class names the function that computes the check (``_saturation_of``)."""

    _saturation_of = None

    @property
    def heldout(self) -> int:
        """Held-out inputs (drawn apart from the k) whose Jacobians measure what the sample missed."""
        return int(sum(self.heldout_sizes))

    @property
    def saturation(self) -> "Saturation":
        """:class:`Saturation` of this estimate (cached); ``"not differentiable"`` when the estimate's path check
        (``path_error``, :mod:`reconguard.bounds.differentiable`) exceeds ``PATH_TOL``, whatever the sample saw."""
        if "saturation" not in self._cache:
            s = type(self)._saturation_of(self)
            err = getattr(self, "path_error", None)
            if err is not None:
                s = dataclasses.replace(s, path_error=err, status="not differentiable" if err > PATH_TOL else s.status)
            self._cache["saturation"] = s
        return self._cache["saturation"]


def classify(share: float | None, heldout: int, rank: int, d: int, curve=()) -> Saturation:
    if heldout == 0 or share is None:
        return Saturation("unchecked", None, 0, rank, d, tuple(curve))
    status = "saturated" if share <= SATURATION_TOL else "not saturated"
    return Saturation(status, float(share), heldout, rank, d, tuple(curve))


def exact_saturation(d: int, rank: int) -> Saturation:
    return Saturation("exact", 0.0, 0, rank, d)


def _null_basis(evals: torch.Tensor, evecs: torch.Tensor, eps: float) -> torch.Tensor:
    lam = float(evals[-1]) if evals.numel() else 0.0
    if lam <= 0:
        return evecs
    return evecs[:, evals <= evals.shape[0] * eps * lam]


def _share(N: torch.Tensor, H: torch.Tensor) -> float:
    total = float(torch.trace(H))
    return 0.0 if total <= 0 or N.shape[1] == 0 else max(0.0, float(torch.trace(N.T @ H @ N))) / total


def _prefixes(groups: int) -> list[int]:
    return sorted({max(1, math.ceil(groups * q)) for q in (0.25, 0.5, 0.75)} | {groups}) if groups else []


def heldout_mean(fisher) -> torch.Tensor:
    sizes = torch.tensor(fisher.heldout_sizes, dtype=torch.float64)
    return (fisher.heldout_means * sizes[:, None, None]).sum(0) / sizes.sum()


def dense_saturation(fisher) -> Saturation:
    """The check for a dense :class:`~reconguard.bounds.fisher.FisherEstimate`."""
    rank = int((fisher.eigenvalues > fisher.d * fisher.eps * max(fisher.lambda_max, 0.0)).sum())
    if fisher.exact:
        return exact_saturation(fisher.d, rank)
    if not fisher.heldout:
        return classify(None, 0, rank, fisher.d)
    H = heldout_mean(fisher)
    share = _share(_null_basis(fisher.eigenvalues, fisher.eigenvectors, fisher.eps), H)
    curve = []
    if fisher.groups:
        sizes = torch.tensor(fisher.group_sizes, dtype=torch.float64)
        for j in _prefixes(fisher.groups):
            Gj = (fisher.group_means[:j] * sizes[:j, None, None]).sum(0) / sizes[:j].sum()
            ev, V = torch.linalg.eigh((Gj + Gj.T) / 2)
            curve.append((int(sizes[:j].sum()), _share(_null_basis(ev, V, fisher.eps), H)))
    return classify(share, fisher.heldout, rank, fisher.d, curve)


def anchor_gamma(fisher) -> float:
    """γ of the anchor ``Ĝ + γ·NNᵀ``: the energy each block of the sample has outside the others' range, averaged
    over the blocks and spread over null(Ĝ) (0 without blocks). Uses the sample only (module docstring)."""
    if "gamma" not in fisher._cache:
        null_dim = _null_basis(fisher.eigenvalues, fisher.eigenvectors, fisher.eps).shape[1]
        unseen = 0.0
        if fisher.groups >= 2 and null_dim:
            for b in range(fisher.groups):
                other = fisher.leave_out(b)
                N = _null_basis(other.eigenvalues, other.eigenvectors, other.eps)
                Gb = fisher.group_means[b]
                unseen += fisher.group_sizes[b] * (float(torch.trace(N.T @ Gb @ N)) if N.shape[1] else 0.0)
            unseen /= fisher.k
        fisher._cache["gamma"] = unseen / null_dim if null_dim else 0.0
    return fisher._cache["gamma"]


def _tangent_terms(fisher, S_m: torch.Tensor, sigma: float) -> tuple[float, torch.Tensor]:
    """``(Tr(M⁻¹) + Tr(M⁻²G₀)/σ², [Tr(M⁻²Ĥ_b)/σ²]_b)`` for the anchor G₀ (dense)."""
    N = _null_basis(fisher.eigenvalues, fisher.eigenvectors, fisher.eps)
    G0 = fisher.matrix + anchor_gamma(fisher) * (N @ N.T)
    M = G0 / sigma**2 + S_m
    L, info = torch.linalg.cholesky_ex((M + M.T) / 2)
    if int(info) != 0:
        raise ParameterError("E[G]/σ² + S is not positive definite: S (score matrix) must be positive definite.")
    Minv = torch.cholesky_inverse(L)
    M2 = Minv @ Minv
    const = float(torch.trace(Minv)) + float((M2 * G0).sum()) / sigma**2
    slopes = (M2.unsqueeze(0) * fisher.heldout_means).sum((1, 2)) / sigma**2
    return const, slopes


def tangent_jackknife(terms, sizes: tuple, d: int, S, level: float) -> Jackknife:
    """The tangent bound's lower confidence bound from ``terms(S_matrix) -> (const, per-block slopes)``: linear in
    the held-out blocks (their leave-one-out values give the standard error of the mean), the S blocks by the
    jackknife."""
    w = torch.tensor(sizes, dtype=torch.float64)

    def value(const, slopes, keep=None):
        ww = w if keep is None else w * keep
        return (const - float((ww * slopes).sum() / ww.sum())) / d

    const, slopes = terms(getattr(S, "matrix", S))
    point = value(const, slopes)
    loo_h = [value(const, slopes, (torch.arange(len(sizes)) != b).double()) for b in range(len(sizes))] \
        if len(sizes) >= 2 else []
    loo_s = [value(*terms(S.leave_out(j))) for j in range(getattr(S, "groups", 0))]
    return block_jackknife(point, [loo_h, loo_s], level)


def dense_tangent(fisher, S, sigma: float, level: float = DEFAULT_LEVEL) -> Jackknife:
    """Corollary 1's tangent-plane bound at the anchor, from the held-out blocks (module docstring)."""
    return tangent_jackknife(lambda S_m: _tangent_terms(fisher, S_m, sigma), fisher.heldout_sizes, fisher.d, S, level)


def bonferroni(level: float) -> float:
    """Each of two bounds at this level holds together with the other with probability ≥ ``level``."""
    return 1 - (1 - level) / 2


TANGENT_SATURATED = "corollary 1 tangent plane at held-out inputs (saturated sample)"
TANGENT_UNSATURATED = "corollary 1 tangent plane at held-out inputs (sample not saturated)"
MAENG_UNSATURATED = "theorem 1 (sample not saturated)"
ZERO_UNSATURATED = "0: sigma = 0 and the sample is not saturated (the population null space may be empty)"
NOT_DIFFERENTIABLE = ("0: the encoder is not differentiable (its output changes where autograd's Jacobian says it does "
                      "not: sign, rounding, integer outputs, detach / no_grad / NumPy inside forward, or noise drawn "
                      "inside forward — give that as sigma instead), so no Fisher-information bound applies")


def zero_bound(level: float) -> Jackknife:
    """The bound that holds for every encoder: 0."""
    return Jackknife(0.0, 0.0, 0.0, 0.0, level, 0)


def differentiable(saturation) -> bool:
    """False when the path check found the encoder not differentiable (``saturation``: a :class:`Saturation` or its
    ``to_dict()``, or None)."""
    status = saturation.get("status") if isinstance(saturation, dict) else getattr(saturation, "status", None)
    return status != "not differentiable"


def corollary1_rule(saturation: Saturation, plugin, tangent, maeng, level: float) -> tuple[Jackknife, str]:
    """Which rule gives Corollary 1's reported value. ``plugin``, ``tangent`` (None without held-out inputs) and
    ``maeng`` map a confidence level to a :class:`Jackknife`.

    Exact E[G]: the plug-in. Saturated sample: the smaller of the plug-in (its jackknife is asymptotic: nominal
    5 % exceedance) and the tangent plane (below Corollary 1 by convexity). Not saturated: the larger of the
    tangent plane and Theorem 1, each at level (1 + level)/2. Not differentiable: 0."""
    if not differentiable(saturation):
        return zero_bound(level), NOT_DIFFERENTIABLE
    if saturation.saturated:
        jk, kind = plugin(level), "corollary 1"
        if saturation.status != "exact" and tangent is not None:
            t = tangent(level)
            if t.lcb < jk.lcb:
                jk, kind = t, TANGENT_SATURATED
        return jk, kind
    half = bonferroni(level)
    m = maeng(half)
    if tangent is not None:
        t = tangent(half)
        if t.lcb > m.lcb:
            return t, TANGENT_UNSATURATED
    return m, MAENG_UNSATURATED


def corollary2_rule(saturation: Saturation, plugin, tau: float, heuristic: bool, level: float) -> tuple[Jackknife, str]:
    """Corollary 2 on a null space the check confirms (exact or saturated); 0 otherwise; τ > 0 is the heuristic;
    0 for an encoder that is not differentiable, whatever τ."""
    if not differentiable(saturation):
        return zero_bound(level), NOT_DIFFERENTIABLE
    if heuristic:
        return plugin(level), f"heuristic: Corollary 2 with tau = {tau:g} (paper section 6.4.3), not a guarantee"
    if saturation.saturated:
        return plugin(level), "corollary 2"
    return zero_bound(level), ZERO_UNSATURATED
