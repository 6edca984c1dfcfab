"""Carlini et al.'s attack on InstaHide ("Is private learning possible with instance encoding?"),
re-implemented from its description and generalised to inside-dataset InstaHide with soft labels,
any number of private images n and encryptions per image T.

The attacker has the encryptions ``|x̃_t| = |Σ_j λ_tj x_{i_tj}|`` (the sign mask is undone by the
absolute value) and the released soft labels ``ℓ_t = Σ_j λ_tj onehot(y_{i_tj})``. Write
``A`` (N×n) for the unknown mixing matrix and ``X`` (n×d) for the normalised private images.

1. **How many images per class.** Each private image carries, in expectation, the same total coefficient mass
   over all encryptions (N/n), so class c holds ``round(Σ_t ℓ_tc · n / N)`` images.
2. **Recovering the images given A — lifting.** Per pixel p, ``|x̃_tp|² = a_tᵀ U_p a_t`` with ``U_p = u_p u_pᵀ``
   (``u_p`` = pixel p of every private image): *linear* in the n(n+1)/2 entries of U_p. One least-squares solve
   (shared by every pixel) gives all U_p; ``u_p`` is the leading eigenvector of U_p scaled by √eigenvalue, and its
   global sign is the one closer to the attacker's public images' mean at that pixel. Exact when A is (noise-free,
   N ≥ n(n+1)/2, every pair of images co-occurs).
3. **Assigning the encryptions — clustering by alternating minimisation.** The labels fix, per
   encryption, which classes are present and their total coefficients; A is unknown only in *which*
   members of each class (and, when a class is present twice, how its mass splits — a grid). Starting
   from a random assignment, alternate: solve X by lifting; give each encryption the assignment (among
   its label-consistent options, k members in all, no coefficient above c1) whose ``|a X|`` best matches
   ``|x̃_t|``. Restart from several random assignments — and from ``anneal_restarts`` assignments found by
   deterministic annealing (soft assignments ∝ exp(−residual/τ), τ lowered geometrically, the lifting solved on
   the expected pair features), which escape the poor local minima that random starts hit when a class holds
   many images — and keep the lowest residual. This replaces the paper's similarity network + graph clustering:
   the labels and the lifting make the assignment a proper (residual-minimising) one with no fixed thresholds.
   Inside k = 6 (n = 20, T = 25: ~940,000 options) the annealed starts are what succeed (residual 10–107 against
   660–720 from random starts): 100 % recovered, mean SSIM 0.93.

Cross-dataset mode (``mode="cross"``: two private images and k − 2 unknown public ones per mix, the
labels covering the private part only, summing to s_t = λ_0 + λ_1 ≥ c2): each encryption's options put
its label mass on 2 private members, the per-class counts are each class's share of the total mass, and
the public part p_t (mass 1 − s_t) is modelled as noise with the per-pixel mean μ and variance σ² of
public images of the kind the scheme mixes (``noise_images``): |x̃_t| ≈ √((a_t X + (1 − s_t) μ)² + v_t),
v_t = γ_t (1 − s_t)² σ² · 2/(k − 1), γ_t = 1 label-free, with labels each mix's own scale from its energy (``public_scale``,
``carlini_model.scale_noise``). **Which normalisation the owner gave the public images** — the private set's
statistics, or their own (the reference code's and the published challenge's convention) — changes μ and σ² completely;
``public_normalization="auto"`` simulates mixes of the attacker's own images with the noise images under each and keeps
the one whose per-pixel E|x̃|² matches the encryptions' (``moment_gap``).
The public part is smooth natural-image texture, not pixel noise: the assignment's error discounts its
``noise_rank`` dominant directions (``carlini_metric.Metric``, from simulated mixes; the X-step keeps ‖·‖²).

**Two X-steps** (``solver``). The lifting (step 2) needs N ≥ n(n+1)/2 and every pair of images to co-occur;
at the published size (cross, n = 100, T = 50: N = 5,000 < 5,050, a pair co-occurs about once) it cannot
work, and it ignores the public part. The *direct* X-step needs neither. Inside mode (``phase_starts``, default 5):
per-pixel phase retrieval (``carlini_phase``: Adam on the intensity error from several starts per pixel, the best
kept per pixel) — natural-image crops, inside k = 3, n = 20: identified 0.40 → 1.00 (grey), 0.55 / 0.75 → 0.70 /
0.90 (RGB, two key seeds). Cross mode (measured worse with it: 0.85 vs 0.95 on digits): Adam on the model's error
with X in the box [0, 1] occupies once normalised, then two moves Adam cannot make — per pixel, the global sign
(``orient``) and per image and pixel, x → −x / black / white where that lowers the error (``flip_signs``).
``solver="auto"`` is the direct X-step everywhere (8×8 digits, inside, n = 20, T = 25, labels: identified 1.00 vs
the lifting's 0.60 at k = 4, 1.00 vs 0.95 at k = 6, 7 s vs 207 s: its exactness does not survive noisy assignments).
Direct: round(120,000 / (N·n)) random starts (1 to 6), stopped at a relative gain below 0.25 %; then **k-means' split
move** (``split_overloaded``, ≤ ``splits`` times, ``split_patience`` rejections in a row end them, ``max_rounds`` caps
a start's rounds): a slot used > 1.25× the average, another of its class < 0.75×, is split by a 2-means of its
encryptions and the alternation resumes, kept if its error ends lower. Cross, own convention, n = 100, T = 50,
identified: 0.59 (‖·‖²) → 0.76 (the metric) → 0.89–0.93 (the split; three key seeds).

**After the attack** (``carlini_signs.settle``): each pixel's global sign (``sign_prior``; |a X| cannot tell column p
of X from its negative) chosen under a Gaussian model of the attacker's own images (natural crops, inside k = 3,
n = 20: identified 0.05 → 0.40); cross mode refits X to the amplitudes' *mean* (``carlini_model.mean_link``: the
search's RMS model shrinks contrast); then ``prior_moves`` rounds of single-pixel moves (−x, black, white) under the
fit plus that prior (RGB 32×32 crops, cross k = 6, n = 20: identified 0.75 → 0.90, SSIM 0.29 → 0.50; README: n = 100);
cross mode ends by giving the set its kind's per-image contrast (``match_contrast``: plain-NN identification). An
unpublished normalisation is read off the recovery's range (``denormalize="range"``; cross, natural: quantiles; ``carlini_range``).

**Two searches** (``search``) for the labelled assignment: ``exhaustive`` scores every label-consistent row;
``local`` (``carlini_local``) keeps one state per encryption and member-count tuple and changes one class's
members at a time — Σ_c K_c rows per state instead of Π_c K_c, for inside k ≥ 4 at n = 100 (5·10⁷ rows).
``exact`` (``carlini_exact``, what ``auto`` uses when the rows exceed ``max_options``): each state's exact minimiser by
meeting in the middle (given the true X at n = 100: 81 % of rows right vs the local search's 35 %; 4.4 CPU-s). The
search runs on ``search_pixels`` random pixels (``"auto"``: ``carlini_options.searched_pixels``), then X is solved at
every pixel; the phase step ends in ``phase_polish`` rounds of alternating projections; ``cluster_start``
(``carlini_start``) replaces the first random start by a labelled clustering.

**Cost** (direct, labelled, cross; O ≈ N·(n/10)² options, m ≤ k members a row): per iteration O(O·m·d) for the
assignment, O(direct_steps·N·n·d) for the X-step; memory O(O·m) plus O(chunk·d) while scoring.

**Natural images, cross mode, labels** (``sign_sync="auto"``: the own images' ``sign_information`` < ``SIGN_FLOOR``): ``carlini_sync``'s
clustered start and sign-synchronising X-step replace the search, from ``restarts`` k-means seeds (default ``SYNC_STARTS``) joined (README).

**Label-free** (no labels): every encryption's row among all C(n, m) member sets × the coefficient grid, one list
shared by all encryptions (``Options(shared=…)``), its minimum per encryption by ``Metric.nearest`` (O(N·O·d) per
assignment; O = 89,100 at n = 100: 8 s on 2 cores). Above ``max_free_work`` multiply-adds, each encryption's rows
among its likeliest images (``similarity.candidate_options``) under pair scores — ``similarity`` (the network's),
else, inside, the encryptions' own (``encryption_affinity``); cross refuses — whose clustering gives one start too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ...checks import check_int_at_least, check_positive_int
from ...memory import keep_freed_memory
from ...errors import ParameterError, UnknownOptionError
from ..base import Attack
from ...results import Result
from ...progress import progress
from .carlini_local import LocalOptions, labelled_options
from .carlini_model import (PLAIN, alternate, cross_noise, descend, flip_signs, lift, noise_pixels, noise_rows, orient,
                            pair_features, predict, scale_noise, split_overloaded)
from .carlini_options import Options, RowGrid, carlini_inputs, check_search_pixels, class_members, searched_pixels
from .carlini_phase import phase_step
from .carlini_range import owner_stats
from .carlini_signs import settle
from .carlini_start import cluster_start
from .carlini_sync import SYNC_STARTS, check_sign_sync, sync_search, wants_sync
from .similarity import affinity_neighbours, balanced_members, encryption_affinity, soft_memberships

__all__ = ["CarliniAttack", "CarliniResult", "lift", "pair_features"]
SOLVERS = ("auto", "lift", "direct")
SEARCHES = ("auto", "exhaustive", "local", "exact")
PUBLIC_NORMALIZATION = ("auto", "private", "own")
DENORMALIZE = ("own", "range")  # inside, an unpublished normalisation: own images' statistics, or read off the recovery


@dataclass(frozen=True)
class CarliniResult(Result):
    images: torch.Tensor        # n̂×C×H×W in [0, 1], de-normalised (normalize's constants / own's / the recovery's range)
    normalized: torch.Tensor    # n̂×d in the scheme's normalised units
    classes: torch.Tensor       # the class of each recovered image
    mixing: torch.Tensor        # N×n̂ estimated A
    residual: float             # Σ_t error(|a_t X| − |x̃_t|): ‖·‖², cross mode under the noise Metric
    restarts: list              # residual of each restart
    seconds: float
    solver: str = "lift"                  # the X-step used: "lift" or "direct" (see carlini_model)
    public_normalization: str | None = None  # cross mode: the public part's normalisation assumed ("private"/"own")
    search: str = "exhaustive"            # every label-consistent row, "local" (carlini_local) or "exact" (carlini_exact)
    unrefined: torch.Tensor | None = None  # the images before the refit and the prior moves (carlini_signs.settle)
    unrefined_normalized: torch.Tensor | None = None  # the same, n̂×d in normalised units (not clamped)
    _skip_in_dict = ("images", "normalized", "mixing", "unrefined", "unrefined_normalized")


@dataclass(frozen=True)
class _Run:
    """One run's state, passed explicitly (the attack object keeps only its settings, so one object can run twice
    at once): the X-step, the box [0, 1] occupies once normalised, the cross-mode noise model and the metric."""

    solver: str
    box: tuple
    noise: tuple = (None, None)
    metric: object = PLAIN

    def predict(self, A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """The model of |x̃| (``carlini_model.predict``) with this run's public-noise statistics."""
        return predict(A, X, *self.noise)

    def on(self, pixels: torch.Tensor, metric) -> _Run:
        """This run restricted to ``pixels`` (the search's subset), with that subset's ``metric``."""
        return _Run(self.solver, tuple(b[pixels] for b in self.box),
                    noise_pixels(self.noise, pixels), metric)


class CarliniAttack(Attack):
    name = "carlini"

    def __init__(self, k: int, n: int | None = None, restarts: int | None = None, max_iter: int = 60, split_grid: int = 5,
                 c1: float = 0.65, c2: float = 0.3, anneal_restarts: int | None = None, max_options: int = 2_000_000,
                 seed: int = 0, mode: str = "inside", refine_steps: int | None = None, final_refine_steps: int = 300,
                 solver: str = "auto", public_normalization: str = "auto", direct_steps: int = 30,
                 search: str = "auto", noise_rank: int = 20, max_free_work: float = 1e12, splits: int = 10,
                 sign_prior: bool = True, normalize="dataset", phase_starts: int | None = None,
                 search_pixels: int | str | None = "auto", cluster_start: bool = False, phase_polish: int = 50,
                 prior_moves: int = 8, public_scale: bool = True, split_patience: int | None = None, max_rounds: int | None = None,
                 denormalize: str = "range", sign_sync: bool | str = "auto", progress: bool = False):
        super().__init__(None)
        from ...encoders.instahide import MODES, InstaHide, check_coefficient_caps

        self.k = check_positive_int(k, "k")
        for name, value, options in (("mode", mode, MODES), ("solver", solver, SOLVERS), ("search", search, SEARCHES),
                                     ("public_normalization", public_normalization, PUBLIC_NORMALIZATION),
                                     ("denormalize", denormalize, DENORMALIZE)):
            if value not in options:
                raise UnknownOptionError(f"{name} must be one of {options}, got {value!r}.")
        if mode == "cross" and self.k < 3:
            raise ParameterError("cross mode with k = 2 mixes no public image: attack it as inside mode "
                                 "(mode='inside', k=2, with the labels' mass as it is).")
        self.mode, self.solver, self.public_normalization, self.search = mode, solver, public_normalization, search
        c1, c2 = check_coefficient_caps(self.k, c1, c2, mode)
        self.members = self.k if mode == "inside" else 2  # private images per mix
        self.refine_steps = (0 if mode == "inside" else 150) if refine_steps is None else int(refine_steps)
        self.final_refine_steps, self.direct_steps = int(final_refine_steps), check_positive_int(direct_steps, "direct_steps")
        self.n = check_positive_int(n, "n") if n is not None else None
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self._restarts = None if restarts is None else check_positive_int(restarts, "restarts")
        self._anneal_restarts = anneal_restarts
        self.split_grid, self.c1, self.c2, self.seed, self.progress = split_grid, c1, c2, seed, progress
        self.max_options, self.top_options, self.max_free_work = int(max_options), 8, float(max_free_work)
        self.noise_rank = check_int_at_least(noise_rank, "noise_rank", 0, "0: plain squared error")
        self.splits, self.sign_prior = check_int_at_least(splits, "splits", 0, "0: no split move"), bool(sign_prior)
        self.split_patience = None if split_patience is None else check_positive_int(split_patience, "split_patience")
        self.max_rounds = None if max_rounds is None else check_positive_int(max_rounds, "max_rounds")
        self.prior_moves = check_int_at_least(prior_moves, "prior_moves", 0, "0: none")
        if phase_starts is None:  # cross mode: the amplitude descent's box and sign moves (carlini_phase: measured)
            phase_starts = 5 if mode == "inside" else 0
        if int(phase_starts) < 0:
            raise ParameterError(f"phase_starts must be ≥ 0 (0: the amplitude descent alone), got {phase_starts}.")
        self.phase_starts = int(phase_starts)
        self.cluster_start, self.phase_polish, self.public_scale = bool(cluster_start), int(phase_polish), bool(public_scale)
        self.search_pixels = check_search_pixels(search_pixels)
        # the owner's pixel normalisation, as InstaHide(normalize=…) takes it: an unknown rule fails here
        InstaHide(k=self.k, normalize=normalize).channel_stats(torch.zeros(2, 1, 1, 1))
        self.normalize, self.denormalize, self.sign_sync = normalize, denormalize, check_sign_sync(sign_sync)
        self.grid = RowGrid(self.members, mode, split_grid, c1, c2)

    def _anneal(self, r: _Run, A, opts, B, prior, steps: int = 30):
        """Deterministic annealing: soft assignments p ∝ exp(−residual/τ) per encryption, τ lowered geometrically
        from the residuals' median to 1 % of it; the X-step on them is the lifting on the expected pair
        features, or (direct solver) Adam on the p-weighted error of each encryption's ``top`` options."""
        X = self._solve(r, A, B, prior)
        res = opts.residuals(X, B, r.noise, r.metric)
        tau0 = float(res.median())
        owner, N = opts.owner, opts.n_encryptions
        for step in range(steps):
            tau = tau0 * (0.01 ** (step / max(steps - 1, 1)))
            logits = -res / tau
            mx = torch.full((N,), -torch.inf, dtype=logits.dtype).scatter_reduce(0, owner, logits, "amax")
            w = torch.exp(logits - mx[owner])
            z = torch.zeros(N, dtype=w.dtype).index_add_(0, owner, w)
            p = w / z[owner]
            if r.solver == "direct":
                keep = opts.top(p, self.top_options)
                R, own, pk = opts.rows(keep), owner[keep], p[keep] / z.new_zeros(N).index_add_(0, owner[keep], p[keep])[owner[keep]]
                X = descend(X, B[own], self.direct_steps, 0.05, lambda: R, noise_rows(r.noise, own), r.box,
                            weights=pk[:, None])[1]
            else:
                Aexp, W = opts.expected(p)
                X = lift(Aexp, B, prior, W)
            res = opts.residuals(X, B, r.noise, r.metric)
        return opts.assign(X, B, r.noise, r.metric)[0]

    def _solve(self, r: _Run, A, B, prior, X=None, steps: int | None = None):
        """X given A. Lift solver: the lifting (or ``X``), then ``steps`` (default ``refine_steps``) Adam steps on the
        model's error. Direct: the phase step, or ``steps`` (default ``direct_steps``) from ``X`` (or the prior mean)."""
        if r.solver == "direct" and self.phase_starts:  # per-pixel phase retrieval (carlini_phase)
            cold = X is None  # unclamped: the box is only the attacker's estimate of the owner's normalisation
            return phase_step(A, B, X, r.noise, self.phase_starts if cold else 3, 150 if cold else 100, seed=self.seed,
                              tol=0.01, polish=self.phase_polish)
        if r.solver == "direct":
            X = prior.expand(A.shape[1], -1).clone() if X is None else X
            X = descend(X, B, self.direct_steps if steps is None else steps, 0.05, lambda: A, r.noise, r.box)[1]
            return flip_signs(orient(X, A, B, prior, r.predict, r.box), A, B, r.noise, r.box)
        X, steps = lift(A, B, prior) if X is None else X, self.refine_steps if steps is None else steps
        return descend(X, B, steps, 0.05, lambda: A, r.noise, r.box)[1] if steps else X

    def _polish(self, r: _Run, A, X, B, steps: int = 300):
        """Label-free coefficients are on a grid: refine the chosen members' coefficients (in [0, c1]; their
        sum 1 inside, in [c2, 1] cross) jointly with X by Adam on the model's error."""
        on = A > 0
        a = A.clone().requires_grad_(True)

        def rows():
            Ac = a.clamp(0.0, self.c1) * on
            mass = Ac.sum(1, keepdim=True)
            return Ac / mass if self.mode == "inside" else Ac * (mass.clamp(self.c2, 1.0) / mass)

        return descend(X, B, steps, 0.01, rows, r.noise, r.box, extra=(a,))

    def check_free_search(self, n: int, N: int, d: int, similarity: bool = False) -> bool:
        """Whether the label-free assignment can search every option (``RowGrid.free_work`` ≤ ``max_free_work``); when it
        cannot (or inside k ≥ 4, C(n, k) member sets, always), False if ``similarity`` scores can restrict it — given,
        or inside the encryptions' own (``encryption_affinity``, computed by ``run``) — else the error saying what to do."""
        pixels = searched_pixels(self.search_pixels, self.mode, labelled=False)
        work = self.grid.free_work(n, N, d if pixels is None else min(d, pixels))
        if work <= self.max_free_work and (self.mode == "cross" or self.k <= 3):
            return True
        if similarity or self.mode == "inside":
            return False
        raise ParameterError(f"a label-free assignment over every option (k={self.k}, n={n}, N={N}: {work:.2g} multiply-"
                             f"adds > max_free_work = {self.max_free_work:.2g}) is too large a search; pass the soft labels, "
                             "or similarity= (SimilarityNetwork scores) to search each encryption's likely images only.")

    def run(self, encryptions, labels, public, noise_images=None, similarity=None) -> CarliniResult:
        """``encryptions`` N×C×H×W (signed, normalised units); ``labels`` N×classes (soft) or None
        (label-free: the coefficients are searched on a grid, ``n`` must be given); ``public``: the
        attacker's own images of the same kind in [0, 1] (signs and de-normalisation); ``noise_images``
        (cross mode): images like the scheme's public pool, for the noise model's μ, σ² (default:
        ``public``); ``similarity``: an N×N matrix of pair scores (``SimilarityNetwork.scores``) — one more
        start, from the encryptions clustered on it (``cluster_encryptions``)."""
        from ...encoders.instahide import InstaHide

        start = time.perf_counter()
        keep_freed_memory()  # thousands of steps free and rebuild the same N×d arrays (reconguard.memory)
        E, public, noise, similarity = carlini_inputs(encryptions, public, noise_images, similarity, self.n, self.members)
        N = E.shape[0]
        if labels is not None:  # labels stored in float16 / bfloat16 sum to 1 only within their rounding
            labels = (raw := torch.as_tensor(labels)).to(torch.float64)
            classes, members = class_members(labels, N, self.n, self.mode, max(1e-4, 2 * torch.finfo(raw.dtype).eps)
                                                   if raw.is_floating_point() else 1e-4)
            if self.mode == "inside":
                labels = labels / labels.sum(1, keepdim=True)
        else:
            classes, members = [-1] * self.n, None
        n_hat = len(classes)
        solver = "direct" if self.solver == "auto" else self.solver
        if solver == "lift" and n_hat * (n_hat + 1) // 2 > N:
            raise ParameterError(f"{N} encryptions cannot determine {n_hat} images by lifting (needs N ≥ n(n+1)/2 = "
                                 f"{n_hat * (n_hat + 1) // 2}); use solver='direct' (or 'auto'), which needs no pair to "
                                 "co-occur.")
        B = E.reshape(N, -1).abs()
        # Statistics rounded to 6 decimals: vectorised float32 sums differ in the last bits with the input's memory
        # alignment, and the discrete assignment turns those bits into a different local minimum.
        stats = tuple(tuple(round(v, 6) for v in part)
                      for part in InstaHide(k=self.k, normalize=self.normalize).channel_stats(public))
        own = InstaHide.normalize_images(public, stats).reshape(len(public), -1).to(torch.float64)
        prior = (own.mean(0) * 1e6).round() / 1e6
        mean_t, std_t = (torch.tensor(v, dtype=torch.float64).repeat_interleave(B.shape[1] // len(v)) for v in stats)
        box, chosen = (-mean_t / std_t, (1 - mean_t) / std_t), None  # images in [0, 1], normalised
        r = s = _Run(solver, box)
        pixels, count = None, searched_pixels(self.search_pixels, self.mode, labels is not None)  # the search's subset
        if count is not None and B.shape[1] > count:
            pixels = torch.randperm(B.shape[1], generator=torch.Generator().manual_seed(self.seed))[:count].sort().values
        if self.mode == "cross":
            chosen, noise_model, metric = cross_noise(E, labels, public, noise, own, stats, self.k, self.c2,
                                                      self.public_normalization, self.noise_rank, self.seed,
                                                      self.normalize, pixels, self.c1)
            if labels is not None and self.public_scale:  # each encryption's public variance (carlini_model.scale_noise)
                noise_model = scale_noise(B, labels, own, noise_model)
            r = s = _Run(solver, box, noise_model, metric)
        if pixels is not None:
            r, s = _Run(solver, box, r.noise), r.on(pixels, r.metric)
        Bs, prior_s = (B, prior) if pixels is None else (B[:, pixels], prior[pixels])
        if wants_sync(self.sign_sync, self.mode, labels, own):  # natural images with labels (carlini_sync)
            A, X, history = sync_search(B, labels, classes, r.noise, tuple(E.shape[1:]), seed=self.seed,
                                        starts=self._restarts or SYNC_STARTS, show=self.progress)  # each start's residual
            best, searched = (float(((r.predict(A, X) - B) ** 2).sum()), A, X), "sync"
        else:
            if members is None and similarity is None and not self.check_free_search(n_hat, N, Bs.shape[1]):
                similarity = encryption_affinity(E, neighbours=affinity_neighbours(N, n_hat, self.members))
            H = None if similarity is None or members is not None else soft_memberships(similarity, n_hat, seed=self.seed)
            opts = self._options(labels, members, n_hat, N, Bs.shape[1], similarity, H)  # label-free: H read twice
            best, history, searched = self._search(s, opts, Bs, prior_s, classes, n_hat, N, similarity, H, labels)
            A = best[1]  # then X at every pixel from the found rows (cold where the search saw a subset)
            X = self._solve(r, A, B, prior, best[2] if pixels is None else None,
                            steps=max(self.refine_steps, self.final_refine_steps))
        if members is None:  # label-free: the grid's coefficients, made continuous
            A, X = self._polish(r, A, X, B)
        # each pixel's global sign, which no fit to |x̃| can tell; cross mode's refit to the amplitudes' mean; the
        # posterior moves (carlini_signs.settle)
        X, before = settle(X.detach(), A, B, r.noise, r.box, own, tuple(E.shape[1:]), self.sign_prior, self.prior_moves,
                           self.seed, self.final_refine_steps if self.mode == "cross" else 0, fitted_signs=searched != "sync")
        if self.normalize == "dataset" and self.denormalize == "range" and (self.mode == "inside" or searched == "sync"):
            stats = owner_stats(X, E.shape[1], stats, self.mode, public)  # never published: read off X (carlini_range)
        mean, std = (torch.tensor(v, dtype=torch.float64).reshape(1, -1, 1, 1) for v in stats)
        images, unrefined = ((Z.reshape(n_hat, *E.shape[1:]) * std + mean).clamp(0, 1).float() for Z in (X, before))
        return CarliniResult(images, X, torch.tensor(classes), A, best[0], history, time.perf_counter() - start,
                             solver, chosen, searched, unrefined, before)

    def _options(self, labels, members, n_hat: int, N: int, d: int, similarity, memberships=None):
        """Each encryption's candidate rows: label-consistent (every one, or the local search's components), or
        label-free (the shared grid, or each encryption's likeliest images from the similarity scores)."""
        if members is None and self.search in ("local", "exact"):
            raise ParameterError(f"search={self.search!r} changes labelled classes' members: it needs the soft "
                                 "labels (label-free, use search='auto', with similarity= at large n).")
        if members is None and not self.check_free_search(n_hat, N, d, similarity is not None):
            from .similarity import candidate_options  # each encryption's likeliest images from the pair scores
            return candidate_options(similarity, n_hat, self.grid, self.seed, memberships=memberships)
        if members is None:
            return Options(shared=self.grid.free_rows(n_hat), n_encryptions=N)
        return labelled_options(self.grid, labels, members, n_hat, N, self.k, self.search, self.max_options)

    def _search(self, r: _Run, opts, B, prior, classes, n_hat: int, N: int, similarity, memberships, labels=None):
        """``(best, history, search)``: the alternation from every start (random, annealed, the clustering's of the
        pair scores' N×n soft ``memberships``, from ``similarity`` after the refusal below if None), the best kept."""
        searched = "exhaustive" if not isinstance(opts, LocalOptions) else "local" if opts.exact_pixels is None else "exact"
        direct = r.solver == "direct"  # lift: 4 random + 2 annealed starts; direct: 1–6 random (see above)
        restarts = self._restarts if self._restarts is not None else (min(6, max(1, round(120_000 / (N * n_hat)))) if direct else 4)
        if self._restarts is None and similarity is not None:  # the start from the pair scores takes one random start's place
            restarts -= 1
        anneals = self._anneal_restarts if self._anneal_restarts is not None else (0 if direct or searched != "exhaustive" else 2)
        if searched != "exhaustive" and (anneals or similarity is not None):
            raise ParameterError("the local search starts from random assignments only: set anneal_restarts=0 and "
                                 "give no similarity= (or search='exhaustive' with max_options raised).")
        if memberships is None and similarity is not None:
            memberships = soft_memberships(similarity, n_hat, seed=self.seed)
        tol = 2.5e-3 if direct else 1e-9  # the direct X-step is a few Adam steps: stop at a small relative gain
        starts = ["random"] * restarts + ["anneal"] * anneals + (["similarity"] if similarity is not None else [])
        if labels is not None and self.cluster_start:  # the labelled clustering takes the first random start's place
            starts = ["cluster"] + starts[1:]
        g = torch.Generator().manual_seed(self.seed)
        best, history = None, []
        for kind in progress(starts, "carlini restarts", enabled=self.progress):
            A = opts.random(g)
            if kind == "anneal":
                A = self._anneal(r, A, opts, B, prior)
            elif kind == "cluster":
                A = cluster_start(B, labels, classes, self.seed)
            elif kind == "similarity":  # equal coefficients on the clusters found from the pair scores
                A = balanced_members(memberships, self.members).to(torch.float64)
                A = A * (opts.mean_mass() / self.members)
            split = (lambda A_, X_: split_overloaded(A_, X_, B, classes, r.noise, r.box)) if direct else None
            total, A, X = alternate(A, lambda A_, X_: self._solve(r, A_, B, prior, X_),
                                    lambda X_: opts.assign(X_, B, r.noise, r.metric), self.max_iter, tol, split,
                                    self.splits, self.split_patience, self.max_rounds)
            history.append(total)
            if best is None or total < best[0]:
                best = (total, A, X if direct else None)
        return best, history, searched
