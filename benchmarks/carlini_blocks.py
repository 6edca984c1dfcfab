"""``carlini_model.flip_signs`` (the X-step's and the prior moves' single-pixel moves), the label-free assignment and
``carlini_model.descend`` (the amplitude descent: the X-step at every pixel and cross mode's refit) in blocks of
``BLOCK`` values against one block, timed in one run with ``reconguard.memory.keep_freed_memory`` on, as the attack runs it. Its
nnz(A)×d terms are 41 MB each as one block at n = 100, T = 50, 512 pixels — above glibc's 32 MiB mmap threshold, so
every one was mapped fresh and faulted in page by page; a block of 16 MB reuses freed heap memory. The script prints
CPU-seconds, of them system, and minor page faults of each, their ratio, and whether the moves are the same bit for
bit (the descent: its largest difference, the products' rounding). Cross k = 6, the keys at hand
(``carlini_basin._challenge``), the true images with noise as the start::

    python benchmarks/carlini_blocks.py --data fashion --n 100 --T 50 --pixels 512
    python benchmarks/carlini_blocks.py --data photos --size 32 --n 100 --T 50 --pixels 0 --steps 50 --repeats 1
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _usage():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime, u.ru_stime, u.ru_minflt


def main(argv=None):
    from carlini_basin import challenge_parser

    p = challenge_parser(__doc__)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=50, help="Adam steps of each descent")
    a = p.parse_args(argv)
    import torch

    from carlini_basin import _challenge
    from reconguard.attacks.instahide import carlini_model
    from reconguard.attacks.instahide.carlini_model import noise_metric, predict
    from reconguard.attacks.instahide.carlini_options import RowGrid
    from reconguard.encoders.instahide import paper_c1
    from reconguard.memory import keep_freed_memory

    keep_freed_memory()
    A, X_true, B, _, _, _, _ = _challenge(a, "cross")
    g = torch.Generator().manual_seed(a.seed)
    X = X_true + 0.5 * torch.randn(X_true.shape, generator=g, dtype=X_true.dtype)
    d = B.shape[1]
    noise = (torch.zeros(d, dtype=torch.float64), (B.pow(2).mean(0) - (A @ X_true).pow(2).mean(0)).clamp_min(1e-3))
    box = (torch.full((d,), float(X_true.min())), torch.full((d,), float(X_true.max())))
    prior = (X_true.mean(0).float(), torch.eye(d) * 0.1)
    blocks = {"one block": 10 ** 12, "blocks": carlini_model.BLOCK}
    use, ends = {}, {}
    for _ in range(a.repeats):
        for name, block in blocks.items():
            carlini_model.BLOCK = block
            before = _usage()
            ends[name] = [carlini_model.flip_signs(X, A, B, noise, box), carlini_model.flip_signs(X, A, B, noise, box, prior=prior)]
            use.setdefault(name, []).append([x1 - x0 for x0, x1 in zip(before, _usage())])
    carlini_model.BLOCK = blocks["blocks"]
    _report(f"{a.data} cross k={a.k}, N={len(A)}, n={a.n}, {d} pixels, nnz(A) = {int((A != 0).sum()):,}; flip_signs "
            f"without and with the prior, 3 rounds; median of {a.repeats}", use, ends)
    # the label-free assignment: every encryption's nearest of the shared rows under the attack's noise metric
    metric = noise_metric(X_true, X_true.flip(0), None, noise, a.k, 0.3, 20, g, 2000)
    shared = RowGrid(2, "cross", 5, paper_c1(a.k), 0.3).free_rows(a.n)
    runs = {"one block": lambda: metric.nearest(B, predict(shared, X, *noise), block=10 ** 12),  # all O×d predictions first
            "blocks": lambda: metric.nearest(B, (len(shared), lambda rows: predict(shared[rows], X, *noise)))}
    use, ends = {}, {}
    for _ in range(a.repeats):
        for name, run in runs.items():
            before = _usage()
            ends[name] = run()
            use.setdefault(name, []).append([x1 - x0 for x0, x1 in zip(before, _usage())])
    _report(f"the label-free assignment (predictions + Metric.nearest) over {len(shared):,} shared rows (rank 20); "
            f"median of {a.repeats}", use, ends)
    use, ends = {}, {}
    for _ in range(a.repeats):
        for name, block in blocks.items():
            carlini_model.BLOCK = block
            before = _usage()
            ends[name] = [carlini_model.descend(X, B, a.steps, 0.05, lambda: A, noise, box, model=model)[1]
                          for model in (carlini_model.predict, carlini_model.expected)]
            use.setdefault(name, []).append([x1 - x0 for x0, x1 in zip(before, _usage())])
    carlini_model.BLOCK = blocks["blocks"]
    _report(f"descend, {a.steps} Adam steps under the RMS and the unbiased model (the X-step, cross mode's refit); "
            f"median of {a.repeats}", use, ends)


def _report(title: str, use: dict, ends: dict):
    import torch

    med = {k: [sorted(v[j] for v in use[k])[len(use[k]) // 2] for j in range(3)] for k in use}
    same = all(torch.equal(x, y) for x, y in zip(ends["one block"], ends["blocks"]))
    gap = max(float((x - y).abs().max()) for x, y in zip(ends["one block"], ends["blocks"]))
    print(title)
    for k, (cpu, system, faults) in med.items():
        print(f"  {k}: {cpu:.2f} CPU-s ({system:.2f} system), {faults:,} minor page faults")
    print(f"  one block / blocks: {med['one block'][0] / med['blocks'][0]:.2f}× the CPU-seconds; the same result bit for "
          f"bit: {same} (largest difference {gap:.1e})")


if __name__ == "__main__":
    main()
