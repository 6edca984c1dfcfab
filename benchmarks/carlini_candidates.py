"""Why label-free Carlini is refused inside mode at k = 4 (issue 31): the label-free search at scale restricts each
encryption to its ``per`` likeliest images from the similarity network's scores (``similarity.candidate_options``);
inside k = 4 an encryption's four members must all be among them. This measures, on a challenge made with its keys at
hand (``carlini_basin._challenge``), the network's pair ROC AUC and, per ``per``, the share of the true (encryption,
member) pairs among the candidates and of the encryptions with every member there (the NMF clusters matched to the
true images 1-to-1 by their overlap).

    python benchmarks/carlini_candidates.py --data fashion --k 4 --n 100 --T 50 --steps 300 --seed 10
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main():
    from carlini_basin import _challenge, challenge_parser
    from scipy.optimize import linear_sum_assignment
    from sklearn.metrics import roc_auc_score

    from reconguard.attacks.instahide import SimilarityNetwork
    from reconguard.attacks.instahide.similarity import soft_memberships
    from reconguard.encoders import InstaHide
    from reconguard.encoders.instahide import paper_c1

    p = challenge_parser(__doc__, "fashion", 28, 100, 50, 4, 0)
    p.add_argument("--steps", type=int, default=300, help="the similarity network's training steps")
    p.add_argument("--per", type=int, nargs="*", default=[5, 7, 10, 15])
    a = p.parse_args()
    a.pixels = None
    A, _, B, _, _, own, _ = _challenge(a, mode="inside")
    N, n = A.shape
    t0 = time.process_time()
    net = SimilarityNetwork(own.shape[1], steps=a.steps, seed=a.seed)
    net.fit(InstaHide(a.k, c1=paper_c1(a.k), mode="inside"), own)
    S = net.scores(B.float().reshape(N, *own.shape[1:]))
    M = (A > 0).double()
    iu = torch.triu_indices(N, N, 1)
    auc = roc_auc_score(((M @ M.T) > 0)[iu[0], iu[1]].numpy(), S[iu[0], iu[1]].numpy())
    print(f"{a.data} inside k = {a.k}, n = {n}, T = {a.T}: network {a.steps} steps, pair AUC {auc:.3f} "
          f"({time.process_time() - t0:.0f} CPU-s)")
    H = soft_memberships(S, n, seed=a.seed)
    rows, cols = linear_sum_assignment(-(H.T.double() @ M).numpy())
    image_of = torch.as_tensor(cols)[torch.argsort(torch.as_tensor(rows))]
    for per in a.per:
        cand = torch.zeros(N, n, dtype=torch.bool).scatter_(1, image_of[H.topk(per, 1).indices], True)
        print(f"per {per}: members among the candidates {float(cand[M > 0].double().mean()):.3f}, encryptions with "
              f"every member there {float((cand | (M == 0)).all(1).double().mean()):.3f}")


if __name__ == "__main__":
    main()
