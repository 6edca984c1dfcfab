"""Which encryptions tell their private images apart (issue 31: Carlini's attack on natural images, cross mode):
per class (the labels name each encryption's classes and their masses), the encryptions holding one image of that
class with a coefficient ≥ ``--weights``, their |x̃| centred over those encryptions and scaled to unit norm, scored
three ways against the truth (the challenge is made with its keys at hand, ``carlini_basin._challenge``):

- ``AUC``: the ROC AUC of the pair scores (cosines) for "the two share their class-c image";
- ``spectral``: the share of those encryptions a spectral clustering (the class's image count of leading
  eigenvectors of the cosine matrix, then k-means) puts with the majority of their image, clusters matched 1-to-1;
- ``oracle``: the same for each encryption's nearest true centroid (the mean of its image's encryptions, itself
  included) — what clustering these features could reach at best.

    python benchmarks/carlini_dominant.py --data photos --size 32 --seeds 3 --weights 0 0.2 0.3 0.4

Mean over the classes of each challenge; one line per challenge and weight.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def separation(A: torch.Tensor, B: torch.Tensor, cls: torch.Tensor, low: float) -> dict:
    """``{"rows", "auc", "spectral", "oracle"}`` averaged over the classes, for the encryptions whose class-c image
    (one only) has coefficient ≥ ``low`` (A: true N×n rows in slot order; B: |x̃|, N×d; cls: each slot's class)."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.cluster import KMeans
    from sklearn.metrics import roc_auc_score

    out = []
    for c in cls.unique().tolist():
        slots = torch.nonzero(cls == c).squeeze(1)
        sub = A[:, slots]
        rows = torch.nonzero(((sub > 0).sum(1) == 1) & (sub.max(1).values >= low)).squeeze(1)
        if len(rows) < 3 * len(slots):
            continue
        who = sub[rows].argmax(1).numpy()
        g = B[rows].double()
        g = g - g.mean(0)
        g = (g / g.norm(dim=1, keepdim=True).clamp_min(1e-12)).numpy()
        S = g @ g.T
        iu = np.triu_indices(len(rows), 1)
        auc = roc_auc_score((who[:, None] == who[None, :])[iu], S[iu])
        M = np.stack([g[who == i].mean(0) if (who == i).any() else np.zeros(g.shape[1]) for i in range(len(slots))])
        oracle = float(((g @ M.T).argmax(1) == who).mean())
        vec = np.linalg.eigh(S)[1][:, -len(slots):]
        found = KMeans(len(slots), n_init=10, random_state=0).fit_predict(vec)
        C = np.zeros((len(slots), len(slots)))
        np.add.at(C, (found, who), 1)
        r, k = linear_sum_assignment(-C)
        out.append((len(rows), auc, C[r, k].sum() / len(rows), oracle))
    m = np.array(out).mean(0)
    return {"rows": float(m[0]), "auc": float(m[1]), "spectral": float(m[2]), "oracle": float(m[3])}


def main():
    from carlini_basin import _challenge, challenge_parser

    p = challenge_parser(__doc__, "photos", 32, 100, 50, 6, 0)
    p.add_argument("--seeds", type=int, default=1, help="fresh challenges (seeds seed, seed+1, …)")
    p.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.2, 0.3, 0.4])
    a = p.parse_args()
    a.pixels = a.pixels or None  # 0: every pixel
    print(f"{a.data} {a.size}×{a.size}, cross k = {a.k}, n = {a.n}, T = {a.T}")
    print(f"{'seed':>4s} {'weight ≥':>8s} {'rows/class':>10s} {'AUC':>6s} {'spectral':>9s} {'oracle':>7s} {'CPU-s':>6s}")
    seed0 = a.seed
    for s in range(seed0, seed0 + a.seeds):
        a.seed = s
        A, _, B, _, cls, _, _ = _challenge(a, mode="cross")
        for w in a.weights:
            t = time.process_time()
            r = separation(A, B, cls, w)
            print(f"{s:4d} {w:8.2f} {r['rows']:10.0f} {r['auc']:6.3f} {r['spectral']:9.3f} {r['oracle']:7.3f} "
                  f"{time.process_time() - t:6.1f}", flush=True)


if __name__ == "__main__":
    main()
