"""Uncovering public images by similarity search when the public pool is randomly cropped (InstaHide
paper, section 5.3 "Uncover public images by similarity search", Figure 8; Tramèr's attack pipeline).

Cross-dataset InstaHide mixes two private images with k − 2 public *patches*; the best-practice
preprocessing cuts those patches at random positions from public images (section 3.2). The attacker
has the public images (``sources``: the public dataset is public) but not where each patch was cut.
For each encryption it ranks the sources and calls it a *hit* when at least one source of a mixed patch
is among the top m (the paper: m = √N). Scorers:

* ``"cosine"`` / ``"ssim"``: alignment-based — |encryption| against each source's centre crop
  (centred cosine; SSIM as in the paper). A shifted crop no longer lines up, so these degrade.
* ``"shift-cosine"``: the centred cosine maximised over every crop position of the source — the search
  that random cropping enlarges only by the number of positions ((S − H + 1)², 25 for 20 → 16).
* ``"learned"``: the paper's "deep model to predict the similarity score", built as a learned
  shift-cosine: per-pixel feature maps φ(x) = x + conv(GELU(conv(x))) of |encryption| and of the source
  (the residual branch starts at zero, so training starts from the shift-cosine ranking), compared by
  the centred cosine at every crop position (one ``conv2d`` of the sources by the queries) and maxed
  over positions; a learned temperature and bias turn it into a logit. The attacker trains it on mixes
  it makes itself — its own images of the private kind, random crops of the sources, the scheme's
  coefficients and mask — with binary cross-entropy over every (mix, source) pair of a batch
  (positives up-weighted). It scores |x̃| directly, so no demasking is needed. Measured (N = 400
  sources, 20 → 16 crops, 200 encryptions, top 20; chance 0.19 / 0.10): k = 6 cosine 0.41,
  shift-cosine 0.50, learned 0.585; k = 4 0.21 / 0.30 / 0.47.

``random_crops(sources, size, per_source)`` makes such a pool (and each patch's source) for experiments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ...checks import check_positive_int
from ...errors import ParameterError, ShapeError, UnknownOptionError
from ...nn.init import seeded
from ..base import Attack
from ...results import Result
from ...progress import progress

SCORERS = ("cosine", "shift-cosine", "ssim", "learned")


def random_crops(sources: torch.Tensor, size: int, per_source: int = 1, generator: torch.Generator | None = None):
    """``(patches P×C×size×size, source index P)``: ``per_source`` crops at random positions of each source."""
    s = torch.as_tensor(sources, dtype=torch.float32)
    if s.ndim != 4:
        raise ShapeError(f"sources must be N×C×H×W, got {tuple(s.shape)}.")
    H, W = s.shape[2], s.shape[3]
    if not 0 < size <= min(H, W):
        raise ParameterError(f"crop size {size} must be in [1, {min(H, W)}] for {H}×{W} sources.")
    owner = torch.arange(len(s)).repeat_interleave(per_source)
    top = torch.randint(H - size + 1, (len(owner),), generator=generator)
    left = torch.randint(W - size + 1, (len(owner),), generator=generator)
    rows = (top[:, None] + torch.arange(size))[:, :, None]
    cols = (left[:, None] + torch.arange(size))[:, None, :]
    patches = s[owner[:, None, None], :, rows, cols]  # P×size×size×C (the advanced indices come first)
    return patches.permute(0, 3, 1, 2).contiguous(), owner


def _centre(sources: torch.Tensor, size: int) -> torch.Tensor:
    H, W = sources.shape[2], sources.shape[3]
    t, left = (H - size) // 2, (W - size) // 2
    return sources[:, :, t:t + size, left:left + size]


class _Features(nn.Module):
    """x + conv(GELU(conv(x))), the residual branch zero-initialised (the identity at the start)."""

    def __init__(self, channels: int, width: int):
        super().__init__()
        self.a = nn.Conv2d(channels, width, 3, padding=1)
        self.b = nn.Conv2d(width, channels, 3, padding=1)
        nn.init.zeros_(self.b.weight)
        nn.init.zeros_(self.b.bias)

    def forward(self, x):
        return x + self.b(nn.functional.gelu(self.a(x)))


def window_cosine(queries: torch.Tensor, sources: torch.Tensor) -> torch.Tensor:
    """Q×N: for every query (Q×C×h×w) and source (N×C×S×S), the largest centred cosine between the query
    and a window of the source. Queries are centred by their mean, windows by the mean window."""
    F = nn.functional
    a = queries - queries.mean(0, keepdim=True)
    a = a / a.flatten(1).norm(dim=1).clamp_min(1e-12)[:, None, None, None]
    h, w = a.shape[2], a.shape[3]
    mu = sources.mean(0, keepdim=True).unfold(2, h, 1).unfold(3, w, 1).mean((2, 3))  # the mean window
    corr = F.conv2d(sources, a) - (a * mu).sum((1, 2, 3))[None, :, None, None]
    norm2 = F.conv2d(sources ** 2, torch.ones_like(mu)) - 2 * F.conv2d(sources, mu) + (mu ** 2).sum()
    return (corr / norm2.clamp_min(1e-12).sqrt()).amax((2, 3)).T


@dataclass(frozen=True)
class SearchResult(Result):
    top: torch.Tensor                 # Q×m source indices, best first
    scorer: str
    m: int
    hit_rate: float | None = None     # fraction of queries with ≥ 1 true source in the top m
    chance: float | None = None       # the hit rate of a random ranking, for comparison
    history: list = field(default_factory=list)
    _skip_in_dict = ("top",)


class PublicSearchAttack(Attack):
    """``fit(scheme, own_images, sources, crop)`` (for ``"learned"``), then ``run(encryptions, sources, m)``."""

    name = "public-search"

    def __init__(self, scorer: str = "learned", width: int = 16, steps: int = 600, batch_size: int = 64,
                 lr: float = 1e-3, seed: int = 0, progress: bool = False):
        super().__init__(None)
        if scorer not in SCORERS:
            raise UnknownOptionError(f"scorer must be one of {SCORERS}, got {scorer!r}.")
        self.scorer, self.seed, self.progress = scorer, seed, progress
        self.steps, self.batch_size, self.lr = check_positive_int(steps, "steps"), check_positive_int(batch_size, "batch_size"), lr
        self.size = self.query_features = self.source_features = None  # built in fit
        self.width = width

    def fit(self, scheme, own_images, sources, crop: int) -> list:
        """Train the learned scorer on the attacker's own mixes: ``own_images`` (private kind, in [0, 1])
        mixed by ``scheme`` (its k, c1, c2 and mask; cross mode) with random ``crop``-sized crops of ``sources``."""
        from ...encoders import InstaHide

        if self.scorer != "learned":
            raise ParameterError(f"only the learned scorer is trained; {self.scorer!r} needs no fit.")
        own = torch.as_tensor(own_images, dtype=torch.float32)
        src = torch.as_tensor(sources, dtype=torch.float32)
        if own.ndim != 4 or src.ndim != 4 or own.shape[1] != src.shape[1]:
            raise ShapeError(f"own_images and sources must be N×C×H×W with one channel count, got "
                             f"{tuple(own.shape)} and {tuple(src.shape)}.")
        if tuple(own.shape[2:]) != (crop, crop):
            raise ShapeError(f"the mixed patches are {crop}×{crop}: own_images must be too, got {tuple(own.shape[2:])}.")
        if scheme.mode != "cross" or scheme.k < 3:
            raise ParameterError("similarity search for public patches needs a cross-mode scheme with k ≥ 3.")
        c = own.shape[1]
        with seeded(self.seed):
            self.query_features, self.source_features = _Features(c, self.width), _Features(c, self.width)
        self.scale = nn.Parameter(torch.tensor([10.0, -3.0]))  # temperature, bias
        self.size = crop
        g = torch.Generator().manual_seed(self.seed)
        stats = scheme.channel_stats(own)
        self._stats = stats
        params = list(self.query_features.parameters()) + list(self.source_features.parameters()) + [self.scale]
        opt = torch.optim.Adam(params, lr=self.lr)
        steps = progress(range(self.steps), "public-patch similarity", enabled=self.progress)
        history, B, n_src = [], self.batch_size, min(len(src), 4 * self.batch_size)
        for _ in steps:
            cand = torch.randperm(len(src), generator=g)[:n_src]          # this batch's candidate sources
            patches, owner = random_crops(src[cand], crop, 1, g)
            mixer = InstaHide(scheme.k, c1=scheme.c1, c2=scheme.c2, mode="cross", public=patches)
            pick = torch.randint(len(own), (B,), generator=g)
            enc = mixer.encrypt(own[pick], seed=int(torch.randint(2**31, (1,), generator=g)), stats=stats)
            truth = torch.zeros(B, n_src)
            for j in range(2, scheme.k):
                truth[torch.arange(B), owner[enc.key.partners[:, j]]] = 1.0
            sim = self._similarity(enc.images.abs(), InstaHide.normalize_images(src[cand], stats).abs())
            logits = self.scale[0] * sim + self.scale[1]
            rate = float(truth.mean())
            loss = nn.functional.binary_cross_entropy_with_logits(logits, truth,
                                                                  pos_weight=torch.tensor((1 - rate) / rate))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            history.append(float(loss.detach()))
        return history

    def _similarity(self, queries, sources):
        return window_cosine(self.query_features(queries), self.source_features(sources))

    def scores(self, encryptions, sources, stats=None) -> torch.Tensor:
        """Q×N similarity of every encryption (signed or |·|, normalised units) to every source ([0, 1]);
        ``stats``: the (mean, std) the encryptions were normalised with (the sources are normalised alike)."""
        from ...encoders import InstaHide

        q = torch.as_tensor(encryptions, dtype=torch.float32).abs()
        src = torch.as_tensor(sources, dtype=torch.float32)
        if q.ndim != 4 or src.ndim != 4 or q.shape[1] != src.shape[1]:
            raise ShapeError(f"encryptions and sources must be N×C×H×W with one channel count, got "
                             f"{tuple(q.shape)} and {tuple(src.shape)}.")
        if src.shape[2] < q.shape[2] or src.shape[3] < q.shape[3]:
            raise ShapeError(f"sources {tuple(src.shape[2:])} must be at least as large as the encryptions "
                             f"{tuple(q.shape[2:])} (the patches are crops of them).")
        stats = stats or getattr(self, "_stats", None)
        if stats is None:
            raise ParameterError("give stats: the encryptions' normalisation, e.g. scheme.channel_stats(own_images) "
                                 "with your own images of the private kind (fit() records it for 'learned').")
        z = InstaHide.normalize_images(src, stats)
        if self.scorer == "learned":
            if self.size is None:
                raise ParameterError("the learned scorer is not trained: call fit(scheme, own_images, sources, crop).")
            with torch.no_grad():
                return self._similarity(q, z.abs())
        h = q.shape[2]
        if self.scorer in ("cosine", "shift-cosine"):
            return window_cosine(q, (_centre(z, h) if self.scorer == "cosine" else z).abs())
        centre = _centre(z, h).abs()
        from ...metrics import ssim  # SSIM on [0, 1]: both rescaled by the encryptions' largest |value|
        top = float(torch.cat([q.reshape(-1), centre.reshape(-1)]).max())
        qa, ca = (q / top).double(), (centre / top).double()
        return torch.stack([ssim(ca, qi.expand_as(ca)) for qi in qa])

    def run(self, encryptions, sources, m: int | None = None, true_sources=None, stats=None) -> SearchResult:
        """Rank the sources for every encryption; ``true_sources``: Q×(k−2) source indices of the mixed
        patches, for the hit rate. ``m`` defaults to ⌈√N⌉ (the paper's choice)."""
        S = self.scores(encryptions, sources, stats)
        n = S.shape[1]
        m = int(m or -(-n ** 0.5 // 1))
        if not 1 <= m <= n:
            raise ParameterError(f"m must be in [1, {n}], got {m}.")
        top = S.topk(m, dim=1).indices
        hit = chance = None
        if true_sources is not None:
            t = torch.as_tensor(true_sources).long().reshape(len(S), -1)
            hit = float((top[:, :, None] == t[:, None, :]).any(2).any(1).float().mean())
            distinct = torch.tensor([len(set(r.tolist())) for r in t], dtype=torch.float64)
            # P(a random top-m misses all r true sources) = C(n − r, m) / C(n, m)
            lg = torch.lgamma
            miss = torch.exp(lg(n - distinct + 1.0) + lg(torch.tensor(n - m + 1.0, dtype=torch.float64))
                             - lg((n - distinct - m + 1.0).clamp_min(1e-9)) - lg(torch.tensor(n + 1.0, dtype=torch.float64)))
            miss = torch.where(n - distinct - m + 1.0 > 0, miss, torch.zeros_like(miss))
            chance = float((1 - miss).mean())
        return SearchResult(top, self.scorer, m, hit, chance)
