"""The MMSE attack: the posterior mean ``E[x | e]`` for a linear encoder ``e = Wx + N(0, σ²I)``
(spectral-bounds paper, section 6.1, eqs. 8–9, appendix A.6), generalised to priors that are
equal-weight mixtures of isotropic Gaussians ``N(m_k, s²I)``.

Per component the posterior mean is affine in e,

* σ > 0 (eq. 8):  ``m_k + A (e − W m_k)``,  ``A = (WᵀW/σ² + I/s²)⁻¹ Wᵀ/σ²``
* σ = 0 (eq. 9):  ``m_k + W⁺ (e − W m_k)``

and the components are weighted by their evidence ``p(e | k) = N(e; W m_k, σ²I + s²WWᵀ)``
(σ = 0: the row-space part ``W⁺e`` is ``N(P_row m_k, s² P_row)``). With one component
(``N(mu·1, eta²I)``) the weights are 1 and this is exactly eqs. 8 and 9. The mixture form is the
Bayes-optimal attack for the smoothed-empirical prior (a dataset plus smoothing noise).

For a Gaussian prior ``N(μ, Σ)`` with a full covariance (``reconguard.data.GaussianPrior``) the
posterior mean is ``μ + K(e − Wμ)``, ``K = ΣWᵀ(WΣWᵀ + σ²I)⁺`` (σ = 0 included), and the Bayes
MMSE per coordinate is ``Tr(Σ − KWΣ)/d`` (:func:`gaussian_bayes_mmse`): the exact error no attack beats.
"""

from __future__ import annotations

from typing import Callable

import torch

from ...checks import as_tensor, check_finite, check_sigma
from ...data.priors import GaussianMixturePrior, GaussianPrior, gaussian_prior
from ...encoders.linear import LinearEncoder
from ...encoders.noisy import split_noise
from ...errors import ParameterError, ShapeError
from ..base import Attack, Reconstruction


def _linear_weight(encoder) -> torch.Tensor:
    enc, _ = split_noise(encoder) if isinstance(encoder, torch.nn.Module) else (encoder, 0.0)
    if isinstance(enc, LinearEncoder):
        return enc.W.detach().cpu().to(torch.float64)
    if isinstance(enc, torch.nn.Linear):
        if enc.bias is not None and bool((enc.bias != 0).any()):
            raise ParameterError("nn.Linear with a bias: subtract it from the embeddings and pass the layer's "
                                 "weight (an m×d W) instead.")
        return enc.weight.detach().cpu().to(torch.float64)
    if isinstance(enc, torch.Tensor):
        if enc.ndim != 2:
            raise ShapeError(f"W must be m×d, got shape {tuple(enc.shape)}.")
        return enc.detach().cpu().to(torch.float64)
    raise ParameterError("The MMSE attack is defined for linear encoders only (LinearEncoder, "
                         f"Noisy(LinearEncoder) or an m×d W); got {type(enc).__name__}.")


def _resolve_sigma(encoder, sigma) -> float:
    enc_sigma = split_noise(encoder)[1] if isinstance(encoder, torch.nn.Module) else None
    if sigma is None:
        if enc_sigma is None:
            raise ParameterError("Give sigma (the encoder's noise std) when passing a bare W.")
        return enc_sigma
    sigma = check_sigma(sigma)
    if enc_sigma not in (None, 0.0) and abs(enc_sigma - sigma) > 1e-12 * max(1.0, sigma):
        raise ParameterError(f"sigma={sigma} differs from the Noisy encoder's sigma={enc_sigma}.")
    return sigma


def mixture_posterior_mean(encoder, prior: GaussianMixturePrior, sigma: float | None = None,
                        chunk: int = 1024) -> Callable[[torch.Tensor], torch.Tensor]:
    """Return ``attack(e) -> x̂`` (``N×m`` embeddings → ``N×d`` posterior means, float64)."""
    W = _linear_weight(encoder)
    sigma = _resolve_sigma(encoder, sigma)
    m, d = W.shape
    if prior.dim != d:
        raise ShapeError(f"The prior has d={prior.dim} but the encoder's W is {m}×{d}.")
    s2 = prior.std**2
    eye_d = torch.eye(d, dtype=torch.float64)
    if sigma > 0:
        A = torch.linalg.solve(W.T @ W / sigma**2 + eye_d / s2, W.T / sigma**2)
        # whitening for the evidence N(e; W m_k, C):  ‖L⁻¹(e − W m_k)‖²
        L = torch.linalg.cholesky(sigma**2 * torch.eye(m, dtype=torch.float64) + s2 * W @ W.T)
        def to_evidence_space(v: torch.Tensor) -> torch.Tensor:  # N×m → N×m
            return torch.linalg.solve_triangular(L, v.T, upper=False).T
        comp = to_evidence_space(prior.means @ W.T)
    else:
        A = torch.linalg.pinv(W)
        def to_evidence_space(v: torch.Tensor) -> torch.Tensor:  # row-space coordinates, scaled by 1/s
            return (v @ A.T) / prior.std
        comp = (prior.means @ (A @ W).T) / prior.std
    B_means = prior.means @ (eye_d - A @ W).T  # (I − AW) m_k for every k
    comp_sq = (comp * comp).sum(1)

    def estimate(e: torch.Tensor) -> torch.Tensor:
        e = check_finite(as_tensor(e, "embeddings", dtype=torch.float64), "embeddings").cpu()
        if e.ndim != 2 or e.shape[1] != m:
            raise ShapeError(f"embeddings must be N×{m}, got shape {tuple(e.shape)}.")
        out = []
        for ec in e.split(chunk):
            if prior.n_components == 1:
                mix = B_means.expand(ec.shape[0], d)
            else:
                z = to_evidence_space(ec)
                dist = (z * z).sum(1, keepdim=True) - 2 * z @ comp.T + comp_sq
                mix = torch.softmax(-0.5 * dist, dim=1) @ B_means
            out.append(ec @ A.T + mix)
        return torch.cat(out)

    return estimate


def _gain(W: torch.Tensor, cov: torch.Tensor, sigma: float) -> torch.Tensor:
    """``K = ΣWᵀ(WΣWᵀ + σ²I)⁺`` (d×m)."""
    C = W @ cov @ W.T + sigma**2 * torch.eye(W.shape[0], dtype=torch.float64)
    return cov @ W.T @ (torch.linalg.pinv(C, hermitian=True) if sigma == 0 else torch.linalg.inv(C))


def gaussian_bayes_mmse(encoder, prior: GaussianPrior | GaussianMixturePrior, sigma: float | None = None) -> float:
    """The Bayes MMSE per coordinate ``Tr(Σ − KWΣ)/d`` of a linear encoder under a Gaussian prior (K = 1)."""
    W = _linear_weight(encoder)
    sigma = _resolve_sigma(encoder, sigma)
    cov = _gaussian_cov(prior, W.shape[1])
    return float(torch.trace(cov - _gain(W, cov, sigma) @ W @ cov)) / W.shape[1]


def _gaussian_cov(prior, d: int) -> torch.Tensor:
    if getattr(prior, "n_components", 1) != 1:
        raise ParameterError("the closed form needs a single Gaussian prior (GaussianPrior or gaussian_prior).")
    if prior.dim != d:
        raise ShapeError(f"The prior has d={prior.dim} but the encoder's W has d={d}.")
    return prior.covariance()


def gaussian_posterior_mean(encoder, prior: GaussianPrior, sigma: float | None = None,
                         chunk: int = 4096) -> Callable[[torch.Tensor], torch.Tensor]:
    """``attack(e) = μ + K(e − Wμ)``: the posterior mean under ``N(μ, Σ)`` (full Σ), σ ≥ 0."""
    W = _linear_weight(encoder)
    sigma = _resolve_sigma(encoder, sigma)
    m, d = W.shape
    cov = _gaussian_cov(prior, d)
    K = _gain(W, cov, sigma)
    mu = prior.means[0]
    offset = mu - K @ (W @ mu)

    def estimate(e: torch.Tensor) -> torch.Tensor:
        e = check_finite(as_tensor(e, "embeddings", dtype=torch.float64), "embeddings").detach().cpu()
        if e.ndim != 2 or e.shape[1] != m:
            raise ShapeError(f"embeddings must be N×{m}, got shape {tuple(e.shape)}.")
        return torch.cat([ec @ K.T + offset for ec in e.split(chunk)])

    return estimate


def posterior_mean(encoder, mu, eta: float | None = None, sigma: float | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """Posterior mean under a Gaussian prior: ``posterior_mean(enc, mu, eta)`` for ``N(mu·1, eta²I)`` (eq. 8 for
    σ > 0, eq. 9 for σ = 0), or ``posterior_mean(enc, prior)`` with a ``GaussianPrior`` ``N(μ, Σ)`` (full Σ)."""
    if isinstance(mu, GaussianPrior):
        return gaussian_posterior_mean(encoder, mu, sigma)
    if isinstance(mu, GaussianMixturePrior):
        return mixture_posterior_mean(encoder, mu, sigma)
    if eta is None:
        raise ParameterError("posterior_mean needs eta (the prior's std) with a scalar mu, or a GaussianPrior.")
    W = _linear_weight(encoder)
    return mixture_posterior_mean(encoder, gaussian_prior(mu, eta, W.shape[1]), sigma)


class MMSEAttack(Attack):
    """The MMSE attack as an :class:`~reconguard.attacks.base.Attack`: the posterior mean of the input.

    Args:
        encoder: a ``LinearEncoder``, ``Noisy(LinearEncoder)``, bias-free ``nn.Linear`` or an ``m×d`` W.
        prior: a ``GaussianPrior`` (full Σ), a ``GaussianMixturePrior``, or the scalar mean of ``N(mu·1, eta²I)``.
        eta: the prior's std (only with a scalar ``prior``).
        sigma: the release's noise std (default: the ``Noisy`` encoder's; required with a bare W).

    ``run(embeddings)`` (``N×m``) returns a :class:`Reconstruction` with ``N×d`` float64 ``images``.

    Example::

        x_hat = MMSEAttack(enc, 0.5, 0.2, sigma=1e-3).run(Noisy(enc, 1e-3)(x)).images
    """

    name = "mmse"

    def __init__(self, encoder, prior, eta: float | None = None, *, sigma: float | None = None):
        super().__init__(encoder if isinstance(encoder, torch.nn.Module) else None, device="cpu")
        self.estimate = posterior_mean(encoder, prior, eta, sigma)

    def run(self, embeddings: torch.Tensor) -> Reconstruction:
        return Reconstruction(self.estimate(embeddings), self.name)
