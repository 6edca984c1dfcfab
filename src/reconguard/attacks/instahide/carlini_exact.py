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
is scored by one matrix product, |P|·|Q|·3d multiply-adds (100·100·768 for four classes of ten images at d = 256),
and the state's best pair is its exact minimiser. Each encryption then takes its state of least error.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import torch

from .carlini_model import noise_rows


class ExactStates:
    """For each state of a ``LocalOptions``: the component combinations of its two halves, bucketed by size."""

    def __init__(self, opts, budget: int = 40_000_000):
        self.opts, self.budget = opts, budget
        slots_of = defaultdict(list)
        for s, g in enumerate(opts.slot_group.tolist()):
            slots_of[g].append(s)
        starts, sizes = opts.slot_start.tolist(), opts.slot_size.tolist()
        buckets = defaultdict(lambda: ([], [], [], []))
        for g, slots in slots_of.items():
            halves = (slots[:len(slots) // 2], slots[len(slots) // 2:])
            combos = [self._combos(h, starts, sizes) for h in halves]
            key = (len(combos[0]), len(combos[1]), len(halves[0]), len(halves[1]))
            b = buckets[key]
            b[0].append(g)
            b[1].append(combos[0])
            b[2].append(combos[1])
            b[3].append(slots)
        self.buckets = [(torch.tensor(g), torch.tensor(p, dtype=torch.long), torch.tensor(q, dtype=torch.long),
                         torch.tensor(s, dtype=torch.long), key[2] == 0) for key, (g, p, q, s) in buckets.items()]

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

    def assign(self, X: torch.Tensor, B: torch.Tensor, noise) -> torch.Tensor:
        """Sets every state's components to its exact minimiser of the intensity error against ``B`` (under the
        public part's ``noise`` = (μ, v), or (None, None)); returns each state's error (intensity units)."""
        opts = self.opts
        Xf, Bf = X.float(), B.float()
        mu, var = (None if v is None else v.float() for v in noise)
        d = Xf.shape[1]
        state_err = torch.zeros(len(opts.group_owner))
        for groups, P_c, Q_c, slots, first_empty in self.buckets:
            per = max(1, self.budget // ((P_c.shape[1] + Q_c.shape[1]) * 3 * d + P_c.shape[1] * Q_c.shape[1]))
            for lo in range(0, len(groups), per):
                sl = slice(lo, lo + per)
                g = groups[sl]
                u, v = (self._parts(C[sl], lambda c: opts._private(c, Xf), d) for C in (P_c, Q_c))
                w = Bf[opts.group_owner[g]] ** 2
                if mu is not None:
                    rest = (1.0 - opts.mass[g]).float()[:, None]
                    u = u + (rest * mu)[:, None, :]
                    w = w - rest ** 2 * noise_rows((mu, var), opts.group_owner[g])[1]
                alpha = u * u - w[:, None, :]
                F = torch.cat([4 * u * u + 2 * alpha, 4 * alpha * u, 4 * u], 2)
                G = torch.cat([v * v, v, v ** 3], 2)
                L = (alpha * alpha).sum(2)[:, :, None] + (v ** 4).sum(2)[:, None, :] + torch.bmm(F, G.transpose(1, 2))
                best = L.reshape(len(g), -1).argmin(1)
                p, q = best // L.shape[2], best % L.shape[2]
                chosen = torch.cat([P_c[sl][torch.arange(len(g)), p], Q_c[sl][torch.arange(len(g)), q]], 1)
                opts.cur[slots[sl].reshape(-1)] = (chosen[:, 1:] if first_empty else chosen).reshape(-1)
                state_err[g] = L.reshape(len(g), -1).gather(1, best[:, None])[:, 0]
        return state_err
