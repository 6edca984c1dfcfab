"""Audit a user's own encoder (split inference / instance encoding): what an attacker reaches and what the
theory guarantees, for the user's model on the user's images.

For each noise level σ of the release ``e = Enc(x) + N(0, σ²I)`` (σ = 0: the encoder as it is):

- **the theory** (spectral-bounds paper, §3–5): E[G] from ``k`` Jacobians of the model (float64, any dtype it
  came in), S from the prior's score, and Corollary 1 (σ > 0) or Corollary 2 (σ = 0) — reported as the one-sided
  95 % lower confidence bound over their sampling error — with Theorem 1, the ceiling ``Tr(S⁻¹)/d`` (what no
  information allows) and RTC. The prior π is the smoothed empirical distribution of the user's images
  (``x_i + N(0, σ_s²I)``), whose score is exact (``score="exact"``, the default: a badly trained score cannot
  inflate the bound), or a score model trained on them (``"trained"``) or a local DDPM (``"ddpm:DIR"``);
  S's quality (§6.4.1) is checked and reported either way.
- **the attacks** on held-out images the prior never saw: the MAP attack with the prior's score (β = 2σ², or the
  best of a β grid at σ = 0), the learned decoder (trained on the other images), and the **baseline** a guess
  scores (every image predicted as the mean training image).

No attack's MSE may fall below the bound beyond noise (3 s.e.); a row where one does is flagged ``violated``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..bounds.saturation import NOT_DIFFERENTIABLE
from ..errors import ParameterError, UnknownOptionError
from ..results import Result
from .loading import load_images, load_model, probe

PRESETS = {  # what each preset spends: seconds (smoke), minutes on 2 cores (cpu), a GPU (paper)
    "smoke": {"k": 24, "score_samples": 1000, "n_attack": 8, "map_steps": 40, "decoder_epochs": 2,
              "score_epochs": 2, "betas": (2e-4, 2e-2)},
    "cpu": {"k": 256, "score_samples": 20000, "n_attack": 64, "map_steps": 500, "decoder_epochs": 20,
            "score_epochs": 40, "betas": (0.0, 2e-6, 2e-4, 2e-3, 2e-2, 2e-1)},
    "paper": {"k": 1024, "score_samples": 50000, "n_attack": 256, "map_steps": 500, "decoder_epochs": 40,
              "score_epochs": 200, "betas": (0.0, 2e-6, 2e-4, 2e-3, 2e-2, 2e-1)},
}
SCORES = ("exact", "trained", "ddpm:DIR")
DENSE_MAX_D = 2048  # ``path="auto"``: beyond it the low-rank path (S̃ = I/σ_s², conservative) — the dense one's d×d
# eigendecompositions take minutes on 2 cores (d = 3,072: 240 s for the smoke preset, against seconds)


@dataclass(frozen=True)
class AttackScore(Result):
    """An attack's MSE per pixel on the held-out images, its standard error, and what it chose (e.g. β)."""

    name: str
    mse: float
    stderr: float
    detail: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SigmaAudit(Result):
    """One noise level: what the theory guarantees (the bound, Theorem 1, the ceiling, RTC) and what the attacks
    and a guess reach on held-out images."""

    sigma: float
    bound: dict          # the largest valid lower bound: name, value (LCB), point, stderr
    maeng: float         # Theorem 1 (always ≤ the bound above)
    ceiling: float       # Tr(S⁻¹)/d: the error with no information
    rtc: float | None    # ln(ceiling / bound); None = ∞ (the bound is 0)
    attacks: list        # AttackScore per attack
    baseline: AttackScore  # a guess: the mean training image for every image
    violated: bool       # an attack beat the bound beyond 3 s.e. (never expected)

    @property
    def best(self) -> AttackScore:
        return min(self.attacks, key=lambda a: a.mse)

    def verdict(self) -> str:
        b, best = self.bound["value"], self.best
        if self.violated:
            return f"CHECK: {best.name} reached {best.mse:.3g}, below the bound {b:.3g} beyond noise"
        share = best.mse / self.baseline.mse if self.baseline.mse > 0 else float("nan")
        return (f"an attacker reaches MSE {best.mse:.3g} ({best.name}; {100 * share:.0f}% of a guess's "
                f"{self.baseline.mse:.3g}); no attacker can go below {b:.3g}")


@dataclass(frozen=True)
class EncoderAudit(Result):
    model: str
    in_shape: tuple
    d: int
    m: int
    n_images: int
    n_attacked: int
    preset: str
    prior: str
    score: str
    score_quality: dict
    bound_path: str
    rows: list
    seconds: float
    examples: dict = field(default_factory=dict)  # σ → {"originals", "reconstructions", "attack"}
    normalize: dict | None = None  # the pixel convention applied inside the model (MSE stays in [0, 1] pixels)
    warnings: tuple = ()
    stages: dict = field(default_factory=dict)   # stage → {"seconds", "peak_gib"} (peak so far), as measured
    budget: dict = field(default_factory=dict)   # the estimate made before the work, the settings it ran with
    _skip_in_dict = ("examples",)

    kind = "encoder"


def _score(score: str, prior, train: torch.Tensor, sigma_s: float, epochs: int, seed: int, device, progress: bool):
    """The score function the bound and the MAP attack use, and whether it is exact for π."""
    if score == "exact":
        return prior.score, True
    if score == "trained":
        from ..data import ImageDataset
        from ..train import train_score_model

        model, _ = train_score_model(ImageDataset(train, name="audit"), sigma_s, epochs=epochs, seed=seed,
                                     device=device, progress=progress)
        return (lambda v: model.score(v).detach().to(torch.float64)), False
    if score.startswith("ddpm:"):
        from ..bounds import ddpm_score
        from ..nn.ddpm import load_ddpm

        unet, sched = load_ddpm(score[len("ddpm:"):])
        return ddpm_score(unet, sched, sigma_s, in_shape=tuple(train.shape[1:])), False
    raise UnknownOptionError(f"score must be one of {SCORES}, got {score!r}.")


def _bounds(wrapped, prior, score_fn, exact: bool, cfg: dict, d: int, m: int, sigma_s: float, seed: int, device,
            progress: bool, scripted: bool, sigmas, path: str = "auto"):
    """``({σ: BoundRow}, score quality, path)``: the dense path (d×d E[G] and S) where it fits, else the
    low-rank path with ``S̃ = I/σ_s²``. Why S̃ is conservative: π = (1/n)Σ N(x_i, σ_s²I) has score
    ``s = Σ_i r_i(x) s_i(x)`` (r_i the posterior weights), so ``s sᵀ ⪯ Σ_i r_i s_i s_iᵀ`` pointwise (vvᵀ is convex)
    and ``S = E_π[s sᵀ] ⪯ (1/n) Σ_i E_{N(x_i, σ_s²I)}[s_i s_iᵀ] = I/σ_s²``; every bound decreases as S grows, so
    bounds with S̃ ⪰ S are valid, only lower."""
    from ..bounds import ceiling, estimate_fisher, estimate_score_matrix, score_quality
    from ..bounds.fisher import default_heldout
    from ..experiments.bound import bound_row, choose_path, lowrank_rows

    n_fisher = cfg["k"] + default_heldout(cfg["k"])  # k inputs for E[G] and its saturation check's held-out ones
    if choose_path(d, cfg["k"] * m, path) == "dense":
        n_s = max(cfg["score_samples"], 2 * d + 100)  # S = E[s sᵀ] is d×d: a mean of fewer than d terms is singular
        samples = prior.sample(max(n_fisher, n_s), generator=torch.Generator().manual_seed(seed + 1))
        with torch.no_grad():
            S = estimate_score_matrix(prior, n=n_s, seed=seed + 2) if exact else estimate_score_matrix(score_fn,
                                                                                                       samples[:n_s])
        quality = score_quality(S, samples[:n_s]).to_dict()
        quality.pop("eigenvalues", None)
        fisher = estimate_fisher(wrapped, samples[:n_fisher].to(torch.float32), k=cfg["k"], seed=seed,
                                 method="loop" if scripted else "auto", device=device, progress=progress)
        top = ceiling(S)
        return {sigma: bound_row(fisher, S, top, sigma, 0.0) for sigma in sigmas}, quality, "dense (d×d E[G] and S)"
    from ..bounds.structured import StructuredScore

    S = StructuredScore.isotropic(1.0 / sigma_s**2, d)
    samples = prior.sample(n_fisher, generator=torch.Generator().manual_seed(seed + 1)).to(torch.float32)
    f, rows, streamed = lowrank_rows(wrapped, samples, S, sigmas, cfg["k"], m, 0.0, seed, device, progress)
    quality = {"structure": "isotropic S̃ = I/σ_s² ⪰ S (convexity of Fisher information: conservative)",
               "sigma_s": sigma_s, "note": "the d×d check of §6.4.1 is not computed at this size"}
    path = (f"low-rank (Gram of the {f.n} Jacobian rows{', streamed through a file' if streamed else ''}; "
            f"S̃ = I/σ_s² ⪰ S; E[G] sample {f.saturation.describe()})")
    return dict(zip(sigmas, rows)), quality, path


class _Stages:
    """Wall seconds and the process's peak memory so far at the end of each stage of the audit."""

    def __init__(self):
        from .budget import peak_rss_bytes

        self._peak, self._last, self.rows = peak_rss_bytes, time.perf_counter(), {}

    def done(self, name: str) -> None:
        now = time.perf_counter()
        prev = self.rows.get(name, {}).get("seconds", 0.0)
        self.rows[name] = {"seconds": prev + now - self._last, "peak_gib": self._peak() / 2**30}
        self._last = now


def _prepare(model, data, weights, normalize, device):
    """``(module, images, normalisation, warning)``: the user's model (wrapped in its normalisation) and images."""
    from ..nn.normalize import first_batchnorm_mismatch, with_normalization

    images = load_images(data)
    module, norm = with_normalization(load_model(model, weights), normalize, int(images.shape[1]))
    warning = first_batchnorm_mismatch(module, images[:min(64, len(images))].to(
        next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)))
    return module.to(device), images, norm, warning


def _plan(wrapped, images, train, cfg, m, sigmas, score_fn, path, device, max_minutes, announce):
    """``(cfg, path, estimate)``: the representation chosen, the time and memory estimate (announced before the
    work starts) and the preset cut to ``max_minutes`` when given."""
    from ..bounds.fisher import default_heldout
    from ..experiments.bound import choose_path, stream_rows
    from .budget import estimate, fit_budget

    d = int(images[0].numel())
    path = choose_path(d, cfg["k"] * m, path, max_dense_d=DENSE_MAX_D)
    streamed = path == "lowrank" and stream_rows(d, (cfg["k"] + default_heldout(cfg["k"])) * m)
    est = estimate(wrapped, images, train, cfg, m=m, path=path, streamed=streamed, sigmas=sigmas, score_fn=score_fn,
                   device=device)
    if max_minutes is not None:
        cut, changed = fit_budget(est, cfg, max_minutes, len(images))
        if changed:
            cfg = cut
            if announce:
                announce(f"--max-minutes {max_minutes:g}: k = {cfg['k']}, MAP steps {cfg['map_steps']}, decoder epochs "
                         f"{cfg['decoder_epochs']}, {cfg['n_attack']} attacked images")
    if announce:
        announce(est.describe(cfg))
    return cfg, path, est


def _attack_row(wrapped, row, held, train, e, score_fn, sigma, cfg, in_shape, seed, baseline, stages):
    """``(SigmaAudit, reconstructions)`` at one σ: the registry's attacks on embeddings (the MAP attack with the
    prior's score, the learned decoder trained on the other images) against the bound."""
    from ..attacks.registry import run_attack
    from ..metrics import mse
    from ..observations import EmbeddingRelease, Knowledge

    x = held.reshape(len(held), -1)
    obs = EmbeddingRelease(e, wrapped, sigma, in_shape)
    know = Knowledge(score=score_fn, images=train, oracle=x, exact_prior=False)
    attacks, recon = [], {}
    for name, label, options in (("map", "MAP (prior score)", {"steps": cfg["map_steps"], "betas": cfg["betas"]}),
                                 ("decoder", "learned decoder", {"epochs": cfg["decoder_epochs"], "seed": seed})):
        r = run_attack(name, obs, know, options)
        est = mse(r.images, x)
        attacks.append(AttackScore(label, est.mean, est.stderr, {"beta": r.detail["beta"]} if "beta" in r.detail
                                   else {}))
        recon[label] = r.images
        stages.done("MAP" if name == "map" else "decoder")
    violated = any(a.mse < row.bound - 3 * (a.stderr if a.stderr == a.stderr else 0.0) for a in attacks)
    bound = {"name": row.bound_name, "value": row.bound, "point": row.bound_point, "stderr": row.bound_stderr,
             "level": row.level, "rank": row.rank, "kind": row.kind, "saturation": row.saturation,
             "plugin": row.bound_plugin}
    return SigmaAudit(sigma, bound, row.maeng, row.ceiling, None if row.rtc_infinite else row.rtc, attacks,
                      baseline, violated), recon


def encoder(model, data, *, sigmas=(0.0,), preset: str = "smoke", score: str = "exact", sigma_s: float = 0.1,
            weights=None, device=None, seed: int = 0, progress: bool = False, normalize=None,
            path: str = "auto", max_minutes: float | None = None, announce=None) -> EncoderAudit:
    """Audit ``model`` (an ``nn.Module``, or a spec for :func:`~reconguard.audit.loading.load_model`) on ``data``
    (a tensor, an array, an image folder, a ``.npy`` / ``.npz`` file, or ``"digits"``). ``normalize``: the pixel
    convention the model expects (``imagenet``, ``symmetric``, ``MEANS:STDS``; :mod:`reconguard.nn.normalize`),
    applied inside the audited model so that images, attacks and MSE stay in [0, 1] pixels. ``path``: ``auto``
    (dense d×d E[G] and S where they fit in half the memory, else low-rank), ``dense`` or ``lowrank``.
    Before the work starts, the time and memory estimate of :mod:`reconguard.audit.budget` goes to ``announce``
    (e.g. ``print``); ``max_minutes`` cuts the preset to fit that budget."""
    from ..checks import check_sigma
    from ..data import smoothed_empirical_prior
    from ..metrics import mse

    if preset not in PRESETS:
        raise UnknownOptionError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}.")
    cfg = PRESETS[preset]
    start, stages = time.perf_counter(), _Stages()
    sigmas = sorted({check_sigma(s) for s in sigmas})
    name = model if isinstance(model, str) else type(model).__name__
    device = torch.device(device) if device is not None else torch.device("cpu")
    module, images, norm, warning = _prepare(model, data, weights, normalize, device)
    wrapped, m = probe(module, images)
    n = len(images)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_attack = min(cfg["n_attack"], max(2, n // 4))
    held, train = images[perm[:n_attack]], images[perm[n_attack:]]
    if len(train) < 2:
        raise ParameterError(f"{n} images leave too few to build the prior from; give more images.")
    in_shape, d = tuple(images.shape[1:]), int(images[0].numel())
    prior = smoothed_empirical_prior(train, sigma_s, name="your images")
    score_fn, exact = _score(score, prior, train, sigma_s, cfg["score_epochs"], seed, device, progress)
    stages.done("load, prior and score")
    cfg, path, est = _plan(wrapped, images, train, cfg, m, sigmas, score_fn, path, device, max_minutes, announce)
    if cfg["n_attack"] < n_attack:
        n_attack = cfg["n_attack"]
        held, train = images[perm[:n_attack]], images[perm[n_attack:]]
    stages.done("estimate")
    bound_rows, quality, bound_path = _bounds(wrapped, prior, score_fn, exact, cfg, d, m, sigma_s, seed, device,
                                              progress, isinstance(module, torch.jit.ScriptModule), sigmas, path)
    stages.done("E[G] and bounds")
    warnings = (warning,) if warning else ()
    if any(r.kind == NOT_DIFFERENTIABLE for r in bound_rows.values()):
        warnings += ("the model's output changes where autograd's Jacobian says it does not (sign, rounding, integer "
                     "codes, detach / no_grad / NumPy, noise inside forward): every bound is 0, and the gradient "
                     "attack (MAP) sees no gradient — only the learned decoder measures it, so a poor attack here is "
                     "no evidence of privacy.",)
    x = held.reshape(n_attack, -1)
    base = mse(train.reshape(len(train), -1).mean(0, keepdim=True).expand_as(x), x)
    baseline = AttackScore("baseline: the mean image (a guess)", base.mean, base.stderr)
    rows, examples = [], {}
    for i, sigma in enumerate(sigmas):
        with torch.no_grad():
            e = wrapped(held.to(device)).float().cpu()
        e = e + sigma * torch.randn(e.shape, generator=torch.Generator().manual_seed(seed + 100 + i))
        audit_row, recon = _attack_row(wrapped, bound_rows[sigma], held, train, e, score_fn, sigma, cfg, in_shape,
                                       seed, baseline, stages)
        rows.append(audit_row)
        best = audit_row.best.name
        examples[sigma] = {"originals": held[:8], "reconstructions": recon[best][:8].reshape(-1, *in_shape).clamp(0, 1),
                           "attack": best}
    budget = {"estimate_seconds": est.seconds(cfg), "estimate_peak_gib": est.peak_bytes(cfg) / 2**30,
              "max_minutes": max_minutes, "settings": {k: cfg[k] for k in ("k", "map_steps", "decoder_epochs",
                                                                            "n_attack")}}
    return EncoderAudit(str(name), in_shape, d, m, n, n_attack, preset, prior.name,
                        score, quality, bound_path, rows, time.perf_counter() - start, examples,
                        norm, warnings,
                        stages.rows, budget)
