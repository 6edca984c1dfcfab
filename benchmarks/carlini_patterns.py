"""The label-free assignment's residuals over each encryption's candidate rows (``similarity.candidate_options``:
member sets of its likeliest images × the grid's coefficient tuples), computed row by row (each row gathers its m
images' pixels, ``Options(patterns=None)``) against member set by member set (its m images gathered once, the P
tuples mixed by one P×m product, ``Options(patterns=…)``), in one run on a challenge made with its keys at hand
(``carlini_basin._challenge``). Each encryption's candidates are its true members plus random others (``--per`` in
all), X the true images plus noise. The script prints CPU-seconds of each (median of ``--repeats``), their ratio,
the residuals' largest relative difference (the products' rounding) and the share of encryptions whose chosen row
is the same::

    python benchmarks/carlini_patterns.py --data photos --size 32 --n 100 --T 50 --k 4 --pixels 256
    python benchmarks/carlini_patterns.py --data fashion --mode cross --k 6 --pixels 512
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None):
    from carlini_basin import _challenge, challenge_parser

    from reconguard.attacks.instahide.carlini_options import Options, RowGrid, segment_argmin
    from reconguard.encoders.instahide import paper_c1

    p = challenge_parser(__doc__, "photos", 32, 100, 50, 4, 256)
    p.add_argument("--mode", choices=("inside", "cross"), default="inside")
    p.add_argument("--per", type=int, default=None, help="candidates per encryption (default: the attack's, "
                   "k + 2 inside, 5 cross)")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    A, X_true, B, _, _, _, _ = _challenge(a, a.mode)
    N, n = A.shape
    members = a.k if a.mode == "inside" else 2
    grid = RowGrid(members, a.mode, 5, paper_c1(a.k), 0.3)
    per = a.per or max(5, members + 2)
    g = torch.Generator().manual_seed(a.seed)
    blocks = []
    for t in range(N):  # the true members (cross: the two largest) and random others
        true = A[t].topk(members).indices.tolist()
        others = [i for i in torch.randperm(n, generator=g).tolist() if i not in true][:per - members]
        blocks.append(grid.free_entries(sorted(true + others)))
    patterns = torch.tensor(grid.free_splits(), dtype=torch.float64)
    X = X_true + 0.3 * torch.randn(X_true.shape, generator=g, dtype=X_true.dtype)
    noise = (None, None) if a.mode == "inside" else (torch.zeros(B.shape[1], dtype=torch.float64),
                                                     B.pow(2).mean(0).clamp_min(1e-3))
    ways = {"row by row": Options(blocks, n=n), "member sets × patterns": Options(blocks, n=n, patterns=patterns)}
    cpu, out = {}, {}
    for _ in range(a.repeats):
        for name, opts in ways.items():
            t0 = time.process_time()
            out[name] = opts.residuals(X, B, noise)
            cpu.setdefault(name, []).append(time.process_time() - t0)
    (r0, r1), opts = out.values(), ways["row by row"]
    pick0, pick1 = (segment_argmin(r, opts.owner, N)[0] for r in (r0, r1))
    print(f"{a.data} {a.mode} k = {a.k}, N = {N}, n = {n}, {B.shape[1]} pixels: {len(opts):,} candidate rows "
          f"({per} images, {len(patterns)} coefficient tuples a member set); CPU-s, median of {a.repeats}:")
    for name, v in cpu.items():
        print(f"  {name:24s} {statistics.median(v):7.2f}")
    ratio = statistics.median(cpu["row by row"]) / statistics.median(cpu["member sets × patterns"])
    rel = float(((r1 - r0).abs() / r0.abs().clamp_min(1e-12)).max())
    print(f"ratio {ratio:.1f}×; largest relative difference {rel:.1e}; the same row chosen for "
          f"{float((pick0 == pick1).double().mean()):.4f} of the encryptions")


if __name__ == "__main__":
    main()
