"""``carlini_exact``: every state's error is its exact minimum over all combinations of its classes' components — by
the balanced halves and by the shared unit tables alike — checked against brute force, inside and cross."""

import itertools

import torch

from reconguard.attacks.instahide.carlini_exact import ExactStates
from reconguard.attacks.instahide.carlini_local import labelled_options
from reconguard.attacks.instahide.carlini_options import RowGrid, class_members
from reconguard.data import load_digits
from reconguard.encoders import InstaHide
from reconguard.encoders.instahide import paper_c1


def _options(mode: str, k: int, n: int, T: int):
    d = load_digits()
    perm = torch.randperm(len(d), generator=torch.Generator().manual_seed(5))
    x, y = d.images[perm[:n]], d.labels[perm[:n]]
    public = d.images[perm[500:900]] if mode == "cross" else None
    scheme = InstaHide(k, c1=paper_c1(k), mode=mode, public=public)
    encs = [scheme.encrypt(x, y, seed=100 + t) for t in range(T)]
    E, L = torch.cat([e.images for e in encs]).double(), torch.cat([e.labels for e in encs]).double()
    classes, members = class_members(L, len(E), n, mode)
    if mode == "inside":
        L = L / L.sum(1, keepdim=True)
    members_per_mix = k if mode == "inside" else 2
    opts = labelled_options(RowGrid(members_per_mix, mode, 5, paper_c1(k), 0.3), L, members, n, len(E), k, "exact",
                            10_000, exact_pixels=16)
    return opts, E.reshape(len(E), -1).abs()[:, :16], len(classes)


def _brute(opts, X, B, noise) -> torch.Tensor:
    """Each state's least intensity error over every combination of one component per slot (float64)."""
    mu, var = noise
    out = torch.empty(len(opts.group_owner), dtype=torch.float64)
    for g in range(len(opts.group_owner)):
        slots = torch.nonzero(opts.slot_group == g).squeeze(1).tolist()
        ranges = [range(int(opts.slot_start[s]), int(opts.slot_start[s] + opts.slot_size[s])) for s in slots]
        combos = torch.tensor(list(itertools.product(*ranges)))
        u = sum(opts._private(combos[:, j], X) for j in range(len(slots)))
        t = int(opts.group_owner[g])
        w = B[t] ** 2
        if mu is not None:
            rest = 1.0 - float(opts.mass[g])
            u, w = u + rest * mu, w - rest ** 2 * var
        out[g] = ((u * u - w) ** 2).sum(1).min()
    return out


def _check(mode: str, k: int, n: int, T: int, noise=(None, None)):
    opts, B, n_hat = _options(mode, k, n, T)
    X = torch.randn(n_hat, B.shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    truth = _brute(opts, X, B, noise)
    plans = {}
    for shared in (True, False):
        ex = ExactStates(opts, shared=shared)
        plans[shared] = {b[0] for b in ex.buckets}
        err = ex.assign(X, B, noise).double()
        assert torch.allclose(err, truth, rtol=2e-4, atol=1e-3 * float(truth.mean())), (shared, float((err - truth).abs().max()))
        # the components it set are a minimiser: their error is the state's minimum
        slots = torch.arange(len(opts.slot_group))
        U = torch.zeros(len(opts.group_owner), B.shape[1], dtype=torch.float64).index_add_(
            0, opts.slot_group, opts._private(opts.cur[slots], X))
        w = B[opts.group_owner] ** 2
        if noise[0] is not None:
            rest = (1.0 - opts.mass)[:, None]
            U, w = U + rest * noise[0], w - rest ** 2 * noise[1]
        assert torch.allclose(((U * U - w) ** 2).sum(1), truth, rtol=2e-4, atol=1e-3 * float(truth.mean()))
    assert "shared" in plans[True] and plans[False] == {"pairs"}, plans
    return plans[True]


def test_exact_states_are_each_states_minimum_inside():
    """Inside k = 4, n = 30 (classes of ~3 images: four-class states take the balanced halves, states with a class
    holding two or three members the shared tables)."""
    assert _check("inside", 4, 30, 8) == {"shared", "pairs"}


def test_exact_states_are_each_states_minimum_cross():
    """Cross k = 6 (two private members per mix), with the public part's mean and variance in the error."""
    g = torch.Generator().manual_seed(1)
    noise = (0.3 * torch.randn(16, dtype=torch.float64, generator=g), 0.2 + torch.rand(16, dtype=torch.float64, generator=g))
    _check("cross", 6, 30, 8, noise)
