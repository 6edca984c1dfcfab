"""The amplitude descent's products with the mixing matrix (cross mode's X-step, ``carlini_model.descend`` on
``predict``), timed in one run: dense ``A @ X`` against ``carlini_sparse.mix`` (compressed rows; two private members a
row, so 2 % of A non-zero at n = 100), and the label-free assignment's predictions of every option (the shared rows).
Both are the same arithmetic up to rounding, so the script prints the largest
difference of the two end points beside the CPU-seconds of each and their ratio. Cross k = 6, the keys at hand
(``carlini_basin._challenge``), ``--pixels`` random pixels (the attack's search pixels)::

    python benchmarks/carlini_descent.py --data fashion --n 100 --T 50 --pixels 512
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None):
    from carlini_basin import challenge_parser

    p = challenge_parser(__doc__)
    p.add_argument("--steps", type=int, default=30, help="Adam steps per X-step (the attack's direct_steps)")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    import torch

    from carlini_basin import _challenge
    from reconguard.attacks.instahide.carlini_model import descend, link, predict
    from reconguard.attacks.instahide.carlini_options import RowGrid
    from reconguard.encoders.instahide import paper_c1

    A, X_true, B, _, _, _, _ = _challenge(a, "cross")
    mu = torch.zeros(B.shape[1], dtype=torch.float64)  # the timing does not depend on the noise model's values
    var = B.pow(2).mean(0) - (A @ X_true).pow(2).mean(0) / A.sum(1).pow(2).mean()
    var = var.clamp_min(1e-3)
    start = torch.zeros_like(X_true)
    models = {"dense": lambda A_, X_, m, v: link(A_ @ X_, A_.sum(1, keepdim=True), m, v),
              "compressed rows": predict}
    cpu, ends = {}, {}
    for _ in range(a.repeats):
        for name, model in models.items():
            t = time.process_time()
            ends[name] = descend(start, B, a.steps, 0.05, lambda: A, (mu, var), model=model)[1]
            cpu.setdefault(name, []).append(time.process_time() - t)
    dense, sparse = (sorted(cpu[k])[len(cpu[k]) // 2] for k in models)
    print(f"{a.data} cross k={a.k}, N={len(A)}, n={a.n}, {B.shape[1]} pixels, {a.steps} Adam steps, "
          f"A {float((A != 0).double().mean()):.1%} non-zero; median of {a.repeats}")
    print(f"  X-step: dense {dense:.3f} CPU-s, compressed rows {sparse:.3f} CPU-s: {dense / sparse:.2f}×; "
          f"end points differ by {float((ends['dense'] - ends['compressed rows']).abs().max()):.2e}")
    # label-free: every option's prediction (the shared rows, Options(shared=…)) before each assignment's minimum
    rows = RowGrid(2, "cross", 5, paper_c1(a.k), 0.3).free_rows(a.n)
    X = ends["dense"]
    cpu, out = {}, {}
    for _ in range(a.repeats):
        for name, model in models.items():
            t = time.process_time()
            out[name] = model(rows, X)
            cpu.setdefault(name, []).append(time.process_time() - t)
    dense, sparse = (sorted(cpu[k])[len(cpu[k]) // 2] for k in models)
    print(f"  label-free options' predictions ({len(rows):,} rows): dense {dense:.3f} CPU-s, compressed rows "
          f"{sparse:.3f}: {dense / sparse:.2f}×; largest difference {float((out['dense'] - out['compressed rows']).abs().max()):.2e}")


if __name__ == "__main__":
    main()
