"""Local search over label-consistent assignments, for when listing them all is too large (inside mode with
k ≥ 4 at n = 100: an encryption of four classes of ten images has 10⁴ member sets, 5·10⁷ rows for 5,000 of them).

An encryption's labels fix, for each *member-count tuple* q (how many of the k members each present class
holds), a list of **components** per class: that class's member subsets × mass splits (``RowGrid.components``).
A **state** picks one component per class; its row is their sum. Every (encryption, q) pair keeps a state. Its
**neighbours** are the states with one class's component replaced — Σ_c K_c rows instead of the Π_c K_c of the
exhaustive list. A sweep scores every neighbour against |x̃_t| and moves each state to its best one (steepest
descent: the current state is among its neighbours, so no state's error rises); ``assign`` sweeps until no
state moves (at most ``sweeps`` times) and gives each encryption its best state's row.

The private part of a neighbour is ``U = U_state − U_old + U_new`` (U_c = Σ_m w_m X[i_m] for a component), so a
sweep costs O(R·m·d) for R = Σ_t Σ_q Σ_c K_c components of m ≤ 3 members, in chunks of ``chunk`` rows (small:
a 2,048 × d block stays in cache — 4× faster than 32,768, measured); memory O(R·m) for the components plus
O((G + S)·d) for the G states' and S slots' private parts.
"""

from __future__ import annotations

import math

import torch

from .carlini_metric import PLAIN
from .carlini_model import link, noise_pixels, noise_rows
from .carlini_options import ranges, segment_argmin, segment_starts


class LocalOptions:
    """``groups``: one ``(t, [components of class 1], [components of class 2], …)`` per (encryption, count
    tuple); a component is a tuple of (member, weight) pairs. ``n``: the number of images."""

    def __init__(self, groups: list, n: int, n_encryptions: int, sweeps: int = 4, chunk: int = 2048,
                 exact_pixels: int | None = None):
        self.n, self.n_encryptions, self.sweeps, self.chunk = n, n_encryptions, sweeps, chunk
        self.exact_pixels, self._exact = exact_pixels, None  # carlini_exact: each state solved exactly
        idx, w, slot, slot_group, group_owner, slot_start = [], [], [], [], [], []
        for g, (t, *classes) in enumerate(groups):
            group_owner.append(t)
            for comps in classes:
                slot_start.append(len(idx))
                for comp in comps:
                    idx.append([i for i, _ in comp] + [0] * (3 - len(comp)))
                    w.append([v for _, v in comp] + [0.0] * (3 - len(comp)))
                    slot.append(len(slot_group))
                slot_group.append(g)
        self.idx, self.w = torch.tensor(idx), torch.tensor(w, dtype=torch.float64)
        self.slot = torch.tensor(slot)                       # comp → its slot (encryption, count tuple, class)
        self.slot_group = torch.tensor(slot_group)           # slot → its state
        self.group_owner = torch.tensor(group_owner)         # state → its encryption
        self.slot_start = torch.tensor(slot_start)
        self.slot_size = torch.diff(torch.cat([self.slot_start, torch.tensor([len(idx)])]))
        self.comp_group = self.slot_group[self.slot]
        self.group_start = segment_starts(self.comp_group)     # state → its first component
        self.owner_start = segment_starts(self.group_owner)    # encryption → its first state
        self.cur = self.slot_start.clone()                    # slot → its current component
        self.mass = torch.zeros(len(group_owner), dtype=torch.float64)
        self.mass.index_add_(0, self.slot_group, self.w[self.slot_start].sum(1))  # a state's mass is fixed
        self.choice = self.owner_start.clone()                # encryption → its chosen state

    def __len__(self) -> int:
        return len(self.idx)

    def _private(self, comps: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """Σ_m w_m X[i_m] for each component (the second and third members only where the component has them)."""
        idx, w = self.idx[comps], self.w[comps].to(X.dtype)
        U = w[:, 0, None] * X[idx[:, 0]]
        for m in (1, 2):
            on = torch.nonzero(w[:, m] != 0).squeeze(1)
            U.index_add_(0, on, w[on, m, None] * X[idx[on, m]])
        return U

    def _comps_of(self, groups: torch.Tensor) -> torch.Tensor:
        """The components of ``groups`` (each group's contiguous range, in group order)."""
        ends = torch.cat([self.group_start[1:], torch.tensor([len(self)])])
        return ranges(self.group_start[groups], ends[groups] - self.group_start[groups])

    def _rows(self) -> torch.Tensor:
        """Each encryption's row: its chosen state's components, summed."""
        on = torch.isin(self.slot_group, self.choice)
        slots = torch.nonzero(on).squeeze(1)
        comps = self.cur[slots]
        t = self.group_owner[self.slot_group[slots]]
        A = torch.zeros(self.n_encryptions, self.n, dtype=torch.float64)
        for m in range(3):
            A.index_put_((t, self.idx[comps, m]), self.w[comps, m], accumulate=True)
        return A

    def random(self, g: torch.Generator) -> torch.Tensor:
        """Every state at a uniformly random component per class; each encryption's row: a random state's."""
        self.cur = self.slot_start + (torch.rand(len(self.slot_start), generator=g, dtype=torch.float64)
                                      * self.slot_size).long()
        sizes = torch.diff(torch.cat([self.owner_start, torch.tensor([len(self.group_owner)])]))
        self.choice = self.owner_start + (torch.rand(len(sizes), generator=g, dtype=torch.float64) * sizes).long()
        return self._rows()

    def assign(self, X: torch.Tensor, B: torch.Tensor, noise, metric=PLAIN) -> tuple[torch.Tensor, float]:
        """Steepest-descent sweeps of every state against ``|x̃|`` = ``B`` under the model ``link`` (``noise``:
        its public-part μ, v, or (None, None)) and the error ``metric`` — after the first, only the states that
        moved are scored again; each encryption's row and its total error. Scored in float32 (the comparisons only; the total is
        float64): the sweep is memory-bound, 4 gathers of d values per component."""
        if self.exact_pixels is not None:
            return self._assign_exact(X, B, noise, metric)
        G = len(self.group_owner)
        Xf, Bf = X.float(), B.float()
        nf = tuple(None if v is None else v.float() for v in noise)
        massf = self.mass.float()
        state_res = torch.zeros(G, dtype=torch.float32)
        groups = torch.arange(G)
        for _ in range(self.sweeps):
            comps = self._comps_of(groups)
            cur_U = self._private(self.cur, Xf)
            rest = torch.zeros(G, X.shape[1]).index_add_(0, self.slot_group, cur_U)[self.slot_group] - cur_U  # per slot
            res = torch.empty(len(comps))
            for i in range(0, len(comps), self.chunk):
                c = comps[i:i + self.chunk]
                grp = self.comp_group[c]
                U = rest[self.slot[c]] + self._private(c, Xf)
                owner = self.group_owner[grp]
                res[i:i + self.chunk] = metric(link(U, massf[grp, None], *noise_rows(nf, owner)) - Bf[owner])
            grp = self.comp_group[comps]
            where, low = segment_argmin(res, grp, G)
            best = comps[where[groups]]  # best neighbours
            slots = self.slot[best]
            is_cur = comps == self.cur[self.slot[comps]]           # the current state, once per class
            now = torch.zeros(G).index_put_((grp[is_cur],), res[is_cur])
            moved = (best != self.cur[slots]) & (low[groups] < now[groups] * (1 - 1e-6))  # near-ties keep the state
            state_res[groups] = torch.where(moved, low[groups], now[groups])
            self.cur[slots[moved]] = best[moved]
            groups = groups[moved]
            if not len(groups):
                break
        self.choice = segment_argmin(state_res, self.group_owner, self.n_encryptions)[0]
        A = self._rows()
        return A, float(metric(link(A @ X, A.sum(1, keepdim=True), *noise) - B).sum())


    def _assign_exact(self, X, B, noise, metric):
        """``assign`` by ``carlini_exact``: every state's exact minimiser of the intensity error on ``exact_pixels``
        random pixels, each encryption's state of least error; the total error is ``assign``'s (every pixel)."""
        from .carlini_exact import ExactStates

        if self._exact is None:
            self._exact = ExactStates(self)
        d = B.shape[1]
        sub = torch.randperm(d, generator=torch.Generator().manual_seed(d))[:min(self.exact_pixels, d)]
        noise_s = noise_pixels(noise, sub)
        state_err = self._exact.assign(X[:, sub], B[:, sub], noise_s)
        self.choice = segment_argmin(state_err, self.group_owner, self.n_encryptions)[0]
        A = self._rows()
        return A, float(metric(link(A @ X, A.sum(1, keepdim=True), *noise) - B).sum())


def labelled_options(grid, labels, members, n_hat: int, N: int, k: int, search: str, max_options: int,
                     exact_pixels: int = 64):
    """The labelled assignment's candidates: every label-consistent row (``Options``) when there are at most
    ``max_options`` of them (``search`` ``exhaustive``/``auto``), else the local search's components."""
    from ...errors import ParameterError
    from .carlini_options import Options

    comps = [grid.components(labels[t], members) for t in range(N)]
    total = sum(math.prod(len(c) for c in per_class) for per in comps for per_class in per)
    local = search in ("local", "exact") or (search == "auto" and total > max_options)
    if not local and total > max_options:
        raise ParameterError(f"{total:,} label-consistent assignments (k={k}, n={n_hat}) is more than "
                             f"max_options = {max_options:,}: use search='exact' or 'local' (or 'auto'), fewer images "
                             "per class, or raise max_options.")
    if not local:
        return Options([grid.entries(labels[t], members) for t in range(N)], n=n_hat)
    opts = LocalOptions([(t, *per_class) for t, per in enumerate(comps) for per_class in per], n_hat, N,
                        exact_pixels=None if search == "local" else exact_pixels)
    if len(opts) > 10 * max_options:  # a component costs ~64 bytes, a row 8·n
        raise ParameterError(f"{len(opts):,} label-consistent components (k={k}, n={n_hat}) is too large "
                             "even for the local search; use fewer images per class or raise max_options.")
    return opts
