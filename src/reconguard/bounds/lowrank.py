"""Bounds at the size real encoders have (d = 3×224×224 = 150,528) without a d×d matrix.

E[G] from k inputs has rank ≤ n = k·m: with ``B`` the ``n×d`` stack of the Jacobian rows scaled by
``1/√k``, ``E[G] = BᵀB``, and its nonzero spectrum is that of the ``n×n`` Gram ``K = BBᵀ = QμQᵀ``
(range basis ``V = BᵀQμ^{-½}``, never formed). Everything the bounds need lives in that
n-dimensional space, through Gram-type products ``B X Bᵀ`` computed in column blocks of B.

Structured S (:class:`StructuredScore`): ``S = D + LLᵀ``, D diagonal positive (a scalar ``s·I`` is the
isotropic case), L a ``d×p`` low-rank part (p = 0 for none). With ``S⁻¹`` by Woodbury,
``S⁻¹ = D⁻¹ − D⁻¹L(I + LᵀD⁻¹L)⁻¹LᵀD⁻¹``, and ``V_r`` the range of E[G] above the cut:

* Corollary 1:  ``Tr((E[G]/σ² + S)⁻¹) = Tr(S⁻¹) − Tr((σ²Λ⁻¹ + VᵀS⁻¹V)⁻¹ VᵀS⁻²V)``  (Woodbury in the range)
* Corollary 2:  ``Tr((UᵀSU)⁻¹) = Tr(S⁻¹) − Tr((VᵀS⁻¹V)⁻¹ VᵀS⁻²V)``, U the complement of V — the
  closed form on the null space, its σ → 0 limit
* Theorem 1:    ``d / (Tr K/σ² + Tr D + ‖L‖²_F)``;   ceiling: ``Tr(S⁻¹)/d``

with ``VᵀXV = μ^{-½}Qᵀ(BXBᵀ)Qμ^{-½}``. Cost O(n²d + npd) time, O(nd) memory for B (streamed
through a file for large n: ``store=``), O(n²) for the Grams.

A structured S̃ ⪰ S only lowers the bounds (:mod:`reconguard.bounds.structured`); the saturation check and
the tangent-plane bound of :mod:`reconguard.bounds.saturation` apply here through the Gram blocks.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..checks import as_samples, check_positive_int, check_sigma, check_tau
from ..errors import ParameterError, ShapeError
from ..results import Result
from .differentiable import path_error
from .jacobians import ACCUMULATION_EPS, DEFAULT_GROUPS, _batched_jacobian, group_edges, jacobian_ready, select_inputs
from .result import Bound
from .sampling import DEFAULT_LEVEL, block_jackknife
from .lowrank_tangent import _saturation, _tangent_terms
from .saturation import NOT_DIFFERENTIABLE, Sampled, corollary1_rule, corollary2_rule, differentiable, tangent_jackknife, \
    zero_bound
from .structured import StructuredScore
from ..progress import progress as progress_bar

_COLUMN_BLOCK = 8192  # columns of B handled at once in the Gram products


@dataclass(frozen=True)
class LowRankFisher(Result, Sampled):
    """E[G] as ``BᵀB`` (``B``: n×d rows, in memory or a file) with the Gram ``K = BBᵀ`` and its spectrum;
    ``row_group[i]`` is the input group of row i (for the jackknife)."""

    B: object  # torch.Tensor or np.memmap, n×d float64
    K: torch.Tensor
    d: int
    m: int
    k: int
    row_group: torch.Tensor
    group_sizes: tuple
    method: str = "jacrev"
    eps: float = ACCUMULATION_EPS
    path: str = "low-rank (Gram of the stacked Jacobians)"
    exact: bool = False
    Bh: object = None  # held-out rows (n_h×d, scaled 1/√h): the saturation check and the tangent plane
    heldout_group: torch.Tensor | None = None  # block of each held-out row
    heldout_sizes: tuple = ()
    path_error: float | None = None  # reconguard.bounds.differentiable
    _cache: dict = field(default_factory=dict, compare=False, repr=False)
    _skip_in_dict = ("B", "K", "row_group", "Bh", "heldout_group")

    _saturation_of = staticmethod(lambda f: _saturation(f))

    def to_dict(self):
        return {**super().to_dict(), "saturation": self.saturation.to_dict()}

    @property
    def n(self) -> int:
        return int(self.K.shape[0])

    @property
    def groups(self) -> int:
        return len(self.group_sizes)

    @property
    def trace(self) -> float:
        return float(torch.trace(self.K))

    def gram(self, S: StructuredScore) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B S⁻¹ Bᵀ, B S⁻² Bᵀ)``, n×n, by column blocks of B (cached per S)."""
        key = ("gram", id(S))
        if key not in self._cache:
            n = self.n
            core = S._core()
            G1 = torch.zeros(n, n, dtype=torch.float64)
            # S⁻¹Bᵀ = D⁻¹Bᵀ − D⁻¹L core (LᵀD⁻¹Bᵀ): its low-rank part needs LᵀD⁻¹Bᵀ (p×n) first
            P = None
            if core is not None:
                P = torch.zeros(S.lowrank.shape[1], n, dtype=torch.float64)
                for a, Bc in self._column_blocks():
                    P += (S.lowrank[a:a + Bc.shape[1]] / S.diag[a:a + Bc.shape[1], None]).T @ Bc.T
                P = core @ P
            G2 = torch.zeros(n, n, dtype=torch.float64)
            for a, Bc in self._column_blocks():
                sl = slice(a, a + Bc.shape[1])
                Y = Bc.T / S.diag[sl, None]                                   # (D⁻¹Bᵀ) block, c×n
                if P is not None:
                    Y = Y - (S.lowrank[sl] / S.diag[sl, None]) @ P            # (S⁻¹Bᵀ) block
                G1 += Bc @ Y
                G2 += Y.T @ Y
            self._cache[key] = ((G1 + G1.T) / 2, (G2 + G2.T) / 2, S)  # keep S alive: its id is the key
        G1, G2, _ = self._cache[key]
        return G1, G2

    def _column_blocks(self, B=None):
        B = self.B if B is None else B
        for a in range(0, self.d, _COLUMN_BLOCK):
            block = B[:, a:a + _COLUMN_BLOCK]
            yield a, torch.as_tensor(np.asarray(block)) if not isinstance(block, torch.Tensor) else block

    def cross(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Bh Bᵀ, ‖Bh rows‖²)``: the held-out rows against the sample's, cached."""
        if "cross" not in self._cache:
            C = torch.zeros(self.Bh.shape[0], self.n, dtype=torch.float64)
            norms = torch.zeros(self.Bh.shape[0], dtype=torch.float64)
            for (_, Bc), (_, Hc) in zip(self._column_blocks(), self._column_blocks(self.Bh)):
                C += Hc @ Bc.T
                norms += (Hc * Hc).sum(1)
            self._cache["cross"] = (C, norms)
        return self._cache["cross"]

    def range_factor(self, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(μ, W)`` of the Gram of ``rows`` (all by default) above the round-off cut; the range basis of those
        rows' E[G] is ``B_rowsᵀ W`` (orthonormal)."""
        K = self.K if rows is None else self.K[rows][:, rows]
        mu, Q = torch.linalg.eigh((K + K.T) / 2)
        lam = float(mu[-1]) if mu.numel() else 0.0
        keep = mu > self.d * self.eps * lam if lam > 0 else torch.zeros_like(mu, dtype=torch.bool)
        return mu[keep], Q[:, keep] / mu[keep].sqrt()

    def rows(self, b: int | None) -> torch.Tensor:
        """Indices of the rows kept when group ``b`` is left out (all rows for None)."""
        if b is None:
            return torch.arange(self.n)
        return (self.row_group != b).nonzero().reshape(-1)

    def scale(self, b: int | None) -> float:
        """``k / (k − k_b)``: E[G] without group b averages over fewer inputs."""
        return 1.0 if b is None else self.k / (self.k - int(self.group_sizes[b]))


def _stats(f: LowRankFisher, S: StructuredScore, b: int | None, tau: float):
    """``(λ, A1, A2)``: the kept spectrum of E[G] (without group b) and ``VᵀS⁻¹V``, ``VᵀS⁻²V`` in its range."""
    key = ("stats", id(S), b, tau)
    if key not in f._cache:
        idx = f.rows(b)
        c = f.scale(b)
        K = f.K[idx][:, idx] * c
        mu, Q = torch.linalg.eigh((K + K.T) / 2)
        lam_max = float(mu[-1]) if mu.numel() else 0.0
        keep = mu > max(tau, f.d * f.eps) * lam_max if lam_max > 0 else torch.zeros_like(mu, dtype=torch.bool)
        mu, Q = mu[keep], Q[:, keep]
        G1, G2 = f.gram(S)
        W = Q / mu.sqrt()                                 # V = (√c B_idx)ᵀ W
        A1 = c * W.T @ G1[idx][:, idx] @ W
        A2 = c * W.T @ G2[idx][:, idx] @ W
        f._cache[key] = (mu, (A1 + A1.T) / 2, (A2 + A2.T) / 2)
    return f._cache[key]


def _corollary(f: LowRankFisher, S: StructuredScore, sigma: float, tau: float, b: int | None) -> float:
    mu, A1, A2 = _stats(f, S, b, tau)
    base = S.inverse_trace()
    if mu.numel() == 0:
        return base / f.d
    M = A1 + (torch.diag(sigma**2 / mu) if sigma > 0 else 0.0)
    try:
        corr = float(torch.trace(torch.linalg.solve(M, A2)))
    except RuntimeError as exc:
        raise ParameterError(f"VᵀS⁻¹V is singular ({exc}); S must be positive definite.") from None
    return max(0.0, base - corr) / f.d


def _jackknife(f: LowRankFisher, value, level: float):
    point = value(None)
    loo = [value(b) for b in range(f.groups)] if f.groups >= 2 else []
    return block_jackknife(point, [loo], level)


def _maeng_jackknife(f: LowRankFisher, S: StructuredScore, sigma: float, level: float):
    def value(b):
        if sigma == 0:
            return 0.0
        tr = float(torch.trace(f.K[f.rows(b)][:, f.rows(b)])) * f.scale(b)
        return f.d / (tr / sigma**2 + S.trace())

    return _jackknife(f, value, level)


def _tangent(f: LowRankFisher, S: StructuredScore, sigma: float):
    """The tangent plane's jackknife at a level, or None (no held-out rows)."""
    if not f.heldout:
        return None
    return lambda lv: tangent_jackknife(lambda S_m: _tangent_terms(f, S_m, sigma), f.heldout_sizes, f.d, S, lv)


def _bound(name, f, S, jk, kind, formula, **kw) -> Bound:
    return Bound(name, jk.lcb, formula, f.d, inputs=_summary(f, S), point=jk.point, stderr=jk.stderr,
                 level=jk.level, kind=kind, saturation=f.saturation.to_dict(), **kw)


def lowrank_mse_bound(f: LowRankFisher, S: StructuredScore, sigma: float, *, level: float = DEFAULT_LEVEL) -> Bound:
    """Corollary 1 by Woodbury in the range of E[G] (σ > 0), by the rule of
    :func:`reconguard.bounds.saturation.corollary1_rule` (plug-in, tangent plane or Theorem 1)."""
    sigma = check_sigma(sigma)
    if sigma == 0:
        raise ParameterError("Corollary 1 needs sigma > 0; use lowrank_noiseless_bound (Corollary 2).")
    _check(f, S)
    jk, kind = corollary1_rule(f.saturation, lambda lv: _jackknife(f, lambda b: _corollary(f, S, sigma, 0.0, b), lv),
                               _tangent(f, S, sigma), lambda lv: _maeng_jackknife(f, S, sigma, lv), level)
    rank = int(_stats(f, S, None, 0.0)[0].numel())
    return _bound("mse", f, S, jk, kind, "Tr((E[G]/sigma^2 + S)^-1) / d  [low-rank E[G], structured S]", sigma=sigma,
                  rank=rank, cut=f"round-off: d·eps(float64)·λ_max = {f.d * f.eps:.3g}·λ_max",
                  plugin=_corollary(f, S, sigma, 0.0, None))


def lowrank_noiseless_bound(f: LowRankFisher, S: StructuredScore, tau: float = 0.0, *,
                            level: float = DEFAULT_LEVEL) -> Bound:
    """Corollary 2: the closed form on the null space (the complement of the kept range), on a null space the
    saturation check confirms; 0 otherwise; τ > 0 is the paper's heuristic (``guarantee=False``)."""
    tau = check_tau(tau)
    _check(f, S)
    heuristic = tau > f.d * f.eps
    jk, kind = corollary2_rule(f.saturation, lambda lv: _jackknife(f, lambda b: _corollary(f, S, 0.0, tau, b), lv),
                               tau, heuristic, level)
    rank = int(_stats(f, S, None, tau)[0].numel())
    return _bound("noiseless_mse", f, S, jk, kind,
                  "Tr((U^T S U)^-1) / d, U = null(E[G])  [low-rank E[G], structured S]", sigma=0.0, tau=tau, rank=rank,
                  cut=(f"tau·λ_max (tau={tau:g})" if heuristic
                       else f"round-off: d·eps(float64)·λ_max = {f.d * f.eps:.3g}·λ_max"), guarantee=not heuristic,
                  plugin=_corollary(f, S, 0.0, tau, None))


def lowrank_maeng_bound(f: LowRankFisher, S: StructuredScore, sigma: float, *, level: float = DEFAULT_LEVEL) -> Bound:
    """Theorem 1: ``d / (Tr E[G]/σ² + Tr S)`` (valid from any sample of a differentiable encoder; else 0)."""
    sigma = check_sigma(sigma)
    _check(f, S)
    ok = differentiable(f.saturation)
    return _bound("maeng", f, S, _maeng_jackknife(f, S, sigma, level) if ok else zero_bound(level),
                  "theorem 1" if ok else NOT_DIFFERENTIABLE, "d / (Tr(E[G])/sigma^2 + Tr(S))", sigma=sigma)


def lowrank_ceiling(S: StructuredScore) -> Bound:
    return Bound("ceiling", S.inverse_trace() / S.d, "Tr(S^-1) / d", S.d, rank=0, inputs={"trace_S": S.trace()},
                 kind="ceiling")


def _check(f: LowRankFisher, S: StructuredScore) -> None:
    if S.d != f.d:
        raise ShapeError(f"S is for d = {S.d} but E[G] for d = {f.d}.")


def _summary(f: LowRankFisher, S: StructuredScore) -> dict:
    return {"path": f.path, "n_rows": f.n, "k": f.k, "m": f.m, "score_structure": S.kind,
            "score_lowrank": 0 if S.lowrank is None else int(S.lowrank.shape[1]), "trace_G": f.trace,
            "fisher_groups": f.groups}


def _jacobian_rows(enc, x: torch.Tensor, m: int, d: int, size: int, store: str | None, label: str, progress: bool):
    """The ``(len(x)·m)×d`` Jacobian rows of ``x`` scaled by ``1/√len(x)``, in memory or a ``.npy`` memmap in
    ``store``."""
    k = x.shape[0]
    if store is not None:
        tmp = tempfile.NamedTemporaryFile(dir=store, suffix=".npy", delete=False)
        B = np.lib.format.open_memmap(tmp.name, mode="w+", dtype=np.float64, shape=(k * m, d))
    else:
        B = torch.empty(k * m, d, dtype=torch.float64)
    scale = 1.0 / math.sqrt(k)
    for a in progress_bar(range(0, k, size), label, enabled=progress):
        J = _batched_jacobian(enc, x[a:a + size], m, d, forward=False).detach().to(torch.float64)
        J = J.reshape(-1, d).cpu() * scale
        B[a * m:a * m + J.shape[0]] = J if isinstance(B, torch.Tensor) else J.numpy()
    return B


def _row_groups(k: int, m: int, edges: list[int]) -> torch.Tensor:
    rows = torch.arange(k * m) // m
    return torch.bucketize(rows, torch.tensor(edges[1:-1], dtype=torch.long), right=True)


def estimate_fisher_lowrank(encoder: nn.Module, data, k: int = 64, *, chunk_size: int | None = None,
                            groups: int = DEFAULT_GROUPS, seed: int | None = 0, device=None, store: str | None = None,
                            progress: bool = False, heldout: int | None = None) -> LowRankFisher:
    """E[G] of ``encoder`` over ``k`` inputs as its low-rank factor (module docstring): Jacobian rows by
    reverse mode on a float64 copy of the encoder, ``chunk_size`` inputs at a time, written into B (in
    memory, or a ``.npy`` memmap in ``store`` — a folder — when B would not fit), then the Gram ``K = BBᵀ``
    by column blocks. ``heldout`` inputs drawn beside the k (as :func:`~reconguard.bounds.estimate_fisher`)
    give the held-out rows of the saturation check and the tangent-plane bound."""
    k = check_positive_int(k, "k")
    x = as_samples(data)
    g = torch.Generator().manual_seed(int(seed)) if seed is not None else None
    x, x_held = select_inputs(x, k, heldout, g)
    h = int(x_held.shape[0])
    with jacobian_ready(encoder, torch.cat([x, x_held]), "float64", device) as (enc, xs, d, m):
        size = chunk_size or max(1, min(k, (1 << 24) // max(1, m * d)))
        B = _jacobian_rows(enc, xs[:k], m, d, size, store, f"Jacobian rows (k={k}, m={m})", progress)
        Bh = _jacobian_rows(enc, xs[k:], m, d, size, store, f"held-out rows (h={h})", progress) if h else None
        path = path_error(enc, xs)
    groups, edges = group_edges(k, groups)
    row_group = _row_groups(k, m, edges) if groups else torch.zeros(k * m, dtype=torch.long)
    sizes = tuple(edges[b + 1] - edges[b] for b in range(groups)) if groups else ()
    h_group, h_sizes = None, ()
    if h:
        _, h_edges = group_edges(h, min(h, DEFAULT_GROUPS))
        h_group = _row_groups(h, m, h_edges)
        h_sizes = tuple(h_edges[b + 1] - h_edges[b] for b in range(len(h_edges) - 1))
    f = LowRankFisher(B, torch.zeros(0, 0), d, m, k, row_group, sizes, Bh=Bh, heldout_group=h_group,
                      heldout_sizes=h_sizes, path_error=path)
    K = torch.zeros(k * m, k * m, dtype=torch.float64)
    for _, Bc in f._column_blocks():
        K += Bc @ Bc.T
    object.__setattr__(f, "K", (K + K.T) / 2)
    return f
