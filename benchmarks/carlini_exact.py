"""The exact labelled assignment's two plans, timed in one run (``carlini_exact``): every state's halves built per
state (``ExactStates(shared=False)``) against the shared unit tables for states whose one class's slot outweighs the
rest (the default). Both are exact, so they must agree: the script prints the largest relative difference of the
states' errors, the share of components chosen alike (float32 ties aside), and the share of encryptions whose rows
are right given the *true* images (the search's job). Inside mode, labelled, the keys at hand
(``carlini_basin._challenge``)::

    python benchmarks/carlini_exact.py --data fashion --size 28 --n 100 --T 50
    python benchmarks/carlini_exact.py --data digits --size 28 --n 50 --T 50 --repeats 3
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None):
    from carlini_basin import challenge_parser

    p = challenge_parser(__doc__, n=50, k=4, pixels=64, pixels_help="pixels the assignment scores (the attack's exact_pixels)")
    p.add_argument("--repeats", type=int, default=2, help="assignments timed per plan (the median is printed)")
    a = p.parse_args(argv)
    from carlini_basin import _challenge
    from reconguard.attacks.instahide.carlini_exact import ExactStates
    from reconguard.attacks.instahide.carlini_local import labelled_options
    from reconguard.attacks.instahide.carlini_options import RowGrid, class_members, segment_argmin
    from reconguard.encoders.instahide import paper_c1

    A, X, B, L, cls, _, _ = _challenge(a)
    classes, members = class_members(L, len(L), a.n, "inside")
    t0 = time.process_time()
    opts = labelled_options(RowGrid(a.k, "inside", 5, paper_c1(a.k), 0.3), L / L.sum(1, keepdim=True), members, a.n,
                            len(L), a.k, "exact", 2_000_000, exact_pixels=a.pixels)
    print(f"{len(opts):,} components, {len(opts.group_owner):,} states ({time.process_time() - t0:.1f} CPU-s to list)")
    out = {}
    for shared in (False, True):
        t0 = time.process_time()
        ex = ExactStates(opts, shared=shared)
        build = time.process_time() - t0
        times = []
        for _ in range(a.repeats):
            t0 = time.process_time()
            err = ex.assign(X, B, (None, None))
            times.append(time.process_time() - t0)
        opts.choice = segment_argmin(err, opts.group_owner, opts.n_encryptions)[0]
        right = float(((opts._rows() > 0) == (A > 0)).all(1).double().mean())
        out[shared] = (sorted(times)[len(times) // 2], err, opts.cur.clone())
        plans = sum(b[0] == "shared" for b in ex.buckets)
        print(f"{'shared tables' if shared else 'per-state halves':>16}: assignment {out[shared][0]:6.2f} CPU-s "
              f"(plan {build:.1f} CPU-s; {plans} of {len(ex.buckets)} buckets shared), rows right given the true images "
              f"{right:.3f}")
    (t_old, e_old, c_old), (t_new, e_new, c_new) = out[False], out[True]
    diff = float((e_old - e_new).abs().max() / e_old.abs().mean())  # true rows have error ≈ 0: relative to the mean
    print(f"ratio {t_old / t_new:.1f}× faster; states' errors agree to {diff:.1e} of their mean, components chosen alike "
          f"{float((c_old == c_new).double().mean()):.5f}; peak memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
