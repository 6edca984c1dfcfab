"""Is it the start or the objective? (issue 31): one cross-mode challenge made with its keys at hand, attacked by
``CarliniAttack`` from the *true* mixing matrix and from a random assignment, each followed by the attack's own
alternation (X-step, assignment, split moves) and last steps. Prints, per start, the final error, the share of
encryptions whose row is right and of (encryption, member) pairs right, the slots' use (true: 2T each) and, from the
true start (where slot j is image j), the recovered images' correlation with their truth. A true start ending at a
lower error than the random one means the search, not the objective, is what is missing; README: "What limits cross
mode at n = 100" came from

    python benchmarks/carlini_truth_start.py --data fashion --n 100 --T 50 --seed 1 --start true
    python benchmarks/carlini_truth_start.py --data fashion --n 100 --T 50 --seed 1 --start random

Labelled, k = 6, public parts normalised with their own statistics; the data and the disjoint public pools are
``benchmarks/carlini.py``'s. The encryptions are made directly (``InstaHide.encrypt``) so the keys are at hand.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _challenge(a):
    """``(A, X, B, labels, classes, own, noise)`` in the attack's slot order (slot j of class c: c's j-th image)."""
    import carlini as bench
    from reconguard.attacks.instahide.carlini_options import class_members
    from reconguard.encoders import InstaHide
    from reconguard.encoders.instahide import paper_c1

    images, labels, own, pool, noise = bench._data(argparse.Namespace(data=a.data, size=a.size, seed=a.seed, mode="cross"))
    g = torch.Generator().manual_seed(a.seed + 1)
    pick = torch.randperm(len(images), generator=g)[:a.n]
    x, y = images[pick], torch.as_tensor(labels)[pick]
    scheme = InstaHide(a.k, c1=paper_c1(a.k), mode="cross", public=pool, public_normalize="own")
    encs = [scheme.encrypt(x, y, seed=a.seed * 1000 + t) for t in range(a.T)]
    L = torch.cat([e.labels for e in encs]).double()
    A = torch.cat([e.key.mixing(a.n) for e in encs])
    B = torch.cat([e.images for e in encs]).abs()
    classes, _ = class_members(L, len(B), a.n, "cross")
    cls = torch.tensor(classes)
    slot_image = torch.empty(a.n, dtype=torch.long)
    for c in cls.unique().tolist():
        have = torch.nonzero(y == c).squeeze(1)
        if len(have) != int((cls == c).sum()):
            raise SystemExit(f"the labels' mass gives class {c} {int((cls == c).sum())} images, the challenge has "
                             f"{len(have)}: try another --seed")
        slot_image[cls == c] = have
    X = InstaHide.normalize_images(x, scheme.channel_stats(x)).reshape(a.n, -1).double()
    return A[:, slot_image], X[slot_image], B, L, cls, own, noise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=["digits", "fashion", "photos"], default="fashion")
    ap.add_argument("--size", type=int, default=None, help="default: 32 for photos, 28 otherwise")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--T", type=int, default=50)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", choices=["true", "random"], default="true")
    a = ap.parse_args()
    a.size = a.size or (32 if a.data == "photos" else 28)
    from reconguard.attacks.instahide import CarliniAttack
    from reconguard.attacks.instahide.carlini_model import alternate, split_overloaded
    from reconguard.encoders.instahide import paper_c1

    At, Xt, B, L, cls, own, noise = _challenge(a)

    def rows(A):
        use = (A > 0).sum(0)
        return (f"rows right {((A > 0) == (At > 0)).all(1).double().mean():.3f}, members right "
                f"{((A > 0) & (At > 0)).sum() / (At > 0).sum():.3f}, slots used {int(use.min())}–{int(use.max())} times")

    class FromStart(CarliniAttack):  # the attack's own steps, from the chosen start
        def _search(self, r, opts, Bs, prior, classes, n_hat, N, similarity, labels=None):
            if list(classes) != cls.tolist():
                raise SystemExit("the attack's slot classes differ from the challenge's")
            t = time.perf_counter()
            A0 = At if a.start == "true" else opts.random(torch.Generator().manual_seed(a.seed))
            total, A, X = alternate(A0, lambda A_, X_: self._solve(r, A_, Bs, prior, X_),
                                    lambda X_: opts.assign(X_, Bs, r.noise, r.metric), self.max_iter, 2.5e-3,
                                    lambda A_, X_: split_overloaded(A_, X_, Bs, classes, r.noise, r.box), self.splits)
            print(f"{a.start} start: final error {total:.0f}, {rows(A)}, {time.perf_counter() - t:.0f} s", flush=True)
            return (total, A, X), [total], "exhaustive"

    res = FromStart(a.k, a.n, c1=paper_c1(a.k), mode="cross", seed=a.seed).run(
        B.reshape(len(B), *own.shape[1:]).float(), L, own, noise_images=noise)
    if a.start == "true":
        Z, T = (M - M.mean(1, keepdim=True) for M in (res.normalized, Xt))
        c = torch.nn.functional.cosine_similarity(Z, T, dim=1)
        print(f"recovered vs true image (slot j is image j): correlation median {c.median():.3f}, "
              f"share above 0.8 {(c > 0.8).double().mean():.2f}")


if __name__ == "__main__":
    main()
