"""How good a start Carlini's alternation needs (issue 31): from the *true* mixing matrix with a share ``q`` of its
members replaced by random images of their class, alternate the attack's two steps — the phase X-step
(``carlini_phase.phase_step``) and the labelled assignment (``search="exact"`` by default) — and print, each round,
the share of (encryption, member) pairs right, the share of rows wholly right and the error. A start below the
basin falls to the error of a random one within the script's rounds (the attack's full alternation, run to the end
with its split moves, recovers RGB 32×32 crops inside k = 4 at n = 100 from a random start: README); the README's
"how good a start must be" rows come from

    python benchmarks/carlini_basin.py --data photos --size 32 --n 100 --T 50 --pixels 256 --q 0.3 0.5 1.0

(``--trim F``: each X-step is refitted on the share F of encryptions it fits best, ``--trim-rounds`` times.)
Inside mode, labelled; the encryptions are made directly (``InstaHide.encrypt``) so the keys are at hand.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def challenge_parser(doc: str, data: str = "digits", size: int = 28, n: int = 100, T: int = 50, k: int = 6,
                     pixels: int = 512, pixels_help: str | None = None) -> argparse.ArgumentParser:
    """The arguments of a ``_challenge`` (``--data --size --n --T --k --pixels --seed``) with each script's defaults."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--data", choices=("digits", "fashion", "photos"), default=data)
    p.add_argument("--size", type=int, default=size)
    p.add_argument("--n", type=int, default=n)
    p.add_argument("--T", type=int, default=T)
    p.add_argument("--k", type=int, default=k)
    p.add_argument("--pixels", type=int, default=pixels, help=pixels_help)
    p.add_argument("--seed", type=int, default=0)
    return p


def _challenge(a, mode: str = "inside"):
    """``(A, X, B, labels, classes, own, noise)`` in the attack's slot order: the true rows, the true normalised images,
    |x̃| (on ``a.pixels`` random pixels when given), the soft labels, each slot's class, and the attacker's own and
    noise images (``benchmarks/carlini.py``'s data; the noise images None inside). ``mode="cross"``: k − 2 public
    images per mix from the encryptor's pool, normalised with their own statistics (the reference convention)."""
    import carlini as bench
    from reconguard.attacks.instahide.carlini_options import class_members
    from reconguard.encoders import InstaHide
    from reconguard.encoders.instahide import paper_c1

    images, labels, own, pool, noise = bench._data(argparse.Namespace(data=a.data, size=a.size, seed=a.seed, mode=mode))
    g = torch.Generator().manual_seed(a.seed + 1)
    pick = torch.randperm(len(images), generator=g)[:a.n]
    x, y = images[pick], torch.as_tensor(labels)[pick]
    scheme = InstaHide(a.k, c1=paper_c1(a.k), mode=mode, public=pool, public_normalize="own")
    encs = [scheme.encrypt(x, y, seed=a.seed * 1000 + t) for t in range(a.T)]
    E = torch.cat([e.images for e in encs])
    L = torch.cat([e.labels for e in encs]).double()
    A = torch.cat([e.key.mixing(a.n) for e in encs])
    N = len(E)
    B = E.reshape(N, -1).abs().double()
    pix = torch.randperm(B.shape[1], generator=g)[:a.pixels].sort().values if getattr(a, "pixels", None) else None
    X = InstaHide.normalize_images(x, scheme.channel_stats(x)).reshape(a.n, -1).double()
    classes, _ = class_members(L, N, a.n, mode)
    cls = torch.tensor(classes)
    slot_image = torch.empty(a.n, dtype=torch.long)
    for c in cls.unique().tolist():  # the attack's slots of class c are that class's images in some order
        have = torch.nonzero(y == c).squeeze(1)
        if len(have) != int((cls == c).sum()):
            raise SystemExit(f"the labels' mass gives class {c} {int((cls == c).sum())} images, the challenge has "
                             f"{len(have)}: try another --seed")
        slot_image[cls == c] = have
    if pix is not None:
        X, B = X[:, pix], B[:, pix]
    return A[:, slot_image], X[slot_image], B, L, cls, own, noise


def right(A: torch.Tensor, A_true: torch.Tensor) -> tuple[float, float]:
    """``(members, rows)``: the share of the true (encryption, member) pairs that A has, and of rows wholly right."""
    on = A_true > 0
    return float((A > 0)[on].double().mean()), float(((A > 0) == on).all(1).double().mean())


def _corrupt(A, cls, q: float, g) -> torch.Tensor:
    """Each member replaced, with probability q, by a random image of its class (itself included)."""
    out = torch.zeros_like(A)
    for t, i in torch.nonzero(A > 0).tolist():
        j = i
        if float(torch.rand(1, generator=g)) < q:
            same = torch.nonzero(cls == cls[i]).squeeze(1)
            j = int(same[torch.randint(len(same), (1,), generator=g)])
        out[t, j] += A[t, i]
    return out


def main():
    from reconguard.attacks.instahide.carlini_local import labelled_options
    from reconguard.attacks.instahide.carlini_options import RowGrid, class_members
    from reconguard.attacks.instahide.carlini_phase import phase_step
    from reconguard.encoders.instahide import paper_c1

    p = challenge_parser(__doc__, "photos", 16, 20, 25, 4, 256, "random pixels the experiment runs on")
    p.add_argument("--q", type=float, nargs="+", default=[0.3, 1.0], help="shares of members replaced")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--search", choices=("exact", "local", "auto"), default="exact")
    p.add_argument("--trim", type=float, default=None, help="refit X on this share of the best-fitting encryptions")
    p.add_argument("--trim-rounds", type=int, default=2)
    a = p.parse_args()
    A_true, _, B, L, cls, _, _ = _challenge(a)
    _, members = class_members(L, len(B), a.n, "inside")
    grid = RowGrid(a.k, "inside", 5, paper_c1(a.k), 0.3)
    opts = labelled_options(grid, L, members, a.n, len(B), a.k, a.search, 2_000_000)
    for q in a.q:
        A = _corrupt(A_true, cls, q, torch.Generator().manual_seed(a.seed + 7))
        print(f"q = {q}: start, members right {right(A, A_true)[0]:.3f}", flush=True)
        X = None
        for r in range(a.rounds):
            t0 = time.perf_counter()
            X = phase_step(A, B, X, starts=5 if X is None else 3, steps=150 if X is None else 100, tol=0.01, polish=50)
            for _ in range(a.trim_rounds if a.trim else 0):
                res = ((A @ X).abs() - B).pow(2).sum(1) / B.pow(2).sum(1)
                keep = res <= res.quantile(a.trim)
                X = phase_step(A[keep], B[keep], X, starts=3, steps=100, tol=0.01, polish=50)
            A, err = opts.assign(X, B, (None, None))
            members, rows = right(A, A_true)
            print(f"  round {r}: members right {members:.3f}, rows right {rows:.3f}, "
                  f"error {err:,.0f} ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
