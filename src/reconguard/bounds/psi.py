"""Ψ-bounds (spectral-bounds paper, section 4, 5.1, 5.4): lower bounds on ``E‖Ψ(x̂) − Ψ(x)‖²`` for a
twice-differentiable feature map Ψ: R^d → R^k (LPIPS, or the identity).

Theorem 2 (eq. 7), with orthogonal projectors P_1 = P_r, P_2 = P_n (range / null of E[G]):

    n_g  = E‖J_Ψ P_g‖²_F,     t_g = Δ_gΨ + J_Ψ P_g s_π,     (Δ_gΨ)_i = Tr(P_g ∇²Ψ_i)
    D_ij = E⟨J_E P_i J_Ψᵀ, J_E P_j J_Ψᵀ⟩_F / σ²  +  E⟨t_i, t_j⟩
    bound = nᵀ D⁻¹ n

Corollary 3 (σ → 0): ``n_n² / E‖t_n‖²``. The expectations are over ``n_inputs`` samples of π and
estimated with Rademacher probes (section 5.4; default 16 probes × 32 inputs):
``‖A‖²_F = E_v‖A v‖²`` (JVPs of Ψ along P_g v), ``Tr(P_g H) = E_v[(P_g v)ᵀ H (P_g v)]``
(forward-over-forward second directional derivatives), and the encoder term with probes u ∈ R^k:
``E_u⟨J_E P_i J_Ψᵀu, J_E P_j J_Ψᵀu⟩`` (a VJP of Ψ, then JVPs of the encoder). Probe noise in Δ
only inflates E‖t‖², which lowers the bound (conservative).

Never overstating: the bound is a ratio of sample means (``1/T̂``), biased upward (+8 % on average
at 16 probes × 8 inputs against the exact linear-Ψ closed form). ``PsiTerms.bound`` therefore
reports the one-sided lower confidence bound at ``level`` (default 95 %) from the jackknife over the
inputs, bias-corrected, with Student's t (:func:`reconguard.bounds.sampling.block_jackknife`);
``Bound.point`` keeps the plug-in value and ``Bound.stderr`` its s.e.

Which rule holds (:mod:`reconguard.bounds.saturation`). Theorem 2 is valid for any pair of projectors when
the encoder term uses each input's own Jacobian (``encoder=``); without it, E[G] stands in for G(x), valid
only when E[G] is exact or its sample saturated. Corollary 3 needs ``J_E P_n = 0``: it holds on a null space
the saturation check confirms and, with ``encoder=``, where the measured ``E‖J_E P_n J_Ψᵀu‖²`` is round-off.
Otherwise the value is 0 (``Bound.kind`` says why). τ > 0 is the paper's heuristic (``guarantee=False``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from ..checks import as_samples, check_positive_int, check_sigma, check_tau
from ..encoders.noisy import split_noise
from ..errors import ParameterError, ShapeError
from ..results import Result
from .fisher import FisherEstimate, as_fisher, split_range_null
from .mse import Bound
from .sampling import DEFAULT_LEVEL, block_jackknife
from .saturation import NOT_DIFFERENTIABLE, SATURATION_TOL, ZERO_UNSATURATED, differentiable


def _theorem2(n: torch.Tensor, T: torch.Tensor, E: torch.Tensor, sigma: float) -> float:
    if sigma == 0:  # Corollary 3
        n_n, t_nn = float(n[1]), float(T[1, 1])
        return 0.0 if n_n <= 0 else (n_n**2 / t_nn if t_nn > 0 else math.inf)
    D = E / sigma**2 + T
    keep = n > 0  # a projector onto nothing (full rank: P_n = 0) drops out
    n, D = n[keep], D[keep][:, keep]
    try:
        return float(n @ torch.linalg.solve(D, n))
    except RuntimeError as exc:
        raise ParameterError(f"D is singular ({exc}); Theorem 2 needs D ≻ 0.") from exc


@dataclass(frozen=True)
class PsiTerms(Result):
    """Theorem 2's terms for P_r, P_n, per input (``n_i``: N×2, ``T_i``, ``E_i``: N×2×2);
    ``bound(sigma)`` averages them; its ``value`` is the jackknife lower confidence bound over the inputs."""

    n_i: torch.Tensor
    T_i: torch.Tensor
    E_i: torch.Tensor  # E⟨J_E P_i J_Ψᵀ, J_E P_j J_Ψᵀ⟩_F at σ = 1
    rank: int
    tau: float
    d: int
    k: int
    probes: int
    n_inputs: int
    saturation: dict | None = None  # the E[G] sample's check (Saturation.to_dict())
    encoder_given: bool = False  # E_i from each input's own encoder Jacobian (else E[G] stands in)
    heuristic: bool = False  # τ above float64 round-off: the paper's heuristic split
    _skip_in_dict = ("n_i", "T_i", "E_i")

    def rule(self, sigma: float) -> tuple[str, bool]:
        """``(kind, valid)``: which rule the value at σ follows, and whether it may be reported (else 0)."""
        saturated = self.saturation is None or self.saturation.get("saturated", False)
        if not differentiable(self.saturation):
            return NOT_DIFFERENTIABLE, False
        if self.heuristic:
            return (f"heuristic: {'Theorem 2' if sigma > 0 else 'Corollary 3'} with tau = {self.tau:g} "
                    "(paper section 6.4.3), not a guarantee"), True
        if sigma > 0:
            if self.encoder_given or saturated:
                return "theorem 2", True
            return "0: Theorem 2 without encoder= needs an exact or saturated E[G]", False
        if not saturated:
            return ZERO_UNSATURATED, False
        E = self.E
        if self.encoder_given and float(E[1, 1]) > SATURATION_TOL * max(float(E[0, 0] + E[1, 1]), 1e-300):
            return "0: the encoder's Jacobian has energy on the null space (Corollary 3 does not apply)", False
        return "corollary 3", True

    @property
    def n(self) -> torch.Tensor:
        return self.n_i.mean(0)

    @property
    def T(self) -> torch.Tensor:
        return self.T_i.mean(0)

    @property
    def E(self) -> torch.Tensor:
        return self.E_i.mean(0)

    def bound(self, sigma: float, level: float = DEFAULT_LEVEL) -> Bound:
        """Theorem 2 for σ > 0, Corollary 3 for σ = 0: ``value`` is the lower confidence bound at
        ``level`` (``point`` the plug-in value; ``stderr``, also ``inputs["stderr"]``, the jackknife s.e.)."""
        sigma = check_sigma(sigma)
        kind, valid = self.rule(sigma)
        value = _theorem2(self.n, self.T, self.E, sigma)
        plugin = value
        N = self.n_i.shape[0]
        loo = []
        if not valid:
            value = 0.0
        elif N > 1 and math.isfinite(value):
            for j in range(N):
                keep = torch.arange(N) != j
                loo.append(_theorem2(self.n_i[keep].mean(0), self.T_i[keep].mean(0), self.E_i[keep].mean(0), sigma))
        jk = block_jackknife(value, [loo], level)
        stderr = jk.stderr if jk.sampled else math.nan
        name, formula = (("psi", "n^T D^-1 n (Theorem 2)") if sigma > 0
                         else ("noiseless_psi", "n_n^2 / E||t_n||^2 (Corollary 3)"))
        return Bound(name, jk.lcb, formula, self.d, sigma=sigma, tau=self.tau, rank=self.rank,
                     inputs={"n": self.n.tolist(), "T": self.T.tolist(), "E": self.E.tolist(), "k": self.k,
                             "probes": self.probes, "n_inputs": self.n_inputs, "stderr": stderr},
                     point=value, stderr=stderr, level=jk.level, kind=kind, saturation=self.saturation,
                     guarantee=not self.heuristic, plugin=plugin)

    def noiseless(self) -> Bound:
        return self.bound(0.0)


def _rademacher(shape, g: torch.Generator, dtype) -> torch.Tensor:
    return (torch.randint(0, 2, shape, generator=g) * 2 - 1).to(dtype)


def psi_terms(fisher, psi: Callable, data, score_fn: Callable, *, encoder: nn.Module | None = None,
              tau: float = 0.0, probes: int = 16, n_inputs: int = 32, seed: int = 0,
              dtype: torch.dtype = torch.float32, device=None) -> PsiTerms:
    """Estimate Theorem 2's terms. ``psi``: ``N×d → N×k``; ``score_fn``: ``N×d → N×d``; ``data``:
    samples of π. ``encoder`` supplies J_E; without it E[G] stands in for G(x), exact when G is
    constant (linear encoders). ``device``: where Ψ (and the encoder) run; they must already be there."""
    fisher: FisherEstimate = as_fisher(fisher)
    probes, n_inputs = check_positive_int(probes, "probes"), check_positive_int(n_inputs, "n_inputs")
    split = split_range_null(fisher, check_tau(tau))
    x_all = as_samples(data)
    x_all = x_all.reshape(x_all.shape[0], -1)
    if x_all.shape[1] != fisher.d:
        raise ShapeError(f"data has dimension {x_all.shape[1]}, E[G] is {fisher.d}×{fisher.d}.")
    if x_all.shape[0] < n_inputs:
        raise ParameterError(f"n_inputs={n_inputs} is larger than the {x_all.shape[0]} samples given.")
    g = torch.Generator().manual_seed(seed)
    device = torch.device(device) if device is not None else torch.device("cpu")
    x_all = x_all[torch.randperm(x_all.shape[0], generator=g)[:n_inputs]].to(device=device, dtype=dtype)
    P = [split.P_r.to(device=device, dtype=dtype), split.P_n.to(device=device, dtype=dtype)]
    enc = split_noise(encoder)[0] if encoder is not None else None
    G = fisher.matrix.to(device=device, dtype=torch.float64)
    f1 = lambda v: psi(v.unsqueeze(0)).squeeze(0)  # noqa: E731 — one input → k features
    n = torch.zeros(n_inputs, 2, dtype=torch.float64)
    T = torch.zeros(n_inputs, 2, 2, dtype=torch.float64)
    E = torch.zeros(n_inputs, 2, 2, dtype=torch.float64)
    k = None
    for xi, x in enumerate(x_all):
        s = torch.as_tensor(score_fn(x.unsqueeze(0).to(torch.float64))).reshape(-1).to(device=device, dtype=dtype)
        V = _rademacher((probes, fisher.d), g, dtype).to(device)
        t = []
        for gi in range(2):
            W = V @ P[gi]  # rows P_g v
            jv = torch.func.vmap(lambda w: torch.func.jvp(f1, (x,), (w,))[1])(W).detach()  # probes × k
            hv = torch.func.vmap(lambda w: torch.func.jvp(lambda y: torch.func.jvp(f1, (y,), (w,))[1],
                                                          (x,), (w,))[1])(W).detach()      # probes × k
            k = jv.shape[1]
            n[xi, gi] = float((jv.to(torch.float64) ** 2).sum(1).mean())
            js = torch.func.jvp(f1, (x,), (P[gi] @ s,))[1].detach()
            t.append(hv.mean(0).to(torch.float64) + js.to(torch.float64))
        for i in range(2):
            for j in range(2):
                T[xi, i, j] = float(t[i] @ t[j])
        _, vjp = torch.func.vjp(f1, x)
        U = _rademacher((probes, k), g, dtype).to(device)
        Wt = torch.func.vmap(lambda u: vjp(u)[0])(U).detach()                               # probes × d: J_Ψᵀu
        a = []
        for gi in range(2):
            Z = Wt @ P[gi]                                                                  # rows P_g J_Ψᵀu
            if enc is not None:
                fe = lambda v: enc(v.unsqueeze(0)).reshape(-1)  # noqa: E731
                a.append(torch.func.vmap(lambda z: torch.func.jvp(fe, (x,), (z,))[1])(Z).detach().to(torch.float64))
            else:
                a.append(Z.to(torch.float64))
        for i in range(2):
            for j in range(2):
                if enc is not None:
                    E[xi, i, j] = float((a[i] * a[j]).sum(1).mean())
                else:
                    E[xi, i, j] = float(((a[i] @ G) * a[j]).sum(1).mean())
    return PsiTerms(n, T, E, split.rank, split.tau, fisher.d, int(k), probes, n_inputs, fisher.saturation.to_dict(),
                    enc is not None, split.tau > fisher.d * fisher.eps)


def psi_bound(fisher, psi: Callable, data, score_fn: Callable, sigma: float, probes: int = 16, *,
              encoder: nn.Module | None = None, tau: float = 0.0, n_inputs: int = 32, seed: int = 0,
              level: float = DEFAULT_LEVEL) -> Bound:
    """Theorem 2: the bound on ``E‖Ψ(x̂) − Ψ(x)‖²`` for an encoder with noise σ > 0."""
    sigma = check_sigma(sigma)
    if sigma == 0:
        raise ParameterError("psi_bound (Theorem 2) needs sigma > 0; use noiseless_psi_bound (Corollary 3).")
    return psi_terms(fisher, psi, data, score_fn, encoder=encoder, tau=tau, probes=probes, n_inputs=n_inputs,
                     seed=seed).bound(sigma, level)


def noiseless_psi_bound(fisher, psi: Callable, data, score_fn: Callable, probes: int = 16, *, tau: float = 0.0,
                        n_inputs: int = 32, seed: int = 0, level: float = DEFAULT_LEVEL) -> Bound:
    """Corollary 3: ``n_n² / E‖t_n‖²`` for a noise-free encoder."""
    return psi_terms(fisher, psi, data, score_fn, tau=tau, probes=probes, n_inputs=n_inputs,
                     seed=seed).bound(0.0, level)
