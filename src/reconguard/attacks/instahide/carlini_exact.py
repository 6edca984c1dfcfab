"""The labelled assignment solved exactly per state, by meeting in the middle (``search="exact"``: ``LocalOptions(exact_pixels=…)``).

The local search (``carlini_local``) changes one class's members at a time, and with |·| that gets stuck: given the
*true* images of a natural-image challenge (RGB 32×32 crops, inside k = 4, n = 100, T = 50, 256 pixels), its sweeps
from a random state got 35 % of the rows right (8 sweeps: 42 %, 16: 40 %), and 69 % of the rows whose four members
are of four different classes — a row whose true error is 0 — so the alternation built its X from 30–60 % wrong
rows and never recovered (identified 0.17).

Here a state's classes are split into two halves; every combination of the first half's components gives a private
part u = P (plus the public part's mean r·μ in cross mode), every combination of the second's v = Q, and the
*intensity* error of the pair, Σ_p ((u + v)² − w)² with w = b² (minus the public variance r²·σ² in cross mode), is

    Σ α² + Σ v⁴ + ⟨4u² + 2α, v²⟩ + ⟨4αu, v⟩ + 4⟨u, v³⟩,   α = u² − w,

a sum of a P-term, a Q-term and an inner product of P-features (3d) with Q-features (3d): every pair of one state
is scored by one matrix product, and the state's best pair is its exact minimiser. Each encryption then takes its
state of least error.

**Two plans per state.** *Balanced* (four classes of ten images: halves of 100 combinations each, 100·100·3d
multiply-adds): both halves' features built per state. *Shared*, where one class's slot has at least as many
components as the other slots' combinations together (a class holding two or three of the members: up to C(21, 3)·9
= 11,970 components against 10–14): that slot alone is the second half, and its components are its class's *units* —
a member subset with a split of the mass, v = m·v̂ with m the class's mass in this encryption — so Q-features
[v², v, v³] = [m² v̂², m v̂, m³ v̂³] are one table per (class, member count) shared by every encryption, computed once
per assignment, and the states' scaled P-features [m²(4u² + 2α), m·4αu, m³·4u] meet it in one matrix product per
table. Building those big halves' features per state cost 35 of an assignment's 44 CPU-seconds at n = 100
(Fashion-MNIST, inside k = 4, T = 50: 9,075 states, 4.5·10⁸ pairs); ``benchmarks/carlini_exact.py`` times both.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import torch

from .carlini_model import noise_rows
from .carlini_options import ranges


class ExactStates:
    """For each state of a ``LocalOptions``: its plan (``shared`` or balanced halves), bucketed by shape.
    ``shared=False`` builds every state's halves per state (the balanced plan only: ``benchmarks/carlini_exact.py``)."""

    def __init__(self, opts, budget: int = 40_000_000, shared: bool = True):
        self.opts, self.budget = opts, budget
        slots_of = defaultdict(list)
        for s, g in enumerate(opts.slot_group.tolist()):
            slots_of[g].append(s)
        starts, sizes = opts.slot_start.tolist(), opts.slot_size.tolist()
        steady = self._steady_mass(opts) if shared else torch.zeros(len(starts), dtype=torch.bool)
        plans = {}
        for g, slots in slots_of.items():
            big = max(slots, key=sizes.__getitem__)
            rest = [s for s in slots if s != big]
            if steady[big] and sizes[big] >= math.prod(sizes[s] for s in rest):
                plans[g] = (rest, [big], True)
            else:
                plans[g] = (slots[:len(slots) // 2], slots[len(slots) // 2:], False)
        self._units([halves[1][0] for halves in plans.values() if halves[2]], starts, sizes)
        buckets = defaultdict(lambda: ([], [], [], []))
        for g, (first, second, is_shared) in plans.items():
            P = self._combos(first, starts, sizes)
            if is_shared:
                s = second[0]
                Q = self.unit_local[starts[s]:starts[s] + sizes[s]].tolist()
                key = ("shared", int(self.slot_family[s]), len(P), len(Q), len(first), 1)
            else:
                Q = self._combos(second, starts, sizes)
                key = ("pairs", None, len(P), len(Q), len(first), len(second))
            b = buckets[key]
            b[0].append(g)
            b[1].append(P)
            b[2].append(Q)
            b[3].append(first + second)
        self.buckets = [(plan, fam, torch.tensor(g), torch.tensor(p, dtype=torch.long), torch.tensor(q, dtype=torch.long),
                         torch.tensor(s, dtype=torch.long), n_first == 0)
                        for (plan, fam, _, _, n_first, _), (g, p, q, s) in buckets.items()]

    @staticmethod
    def _steady_mass(opts) -> torch.Tensor:
        """Per slot: whether all its components carry the same mass (its class's, split on the grid), so that a
        component is that mass times a unit."""
        mass = opts.w.sum(1)
        lo = torch.full((len(opts.slot_start),), torch.inf, dtype=mass.dtype).scatter_reduce(0, opts.slot, mass, "amin")
        hi = torch.full((len(opts.slot_start),), -torch.inf, dtype=mass.dtype).scatter_reduce(0, opts.slot, mass, "amax")
        return (hi - lo <= 1e-9 * hi.abs().clamp_min(1e-12)) & (lo > 0)

    def _units(self, shared_slots: list, starts: list, sizes: list) -> None:
        """The shared slots' components as units — (members, shares of the mass) — grouped in families (the slot's
        class, by its smallest member, and its member count): ``unit_idx``/``unit_frac`` (U×3), each family's range
        ``family_start``/``family_size``, and per component its unit's place in its family (``unit_local``)."""
        opts = self.opts
        self.unit_local = torch.full((len(opts.idx),), -1, dtype=torch.long)
        self.slot_family = torch.full((len(starts),), -1, dtype=torch.long)
        if not shared_slots:
            self.unit_idx, self.unit_frac = torch.zeros(0, 3, dtype=torch.long), torch.zeros(0, 3, dtype=torch.float64)
            self.family_start = self.family_size = torch.zeros(0, dtype=torch.long)
            return
        slots = torch.tensor(shared_slots)
        count = torch.tensor(sizes)[slots]
        comps = ranges(torch.tensor(starts)[slots], count)
        slot_of = torch.repeat_interleave(slots, count)
        w = opts.w[comps]
        on = w > 0
        idx = torch.where(on, opts.idx[comps], -1)
        first = torch.full((len(starts),), opts.n, dtype=torch.long).scatter_reduce(
            0, slot_of, torch.where(on, idx, opts.n).min(1).values, "amin")  # the slot's class, by its first member
        frac = (w / w.sum(1, keepdim=True) * 1e9).round().long()
        key = torch.cat([first[slot_of, None], on.sum(1, keepdim=True), idx, frac], 1)
        rows, unit = torch.unique(key, dim=0, return_inverse=True)  # sorted: each family's units contiguous
        fam_key, fam = torch.unique_consecutive(rows[:, :2], dim=0, return_inverse=True)
        self.family_size = torch.bincount(fam, minlength=len(fam_key))
        self.family_start = self.family_size.cumsum(0) - self.family_size
        self.unit_idx, self.unit_frac = rows[:, 2:5].clamp_min(0), rows[:, 5:8].double() / 1e9
        self.unit_local[comps] = unit - self.family_start[fam[unit]]
        self.slot_family[slot_of] = fam[unit]

    @staticmethod
    def _combos(slots, starts, sizes) -> list:
        """Every combination of one component per slot (component ids; [[-1]] for no slot)."""
        if not slots:
            return [[-1]]
        return [list(c) for c in itertools.product(*[range(starts[s], starts[s] + sizes[s]) for s in slots])]

    def _parts(self, combos: torch.Tensor, U: callable, d: int) -> torch.Tensor:
        """Σ of the combination's components' private parts: ``combos`` S×C×h → S×C×d."""
        S, C, h = combos.shape
        out = torch.zeros(S * C, d)
        flat = combos.reshape(-1, h)
        for j in range(h):
            on = torch.nonzero(flat[:, j] >= 0).squeeze(1)
            if len(on):
                out.index_add_(0, on, U(flat[on, j]))
        return out.reshape(S, C, d)

    def _tables(self, Xf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every unit's Q-features [v̂², v̂, v̂³] (U×3d) and Σ v̂⁴, for v̂ = Σ_m share_m X[member_m]."""
        frac = self.unit_frac.float()
        v = (frac[:, :, None] * Xf[self.unit_idx]).sum(1)
        return torch.cat([v * v, v, v ** 3], 1), (v ** 4).sum(1)

    def assign(self, X: torch.Tensor, B: torch.Tensor, noise) -> torch.Tensor:
        """Sets every state's components to its exact minimiser of the intensity error against ``B`` (under the
        public part's ``noise`` = (μ, v), or (None, None)); returns each state's error (intensity units)."""
        opts = self.opts
        Xf, Bf = X.float(), B.float()
        mu, var = (None if v is None else v.float() for v in noise)
        d = Xf.shape[1]
        table, quart = self._tables(Xf)
        state_err = torch.zeros(len(opts.group_owner))
        private = lambda c: opts._private(c, Xf)  # noqa: E731
        for plan, fam, groups, P_c, Q_c, slots, first_empty in self.buckets:
            if plan == "shared":
                lo_f, size_f = int(self.family_start[fam]), int(self.family_size[fam])
                t_f, q_f = table[lo_f:lo_f + size_f], quart[lo_f:lo_f + size_f]
                per = max(1, self.budget // (P_c.shape[1] * (7 * d + size_f + Q_c.shape[1])))
            else:
                per = max(1, self.budget // ((P_c.shape[1] + Q_c.shape[1]) * 3 * d + P_c.shape[1] * Q_c.shape[1]))
            for lo in range(0, len(groups), per):
                sl = slice(lo, lo + per)
                g = groups[sl]
                u = self._parts(P_c[sl], private, d)
                w = Bf[opts.group_owner[g]] ** 2
                if mu is not None:
                    rest = (1.0 - opts.mass[g]).float()[:, None]
                    u = u + (rest * mu)[:, None, :]
                    w = w - rest ** 2 * noise_rows((mu, var), opts.group_owner[g])[1]
                alpha = u * u - w[:, None, :]
                base = (alpha * alpha).sum(2)[:, :, None]
                if plan == "shared":  # v = m·v̂: the scaled P-features against the family's table
                    q = Q_c[sl]
                    m = opts.w[opts.slot_start[slots[sl][:, -1]]].sum(1).float()[:, None, None]
                    F = torch.cat([m * m * (4 * u * u + 2 * alpha), m * (4 * alpha * u), m ** 3 * (4 * u)], 2)
                    scores = (F.reshape(-1, 3 * d) @ t_f.T).reshape(len(g), u.shape[1], size_f)
                    L = base + (m ** 4) * q_f[q][:, None, :] + scores.gather(2, q[:, None, :].expand(-1, u.shape[1], -1))
                    q_comp = opts.slot_start[slots[sl][:, -1]][:, None] + torch.arange(q.shape[1])  # the slot's comps
                else:
                    v = self._parts(Q_c[sl], private, d)
                    F = torch.cat([4 * u * u + 2 * alpha, 4 * alpha * u, 4 * u], 2)
                    G = torch.cat([v * v, v, v ** 3], 2)
                    L = base + (v ** 4).sum(2)[:, None, :] + torch.bmm(F, G.transpose(1, 2))
                best = L.reshape(len(g), -1).argmin(1)
                p, qb = best // L.shape[2], best % L.shape[2]
                rows = torch.arange(len(g))
                second = q_comp[rows, qb][:, None] if plan == "shared" else Q_c[sl][rows, qb]
                chosen = torch.cat([P_c[sl][rows, p], second], 1)
                opts.cur[slots[sl].reshape(-1)] = (chosen[:, 1:] if first_empty else chosen).reshape(-1)
                state_err[g] = L.reshape(len(g), -1).gather(1, best[:, None])[:, 0]
        return state_err
