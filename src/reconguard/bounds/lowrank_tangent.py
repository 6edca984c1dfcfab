"""The saturation check and the tangent-plane bound of :mod:`reconguard.bounds.saturation` for a low-rank E[G]
(:class:`~reconguard.bounds.lowrank.LowRankFisher`): everything through Gram blocks and one pass over B's
column blocks, never a d×d or d×rank matrix. It equals the dense path to round-off
(``tests/test_lowrank.py``)."""

from __future__ import annotations

import torch

from .saturation import Saturation, _prefixes, classify
from .structured import StructuredScore


def _saturation(f) -> Saturation:
    """The check of :mod:`reconguard.bounds.saturation` on Gram blocks: held-out energy outside span(B's rows)."""
    rank = int(f.range_factor()[0].numel())
    if not f.heldout:
        return classify(None, 0, rank, f.d)
    C, norms = f.cross()
    total = float(norms.sum())

    def share(rows):
        _, W = f.range_factor(rows)
        inside = float(((C[:, rows] @ W) ** 2).sum()) if W.numel() else 0.0
        return 0.0 if total <= 0 else max(0.0, total - inside) / total

    curve = [(int(sum(f.group_sizes[:j])), share((f.row_group < j).nonzero().reshape(-1)))
             for j in _prefixes(f.groups)]
    return classify(share(torch.arange(f.n)), f.heldout, rank, f.d, curve)


def _gamma(f) -> float:
    """The anchor's γ from the sample alone: each block's energy outside the other blocks' range, per null
    direction (as :func:`reconguard.bounds.saturation.anchor_gamma`)."""
    if "gamma" not in f._cache:
        rank = int(f.range_factor()[0].numel())
        unseen = 0.0
        if f.groups >= 2 and rank < f.d:
            diag = torch.diagonal(f.K)
            for b in range(f.groups):
                own, other = (f.row_group == b).nonzero().reshape(-1), (f.row_group != b).nonzero().reshape(-1)
                _, W = f.range_factor(other)
                inside = float(((f.K[own][:, other] @ W) ** 2).sum()) if W.numel() else 0.0
                unseen += max(0.0, float(diag[own].sum()) - inside)  # rows carry 1/√k: Σ_b (k_b/k)·(k/k_b)·…
        f._cache["gamma"] = unseen / (f.d - rank) if rank < f.d else 0.0
    return f._cache["gamma"]


def _tangent_terms(f, S: StructuredScore, sigma: float) -> tuple[float, torch.Tensor]:
    """``(Tr(M⁻¹) + Tr(M⁻²G₀)/σ², [Tr(M⁻²Ĥ_b)/σ²]_b)`` for the anchor ``G₀ = γI + V(Λ − γ)Vᵀ`` with ``M = G₀/σ² + S``
    by Woodbury: ``M = D' + U C Uᵀ``, ``D' = D + γ/σ²``, ``U = [L | V]``, ``C = diag(1, (Λ − γ)/σ²)``,
    ``M⁻¹ = D'⁻¹ − D'⁻¹U R UᵀD'⁻¹``, ``R = (I + C UᵀD'⁻¹U)⁻¹ C``. For a vector w,
    ``‖M⁻¹w‖² = ‖D'⁻¹w‖² − 2 (UᵀD'⁻²w)ᵀR(UᵀD'⁻¹w) + (R UᵀD'⁻¹w)ᵀ(UᵀD'⁻²U)(R UᵀD'⁻¹w)``. Every term is a sum over
    coordinates, accumulated in one pass over column blocks of B (V's rows formed block by block): memory
    O(block·(p + rank) + (p + rank)²), never d×rank."""
    gamma = _gamma(f)
    mu, W = f.range_factor()
    r = W.shape[1]
    p = 0 if S.lowrank is None else S.lowrank.shape[1]
    q = p + r
    Z1, Z2, Z3 = (torch.zeros(q, q, dtype=torch.float64) for _ in range(3))
    P1v, P2v, P1h, P2h = (torch.zeros(q, n, dtype=torch.float64) for n in (r, r, f.Bh.shape[0], f.Bh.shape[0]))
    t0v, t0h = torch.zeros(r, dtype=torch.float64), torch.zeros(f.Bh.shape[0], dtype=torch.float64)
    inv1 = inv2 = 0.0
    for (a, Bc), (_, Hc) in zip(f._column_blocks(), f._column_blocks(f.Bh)):
        sl = slice(a, a + Bc.shape[1])
        Dp = S.diag[sl] + gamma / sigma**2
        Vb = Bc.T @ W                                                   # rows of V in this block
        Ub = torch.cat([S.lowrank[sl], Vb], 1) if p else Vb
        A1, A2 = Ub / Dp[:, None], Ub / Dp[:, None] ** 2                # D'⁻¹U, D'⁻²U
        Z1 += Ub.T @ A1
        Z2 += A1.T @ A1
        Z3 += A1.T @ (A1 / Dp[:, None])
        P1v += A1.T @ Vb
        P2v += A2.T @ Vb
        t0v += ((Vb / Dp[:, None]) ** 2).sum(0)
        P1h += A1.T @ Hc.T
        P2h += A2.T @ Hc.T
        t0h += ((Hc / Dp[None, :]) ** 2).sum(1)
        inv1 += float((1 / Dp).sum())
        inv2 += float((1 / Dp**2).sum())
    c = torch.cat([torch.ones(p, dtype=torch.float64), (mu - gamma) / sigma**2])
    R = torch.linalg.solve(torch.eye(q, dtype=torch.float64) + c[:, None] * Z1, torch.diag(c))

    def norms(t0, P1, P2):  # ‖M⁻¹w‖² for each column w
        RP = R @ P1
        return t0 - 2 * (P2 * RP).sum(0) + (RP * (Z2 @ RP)).sum(0)

    tr_inv = inv1 - float(torch.trace(R @ Z2))
    fro2 = inv2 - 2 * float(torch.trace(R @ Z3)) + float(torch.trace(R @ Z2 @ R.T @ Z2))
    tr_m2_g0 = gamma * fro2 + float(((mu - gamma) * norms(t0v, P1v, P2v)).sum())
    row_norms = norms(t0h, P1h, P2h)
    sizes = torch.tensor(f.heldout_sizes, dtype=torch.float64)
    per_block = torch.zeros(len(f.heldout_sizes), dtype=torch.float64).index_add_(0, f.heldout_group, row_norms)
    slopes = per_block * (f.heldout / sizes) / sigma**2  # Ĥ_b = (h/h_b) Bh_bᵀBh_b
    return tr_inv + tr_m2_g0 / sigma**2, slopes
