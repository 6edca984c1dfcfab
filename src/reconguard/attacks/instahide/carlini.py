"""Carlini et al.'s attack on InstaHide ("Is private learning possible with instance encoding?"),
re-implemented from its description and generalised to inside-dataset InstaHide with soft labels,
any number of private images n and encryptions per image T.

The attacker has the encryptions ``|x̃_t| = |Σ_j λ_tj x_{i_tj}|`` (the sign mask is undone by the
absolute value) and the released soft labels ``ℓ_t = Σ_j λ_tj onehot(y_{i_tj})``. Write
``A`` (N×n) for the unknown mixing matrix and ``X`` (n×d) for the normalised private images.

1. **How many images per class.** Each private image carries, in expectation, the same total
   coefficient mass over all encryptions (N/n), so class c holds ``round(Σ_t ℓ_tc · n / N)`` images.
2. **Recovering the images given A — lifting.** Per pixel p, ``|x̃_tp|² = a_tᵀ U_p a_t`` with
   ``U_p = u_p u_pᵀ`` (``u_p`` = pixel p of every private image): *linear* in the n(n+1)/2 entries of U_p.
   One least-squares solve (shared by every pixel) gives all U_p; ``u_p`` is the leading eigenvector of
   U_p scaled by √eigenvalue, and its global sign is the one closer to the attacker's public images'
   mean at that pixel. Exact when A is (noise-free, N ≥ n(n+1)/2, every pair of images co-occurs).
3. **Assigning the encryptions — clustering by alternating minimisation.** The labels fix, per
   encryption, which classes are present and their total coefficients; A is unknown only in *which*
   members of each class (and, when a class is present twice, how its mass splits — a grid). Starting
   from a random assignment, alternate: solve X by lifting; give each encryption the assignment (among
   its label-consistent options, k members in all, no coefficient above c1) whose ``|a X|`` best matches
   ``|x̃_t|``. Restart from several random assignments — and from ``anneal_restarts`` assignments
   found by deterministic annealing (soft assignments ∝ exp(−residual/τ), τ lowered geometrically, the
   lifting solved on the expected pair features), which escape the poor local minima that random
   starts hit when a class holds many images — and keep the lowest residual. This replaces
   the paper's similarity network + graph clustering: the labels and the lifting make the assignment a
   proper (residual-minimising) one with no fixed thresholds.

Inside mode only (every mixed image is private); cross-dataset encryptions add unknown public images.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np
import torch

from ...checks import check_positive_int
from ...errors import ParameterError, ShapeError
from ...results import Result


@dataclass(frozen=True)
class CarliniResult(Result):
    images: torch.Tensor        # n̂×C×H×W in [0, 1] (de-normalised with the public images' statistics)
    normalized: torch.Tensor    # n̂×d in the scheme's normalised units
    classes: torch.Tensor       # the class of each recovered image
    mixing: torch.Tensor        # N×n̂ estimated A
    residual: float             # Σ_t ‖|a_t X| − |x̃_t|‖²
    restarts: list              # residual of each restart
    seconds: float
    _skip_in_dict = ("images", "normalized", "mixing")


def pair_features(A: torch.Tensor) -> torch.Tensor:
    """Rows ``a`` → the coefficients of ``aᵀ U a`` on the upper triangle of a symmetric U."""
    n = A.shape[1]
    iu = torch.triu_indices(n, n)
    return A[:, iu[0]] * A[:, iu[1]] * torch.where(iu[0] == iu[1], 1.0, 2.0).to(A.dtype)


def lift(A: torch.Tensor, B: torch.Tensor, prior_mean: torch.Tensor, W: torch.Tensor | None = None) -> torch.Tensor:
    """X (n×d) from ``|A X| = B`` by least squares on the lifted U_p = u_p u_pᵀ; signs from ``prior_mean``.
    ``W``: the rows' pair features (expected ones, under a soft assignment), instead of those of A."""
    n = A.shape[1]
    iu = torch.triu_indices(n, n)
    W = pair_features(A) if W is None else W
    V = torch.linalg.lstsq(W, B ** 2).solution
    U = torch.zeros(B.shape[1], n, n, dtype=A.dtype)
    U[:, iu[0], iu[1]] = V.T
    U[:, iu[1], iu[0]] = V.T
    ev, evec = torch.linalg.eigh(U)
    u = evec[:, :, -1] * ev[:, -1:].clamp_min(0).sqrt()  # d×n
    closer = ((u - prior_mean[:, None]) ** 2).sum(1) <= ((-u - prior_mean[:, None]) ** 2).sum(1)
    return (u * torch.where(closer, 1.0, -1.0).to(u.dtype)[:, None]).T


class CarliniAttack:
    def __init__(self, k: int, n: int | None = None, restarts: int = 4, max_iter: int = 60, split_grid: int = 5,
                 c1: float = 0.65, anneal_restarts: int = 2, max_options: int = 500_000, seed: int = 0,
                 progress: bool = False):
        self.k = check_positive_int(k, "k")
        self.n = check_positive_int(n, "n") if n is not None else None
        self.restarts, self.max_iter = check_positive_int(restarts, "restarts"), check_positive_int(max_iter, "max_iter")
        self.split_grid, self.c1, self.seed, self.progress = split_grid, c1, seed, progress
        self.anneal_restarts, self.max_options = int(anneal_restarts), int(max_options)

    def _options(self, label: torch.Tensor, members: dict, n_hat: int) -> torch.Tensor:
        """Every label-consistent mixing row: k members in all, per-class masses split on a grid."""
        grid = np.linspace(0.1, 0.9, self.split_grid)
        splits = {1: [(1.0,)], 2: [(a, 1 - a) for a in grid],
                  3: [(a, b, 1 - a - b) for a in grid for b in grid if a + b <= 0.9 + 1e-9]}
        cs = [c for c in torch.nonzero(label > 1e-9).squeeze(1).tolist() if members.get(c)]
        rows = []
        for counts in itertools.product(*[range(1, min(len(members[c]), 3) + 1) for c in cs]):
            if sum(counts) != self.k:
                continue
            per_class = []
            for c, nc in zip(cs, counts):
                per_class.append([list(zip(sub, (float(label[c]) * s for s in split)))
                                  for sub in itertools.combinations(members[c], nc) for split in splits[nc]
                                  if float(label[c]) * max(split) <= self.c1 + 1e-6])
            for combo in itertools.product(*per_class):
                r = torch.zeros(n_hat, dtype=torch.float64)
                for part in combo:
                    for i, w in part:
                        r[i] += w
                rows.append(r)
        if not rows:  # labels that no k-member split explains (e.g. fewer members than mixed): one per class
            for combo in itertools.product(*[members[c] for c in cs]):
                r = torch.zeros(n_hat, dtype=torch.float64)
                for c, i in zip(cs, combo):
                    r[i] += float(label[c])
                rows.append(r)
        return torch.stack(rows)

    def _anneal(self, A, flat, feats, owner, offsets, B, prior, steps: int = 30):
        """Deterministic annealing: soft assignments p ∝ exp(−residual/τ) per encryption, the lifting on the
        expected pair features, τ lowered geometrically from the residuals' median to 1 % of it."""
        X = lift(A, B, prior)
        res = self._residuals(flat, owner, X, B)
        tau0 = float(res.median())
        for step in range(steps):
            tau = tau0 * (0.01 ** (step / max(steps - 1, 1)))
            logits = -res / tau
            mx = torch.full((len(offsets),), -torch.inf, dtype=logits.dtype).scatter_reduce(0, owner, logits, "amax")
            w = torch.exp(logits - mx[owner])
            z = torch.zeros(len(offsets), dtype=w.dtype).index_add_(0, owner, w)
            p = w / z[owner]
            W = torch.zeros(len(offsets), feats.shape[1], dtype=feats.dtype).index_add_(0, owner, p[:, None] * feats)
            Aexp = torch.zeros(len(offsets), flat.shape[1], dtype=flat.dtype).index_add_(0, owner, p[:, None] * flat)
            X = lift(Aexp, B, prior, W)
            res = self._residuals(flat, owner, X, B)
        choice, _ = self._assign(flat, owner, offsets, X, B)
        return flat[choice]

    @staticmethod
    def _residuals(flat, owner, X, B, chunk: int = 65536):
        return torch.cat([((flat[i:i + chunk] @ X).abs() - B[owner[i:i + chunk]]).pow(2).sum(1)
                          for i in range(0, len(flat), chunk)])

    @staticmethod
    def _assign(flat, owner, offsets, X, B, chunk: int = 65536):
        """For every encryption, the index (into ``flat``) of its option with the smallest residual."""
        res = CarliniAttack._residuals(flat, owner, X, B, chunk)
        key = owner.to(torch.float64) * (float(res.max()) + 1.0) + res  # sort by encryption, then residual
        order = torch.argsort(key)
        first = order[offsets]  # the smallest residual of each encryption's block
        return first, float(res[first].sum())

    def run(self, encryptions, labels, public) -> CarliniResult:
        """``encryptions`` N×C×H×W (signed, normalised units), ``labels`` N×classes (soft), ``public``:
        the attacker's own images of the same kind in [0, 1] (signs and de-normalisation)."""
        from ...encoders.instahide import InstaHide

        start = time.perf_counter()
        E = torch.as_tensor(encryptions, dtype=torch.float64)
        L = torch.as_tensor(labels, dtype=torch.float64)
        if E.ndim != 4:
            raise ShapeError(f"encryptions must be N×C×H×W, got shape {tuple(E.shape)}.")
        if L.ndim != 2 or L.shape[0] != E.shape[0]:
            raise ShapeError(f"labels must be N×classes with N = {E.shape[0]}, got {tuple(L.shape)}.")
        if (L.sum(1) - 1).abs().max() > 1e-4:
            raise ParameterError("the soft labels do not sum to 1: this attack needs inside-dataset InstaHide labels "
                                 "(cross-dataset labels only cover the private part).")
        public = torch.as_tensor(public, dtype=torch.float32)
        if tuple(public.shape[1:]) != tuple(E.shape[1:]):
            raise ShapeError(f"public images {tuple(public.shape[1:])} do not match the encryptions {tuple(E.shape[1:])}.")
        N = E.shape[0]
        B = E.reshape(N, -1).abs()
        if self.n is None:
            raise ParameterError("give n (the number of private images): the class counts are its share of the label mass.")
        counts = torch.round(L.sum(0) * self.n / N).long()
        members, classes = {}, []
        for c in range(L.shape[1]):
            members[c] = list(range(len(classes), len(classes) + int(counts[c])))
            classes += [c] * int(counts[c])
        n_hat = len(classes)
        if n_hat * (n_hat + 1) // 2 > N:
            raise ParameterError(f"{N} encryptions cannot determine {n_hat} images by lifting "
                                 f"(needs N ≥ n(n+1)/2 = {n_hat * (n_hat + 1) // 2}).")
        stats = InstaHide(k=self.k).channel_stats(public)
        prior = InstaHide.normalize_images(public, stats).reshape(len(public), -1).to(torch.float64).mean(0)
        options, total = [], 0
        for t in range(N):
            options.append(self._options(L[t], members, n_hat))
            total += len(options[-1])
            if total > self.max_options:
                raise ParameterError(f"more than {self.max_options:,} label-consistent assignments (k={self.k}, "
                                     f"n={n_hat}): the search is too large; use fewer images per class or raise max_options.")
        flat = torch.cat(options)  # every option of every encryption, with its encryption's index
        owner = torch.cat([torch.full((len(o),), t) for t, o in enumerate(options)])
        offsets = torch.tensor([0] + [len(o) for o in options]).cumsum(0)[:-1]
        g = torch.Generator().manual_seed(self.seed)
        best, history = None, []
        feats = pair_features(flat) if self.anneal_restarts else None
        it = range(self.restarts + self.anneal_restarts)
        if self.progress:
            from tqdm.auto import tqdm
            it = tqdm(it, desc="carlini restarts")
        for r in it:
            A = torch.stack([o[torch.randint(len(o), (1,), generator=g).item()] for o in options])
            if r >= self.restarts:  # the annealed starts
                A = self._anneal(A, flat, feats, owner, offsets, B, prior)
            prev = None
            for _ in range(self.max_iter):
                X = lift(A, B, prior)
                choice, total = self._assign(flat, owner, offsets, X, B)
                A = flat[choice]
                if prev is not None and prev - total <= 1e-9 * max(prev, 1.0):
                    break
                prev = total
            history.append(total)
            if best is None or total < best[0]:
                best = (total, A)
        A = best[1]
        X = lift(A, B, prior)
        mean = torch.tensor(stats[0], dtype=torch.float64).reshape(1, -1, 1, 1)
        std = torch.tensor(stats[1], dtype=torch.float64).reshape(1, -1, 1, 1)
        images = (X.reshape(n_hat, *E.shape[1:]) * std + mean).clamp(0, 1).float()
        return CarliniResult(images, X, torch.tensor(classes), A, best[0], history, time.perf_counter() - start)
