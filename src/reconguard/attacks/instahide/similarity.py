"""Step (1)–(2) of Carlini et al.'s attack on InstaHide: a similarity network on |x̃| pairs, trained by
the attacker on encryptions it makes itself, and the clustering of encryptions by shared private image.

* ``SimilarityNetwork.fit(scheme, images)``: the attacker encrypts groups of its own images with the
  scheme (``group_n`` images × ``group_T`` encryptions per group, fresh keys), so it knows which
  encryptions share an image; an embedding CNN f on |x̃| and a symmetric head
  h(|f(a) − f(b)|, f(a)·f(b)) are trained with binary cross-entropy on every pair of a group (positives
  up-weighted to balance). ``scores(encryptions)`` is the N×N matrix of P(share an image).
* ``cluster_encryptions(S, n, m)``: each encryption holds m of the n private images, so S ≈ M Mᵀ with
  M ∈ {0, 1}^{N×n}, m ones per row. Symmetric NMF (S ≈ H Hᵀ, H ≥ 0, multiplicative updates), then each
  row's m largest entries under a balanced assignment: every image gets N·m/n slots (each image is
  mixed equally often), solved exactly as a linear assignment of the N·m (encryption, slot) pairs
  (scipy's ``linear_sum_assignment``; an encryption may not take one image twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ...checks import check_positive_int
from ...errors import ParameterError, ShapeError
from ...memory import keep_freed_memory
from ...nn.init import seeded
from ...progress import progress
from ..base import Attack
from ...results import Result


class _PairNet(nn.Module):
    """f: three conv stages (BatchNorm, ReLU; 2×2 max-pooling after the second and third, ceil mode so that any size
    ≥ 1 pixel passes), average-pooled to 4×4, one linear layer to the embedding. It replaced a dense layer on every
    pixel after two full-resolution convolutions: on a Fashion-MNIST cross k = 6 challenge (n = 100, T = 50, seed 1;
    a scratch script) it scored the challenge's pairs at ROC AUC 0.748 and put 41 % of the true members among each
    encryption's 5 likeliest images after 600 steps (136 CPU-s), the dense one 0.682 and 33 % after 750 (162 CPU-s)."""

    def __init__(self, channels: int, width: int = 32, embedding: int = 64):
        super().__init__()

        def stage(a: int, b: int) -> list:
            return [nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU()]

        self.f = nn.Sequential(*stage(channels, width), *stage(width, width), nn.MaxPool2d(2, ceil_mode=True),
                               *stage(width, 2 * width), nn.MaxPool2d(2, ceil_mode=True), *stage(2 * width, 4 * width),
                               nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(16 * 4 * width, embedding))
        self.h = nn.Sequential(nn.Linear(2 * embedding, 64), nn.ReLU(), nn.Linear(64, 1))

    def pairs(self, ea: torch.Tensor, eb: torch.Tensor) -> torch.Tensor:
        """Logits of "share an image" for every (row of ea, row of eb)."""
        return self.h(torch.cat([(ea[:, None] - eb[None]).abs(), ea[:, None] * eb[None]], 2)).squeeze(2)


@dataclass(frozen=True)
class SimilarityResult(Result):
    scores: torch.Tensor          # N×N, P(the two encryptions share a private image)
    auc: float | None = None      # against the truth, when given
    history: list = field(default_factory=list)
    _skip_in_dict = ("scores",)


class SimilarityNetwork(Attack):
    """``fit(scheme, images)`` on the attacker's own images, then ``run(encryptions, share=None)``. ``groups``: None
    (default) encrypts a fresh group of ``group_n`` of the attacker's images for every step; a number cycles that many
    groups made up front."""

    name = "similarity"

    def __init__(self, channels: int, width: int = 32, steps: int = 1500, group_n: int = 20, group_T: int = 10,
                 groups: int | None = None, lr: float = 1e-3, seed: int = 0, progress: bool = False):
        super().__init__(None)
        with seeded(seed):
            self.net = _PairNet(channels, width)
        self.steps = check_positive_int(steps, "steps")
        self.groups = None if groups is None else check_positive_int(groups, "groups")
        self.group_n, self.group_T = check_positive_int(group_n, "group_n"), check_positive_int(group_T, "group_T")
        self.lr, self.seed, self.progress = lr, seed, progress

    def _group(self, scheme, images, g, stats) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randperm(len(images), generator=g)[:self.group_n]
        E, M = [], []
        for _ in range(self.group_T):
            enc = scheme.encrypt(images[idx], seed=int(torch.randint(2**31, (1,), generator=g)), stats=stats)
            E.append(enc.images.abs())
            M.append((enc.key.mixing(self.group_n) > 0).float())
        return torch.cat(E), torch.cat(M)

    def fit(self, scheme, images, stats=None) -> list:
        """Train on groups of the attacker's ``images`` encrypted with ``scheme`` (its mode, k, pool): a fresh group
        per step, or ``groups`` groups cycled."""
        x = torch.as_tensor(images, dtype=torch.float32)
        if x.ndim != 4:
            raise ShapeError(f"images must be N×C×H×W, got {tuple(x.shape)}.")
        if len(x) < max(self.group_n, scheme.k):
            raise ParameterError(f"{len(x)} images cannot fill a group of {max(self.group_n, scheme.k)}: give more "
                                 "images or lower group_n.")
        keep_freed_memory()  # a fresh group of encryptions every step (reconguard.memory)
        g = torch.Generator().manual_seed(self.seed)
        stats = stats or scheme.channel_stats(x)
        data = [self._group(scheme, x, g, stats) for _ in range(self.groups or 1)]
        self.net.eval()
        with torch.no_grad():
            self.net.f(data[0][0][:2])  # shape check on two encryptions before the optimiser sees the parameters
        opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        steps = progress(range(self.steps), "similarity network", enabled=self.progress)
        history = []
        self.net.train()
        for step in steps:
            E, M = data[step % len(data)] if self.groups or step == 0 else self._group(scheme, x, g, stats)
            share = ((M @ M.T) > 0).float()
            rate = float(share.mean())
            e = self.net.f(E)  # one embedding pass: both sides of every pair are this group's encryptions
            logits = self.net.pairs(e, e)
            loss = nn.functional.binary_cross_entropy_with_logits(
                logits, share, pos_weight=torch.tensor((1 - rate) / max(rate, 1e-6)))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            history.append(float(loss.detach()))
        self.net.eval()
        return history

    def scores(self, encryptions, chunk: int = 100) -> torch.Tensor:
        e = torch.as_tensor(encryptions, dtype=torch.float32).abs()
        if e.ndim != 4:
            raise ShapeError(f"encryptions must be N×C×H×W, got {tuple(e.shape)}.")
        with torch.no_grad():
            f = self.net.f(e)
            return torch.cat([torch.sigmoid(self.net.pairs(f[a:a + chunk], f)) for a in range(0, len(f), chunk)])

    def run(self, encryptions, share=None) -> SimilarityResult:
        """``share``: the true N×N "share an image" matrix, for the ROC AUC."""
        S = self.scores(encryptions)
        auc = None
        if share is not None:
            from sklearn.metrics import roc_auc_score
            iu = np.triu_indices(len(S), 1)
            auc = float(roc_auc_score(np.asarray(share)[iu], S.numpy()[iu]))
        return SimilarityResult(S, auc)


def soft_memberships(scores, n: int, iters: int = 300, seed: int = 0) -> torch.Tensor:
    """N×n non-negative memberships H (rows sum to 1) from symmetric NMF S ≈ H Hᵀ (Ding et al.'s
    multiplicative update with β = 1/2); O(iters·N²·n) time, O(N²) memory."""
    S = torch.as_tensor(scores, dtype=torch.float64)
    N = S.shape[0]
    if S.ndim != 2 or S.shape[1] != N:
        raise ShapeError(f"scores must be N×N, got {tuple(S.shape)}.")
    n = check_positive_int(n, "n")
    S = (S + S.T) / 2
    g = torch.Generator().manual_seed(seed)
    H = torch.rand(N, n, generator=g, dtype=torch.float64) * float(S.mean()) ** 0.5
    for _ in range(iters):
        H = H * (0.5 + 0.5 * (S @ H) / (H @ (H.T @ H)).clamp_min(1e-12))
    return H / H.sum(1, keepdim=True).clamp_min(1e-300)


def cluster_encryptions(scores, n: int, m: int, iters: int = 300, seed: int = 0, exact_limit: int = 3000) -> torch.Tensor:
    """N×n 0/1 membership, m images per encryption, N·m/n encryptions per image (see the module docstring): the
    ``balanced_members`` of the scores' ``soft_memberships``."""
    S = torch.as_tensor(scores, dtype=torch.float64)
    if S.ndim != 2 or S.shape[1] != S.shape[0]:
        raise ShapeError(f"scores must be N×N, got {tuple(S.shape)}.")
    n, m = check_positive_int(n, "n"), check_positive_int(m, "m")
    if m > n:
        raise ParameterError(f"m={m} images per encryption cannot exceed n={n}.")
    return balanced_members(soft_memberships(S, n, iters, seed), m, exact_limit)


def balanced_members(H, m: int, exact_limit: int = 3000) -> torch.Tensor:
    """N×n 0/1 membership from the N×n soft memberships H (``soft_memberships``): each row's m largest entries under
    a balanced assignment, every image N·m/n slots. Up to ``exact_limit`` memberships (N·m) it is solved exactly
    (Hungarian, O((N·m)³)); above it greedily: (encryption, image) pairs in decreasing membership, each taken while
    the image has slots left and the encryption fewer than m images (O(N·n log(N·n)); the published challenge has
    N·m = 10,000). The attack computes H once for its candidates and this start (the NMF: 98 CPU-s at N = 5,000)."""
    from scipy.optimize import linear_sum_assignment

    H = torch.as_tensor(H, dtype=torch.float64)
    if H.ndim != 2:
        raise ShapeError(f"memberships must be N×n, got {tuple(H.shape)}.")
    (N, n), m = H.shape, check_positive_int(m, "m")
    if m > n:
        raise ParameterError(f"m={m} images per encryption cannot exceed n={n}.")
    slots = -(-N * m // n)  # ceil: every image's share of the N·m memberships
    cost = -torch.log(H + 1e-9).numpy()
    member = torch.zeros(N, n)
    if N * m > exact_limit:
        left, have = np.full(n, slots), np.zeros(N, dtype=int)
        for flat in np.argsort(cost, axis=None):
            t, i = divmod(int(flat), n)
            if have[t] < m and left[i] > 0:
                member[t, i], have[t], left[i] = 1.0, have[t] + 1, left[i] - 1
        for t in np.flatnonzero(have < m):  # slots ran out: the encryption's best unused images
            free = [j for j in np.argsort(cost[t]) if not member[t, j]]
            member[t, free[:m - have[t]]] = 1.0
        return member
    # columns: (image, slot); rows: (encryption, its j-th membership); the j-th copy of an image is
    # barred from an encryption's other rows by a large cost on repeated picks after the solve
    big = np.repeat(cost, m, axis=0)           # (N·m)×n
    cols = np.repeat(big, slots, axis=1)        # (N·m)×(n·slots)
    rows, picked = linear_sum_assignment(cols)
    image = picked // slots
    for r, i in zip(rows, image):
        t = r // m
        if member[t, i]:  # the same image twice: give this row the encryption's best unused image
            free = [j for j in np.argsort(cost[t]) if not member[t, j]]
            i = free[0]
        member[t, i] = 1.0
    return member


MAX_AFFINITY_ENCRYPTIONS = 20_000  # 3.0 GiB of float64 scores, and the NMF needs about as much again


def encryption_affinity(encryptions, drop: int | None = None, rank: int = 500, weight: float = 0.25,
                        neighbours: int | None = None) -> torch.Tensor:
    """N×N pair scores read off the encryptions themselves — no network, no training — for inside mode.

    Per pixel p, ``|x̃_tp|² = (a_t · u_p)²`` (``u_p``: pixel p of the n images): two encryptions' intensities vary
    together over the pixels through the images they share (for independent zero-mean pixels the covariance is
    2⟨a_t, a_u⟩², Chen, Song & Zhuo's observation). The intensities Z (N×d) are standardised per pixel; with
    Z = U diag(s) Vᵀ, each encryption is the row of ``U[:, drop:rank] · s^weight`` — the ``drop`` dominant
    directions removed (what every image shares: a smooth layout, the garment's outline; default min(10, d / 16,
    N / 60)), the next ones partly whitened (``weight`` 1 keeps the covariance, 0 whitens fully), those past ``rank``
    (noise) cut — scaled to unit norm; the score is the cosine, negatives 0.
    Measured on inside k = 4, n = 100, T = 50 challenges (scratch, key seed 0), as the share of an encryption's members
    that the symmetric NMF (``soft_memberships``) puts among its 6 likeliest images — Fashion-MNIST / RGB 32×32
    photograph crops: these defaults 0.82 / 0.64; 50 directions dropped, no whitening (the previous default) 0.61 /
    0.40; nothing dropped, none whitened 0.34 / 0.16. The similarity network put 0.27 among 7 on Fashion-MNIST. End to
    end, label-free crops identified 0.07 on one challenge with the previous default, 0.42 / 0.18 (mean / worst of
    five fresh challenges, ``benchmarks/carlini.py``; README) with these: still below the 0.6 bar; Fashion-MNIST
    0.88 / 0.83 → 0.95 / 0.94. Cross mode's public part weakens it: on crops (n = 100, T = 50, own convention) an
    encryption's 10 nearest share its owner 0.09–0.17 of the time, one of its two images 0.34, and the NMF puts 0.31
    of its members among its 5 likeliest images — the similarity network's scores 0.11 and 0.12 (README).
    ``neighbours`` = K (what the attack passes: ``affinity_neighbours``) replaces the cosines by shared-neighbour
    counts: A the 0/1 graph of each encryption's K highest-scoring ones, symmetrised (either side's choice); the score
    of a pair is (A·A)_tu, the encryptions both count as near. Two encryptions that share an image are near many of the
    same ones (that image's T·k encryptions); a chance high cosine is not. On crops (n = 100, T = 50, K = 200, four
    private sets) it raises the members' share among an encryption's 6 likeliest images from 0.62–0.64 to 0.70–0.74
    (the dominant member's 0.87–0.88 → 0.93–0.96), and end to end label-free crops from 0.42 / 0.18 to 0.86 / 0.71
    (five fresh challenges each); on Fashion-MNIST the share moves 0.81–0.83 → 0.76–0.81, end to end 0.95 / 0.94 →
    0.94 / 0.92 (README).
    O(N·d·min(N, d)) for the directions, O(N²·rank) for the scores (O(N³) more with ``neighbours``); N×N float64
    memory (float32 counts with ``neighbours``)."""
    E = torch.as_tensor(encryptions, dtype=torch.float64)
    if E.ndim < 2 or len(E) < 2:
        raise ShapeError(f"encryptions must be N×C×H×W with N ≥ 2, got {tuple(E.shape)}.")
    if len(E) > MAX_AFFINITY_ENCRYPTIONS:
        raise ParameterError(f"pair scores of N = {len(E):,} encryptions need an N×N matrix of {len(E) ** 2 * 8 / 2**30:.0f} "
                             f"GiB (at most {MAX_AFFINITY_ENCRYPTIONS:,} encryptions): give the soft labels, or attack a "
                             "subset of the encryptions.")
    if not 0 <= weight <= 1:
        raise ParameterError(f"weight={weight} must lie in [0, 1] (1: the covariance's own weights, 0: whitened).")
    Z = E.reshape(len(E), -1) ** 2
    Z = (Z - Z.mean(0)) / Z.std(0).clamp_min(1e-9)
    top = min(Z.shape) - 1
    drop = max(0, min(int(min(10, Z.shape[1] // 16, Z.shape[0] // 60) if drop is None else drop), top - 1))
    stop = max(drop + 1, min(check_positive_int(rank, "rank"), top))
    U, s, _ = torch.linalg.svd(Z, full_matrices=False)
    Z = U[:, drop:stop] * s[drop:stop] ** weight
    Z = Z / Z.norm(dim=1, keepdim=True).clamp_min(1e-12)
    S = (Z @ Z.T).clamp_min_(0).fill_diagonal_(0)
    if neighbours is None:
        return S
    K = min(check_positive_int(neighbours, "neighbours"), len(S) - 1)
    near = S.topk(K, 1).indices
    del S  # float32 0/1 counts are exact (sums ≤ N < 2²⁴) at half the memory
    A = torch.zeros(len(near), len(near), dtype=torch.float32).scatter_(1, near, 1.0)
    A = torch.maximum(A, A.T)  # each pair that either side counts among its K nearest
    return (A @ A).fill_diagonal_(0)


def affinity_neighbours(N: int, n: int, members: int) -> int:
    """K for ``encryption_affinity``'s shared-neighbour counts: the encryptions each image is in, N·m/n (T·k inside),
    at most N/25 — a denser neighbour graph counts chance neighbours (at n = 30, T = 20, N = 600 crops: K = 80 put
    0.47 of the members among the 6 likeliest images, K = 24 0.68, none 0.59; at n = 100, T = 50 both give 200)."""
    return max(1, min(N * members // max(n, 1), N // 25))


def candidate_options(similarity, n: int, grid, seed: int = 0, per: int | None = None,
                      memberships: torch.Tensor | None = None):
    """Carlini's label-free assignment at scale: each encryption's rows (``grid.free_entries``) among its ``per`` most
    likely images (the similarity scores' soft memberships, ``soft_memberships``) instead of all n — by default 5 for
    cross mode's two private members, k + 2 inside (6 at k = 4: C(6, 4) = 15 member sets; label-free Fashion-MNIST,
    inside k = 4, n = 100, T = 50, on the previous, unwhitened pair scores: five fresh challenges with 6 identified
    0.88 / 0.83 in ≤ 824 CPU-s, one with 8 0.87 in 1,891 CPU-s; the current scores' figures are in the README).
    ``memberships``: the scores' N×n ``soft_memberships`` when already computed (the attack's clustered start uses them)."""
    from .carlini_options import Options

    per = per or max(5, grid.members + 2)
    H = soft_memberships(similarity, n, seed=seed) if memberships is None else torch.as_tensor(memberships)
    if H.shape != (len(similarity), n):
        raise ShapeError(f"memberships must be N×n = {len(similarity)}×{n}, got {tuple(H.shape)}.")
    top = H.topk(min(per, n), 1).indices
    return Options([grid.free_entries(sorted(c.tolist())) for c in top], n=n,
                   patterns=torch.tensor(grid.free_splits(), dtype=torch.float64))
