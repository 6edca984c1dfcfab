"""A sign-synchronising X-step for Carlini's attack in cross mode on natural images (issue 31), and the start it
needs. The steps are the package's (``reconguard.attacks.instahide.carlini_sync``, which ``CarliniAttack`` now runs in
cross mode with labels on natural images, with the k-means start's members of mass ≥ 0.2 pinned and the one-class
encryptions left out of the X-step); this script measures them one by one with the keys at hand. The attack's own
cross-mode X-step (Adam on the amplitude model) recovers nothing of RGB 32×32 photograph crops even *given the true
mixing matrix* (median correlation 0.13, README "Where cross mode fails on the crops"): with pixel means ≈ 0 after
normalisation nothing tells one image's sign at a pixel from another's. This X-step solves that part in closed form, given rows A (N×n):

1. *energies*: per pixel, least squares of |x̃_t|² − (public part's mean² + variance) on Σ_i a_ti² e_i → u_i = √e_i;
2. *relative signs*: each encryption with two private members i, j votes, per pixel, for "same sign" by how much
   better √((a_i u_i + a_j u_j)² + v_t) fits |x̃_t| than √((a_i u_i − a_j u_j)² + v_t) (squared errors' difference);
   per pixel the signs of all n images are the leading eigenvector of the votes' n×n matrix;
3. *global signs*: each pixel's sign (which no fit to |x̃| can tell) from the maximum spanning tree of the pixel graph
   (``carlini_signs.tree_signs``); the one overall sign is taken from the truth here (the attack's ``settle`` reads it
   off the pixel range).

Alternated with the nearest option per encryption (the labels' two classes and masses; one-class rows keep their
start), from a start made with the keys at hand (``carlini_basin._challenge``):

- ``--start true``: the true rows; ``--start corrupt --q Q``: each member replaced with probability Q by a random
  image of its class (``carlini_basin._corrupt``); ``--start above --w W``: members of coefficient ≥ W true, the
  others random members of their class (``--wrong Q``: each of those ≥ W also replaced with probability Q — the
  purity a clustering must reach); ``--start kmeans``: a start with no truth in it — per class, the whitened weighted
  k-means of ``carlini_dominant`` (``--whiten``, ``--feature-power``) over its two-class encryptions, each cluster named after the true
  image it holds most of (slots are exchangeable, so this naming changes no image, only lets the script score them);
  one-class rows two random members of their class with half the mass each.

Printed per round: the share of true (encryption, member) pairs held and of rows wholly right, the recovered images' median correlation with
the truth (matched by slot) and the share above 0.8, CPU-seconds.

    python benchmarks/carlini_sync.py --start true --rounds 1
    python benchmarks/carlini_sync.py --start above --w 0.2 --rounds 4
    python benchmarks/carlini_sync.py --start above --w 0.2 --wrong 0.2 --rounds 4
    python benchmarks/carlini_sync.py --start kmeans --rounds 6

``--label-free``: the rounds' assignment is the label-free one instead — each encryption's nearest row among all
C(n, 2) pairs × the coefficient grid (``RowGrid.free_rows``: 89,100 rows at n = 100), on ``--search-pixels`` random
pixels — and the members are scored after matching slots to images by their shared encryptions (label-free slots
have no class). ``--start dominant``: each encryption's larger true member kept, the smaller replaced by a random
image (no row has both members right). What these measure, label-free crops cross k = 6 (README, "Label-free cross
k = 6 on crops: where it fails"):

    python benchmarks/carlini_sync.py --seed 10 --label-free --start true --rounds 4 --search-pixels 1024
    python benchmarks/carlini_sync.py --seed 10 --label-free --start dominant --rounds 4 --search-pixels 1024
    python benchmarks/carlini_sync.py --seed 10 --label-free --start corrupt --q 0.5 --rounds 8

``--noise-rank R``: the label-free assignment under ``carlini_model.noise_metric`` of rank R (mixes of the attacker's
own and noise images; 0, the default: plain squared error, as the runs above). ``--assign-at-truth``: one label-free
assignment at the true images, then stop — the metric's ceiling (README, "The assignment's metric, label-free"):

    python benchmarks/carlini_sync.py --seed 10 --label-free --assign-at-truth --search-pixels 512 --noise-rank 20
    python benchmarks/carlini_sync.py --seed 10 --label-free --assign-at-truth --search-pixels 3072 --noise-rank 3000
    python benchmarks/carlini_sync.py --seed 10 --label-free --start true --rounds 4 --search-pixels 3072 --noise-rank 3000

``--confident Q``: label-free, each round's X-step takes only the share Q of the encryptions whose best member pair
wins by the largest relative margin over the second best:

    python benchmarks/carlini_sync.py --seed 10 --label-free --start true --rounds 3 --search-pixels 512 --noise-rank 20 --confident 0.2
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reconguard.attacks.instahide.carlini_sync import energies, pinned_rows, sync_signs, sync_step  # noqa: E402,F401


def _start(a, A, B, L, cls, g) -> torch.Tensor:
    from carlini_basin import _corrupt

    if a.start == "true":
        return A.clone()
    if a.start == "corrupt":
        return _corrupt(A, cls, a.q, g)
    if a.start == "kmeans":
        return _kmeans_start(a, A, B, L, cls, g)
    if a.start == "dominant":
        return _dominant_start(A, g)
    out = torch.zeros_like(A)  # above: the true member where its coefficient ≥ w (kept with probability 1 − wrong)
    for t, i in torch.nonzero(A > 0).tolist():
        same = torch.nonzero(cls == cls[i]).squeeze(1)
        keep = A[t, i] >= a.w and (a.wrong == 0 or float(torch.rand(1, generator=g)) >= a.wrong)  # draws as before
        j = i if keep else int(same[torch.randint(len(same), (1,), generator=g)])
        out[t, j] += A[t, i]
    return out


def _dominant_start(A, g) -> torch.Tensor:
    """Each row's larger true member kept, the smaller moved to a random image (``--start dominant``)."""
    out = torch.zeros_like(A)
    for t in range(len(A)):
        i, j = sorted(torch.nonzero(A[t] > 0).squeeze(1).tolist(), key=lambda m: -float(A[t, m]))
        out[t, i] += A[t, i]
        out[t, int(torch.randint(A.shape[1], (1,), generator=g))] += A[t, j]
    return out


def _matched(Ae, A) -> tuple[float, torch.Tensor]:
    """Label-free members right: the share of true (encryption, member) pairs held once each slot is matched to the
    image it shares most encryptions with (scipy's ``linear_sum_assignment``), and each slot's image."""
    from scipy.optimize import linear_sum_assignment

    co = ((Ae > 0).double().T @ (A > 0).double()).numpy()
    r, c = linear_sum_assignment(-co)
    return float(co[r, c].sum() / (A > 0).sum()), torch.as_tensor(c)


def _free_assign(a, B, mu, var, own_z, noise_z):
    """``--label-free``: the rounds' assignment, each encryption's nearest row of the shared grid on
    ``--search-pixels`` random pixels (the attack's label-free assignment) under ``--noise-rank``'s metric
    (``carlini_model.noise_metric`` from mixes of the attacker's own and noise images; 0: plain squared error)."""
    from reconguard.attacks.instahide.carlini_model import noise_metric, predict
    from reconguard.attacks.instahide.carlini_options import Options, RowGrid
    from reconguard.encoders.instahide import paper_c1

    grid = RowGrid(2, "cross", 5, paper_c1(a.k), 0.3)
    opts = Options(shared=grid.free_rows(a.n), n_encryptions=len(B))
    sub = torch.randperm(B.shape[1], generator=torch.Generator().manual_seed(a.seed))[:a.search_pixels]
    metric = noise_metric(own_z, noise_z, None, (mu, var), a.k, 0.3, a.noise_rank, torch.Generator().manual_seed(1),
                          pixels=sub)
    if not a.confident:
        return lambda X: opts.assign(X[:, sub], B[:, sub], (mu[sub], var[sub]), metric)[0]
    splits = len(grid.free_splits())  # free_rows is pair-major: each pair's splits side by side

    def confident(X):
        """The nearest rows and each encryption's margin: how much worse, relatively, its second-best member pair fits
        (float32, 500 encryptions at a time)."""
        P = predict(opts.shared, X[:, sub], mu[sub], var[sub]).float()
        best, margin = torch.empty(len(B), dtype=torch.long), torch.empty(len(B))
        for i in range(0, len(B), 500):
            C = metric.cross(B[i:i + 500, sub].float(), P).reshape(-1, P.shape[0] // splits, splits)
            low, at = C.min(2)
            two = low.topk(2, 1, largest=False)
            best[i:i + 500] = two.indices[:, 0] * splits + at.gather(1, two.indices[:, :1]).squeeze(1)
            margin[i:i + 500] = (two.values[:, 1] - two.values[:, 0]) / two.values[:, 0].clamp_min(1e-12)
        return opts.shared[best], margin

    return confident


def _kmeans_start(a, A, B, L, cls, g) -> torch.Tensor:
    """Rows from ``carlini_dominant.kmeans`` of the whitened |x̃| per class (module docstring, ``--start kmeans``)."""
    from carlini_dominant import _matched, _unit, kmeans, whiten

    F, out = whiten(B ** a.feature_power, a.whiten), torch.zeros_like(A)
    two = (L > 1e-6).sum(1) == 2
    for c in cls.unique().tolist():
        slots = torch.nonzero(cls == c).squeeze(1)
        rows = torch.nonzero(two & (L[:, c] > 1e-6)).squeeze(1)
        mass = L[rows, c]
        labels = kmeans(_unit(F[rows]), mass ** 4, len(slots), torch.nonzero(mass >= 0.35).squeeze(1), 30, g)
        named = _matched(labels.numpy(), A[rows][:, slots].argmax(1).numpy(), len(slots))
        out[rows, slots[torch.as_tensor(named)]] = mass
        for t in torch.nonzero(~two & (L[:, c] > 1e-6)).squeeze(1).tolist():
            out[t, slots[torch.randperm(len(slots), generator=g)[:2]]] = L[t, c] / 2
    on = A >= 0.2
    print(f"k-means start: {float((out > 0)[on].double().mean()):.3f} of the members of coefficient ≥ 0.2 right",
          flush=True)
    return out


def main():
    from carlini_basin import _challenge, challenge_parser, right

    from reconguard.encoders import InstaHide

    p = challenge_parser(__doc__, "photos", 32, 100, 50, 6, 0)
    p.add_argument("--start", choices=("true", "corrupt", "above", "kmeans", "dominant"), default="true")
    p.add_argument("--q", type=float, default=0.2, help="--start corrupt: the share of members replaced")
    p.add_argument("--w", type=float, default=0.2, help="--start above: the least coefficient kept true")
    p.add_argument("--wrong", type=float, default=0.0, help="--start above: the share of those ≥ w replaced too")
    p.add_argument("--whiten", type=float, default=1e-3, help="--start kmeans: the whitening's eigenvalue floor")
    p.add_argument("--feature-power", type=float, default=1.0, help="--start kmeans: cluster |x̃| to this power")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--label-free", action="store_true", help="the label-free assignment over every pair (docstring)")
    p.add_argument("--search-pixels", type=int, default=256, help="--label-free: the assignment's random pixels")
    p.add_argument("--noise-rank", type=int, default=0, help="--label-free: the assignment metric's rank (0: plain)")
    p.add_argument("--confident", type=float, default=0.0,
                   help="--label-free: the X-step on this share of the encryptions, those whose best pair wins by the "
                        "largest margin (0: every encryption)")
    p.add_argument("--assign-at-truth", action="store_true",
                   help="--label-free: one assignment at the true images (the ceiling of the metric), then stop")
    a = p.parse_args()
    if a.label_free and a.start in ("above", "kmeans"):
        p.error("--label-free starts: true, corrupt (each member replaced by a random image) or dominant")
    if not a.label_free and (a.noise_rank or a.confident or a.assign_at_truth):
        p.error("--noise-rank, --confident and --assign-at-truth apply to the label-free assignment: add --label-free")
    if not 0 <= a.confident <= 1 or 0 < a.confident * a.n * a.T < 1:
        p.error(f"--confident is a share of the encryptions in (0, 1] (0: all of them), got {a.confident}")
    a.pixels = a.pixels or None
    A, X, B, L, cls, own, noise = _challenge(a, mode="cross")
    z = InstaHide.normalize_images(noise, InstaHide(a.k).channel_stats(noise)).reshape(len(noise), -1).double()
    m = 1 - L.sum(1, keepdim=True)  # the public part's mass; its split's Σw² is 2/(k − 1) of m² on average
    pub_mean, pub_var = m * z.mean(0), m ** 2 * z.var(0) * 2 / (a.k - 1)
    shape = tuple(noise.shape[1:])
    Ae = _start(a, A, B, L, cls if not a.label_free else torch.zeros_like(cls), torch.Generator().manual_seed(a.seed + 7))
    if a.label_free:  # the public part's mass from the rows themselves, as the label-free attack has it
        own_z = InstaHide.normalize_images(own, InstaHide(a.k).channel_stats(own)).reshape(len(own), -1).double()
        free = _free_assign(a, B, z.mean(0), z.var(0) * 2 / (a.k - 1), own_z, z)
    if a.assign_at_truth:
        t0 = time.process_time()
        Ae = free(X)
        Ae = Ae[0] if isinstance(Ae, tuple) else Ae
        whole = float(((Ae > 0) == (A > 0)).all(1).double().mean())
        print(f"at the true images, {a.search_pixels} pixels, noise rank {a.noise_rank}: members "
              f"{float((Ae > 0)[A > 0].double().mean()):.3f}, rows {whole:.3f} ({time.process_time() - t0:.0f} CPU-s)")
        return
    print(f"{a.data} {a.size}×{a.size}, cross k = {a.k}, n = {a.n}, T = {a.T}, start {a.start}"
          f"{', label-free' if a.label_free else ''}")
    keep = torch.arange(len(B))  # the rows the X-step takes (``--confident``: the surest share)
    for r in range(a.rounds):
        t0 = time.process_time()
        if a.label_free:
            m = 1 - Ae.sum(1, keepdim=True)
            pub_mean, pub_var = m * z.mean(0), m ** 2 * z.var(0) * 2 / (a.k - 1)
        Xe = sync_step(Ae[keep], B[keep], pub_mean[keep], pub_var[keep], shape)
        held, image = _matched(Ae, A) if a.label_free else (right(Ae, A)[0], torch.arange(a.n))
        whole = float(((Ae > 0) == (A[:, image] > 0)).all(1).double().mean())  # rows with both members right
        if len(keep) < len(B):
            sure = float(((Ae[keep] > 0) == (A[keep][:, image] > 0)).all(1).double().mean())
            print(f"  the X-step's {len(keep)} surest rows: {sure:.3f} whole")
        c = torch.stack([_corr(Xe, X[image]), _corr(-Xe, X[image])])
        c = c[int(c.median(1).values.argmax())]  # the one overall sign (from the truth here)
        print(f"round {r}: members {held:.3f}, rows {whole:.3f}, median correlation {float(c.median()):.3f}, "
              f"> 0.8: {float((c > 0.8).double().mean()):.2f}  ({time.process_time() - t0:.1f} CPU-s X-step)", flush=True)
        Ae = free(Xe) if a.label_free else pinned_rows(Xe, Ae, Ae, B, L, cls, pub_mean, pub_var, pin=float("inf"))
        if isinstance(Ae, tuple):
            Ae, margin = Ae
            keep = margin.argsort(descending=True)[:int(a.confident * len(B))]


def _corr(U, V) -> torch.Tensor:
    U, V = U - U.mean(1, keepdim=True), V - V.mean(1, keepdim=True)
    return (U * V).sum(1) / (U.norm(dim=1) * V.norm(dim=1)).clamp_min(1e-12)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
