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

    from carlini_basin import _challenge, right  # the challenge with its keys, in the attack's slot order

    At, Xt, B, L, cls, own, noise = _challenge(a, mode="cross")

    def rows(A):
        (members, whole), use = right(A, At), (A > 0).sum(0)
        return f"rows right {whole:.3f}, members right {members:.3f}, slots used {int(use.min())}–{int(use.max())} times"

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
