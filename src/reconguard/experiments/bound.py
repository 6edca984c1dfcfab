"""Every MSE bound for one encoder and one prior, at several noise levels (what ``reconguard bound`` prints).

One E[G] estimate and one S serve every σ: Corollary 1 (σ > 0) or Corollary 2 (σ = 0),
Theorem 1 (Maeng et al.), the ceiling and RTC. ``bound`` is the value to compare attacks with: when
E[G] or S was sampled, the one-sided lower confidence bound at ``level``; ``bound_point`` is the
plug-in value and ``bound_stderr`` its jackknife s.e. (:mod:`reconguard.bounds.sampling`).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

import torch
from torch import nn

from ..bounds import (DEFAULT_LEVEL, FisherEstimate, ceiling, estimate_fisher, estimate_score_matrix, maeng_bound,
                      mse_bound, noiseless_mse_bound, rtc)
from ..bounds.fisher import default_heldout
from ..bounds.representation import PATHS, choose_path, stream_rows  # noqa: F401 — re-exported here
from ..io import discard_tmp
from ..checks import check_sigma, check_tau
from ..data import GaussianMixturePrior
from ..encoders import split_noise
from ..results import Result


@dataclass(frozen=True)
class BoundRow(Result):
    sigma: float
    bound_name: str
    bound: float
    maeng: float
    ceiling: float
    rtc: float
    rank: int
    tau: float | None
    _: KW_ONLY  # (keyword-only, so that rows extending BoundRow can add required fields)
    bound_point: float | None = None   # plug-in value (= bound when E[G] and S are exact)
    bound_stderr: float | None = None  # jackknife s.e. of the plug-in value
    level: float | None = None         # confidence level of ``bound``
    cut: str | None = None             # the spectrum's zero threshold rule
    kind: str = ""                     # the rule that produced ``bound`` (Bound.kind)
    saturation: str = ""               # the E[G] sample's saturation check, in words
    guarantee: bool = True             # False for the τ > 0 heuristic: never counted as a bound that held
    bound_plugin: float | None = None  # the formula at the estimates as they stand (the paper's procedure)

    @property
    def rtc_infinite(self) -> bool:
        """RTC = ∞ (the bound is 0: nothing is guaranteed); JSON writes ``rtc: null`` with this flag."""
        return self.rtc == float("inf")

    def to_dict(self):
        out = super().to_dict()
        if self.rtc_infinite:
            out["rtc"] = None
        out["rtc_infinite"] = self.rtc_infinite
        return out


def row_from(b, maeng, top, sigma: float, tau, fallback_rank: int) -> BoundRow:
    """A ``BoundRow`` from Corollary 1 / 2 ``b`` (a ``Bound``), Theorem 1 ``maeng`` and the ceiling ``top``."""
    return BoundRow(sigma, b.name, b.value, maeng.value, top.value, rtc(b, top).value,
                    b.rank if b.rank is not None else fallback_rank, tau if sigma == 0 else None,
                    bound_point=b.point, bound_stderr=b.stderr, level=b.level, cut=b.cut, kind=b.kind,
                    saturation=(b.saturation or {}).get("description", ""), guarantee=b.guarantee,
                    bound_plugin=b.plugin)


def bound_row(fisher: FisherEstimate, S, top, sigma: float, tau: float = 0.0,
              level: float = DEFAULT_LEVEL) -> BoundRow:
    """Corollary 1 (σ > 0) or Corollary 2 (σ = 0), Theorem 1, the ceiling ``top`` and RTC at one σ."""
    b = mse_bound(fisher, S, sigma, level=level) if sigma > 0 else noiseless_mse_bound(fisher, S, tau, level=level)
    return row_from(b, maeng_bound(fisher, S, sigma, level=level), top, sigma, tau, fisher.m)


@dataclass(frozen=True)
class BoundReport(Result):
    encoder: str
    prior: str
    d: int
    m: int
    fisher: FisherEstimate
    rows: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)


def default_tau(fisher: FisherEstimate) -> float:
    """τ = 0: the null space up to float64 round-off, exact or estimated E[G] alike.

    The paper's τ = 1e-4 (section 6.1) calls directions with eigenvalues below 1e-4·λ_max null; an
    attacker of a noise-free encoder still reads them, so a larger τ can only raise Corollary 2
    above what is guaranteed. Ask for it explicitly (``--tau``) to reproduce the paper's figures."""
    return 0.0


def compute_bounds(encoder: nn.Module, prior: GaussianMixturePrior, sigmas=(0.0, 1e-3), *, tau: float | None = None,
                   k: int = 256, score_samples: int = 20000, seed: int = 0, device=None,
                   progress: bool = False, path: str = "auto") -> BoundReport:
    """Bounds of ``encoder`` under ``prior`` for each σ in ``sigmas`` (a ``Noisy`` encoder's own σ is added).

    ``path``: ``dense`` (d×d E[G] and S), ``lowrank`` (E[G] as the Gram of its Jacobian rows, S structured —
    only for priors whose S is exactly isotropic, N(μ, η²I)), or ``auto`` (dense when it fits)."""
    enc, own_sigma = split_noise(encoder)
    sigmas = sorted({check_sigma(s) for s in sigmas} | ({own_sigma} if own_sigma > 0 else set()))
    d = prior.dim
    if not hasattr(enc, "exact_fisher"):
        with torch.no_grad():
            x0 = prior.sample(1, generator=torch.Generator().manual_seed(0))
            shape = getattr(enc, "in_shape", None)
            p0 = next(iter(enc.parameters()), None)
            x0 = x0.reshape(1, *shape) if shape is not None else x0
            m = int(enc(x0.to(dtype=p0.dtype if p0 is not None else torch.float32,
                                 device=p0.device if p0 is not None else "cpu")).numel())
    else:
        m = int(getattr(enc, "out_dim", d))
    path = choose_path(d, k * m, path)
    if path == "lowrank":
        return _lowrank_bounds(enc, prior, sigmas, tau, k, m, seed, device, progress)
    g = torch.Generator().manual_seed(int(seed))
    data = None if hasattr(enc, "exact_fisher") else prior.sample(k + default_heldout(k), generator=g)
    fisher = estimate_fisher(enc, data, k=k, seed=seed, device=device, progress=progress)
    tau = default_tau(fisher) if tau is None else check_tau(tau)
    S = estimate_score_matrix(prior, n=score_samples, seed=seed + 1)
    top = ceiling(S)
    rows = [bound_row(fisher, S, top, sigma, tau) for sigma in sigmas]
    return BoundReport(type(enc).__name__, prior.name, fisher.d, fisher.m, fisher, rows,
                       {"k": fisher.k, "heldout": fisher.heldout, "saturation": fisher.saturation.to_dict(),
                        "tau": tau, "score_samples": score_samples, "seed": seed,
                        "fisher_method": fisher.method, "exact_fisher": fisher.exact,
                        "path": "dense (d×d E[G] and S)"})


def lowrank_rows(enc, data, S, sigmas, k: int, m: int, tau: float = 0.0, seed: int = 0, device=None,
                 progress: bool = False):
    """``(E[G] as a LowRankFisher, [BoundRow per σ], streamed)``: E[G] of ``enc`` from ``k`` of ``data`` (the rest
    held out; ``m`` the embedding size) and every bound under the structured ``S``, the Jacobian rows streamed through a temporary file when
    they would not fit in memory (removed before returning)."""
    import tempfile

    from ..bounds import ceiling, maeng_bound, mse_bound, noiseless_mse_bound
    from ..bounds.lowrank import estimate_fisher_lowrank

    store = (tempfile.mkdtemp(prefix=".reconguard-rows-", suffix=".tmp")
             if stream_rows(int(data[0].numel()), data.shape[0] * m) else None)
    try:
        f = estimate_fisher_lowrank(enc, data.float(), k=k, seed=seed, device=device, progress=progress, store=store)
        top = ceiling(S)
        rows = []
        for sigma in sigmas:  # while the rows (in memory or a file) are at hand
            b = mse_bound(f, S, sigma) if sigma > 0 else noiseless_mse_bound(f, S, tau)
            rows.append(row_from(b, maeng_bound(f, S, sigma), top, sigma, tau, f.m))
        return f, rows, store is not None
    finally:
        if store is not None:
            discard_tmp(store)


def _lowrank_bounds(enc, prior, sigmas, tau, k, m, seed, device, progress) -> BoundReport:
    from ..bounds.lowrank import StructuredScore
    from ..errors import ParameterError

    if getattr(prior, "n_components", 0) != 1 or not hasattr(prior, "std"):
        raise ParameterError(f"at d = {prior.dim} the d×d score matrix of {prior.name} does not fit; the low-rank "
                             "path needs a prior whose S is exactly isotropic (--data gaussian), or a smaller size.")
    S = StructuredScore.isotropic(1.0 / prior.std**2, prior.dim)
    shape = getattr(enc, "in_shape", None)
    data = prior.sample(k + default_heldout(k), generator=torch.Generator().manual_seed(int(seed)))
    data = data.reshape(data.shape[0], *shape) if shape is not None else data
    tau = 0.0 if tau is None else check_tau(tau)
    f, rows, streamed = lowrank_rows(enc, data, S, sigmas, k, m, tau, seed, device, progress)
    how = "streamed through a file" if streamed else "in memory"
    return BoundReport(type(enc).__name__, prior.name, f.d, f.m, f, rows,
                       {"k": f.k, "heldout": f.heldout, "saturation": f.saturation.to_dict(), "tau": tau, "seed": seed,
                        "fisher_method": f.method, "exact_fisher": False,
                        "path": f"low-rank (Gram of the {f.n} stacked Jacobian rows, {how}; isotropic S = I/η² "
                                "exactly)"})
