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
   Inside k = 6 (n = 20, T = 25: ~940,000 options) the annealed starts are what succeed (residual 10–107
   against 660–720 from random starts): 100 % recovered, mean SSIM 0.93.

Cross-dataset mode (``mode="cross"``: two private images and k − 2 unknown public ones per mix, the
labels covering the private part only, summing to s_t = λ_0 + λ_1 ≥ c2): each encryption's options put
its label mass on 2 private members, the per-class counts are each class's share of the total mass, and
the public part p_t (mass 1 − s_t) is modelled as noise with the per-pixel mean μ and variance σ² of
public images of the kind the scheme mixes (``noise_images``): |x̃_t| ≈ √((a_t X + (1 − s_t) μ)² + v_t),
v_t = (1 − s_t)² σ² · 2/(k − 1) (E Σ w_j² = 2/(m + 1) for a Dirichlet(1) split over m = k − 2 public
images). The X step is then the lifting refined by ``refine_steps`` Adam steps on that model's squared
error (the lifting alone ignores the public part and is far off: mean SSIM 0.19–0.36 against
0.94–0.99 refined, with the true A, on 8×8 digits). In inside mode μ = σ = 0 and the model is |a_t X|.
In every mode the final X is refined for ``final_refine_steps``: with k = 2 each pair of images co-occurs
in only ~N/(n(n−1)/2) mixes and the lifting is poorly determined (n = 20, T = 25: mean SSIM 0.55 → 0.87
and 0.54 → 0.64 on two challenges).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np
import torch

from ...checks import check_positive_int
from ...errors import ParameterError, ShapeError, UnknownOptionError
from ..base import Attack
from ...results import Result
from ...progress import progress


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
    # LAPACK's least squares differs between calls in the last bits (blocked, threaded); the assignment that
    # follows is discrete and chaotic, so those bits changed which local minimum a run ends in. Rounding the
    # solution to float32's precision makes a seed give the same recovery every time.
    V = torch.linalg.lstsq(W, B ** 2).solution.to(torch.float32).to(torch.float64)
    U = torch.zeros(B.shape[1], n, n, dtype=A.dtype)
    U[:, iu[0], iu[1]] = V.T
    U[:, iu[1], iu[0]] = V.T
    ev, evec = torch.linalg.eigh(U)
    u = evec[:, :, -1] * ev[:, -1:].clamp_min(0).sqrt()  # d×n
    closer = ((u - prior_mean[:, None]) ** 2).sum(1) <= ((-u - prior_mean[:, None]) ** 2).sum(1)
    return (u * torch.where(closer, 1.0, -1.0).to(u.dtype)[:, None]).T


class _Options:
    """Every encryption's candidate mixing rows as one flat list (``owner``: whose row; ``offsets``: where
    each encryption's block starts): one block per encryption (label-consistent rows), or one block of
    rows shared by all (label-free), whose residuals are one N×O matrix product instead of N copies."""

    def __init__(self, blocks: list | None = None, shared: torch.Tensor | None = None, n_encryptions: int = 0):
        self.shared = shared
        if shared is not None:
            self.n_encryptions, o = n_encryptions, len(shared)
            self.owner = torch.arange(n_encryptions).repeat_interleave(o)
            self.offsets = torch.arange(n_encryptions) * o
            self.flat = shared
        else:
            self.n_encryptions = len(blocks)
            self.flat = torch.cat(blocks)
            self.owner = torch.cat([torch.full((len(o),), t) for t, o in enumerate(blocks)])
            self.offsets = torch.tensor([0] + [len(o) for o in blocks]).cumsum(0)[:-1]

    def rows(self, idx: torch.Tensor) -> torch.Tensor:
        return self.flat[idx % len(self.flat)] if self.shared is not None else self.flat[idx]

    def random(self, g: torch.Generator) -> torch.Tensor:
        """One uniformly random option per encryption."""
        sizes = torch.diff(torch.cat([self.offsets, torch.tensor([len(self.owner)])]))
        return self.rows(self.offsets + (torch.rand(self.n_encryptions, generator=g, dtype=torch.float64) * sizes).long())

    def residuals(self, predict, X, B, chunk: int = 65536) -> torch.Tensor:
        """‖predict(row) − |x̃_owner|‖² for every option, flat."""
        if self.shared is not None:
            P = predict(self.shared, X)
            return ((B ** 2).sum(1, keepdim=True) - 2 * B @ P.T + (P ** 2).sum(1)).clamp_min(0).reshape(-1)
        return torch.cat([(predict(self.flat[i:i + chunk], X) - B[self.owner[i:i + chunk]]).pow(2).sum(1)
                          for i in range(0, len(self.flat), chunk)])

    def expected(self, p: torch.Tensor, chunk: int = 65536) -> tuple[torch.Tensor, torch.Tensor]:
        """Under per-encryption option probabilities ``p`` (flat): the expected rows and pair features (the
        features computed chunk by chunk, never stored: n(n+1)/2 per option)."""
        if self.shared is not None:
            P = p.reshape(self.n_encryptions, -1)
            return P @ self.shared, P @ pair_features(self.shared)
        N, n = self.n_encryptions, self.flat.shape[1]
        A = torch.zeros(N, n, dtype=self.flat.dtype).index_add_(0, self.owner, p[:, None] * self.flat)
        W = torch.zeros(N, n * (n + 1) // 2, dtype=p.dtype)
        for i in range(0, len(self.flat), chunk):
            sl = slice(i, i + chunk)
            W.index_add_(0, self.owner[sl], p[sl, None] * pair_features(self.flat[sl]))
        return A, W


class CarliniAttack(Attack):
    name = "carlini"

    def __init__(self, k: int, n: int | None = None, restarts: int = 4, max_iter: int = 60, split_grid: int = 5,
                 c1: float = 0.65, c2: float = 0.3, anneal_restarts: int = 2, max_options: int = 2_000_000, seed: int = 0,
                 mode: str = "inside", refine_steps: int | None = None, final_refine_steps: int = 300,
                 progress: bool = False):
        super().__init__(None)
        from ...encoders.instahide import MODES

        self.k = check_positive_int(k, "k")
        if mode not in MODES:
            raise UnknownOptionError(f"mode must be one of {MODES}, got {mode!r}.")
        if mode == "cross" and self.k < 3:
            raise ParameterError("cross mode with k = 2 mixes no public image: attack it as inside mode "
                                 "(mode='inside', k=2, with the labels' mass as it is).")
        self.mode = mode
        self.members = self.k if mode == "inside" else 2  # private images per mix
        self.refine_steps = (0 if mode == "inside" else 150) if refine_steps is None else int(refine_steps)
        self.final_refine_steps = int(final_refine_steps)
        self.n = check_positive_int(n, "n") if n is not None else None
        self.restarts, self.max_iter = check_positive_int(restarts, "restarts"), check_positive_int(max_iter, "max_iter")
        self.split_grid, self.c1, self.c2, self.seed, self.progress = split_grid, c1, c2, seed, progress
        self.anneal_restarts, self.max_options = int(anneal_restarts), int(max_options)

    def _splits(self, count: int) -> list[tuple[float, ...]]:
        """How a mass of 1 splits among ``count`` (1–3) members: each share on ``split_grid`` points of [0.1, 0.9]."""
        grid = np.linspace(0.1, 0.9, self.split_grid)
        return {1: [(1.0,)], 2: [(a, 1 - a) for a in grid],
                3: [(a, b, 1 - a - b) for a in grid for b in grid if a + b <= 0.9 + 1e-9]}[count]

    def _options(self, label: torch.Tensor, members: dict, n_hat: int) -> torch.Tensor:
        """Every label-consistent mixing row: k members in all, per-class masses split on a grid."""
        splits = {c: self._splits(c) for c in (1, 2, 3)}
        cs = [c for c in torch.nonzero(label > 1e-9).squeeze(1).tolist() if members.get(c)]
        rows = []
        for counts in itertools.product(*[range(1, min(len(members[c]), 3) + 1) for c in cs]):
            if sum(counts) != self.members:
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

    def _anneal(self, A, opts, B, prior, steps: int = 30):
        """Deterministic annealing: soft assignments p ∝ exp(−residual/τ) per encryption, the lifting on the
        expected pair features, τ lowered geometrically from the residuals' median to 1 % of it."""
        X = self._solve(A, B, prior)
        res = opts.residuals(self._predict, X, B)
        tau0 = float(res.median())
        owner, N = opts.owner, opts.n_encryptions
        for step in range(steps):
            tau = tau0 * (0.01 ** (step / max(steps - 1, 1)))
            logits = -res / tau
            mx = torch.full((N,), -torch.inf, dtype=logits.dtype).scatter_reduce(0, owner, logits, "amax")
            w = torch.exp(logits - mx[owner])
            z = torch.zeros(N, dtype=w.dtype).index_add_(0, owner, w)
            Aexp, W = opts.expected(w / z[owner])
            X = lift(Aexp, B, prior, W)
            res = opts.residuals(self._predict, X, B)
        return opts.rows(self._assign(opts, X, B)[0])

    def _predict(self, A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """The model of |x̃|: |A X| inside; √((A X + (1 − s) μ)² + v) with the public part as noise (cross)."""
        mu, var = self._noise
        if mu is None:
            return (A @ X).abs()
        rest = 1.0 - A.sum(1, keepdim=True)
        return ((A @ X + rest * mu) ** 2 + rest ** 2 * var).sqrt()

    def _descend(self, X, B, steps: int, lr: float, rows, extra=()):
        """Adam on X (and ``extra`` parameters) for ``steps`` steps on the model's squared error, the mixing
        rows given by ``rows()``; returns the last rows and X."""
        X = X.clone().requires_grad_(True)
        opt = torch.optim.Adam([*extra, X], lr=lr)
        for _ in range(steps):
            A = rows()
            loss = (self._predict(A, X) - B).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return A.detach(), X.detach()

    def _solve(self, A, B, prior, X=None, steps: int | None = None):
        """X given A: the lifting (or ``X`` when given), then ``steps`` (default ``refine_steps``) Adam steps
        on the model's error."""
        X = lift(A, B, prior) if X is None else X
        steps = self.refine_steps if steps is None else steps
        if not steps:
            return X
        return self._descend(X, B, steps, 0.05, lambda: A)[1]

    def _polish(self, A, X, B, steps: int = 300):
        """Label-free coefficients are on a grid: refine the chosen members' coefficients (in [0, c1]; their
        sum 1 inside, in [c2, 1] cross) jointly with X by Adam on the model's error."""
        on = A > 0
        a = A.clone().requires_grad_(True)

        def rows():
            Ac = a.clamp(0.0, self.c1) * on
            mass = Ac.sum(1, keepdim=True)
            return Ac / mass if self.mode == "inside" else Ac * (mass.clamp(self.c2, 1.0) / mass)

        return self._descend(X, B, steps, 0.01, rows, extra=(a,))

    def _assign(self, opts, X, B):
        """For every encryption, the index (into the flat option list) of its option with the smallest residual."""
        res = opts.residuals(self._predict, X, B)
        key = opts.owner.to(torch.float64) * (float(res.max()) + 1.0) + res  # sort by encryption, then residual
        first = torch.argsort(key)[opts.offsets]  # the smallest residual of each encryption's block
        return first, float(res[first].sum())

    def free_options(self, n: int) -> torch.Tensor:
        """Label-free rows: every set of ``members`` of the n images, coefficients on a grid — inside: splits
        of 1; cross: each coefficient in [0.1, c1], their sum (the private mass) in [c2, 1]."""
        if self.mode == "inside":
            if self.members > 3:
                raise ParameterError(f"label-free inside-mode assignment with k={self.k} is too large a search "
                                     "(only k ≤ 3 is supported): pass the soft labels.")
            splits = self._splits(self.members)
        else:
            grid = np.linspace(0.1, self.c1, self.split_grid)
            splits = [(a, b) for a in grid for b in grid if self.c2 - 1e-9 <= a + b <= 1 + 1e-9]
        splits = [sp for sp in splits if max(sp) <= self.c1 + 1e-6]
        rows = []
        for sub in itertools.combinations(range(n), self.members):
            for sp in splits:
                r = torch.zeros(n, dtype=torch.float64)
                r[list(sub)] = torch.tensor(sp, dtype=torch.float64)
                rows.append(r)
        if len(rows) * max(1, len(rows) // 1000) > self.max_options:  # the N×O residual matrix is the cost
            raise ParameterError(f"{len(rows):,} label-free options (k={self.k}, n={n}) is too large a search; "
                                 "pass the soft labels or raise max_options.")
        return torch.stack(rows)

    def run(self, encryptions, labels, public, noise_images=None, similarity=None) -> CarliniResult:
        """``encryptions`` N×C×H×W (signed, normalised units); ``labels`` N×classes (soft) or None
        (label-free: the coefficients are searched on a grid, ``n`` must be given); ``public``: the
        attacker's own images of the same kind in [0, 1] (signs and de-normalisation); ``noise_images``
        (cross mode): images like the scheme's public pool, for the noise model's μ, σ² (default:
        ``public``); ``similarity``: an N×N matrix of pair scores (``SimilarityNetwork.scores``) — one more
        start, from the encryptions clustered on it (``cluster_encryptions``)."""
        from ...encoders.instahide import InstaHide
        from .similarity import cluster_encryptions

        start = time.perf_counter()
        E = torch.as_tensor(encryptions, dtype=torch.float64)
        if E.ndim != 4:
            raise ShapeError(f"encryptions must be N×C×H×W, got shape {tuple(E.shape)}.")
        N = E.shape[0]
        if self.n is None:
            raise ParameterError("give n (the number of private images): the class counts are its share of the "
                                 "label mass, and without labels it is the number of images to recover.")
        public = torch.as_tensor(public, dtype=torch.float32)
        if tuple(public.shape[1:]) != tuple(E.shape[1:]):
            raise ShapeError(f"public images {tuple(public.shape[1:])} do not match the encryptions {tuple(E.shape[1:])}.")
        noise = public if noise_images is None else torch.as_tensor(noise_images, dtype=torch.float32)
        if tuple(noise.shape[1:]) != tuple(E.shape[1:]):
            raise ShapeError(f"noise_images {tuple(noise.shape[1:])} do not match the encryptions {tuple(E.shape[1:])}.")
        if similarity is not None:
            similarity = torch.as_tensor(similarity, dtype=torch.float64)
            if similarity.shape != (N, N):
                raise ShapeError(f"similarity must be N×N = {N}×{N}, got {tuple(similarity.shape)}.")
        if labels is not None:
            labels = torch.as_tensor(labels, dtype=torch.float64)
            classes, members = self._class_members(labels, N)
        else:
            classes, members = [-1] * self.n, None
        n_hat = len(classes)
        if n_hat * (n_hat + 1) // 2 > N:
            raise ParameterError(f"{N} encryptions cannot determine {n_hat} images by lifting "
                                 f"(needs N ≥ n(n+1)/2 = {n_hat * (n_hat + 1) // 2}).")
        B = E.reshape(N, -1).abs()
        stats = InstaHide(k=self.k).channel_stats(public)
        prior = InstaHide.normalize_images(public, stats).reshape(len(public), -1).to(torch.float64).mean(0)
        self._noise = (None, None)
        if self.mode == "cross":
            z = InstaHide.normalize_images(noise, stats).reshape(len(noise), -1).to(torch.float64)
            self._noise = (z.mean(0), z.var(0) * 2.0 / (self.k - 1))
        if members is None:
            opts = _Options(shared=self.free_options(n_hat), n_encryptions=N)
        else:
            blocks, total = [], 0
            for t in range(N):
                blocks.append(self._options(labels[t], members, n_hat))
                total += len(blocks[-1])
                if total > self.max_options:
                    raise ParameterError(f"more than {self.max_options:,} label-consistent assignments (k={self.k}, "
                                         f"n={n_hat}): the search is too large; use fewer images per class or raise "
                                         "max_options.")
            opts = _Options(blocks)
        g = torch.Generator().manual_seed(self.seed)
        best, history = None, []
        starts = ["random"] * self.restarts + ["anneal"] * self.anneal_restarts
        if similarity is not None:
            starts.append("similarity")
        for kind in progress(starts, "carlini restarts", enabled=self.progress):
            A = opts.random(g)
            if kind == "anneal":
                A = self._anneal(A, opts, B, prior)
            elif kind == "similarity":  # equal coefficients on the clusters found from the pair scores
                A = cluster_encryptions(similarity, n_hat, self.members).to(torch.float64)
                A = A * (float(opts.flat.sum(1).mean()) / self.members)
            prev, X = None, None
            for _ in range(self.max_iter):
                X = self._solve(A, B, prior, X)
                choice, total = self._assign(opts, X, B)
                A = opts.rows(choice)
                if prev is not None and prev - total <= 1e-9 * max(prev, 1.0):
                    break
                prev = total
            history.append(total)
            if best is None or total < best[0]:
                best = (total, A)
        A = best[1]
        X = self._solve(A, B, prior, steps=max(self.refine_steps, self.final_refine_steps))
        if members is None:  # label-free: the grid's coefficients, made continuous
            A, X = self._polish(A, X, B)
        mean = torch.tensor(stats[0], dtype=torch.float64).reshape(1, -1, 1, 1)
        std = torch.tensor(stats[1], dtype=torch.float64).reshape(1, -1, 1, 1)
        images = (X.reshape(n_hat, *E.shape[1:]) * std + mean).clamp(0, 1).float()
        return CarliniResult(images, X, torch.tensor(classes), A, best[0], history, time.perf_counter() - start)

    def _class_members(self, L: torch.Tensor, N: int) -> tuple[list, dict]:
        """Each class's images: its share of the label mass times n (step 1); checks the labels."""
        if L.ndim != 2 or L.shape[0] != N:
            raise ShapeError(f"labels must be N×classes with N = {N}, got {tuple(L.shape)}.")
        mass = L.sum(1)
        if self.mode == "inside" and (mass - 1).abs().max() > 1e-4:
            raise ParameterError("the soft labels do not sum to 1: inside-dataset InstaHide labels do; for "
                                 "cross-dataset encryptions (labels cover the private part only) use mode='cross'.")
        if self.mode == "cross" and (mass.min() <= 0 or mass.max() > 1 + 1e-4):
            raise ParameterError("cross-dataset labels must carry the private part's mass, in (0, 1] per encryption.")
        counts = torch.round(L.sum(0) * self.n / L.sum()).long()
        members, classes = {}, []
        for c in range(L.shape[1]):
            members[c] = list(range(len(classes), len(classes) + int(counts[c])))
            classes += [c] * int(counts[c])
        return classes, members
