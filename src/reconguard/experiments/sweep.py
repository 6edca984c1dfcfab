"""Bounds against attacks over a set of encoders, priors and noise levels — the experiment behind
the spectral-bounds paper's Figures 2, 4, 5, 8, 9, 10 and 11 (sections 6.2–6.5).

For every dataset (prior) × encoder × σ: E[G] from ``k`` prior samples (exact for linear
encoders), Corollary 1 (σ > 0) or Corollary 2 (σ = 0, null space at ``tau``), Theorem 1, the
ceiling and RTC; then every attack asked for on ``n_attack`` fresh prior samples: ``mmse``
(Bayes-optimal; linear encoders on an exact prior), ``map`` (optimisation with the prior's score)
and ``decoder`` (a network trained on prior samples). Lists in ``ks`` / ``taus`` repeat the bounds
for each value (Figures 8 and 9) over the same attacks.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field

import torch
from torch import nn

from ..attacks.registry import applies, attack_names, run_attack
from ..bounds import ceiling, estimate_fisher, estimate_score_matrix, psi_terms
from ..data import GaussianMixturePrior
from ..encoders import SplitCNN, SplitResNet18, load_encoder, random_linear, skewed_linear
from ..errors import ParameterError, UnknownOptionError
from ..metrics import mse
from ..observations import EmbeddingRelease, Knowledge
from .params import SweepParams
from ..results import RecipeResult
from ..bounds.fisher import default_heldout
from .bound import BoundRow, bound_row

FAMILIES = ("linear", "skewed", "splitcnn", "resnet18")
ATTACKS = attack_names(EmbeddingRelease, runnable=True)  # the registry's attacks on embeddings: mmse, map, decoder
_SPEC_KEYS = {"family", "m", "alpha", "split", "weights"}


@dataclass(frozen=True)
class EncoderSpec:
    family: str
    m: int | None = None
    alpha: float | None = None
    split: str | None = None
    weights: str = "random"  # random | trained | path to a torchvision-format state dict (resnet18)

    @property
    def label(self) -> str:
        if self.family == "linear":
            return f"linear m={self.m}"
        if self.family == "skewed":
            return f"skewed α={self.alpha:g}"
        w = self.weights if self.weights in ("random", "trained") else "loaded"
        return f"{self.family} {self.split} m={self.m} ({w})"

    @property
    def axis(self) -> tuple[str, float]:
        return ("alpha", float(self.alpha)) if self.family == "skewed" else ("m", float(self.m))


def expand_encoders(specs: list[dict]) -> list[EncoderSpec]:
    """Each spec may give lists for m / alpha / split / weights: one encoder per combination."""
    out = []
    for spec in specs:
        unknown = set(spec) - _SPEC_KEYS
        if unknown:
            raise UnknownOptionError(f"encoder spec has unknown keys {sorted(unknown)}; allowed: {sorted(_SPEC_KEYS)}.")
        family = spec.get("family")
        if family not in FAMILIES:
            raise UnknownOptionError(f"encoder family {family!r} is not one of {FAMILIES}.")
        as_list = {k: (v if isinstance(v, list) else [v]) for k, v in spec.items() if k != "family"}
        keys = list(as_list)
        for combo in itertools.product(*as_list.values()):
            out.append(EncoderSpec(family, **dict(zip(keys, combo))))
    return out


@dataclass(frozen=True)
class SweepPoint(BoundRow):
    """One dataset × encoder × σ (× k × τ): the bounds (``BoundRow``) and each attack's MSE/d."""

    dataset: str
    encoder: str
    family: str
    axis: str
    x: float
    m: int
    d: int
    k: int
    attacks: dict = field(default_factory=dict)  # name → {"mse", "stderr", "n", ["lpips", "lpips_stderr"], ...}
    lpips_bound: float | None = None             # Theorem 2 (σ > 0) / Corollary 3 (σ = 0) with Ψ = LPIPS: the
    #                                              lower confidence bound over the probe inputs
    lpips_bound_point: float | None = None       # its plug-in value
    lpips_bound_stderr: float | None = None      # jackknife s.e. over the probe inputs

    @property
    def attack_mse(self) -> float | None:
        """The strongest attack's MSE/d (None when no attack ran)."""
        values = [a["mse"] for a in self.attacks.values()]
        return min(values) if values else None

    @property
    def attack_stderr(self) -> float | None:
        if not self.attacks:
            return None
        return min(self.attacks.values(), key=lambda a: a["mse"])["stderr"]

    @property
    def beaten(self) -> bool | None:
        """An attack's MSE below the MSE bound (or LPIPS below the LPIPS bound, when computed) by more than 3 of the
        attack's standard errors. The bounds are already lower confidence bounds (their own sampling error is in
        them); the attack's Monte-Carlo error is allowed for with 3 of its standard errors."""
        if not self.attacks:
            return None

        def ok(value, se, bound):
            se = se if math.isfinite(se) else 0.0
            return value - bound * (1 - 1e-9) >= -3 * se

        mse_ok = all(ok(a["mse"], a["stderr"], self.bound) for a in self.attacks.values())
        lp_ok = self.lpips_bound is None or all(ok(a["lpips"], a["lpips_stderr"], self.lpips_bound)
                                                for a in self.attacks.values() if "lpips" in a)
        return not (mse_ok and lp_ok)

    @property
    def holds(self) -> bool | None:
        """The guarantee held: no attack beat the bound (``beaten``). None where no attack ran, and for the τ > 0
        heuristic, which is not a guarantee and never counts as held."""
        return None if self.beaten is None or not self.guarantee else not self.beaten

    @property
    def margin_se(self) -> float | None:
        """(strongest attack − plug-in bound) in standard errors of their difference; a negative value on
        a row that ``holds`` is "within noise"."""
        if not self.attacks:
            return None
        a = min(self.attacks.values(), key=lambda a: a["mse"])
        point = self.bound_point if self.bound_point is not None else self.bound
        se = math.hypot(a["stderr"] if math.isfinite(a["stderr"]) else 0.0, self.bound_stderr or 0.0)
        return (a["mse"] - point) / se if se > 0 else (math.inf if a["mse"] >= point else -math.inf)

    def to_dict(self):
        return {**super().to_dict(), "attack_mse": self.attack_mse, "holds": self.holds, "beaten": self.beaten,
                "margin_se": self.margin_se}


@dataclass(frozen=True)
class SweepResult(RecipeResult):
    points: list = field(default_factory=list)
    elapsed_s: float = 0.0
    examples: dict = field(default_factory=dict)  # (dataset, sigma) -> {"originals", "rows": [(label, rtc, recon)]}
    extras: dict = field(default_factory=dict)    # e.g. score_quality per dataset
    _skip_in_dict = ("examples",)

    def datasets(self) -> list[str]:
        return list(dict.fromkeys(p.dataset for p in self.points))

    def sigmas(self) -> list[float]:
        return sorted(set(p.sigma for p in self.points))

    def select(self, dataset: str, sigma: float, **match) -> list[SweepPoint]:
        pts = [p for p in self.points if p.dataset == dataset and p.sigma == sigma
               and all(getattr(p, k) == v for k, v in match.items())]
        return sorted(pts, key=lambda p: (p.family, p.x))

    @property
    def violations(self) -> int:
        return sum(1 for p in self.points if p.holds is False)

    @property
    def heuristic_beaten(self) -> tuple[int, int]:
        """``(beaten, rows)`` among the τ > 0 heuristic rows (not guarantees; section 6.4.3)."""
        rows = [p for p in self.points if not p.guarantee and p.beaten is not None]
        return sum(1 for p in rows if p.beaten), len(rows)


def build_encoder(spec: EncoderSpec, in_shape: tuple[int, int, int], seed: int, train_data=None,
                  train_epochs: int = 5, progress: bool = False, device=None) -> nn.Module:
    """The encoder of ``spec`` on ``device`` (trained there first when ``weights`` is ``trained``)."""
    return _build(spec, in_shape, seed, train_data, train_epochs, progress, device).to(device or "cpu")


def _build(spec, in_shape, seed, train_data, train_epochs, progress, device) -> nn.Module:
    d = in_shape[0] * in_shape[1] * in_shape[2]
    if spec.family == "linear":
        return random_linear(d, int(spec.m), seed=seed)
    if spec.family == "skewed":
        return skewed_linear(d, float(spec.alpha), seed=seed)
    weights = spec.weights
    if weights not in ("random", "trained") and spec.family == "splitcnn":
        enc = load_encoder(weights)  # a `reconguard train-encoder` file
        if enc.in_shape != tuple(in_shape):
            raise ParameterError(f"{weights}: the encoder takes {enc.in_shape}, the dataset gives {tuple(in_shape)}.")
    elif spec.family == "splitcnn":
        enc = SplitCNN(spec.split or "middle", int(spec.m), in_shape, seed=seed)
    else:
        path = None if weights in ("random", "trained") else weights
        enc = SplitResNet18(spec.split or "middle", int(spec.m), in_shape, seed=seed, weights=path)
    if weights == "trained":
        if train_data is None:
            raise ParameterError(f"{spec.label}: trained weights need a labelled dataset (digits, mnist, cifar10).")
        from ..train import fit

        n = len(train_data)
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        cut = max(1, int(0.9 * n))
        fit(nn.Sequential(enc, enc.downstream()), train_data.subset(perm[:cut]), train_data.subset(perm[cut:]),
            epochs=train_epochs, seed=seed, progress=progress, device=device)
    for p in enc.parameters():
        p.requires_grad_(False)
    return enc.eval()


def attack_sizes(n_attack, names) -> dict:
    """``n_attack`` is one number for every attack or a mapping attack → number of inputs."""
    if isinstance(n_attack, dict):
        unknown = set(n_attack) - set(ATTACKS)
        if unknown:
            raise UnknownOptionError(f"n_attack names unknown attacks {sorted(unknown)}.")
        return {a: int(n_attack.get(a, 64)) for a in names}
    return {a: int(n_attack) for a in names}


def _lpips_of(lp, rec, x, in_shape, cap: int = 256) -> dict:
    """Mean LPIPS (± s.e.) over at most ``cap`` reconstructions (VGG on every image is the costly part)."""
    dev = lp.shift.device
    rec, x = rec[:cap].to(dev, torch.float32), x[:cap].to(dev, torch.float32)
    with torch.no_grad():
        v = lp(rec.reshape(-1, *in_shape), x.reshape(-1, *in_shape)).to(torch.float64).cpu()
    se = float(v.std()) / math.sqrt(v.shape[0]) if v.shape[0] > 1 else math.nan
    return {"lpips": float(v.mean()), "lpips_stderr": se}


def _attack_options(name: str, cfg) -> dict:
    """The recipe's settings of attack ``name`` (its options dataclass in :mod:`reconguard.attacks.registry`)."""
    return {"map": {"steps": cfg.map_steps},
            "decoder": {"epochs": cfg.decoder_epochs, "width": cfg.decoder_width, "train": cfg.decoder_train,
                        "seed": cfg.seed}}.get(name, {})


def _run_attacks(names, enc, spec, prior, score_fn, x_all, sizes, sigma, in_shape, cfg, g,
                 exact_prior, lp=None, device=None) -> tuple[dict, dict]:
    """Each attack's MSE/d on the first ``sizes[name]`` of ``x_all`` (and its reconstructions, for the grids)."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    dtype = torch.float64 if spec.family in ("linear", "skewed") else torch.float32  # W is float64: keep exactness
    with torch.no_grad():
        e_all = enc(x_all.to(device=device, dtype=dtype)).cpu()
    if sigma > 0:
        e_all = e_all + sigma * torch.randn(e_all.shape, generator=g, dtype=e_all.dtype)
    results, recons = {}, {}
    for name in names:
        x, e = x_all[:sizes[name]], e_all[:sizes[name]]
        obs = EmbeddingRelease(e, enc, sigma, in_shape)
        know = Knowledge(prior, score_fn, oracle=x, exact_prior=exact_prior)
        if not applies(name, obs, know):
            continue
        r = run_attack(name, obs, know, _attack_options(name, cfg))
        rec = r.images
        est = mse(rec, x)
        results[name] = {"mse": est.mean, "stderr": est.stderr, "n": est.n, **r.detail}
        if lp is not None:
            results[name].update(_lpips_of(lp, rec, x, in_shape))
        recons[name] = rec
    return results, recons


def _restore_unit(saved: dict, dataset: str, examples: dict | None) -> list:
    """The points (and example rows, into ``examples``) of one encoder finished by an interrupted run."""
    from .units import restore

    points = []
    for d_ in saved["points"]:
        d_ = dict(d_)
        if d_.get("rtc") is None:
            d_["rtc"] = math.inf
        points.append(restore(SweepPoint, d_))
    if examples is not None:
        for sigma, label, rtc_val, rec in saved["examples"]:
            examples[(dataset, float(sigma))]["rows"].append((label, rtc_val, rec))
    return points


def run_sweep(dataset: str, prior: GaussianMixturePrior, in_shape: tuple[int, int, int], encoders: list[EncoderSpec],
              cfg: SweepParams | None = None, *, score_fn=None, S: torch.Tensor | None = None, exact_prior: bool = True,
              labelled=None, progress=None, examples: dict | None = None, device=None, units=None) -> list[SweepPoint]:
    """Sweep ``encoders`` × ``cfg.sigmas`` (× ``cfg.ks`` × ``cfg.taus``) on one prior; see the module docstring. The
    recipe's typed settings ``cfg`` (``SweepParams``) come whole: its attacks, attacked samples, score samples,
    seed, examples shown and ``lpips`` (``{"trunk_weights": path or None, "probes": 16, "n_inputs": 32}``: the
    LPIPS Ψ-bounds, Theorem 2 / Corollary 3 at ``taus[0]``, and each attack's LPIPS)."""
    cfg = cfg or SweepParams()
    sigmas, attacks, ks, taus = list(cfg.sigmas), tuple(cfg.attacks), tuple(cfg.ks), tuple(cfg.taus)
    n_attack, score_samples, seed, n_examples, lpips = cfg.n_attack, cfg.score_samples, cfg.seed, cfg.n_examples, cfg.lpips
    lp = None
    if lpips:
        from ..metrics import LPIPS
        lp = LPIPS(lpips.get("trunk_weights")).to(device or "cpu")
    d = prior.dim
    score_fn = score_fn or prior.score
    if S is None:
        S = estimate_score_matrix(prior, n=score_samples, seed=seed)
    top = ceiling(S)
    sizes = attack_sizes(n_attack, attacks)
    x = prior.sample(max(sizes.values(), default=1), generator=torch.Generator().manual_seed(seed + 17))
    # k inputs for E[G] and the held-out inputs of its saturation check
    fisher_pool = prior.sample(max(ks) + default_heldout(max(ks)),
                               generator=torch.Generator().manual_seed(seed + 29)).to(torch.float32)
    shown = min([n_examples] + list(sizes.values()))
    if examples is not None:
        for sigma in sigmas:
            examples.setdefault((dataset, float(sigma)), {"originals": x[:shown], "rows": []})
    from .units import UnitCache, plain

    units = units or UnitCache(None, {})
    points = []
    for i, spec in enumerate(encoders):
        key = f"{dataset}|{i}|{spec}"
        saved = units.get(key)
        if saved is not None:  # a finished encoder of an interrupted run (--resume)
            points += _restore_unit(saved, dataset, examples)
            if progress is not None:
                progress.update(len(sigmas))
            continue
        first_point, unit_examples = len(points), []
        enc = build_encoder(spec, in_shape, seed + 1000 * i + 1, labelled, cfg.train_epochs,
                            device=device)
        fishers = {k: estimate_fisher(enc, fisher_pool, k=min(k, fisher_pool.shape[0]), seed=seed) for k in ks}
        axis, xval = spec.axis
        terms = None
        if lp is not None:
            linear = spec.family in ("linear", "skewed")
            terms = psi_terms(fishers[max(ks)], lp.psi(in_shape), fisher_pool, score_fn,
                              encoder=None if linear else enc, tau=float(taus[0]),
                              probes=int(lpips.get("probes", 16)), n_inputs=int(lpips.get("n_inputs", 32)), seed=seed,
                              device=device)
        for j, sigma in enumerate(sigmas):
            g = torch.Generator().manual_seed(seed + 7919 * i + 31 * j)
            results, recons = _run_attacks(attacks, enc, spec, prior, score_fn, x, sizes, float(sigma), in_shape,
                                           cfg, g, exact_prior, lp, device)
            lp_b = terms.bound(float(sigma)) if terms is not None else None
            for k, fisher in fishers.items():
                for tau in (taus if sigma == 0 else taus[:1]):
                    row = bound_row(fisher, S, top, float(sigma), float(tau))
                    points.append(SweepPoint(**dataclasses.asdict(row), dataset=dataset, encoder=spec.label,
                                             family=spec.family, axis=axis, x=xval, m=fisher.m, d=d,
                                             k=fisher.k, attacks=results,
                                             lpips_bound=lp_b.value if lp_b else None,
                                             lpips_bound_point=lp_b.point if lp_b else None,
                                             lpips_bound_stderr=lp_b.stderr if lp_b else None))
            if examples is not None and recons:
                best = min(results, key=lambda a: results[a]["mse"])
                rtc_val = bound_row(fishers[max(ks)], S, top, float(sigma), float(taus[0])).rtc
                examples[(dataset, float(sigma))]["rows"].append((f"{spec.label} [{best}]", rtc_val,
                                                                  recons[best][:shown]))
                unit_examples.append((float(sigma), f"{spec.label} [{best}]", rtc_val, recons[best][:shown]))
            if progress is not None:
                progress.update(1)
        units.put(key, {"points": [plain(pt) for pt in points[first_point:]], "examples": unit_examples})
    return points
