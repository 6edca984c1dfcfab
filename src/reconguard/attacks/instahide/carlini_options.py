"""The candidate mixing rows of Carlini et al.'s attack (``carlini.py``) and the exhaustive search over them.

* ``RowGrid``: which rows an encryption may have. With the soft labels (step 3 of ``carlini.py``): per member-count
  tuple (k members in all — inside; 2 private members — cross), each present class's *components*, its member
  subsets × mass splits on a grid, no coefficient above c1; an encryption's rows are their product. Without the
  labels: every set of members of the n images × a coefficient grid (inside: splits of 1; cross: each coefficient in
  [0.1, c1], their sum — the private mass — in [c2, 1]), one list for every encryption.
* ``Options``: every encryption's candidate rows, flat, and their residuals in chunks — O(options·(n + d)) time
  per assignment, O(chunk·d) memory beyond the rows themselves; rows shared by every encryption (label-free) by
  ``Metric.nearest``: O(N·options·d) time, O(options·d) memory.
* ``searched_pixels``: how many random pixels the search fits (``CarliniAttack(search_pixels=…)``).
* ``segment_starts`` / ``ranges`` / ``segment_argmin``: the index idioms the searches (this one and ``carlini_local``)
  share (where each run of a sorted id starts; each segment's smallest value).
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from dataclasses import dataclass

import numpy as np
import torch

from ...checks import check_int_at_least
from ...errors import ParameterError, ShapeError
from .carlini_metric import PLAIN, Metric
from .carlini_model import link, noise_rows, pair_features, predict


# search_pixels="auto": the settings of issue 31's published-size rows (n = 100, T = 50), each within 30 CPU-minutes
# (README, "Where it stands"); inside at 1,024, Fashion-MNIST and 32×32 photograph crops ran past 40 CPU-minutes
AUTO_SEARCH_PIXELS = {"inside": 256, "cross": 1024, "label-free": 512}


def check_search_pixels(search_pixels):
    """``search_pixels`` as given, when it is "auto", None (every pixel) or a positive integer; else a clear error."""
    if search_pixels is None or search_pixels == "auto":
        return search_pixels
    if isinstance(search_pixels, bool) or not isinstance(search_pixels, (int, np.integer)) or search_pixels < 1:
        raise ParameterError(f"search_pixels must be 'auto', None (every pixel) or a positive integer, got "
                             f"{search_pixels!r}.")
    return int(search_pixels)


def searched_pixels(search_pixels, mode: str, labelled: bool) -> int | None:
    """How many random pixels the assignment search fits (None: every pixel): ``search_pixels``, or for ``"auto"``
    ``AUTO_SEARCH_PIXELS`` of ``mode`` (cross mode: with or without the labels). |·| acts per pixel, so a subset's
    fit is exact; fewer pixels make each assignment cheaper and its choice noisier."""
    if search_pixels != "auto":
        return search_pixels
    return AUTO_SEARCH_PIXELS["inside" if mode == "inside" else "cross" if labelled else "label-free"]


def segment_starts(ids: torch.Tensor) -> torch.Tensor:
    """Where each run of equal values in the sorted ``ids`` starts."""
    return torch.cat([torch.tensor([0]), torch.nonzero(torch.diff(ids)).squeeze(1) + 1])


def ranges(starts: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """The indices ``starts[i] … starts[i] + sizes[i] − 1`` of every range, concatenated in order."""
    offsets = torch.arange(int(sizes.sum())) - torch.repeat_interleave(sizes.cumsum(0) - sizes, sizes)
    return torch.repeat_interleave(starts, sizes) + offsets


def segment_argmin(values: torch.Tensor, ids: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For each segment ``0 … count − 1`` of ``ids``: the index of its smallest value (the first of ties) and that
    value (an empty segment: ``len(values)`` and inf). O(len(values)), no sort."""
    low = torch.full((count,), torch.inf, dtype=values.dtype).scatter_reduce(0, ids, values, "amin")
    pos = torch.where(values == low[ids], torch.arange(len(values)), len(values))
    return torch.full((count,), len(values)).scatter_reduce(0, ids, pos, "amin"), low


class Options:
    """Every encryption's candidate mixing rows as one flat list (``owner``: whose row; ``offsets``: where
    each encryption's block starts; ``sizes``: how many it has). Either one block per encryption, each row kept sparse
    as its ≤ m members and weights (``idx``, ``w``: R×m; the dense R×n rows were 0.8 GB at n = 100, N = 5,000 cross),
    or one dense block of rows ``shared`` by all (label-free), whose residuals are one N×O matrix product instead of N
    copies and whose ``owner`` (N·O entries: 3.6 GB at n = 100, N = 5,000) is made only when asked for (annealing).
    ``patterns`` (P×m, sparse blocks only): every block is member sets × these P weight tuples, set by set (what
    ``RowGrid.free_entries`` makes) — checked; the residuals then gather each member set's m rows of X once and mix
    them by one P×m product instead of gathering them P times (``benchmarks/carlini_patterns.py``)."""

    def __init__(self, blocks: list | None = None, shared: torch.Tensor | None = None, n_encryptions: int = 0,
                 n: int = 0, patterns: torch.Tensor | None = None):
        self.shared, self.patterns = shared, None
        if shared is not None:
            self.n_encryptions, self.n = n_encryptions, shared.shape[1]
            self.sizes = torch.full((n_encryptions,), len(shared))
            self._owner = None
        else:  # blocks: one (idx, w) pair of R_t × m_t tensors per encryption; padded with weight-0 members
            self.n_encryptions, self.n = len(blocks), int(n)
            width = max(i.shape[1] for i, _ in blocks)
            self.idx = torch.cat([torch.nn.functional.pad(i, (0, width - i.shape[1])) for i, _ in blocks])
            self.w = torch.cat([torch.nn.functional.pad(w, (0, width - w.shape[1])) for _, w in blocks])
            self.sizes = torch.tensor([len(i) for i, _ in blocks])
            self._owner = torch.arange(self.n_encryptions).repeat_interleave(self.sizes)
            if patterns is not None:
                self.patterns = self._factored(torch.as_tensor(patterns, dtype=self.w.dtype))
        self.offsets = self.sizes.cumsum(0) - self.sizes

    def _factored(self, P: torch.Tensor) -> torch.Tensor:
        """``P`` after checking that every block is its member sets × ``P``'s rows, set by set."""
        p, m = P.shape if P.ndim == 2 else (0, 0)
        if p == 0 or m != self.idx.shape[1] or bool((self.sizes % p).any()):
            raise ShapeError(f"patterns must be P×{self.idx.shape[1]} with P dividing every block's size, got "
                             f"{tuple(P.shape)} for blocks of {sorted(set(self.sizes.tolist()))[:5]} rows.")
        idx, w = self.idx.reshape(-1, p, m), self.w.reshape(-1, p, m)
        if not (torch.equal(idx, idx[:, :1].expand_as(idx)) and torch.equal(w, P.expand_as(w))):
            raise ParameterError("the blocks are not member sets × patterns: give patterns=None.")
        return P

    def __len__(self) -> int:
        return int(self.sizes.sum())

    @property
    def owner(self) -> torch.Tensor:
        if self._owner is None:
            self._owner = torch.arange(self.n_encryptions).repeat_interleave(self.sizes)
        return self._owner

    def rows(self, idx: torch.Tensor) -> torch.Tensor:
        """The options at flat indices ``idx`` as dense rows (len(idx)×n)."""
        if self.shared is not None:
            return self.shared[idx % len(self.shared)]
        return torch.zeros(len(idx), self.n, dtype=self.w.dtype).scatter_add_(1, self.idx[idx], self.w[idx])

    def mean_mass(self) -> float:
        """The options' mean total coefficient (the private mass in cross mode, 1 inside)."""
        return float((self.shared if self.shared is not None else self.w).sum(1).mean())

    def random(self, g: torch.Generator) -> torch.Tensor:
        """One uniformly random option per encryption."""
        return self.rows(self.offsets + (torch.rand(self.n_encryptions, generator=g, dtype=torch.float64) * self.sizes).long())

    def residuals(self, X, B, noise, metric: Metric = PLAIN, chunk: int = 2048) -> torch.Tensor:
        """``metric``(predict(row) − |x̃_owner|) for every option, flat (default ‖·‖²; ``noise``: the model's μ, v).
        A sparse row's private part is Σ_m w_m X[i_m]: O(m·d) per option, not the dense row's O(n·d)."""
        if self.shared is not None:
            return metric.cross(B, predict(self.shared, X, *noise)).reshape(-1)
        if self.patterns is not None:
            return self._factored_residuals(X, B, noise, metric, max(1, chunk // len(self.patterns)))
        # written into one preallocated tensor: small per-chunk results kept between the chunks' large temporaries
        # fragment the heap (a list + torch.cat took the peak from 2.2 to 5.1 GiB at n = 100, N = 5,000)
        out = torch.empty(len(self), dtype=torch.promote_types(X.dtype, B.dtype))
        for i in range(0, len(self), chunk):
            w = self.w[i:i + chunk].to(X.dtype)
            U = (w[:, :, None] * X[self.idx[i:i + chunk]]).sum(1)
            owner = self.owner[i:i + chunk]
            out[i:i + chunk] = metric(link(U, w.sum(1, keepdim=True), *noise_rows(noise, owner)) - B[owner])
        return out

    def _factored_residuals(self, X, B, noise, metric: Metric, sets: int) -> torch.Tensor:
        """``residuals`` when the options are member sets × ``patterns``: per set, its m rows of X gathered once, the
        P mixes one (P×m)·(m×d) product; ``sets`` member sets a chunk. The same flat order (set, then pattern)."""
        p = len(self.patterns)
        W, mass = self.patterns.to(X.dtype), self.patterns.sum(1, keepdim=True).to(X.dtype)
        idx, owner = self.idx[::p], self.owner[::p]
        out = torch.empty(len(self), dtype=torch.promote_types(X.dtype, B.dtype))
        for i in range(0, len(idx), sets):
            U, who = torch.matmul(W, X[idx[i:i + sets]]), owner[i:i + sets]  # c×P×d
            mu, var = noise_rows(noise, who)
            var = var[:, None] if var is not None and var.ndim == 2 else var  # one row per encryption: c×1×d
            R = link(U, mass, mu, var) - B[who][:, None]
            out[i * p:(i + len(U)) * p] = metric(R.reshape(-1, R.shape[-1]))
        return out

    def assign(self, X: torch.Tensor, B: torch.Tensor, noise, metric: Metric = PLAIN) -> tuple[torch.Tensor, float]:
        """Every encryption's option of smallest error (``metric``, default ‖·‖²) under ``predict`` (``noise``: its
        μ, v): the rows and the total error."""
        if self.shared is not None:  # one block for all: the fused minimum, no N×O residuals kept
            idx, low = metric.nearest(B, (len(self.shared), lambda rows: predict(self.shared[rows], X, *noise)))
            return self.shared[idx], float(low.sum())
        first, low = segment_argmin(self.residuals(X, B, noise, metric), self.owner, self.n_encryptions)
        return self.rows(first), float(low.sum())

    def top(self, p: torch.Tensor, K: int) -> torch.Tensor:
        """Flat indices of each encryption's (up to) ``K`` most probable options under ``p`` (flat)."""
        if self.shared is not None:
            P = p.reshape(self.n_encryptions, -1)
            kk = min(K, P.shape[1])
            return (P.topk(kk, 1).indices + self.offsets[:, None]).reshape(-1)
        key = self.owner.to(torch.float64) * 2.0 - p.to(torch.float64)  # by encryption, then most probable first
        order = torch.argsort(key)
        pos = torch.minimum(self.offsets[:, None] + torch.arange(K)[None], (self.offsets + self.sizes - 1)[:, None])
        return order[pos.reshape(-1).unique()]

    def expected(self, p: torch.Tensor, chunk: int = 65536) -> tuple[torch.Tensor, torch.Tensor]:
        """Under per-encryption option probabilities ``p`` (flat): the expected rows and pair features (rows and
        features made chunk by chunk, never stored: n(n+1)/2 features per option)."""
        if self.shared is not None:
            P = p.reshape(self.n_encryptions, -1)
            return P @ self.shared, P @ pair_features(self.shared)
        N, n = self.n_encryptions, self.n
        A = torch.zeros(N, n, dtype=p.dtype)
        W = torch.zeros(N, n * (n + 1) // 2, dtype=p.dtype)
        for i in range(0, len(self), chunk):
            sl = slice(i, i + chunk)
            R = self.rows(torch.arange(i, min(i + chunk, len(self))))
            A.index_add_(0, self.owner[sl], p[sl, None] * R)
            W.index_add_(0, self.owner[sl], p[sl, None] * pair_features(R))
        return A, W


@dataclass(frozen=True)
class RowGrid:
    """The rows an encryption of ``k`` images may have: ``members`` private images per mix (k inside, 2 cross),
    each share on ``split_grid`` points, no coefficient above ``c1``, cross mode's private mass at least ``c2``."""

    members: int
    mode: str = "inside"
    split_grid: int = 5
    c1: float = 0.65
    c2: float = 0.3

    def __post_init__(self):
        check_int_at_least(self.split_grid, "split_grid", 2, "the points of each coefficient's grid; 5 by default")

    def splits(self, count: int) -> list[tuple[float, ...]]:
        """How a mass of 1 splits among ``count`` members: the first count − 1 shares on ``split_grid`` points of
        [0.1, 0.9], the last the rest, at least 0.1 (count 1: (1,); 2: (a, 1 − a); 3: (a, b, 1 − a − b), a + b ≤ 0.9)."""
        grid = np.linspace(0.1, 0.9, self.split_grid)
        return [(*p, functools.reduce(operator.sub, p, 1.0)) for p in itertools.product(grid, repeat=count - 1)
                if sum(p) <= 0.9 + 1e-9]

    def components(self, label: torch.Tensor, members: dict) -> list:
        """Per member-count tuple (``members`` in all): each present class's components — its member subsets × mass
        splits on the grid, no coefficient above c1 — as lists of ((member, weight), …)."""
        cs = [c for c in torch.nonzero(label > 1e-9).squeeze(1).tolist() if members.get(c)]
        mass = {c: float(label[c]) for c in cs}
        splits = {c: self.splits(c) for c in (1, 2, 3)}
        out = []
        for counts in itertools.product(*[range(1, min(len(members[c]), 3) + 1) for c in cs]):
            if sum(counts) != self.members:
                continue
            per_class = [[tuple(zip(sub, (mass[c] * v for v in split)))
                          for sub in itertools.combinations(members[c], nc) for split in splits[nc]
                          if mass[c] * max(split) <= self.c1 + 1e-6] for c, nc in zip(cs, counts)]
            if all(per_class):
                out.append(per_class)
        if not out:  # labels that no split into ``members`` explains (e.g. fewer images than mixed): one per class
            out = [[[((i, mass[c]),) for i in members[c]] for c in cs]]
        return out

    def entries(self, label: torch.Tensor, members: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Every label-consistent mixing row — the product of each count tuple's per-class components — sparse: its
        members and weights (R×m, padded with weight-0 members where a row has fewer)."""
        rows = [sum(combo, ()) for per_class in self.components(label, members) for combo in itertools.product(*per_class)]
        width = max(len(r) for r in rows)
        idx = torch.tensor([[i for i, _ in r] + [0] * (width - len(r)) for r in rows])
        return idx, torch.tensor([[v for _, v in r] + [0.0] * (width - len(r)) for r in rows], dtype=torch.float64)

    def free_splits(self) -> list:
        """Label-free coefficient tuples: inside, splits of 1 among the k members; cross, pairs in [0.1, c1] summing
        to [c2, 1]. Inside k ≥ 4 the attack searches each encryption's likeliest images only
        (``similarity.candidate_options``): all C(n, k) member sets are 6·10⁷ rows at n = 100, k = 4."""
        if self.mode == "inside":
            splits = self.splits(self.members)
        else:
            grid = np.linspace(0.1, self.c1, self.split_grid)
            splits = [(a, b) for a in grid for b in grid if self.c2 - 1e-9 <= a + b <= 1 + 1e-9]
        out = [sp for sp in splits if max(sp) <= self.c1 + 1e-6]
        if not out:
            raise ParameterError(f"no label-free coefficient tuple of the {self.split_grid}-point grid keeps every "
                                 f"coefficient ≤ c1 = {self.c1:g}: raise split_grid (5 by default).")
        return out

    def free_work(self, n: int, N: int, d: int) -> int:
        """Multiply-adds of one label-free assignment over every row (N encryptions of d pixels, n images)."""
        return len(self.free_splits()) * math.comb(n, self.members) * N * d

    def free_entries(self, candidates) -> tuple[torch.Tensor, torch.Tensor]:
        """Label-free rows, sparse: every set of ``members`` of the ``candidates`` × ``free_splits``."""
        splits = torch.tensor(self.free_splits(), dtype=torch.float64)
        subs = torch.tensor(list(itertools.combinations(candidates, self.members)))
        return subs.repeat_interleave(len(splits), 0), splits.repeat(len(subs), 1)

    def free_rows(self, n: int) -> torch.Tensor:
        """Label-free rows over all n images, dense (n columns): the one block every encryption shares."""
        idx, w = self.free_entries(range(n))
        return torch.zeros(len(idx), n, dtype=torch.float64).scatter_(1, idx, w)


def class_members(L: torch.Tensor, N: int, n: int, mode: str, tol: float = 1e-4) -> tuple[list, dict]:
    """Each class's images: its share of the label mass times n (step 1 of the attack); checks the labels (sums
    within ``tol``)."""
    if L.ndim != 2 or L.shape[0] != N:
        raise ShapeError(f"labels must be N×classes with N = {N}, got {tuple(L.shape)}.")
    if not bool(torch.isfinite(L).all()) or float(L.min()) < 0:
        raise ParameterError("the soft labels must be finite and ≥ 0 (each encryption's coefficient mass per class).")
    mass = L.sum(1)
    if mode == "inside" and (mass - 1).abs().max() > tol:
        raise ParameterError("the soft labels do not sum to 1: inside-dataset InstaHide labels do; for "
                             "cross-dataset encryptions (labels cover the private part only) use mode='cross'.")
    if mode == "cross" and (mass.min() <= 0 or mass.max() > 1 + tol):
        raise ParameterError("cross-dataset labels must carry the private part's mass, in (0, 1] per encryption.")
    share = L.sum(0) * n / L.sum()  # largest remainders: the counts sum to n
    counts = share.floor().long()
    counts[torch.argsort(share - counts, descending=True)[:n - int(counts.sum())]] += 1
    members, classes = {}, []
    for c in range(L.shape[1]):
        members[c] = list(range(len(classes), len(classes) + int(counts[c])))
        classes += [c] * int(counts[c])
    return classes, members


def carlini_inputs(encryptions, public, noise_images, similarity, n: int | None, members: int = 1):
    """``CarliniAttack.run``'s inputs as float tensors, their shapes checked against each other (``n``: the number of
    private images, which the attack needs; ``members``: private images per encryption)."""
    from ...checks import check_finite, check_images

    E = torch.as_tensor(encryptions, dtype=torch.float64)
    if E.ndim != 4 or E.shape[0] == 0:
        raise ShapeError(f"encryptions must be N×C×H×W with N ≥ 1, got shape {tuple(E.shape)}.")
    check_finite(E, "encryptions")
    N = E.shape[0]
    if n is None:
        raise ParameterError("give n (the number of private images): the class counts are its share of the "
                             "label mass, and without labels it is the number of images to recover.")
    if n > N * members:
        raise ParameterError(f"{N} encryptions of {members} private images each hold at most {N * members} distinct "
                             f"images, fewer than n = {n}: give the number of private images the encryptions were made from.")
    # the attacker's own / noise images are pixels in [0, 1] (their statistics normalise the recovery): 0..255 or
    # already-normalised images would silently give a wrong normalisation
    public = check_images(torch.as_tensor(public, dtype=torch.float32), "public (the attacker's own images)")
    if tuple(public.shape[1:]) != tuple(E.shape[1:]):
        raise ShapeError(f"public images {tuple(public.shape[1:])} do not match the encryptions {tuple(E.shape[1:])}.")
    noise = public if noise_images is None else check_images(torch.as_tensor(noise_images, dtype=torch.float32),
                                                             "noise_images")
    if tuple(noise.shape[1:]) != tuple(E.shape[1:]):
        raise ShapeError(f"noise_images {tuple(noise.shape[1:])} do not match the encryptions {tuple(E.shape[1:])}.")
    if similarity is not None:
        similarity = torch.as_tensor(similarity, dtype=torch.float64)
        if similarity.shape != (N, N):
            raise ShapeError(f"similarity must be N×N = {N}×{N}, got {tuple(similarity.shape)}.")
    return E, public, noise, similarity
