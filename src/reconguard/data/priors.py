"""Data priors with exact scores: isotropic Gaussian mixtures.

``GaussianMixturePrior(means, std)`` is ``π(x) = (1/K) Σ_k N(x; m_k, std²·I_d)``. Two uses:

* ``gaussian_prior(mu, eta, d)``: K = 1, ``N(mu·1, eta²·I_d)`` — the Gaussian dataset of the
  spectral-bounds paper (section 6.1). Its score is ``s(x) = −(x − mu·1)/eta²`` and its score
  matrix ``S = E[s sᵀ] = I_d/eta²`` exactly.
* ``GaussianPrior(mean, cov)``: ``N(μ, Σ)`` with a full covariance; score ``−Σ⁻¹(x − μ)``, ``S = Σ⁻¹``
  exactly. With a linear encoder its Bayes MMSE has a closed form (the posterior covariance), which the
  bounds' property tests compare against.
* ``smoothed_empirical_prior(data, sigma_s)``: one component per image — the distribution of
  smoothed images ``x = x_i + N(0, sigma_s²·I)`` (section 6.1's smoothing, Assumption 1). Its score
  is exact, ``s(x) = (Σ_k w_k(x) m_k − x)/sigma_s²`` with ``w = softmax(−‖x − m_k‖²/(2 sigma_s²))``;
  its S has no closed form and is averaged over samples (``reconguard.bounds.score_matrix``).
"""

from __future__ import annotations

import math

import torch

from ..checks import as_samples, as_tensor, check_finite, check_positive_int, check_scalar
from ..errors import ShapeError

DEFAULT_SIGMA_S = 0.1  # smoothing noise of section 6.1 (following Maeng et al.)


class GaussianMixturePrior:
    """Equal-weight mixture of isotropic Gaussians ``N(m_k, std²·I_d)`` in float64."""

    def __init__(self, means: torch.Tensor, std: float, name: str = "mixture"):
        means = check_finite(as_tensor(means, "means", dtype=torch.float64), "means")
        if means.ndim != 2:
            raise ShapeError(f"means must be K×d, got shape {tuple(means.shape)}.")
        self.means = means
        self.std = check_scalar(std, "std", low=0.0, low_open=True)
        self.name = name

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    @property
    def n_components(self) -> int:
        return self.means.shape[0]

    @property
    def mean(self) -> torch.Tensor:
        return self.means.mean(0)

    def covariance(self) -> torch.Tensor:
        """Σ = std²·I + covariance of the component means (population form)."""
        centred = self.means - self.mean
        between = centred.T @ centred / self.n_components
        return between + self.std**2 * torch.eye(self.dim, dtype=torch.float64)

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n×d`` float64 samples."""
        n = check_positive_int(n, "n")
        k = torch.randint(self.n_components, (n,), generator=generator)
        return self.means[k] + self.std * torch.randn(n, self.dim, generator=generator, dtype=torch.float64)

    @property
    def _means_sq(self) -> torch.Tensor:
        """``‖m_k‖²`` (cached: the MAP attack asks for the score thousands of times)."""
        if getattr(self, "_msq", None) is None or self._msq.shape[0] != self.means.shape[0]:
            self._msq = (self.means * self.means).sum(1)
        return self._msq

    def responsibilities(self, x: torch.Tensor) -> torch.Tensor:
        """Posterior component weights ``w_k(x)`` (``n×K``); ``‖x‖²`` is constant per row, so it drops out of the
        softmax."""
        x = self._check_x(x)
        return torch.softmax((x @ self.means.T - 0.5 * self._means_sq) / self.std**2, dim=1)

    def score(self, x: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
        """∇ₓ log π(x), ``n×d`` float64 (flattens image batches)."""
        x = self._check_x(x)
        if self.n_components == 1:
            return -(x - self.means[0]) / self.std**2
        out = [(self.responsibilities(xc) @ self.means - xc) / self.std**2 for xc in x.split(chunk)]
        return torch.cat(out)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check_x(x)
        d2 = (x * x).sum(1, keepdim=True) - 2 * x @ self.means.T + self._means_sq
        log_norm = -0.5 * self.dim * math.log(2 * math.pi * self.std**2) - math.log(self.n_components)
        return torch.logsumexp(-d2 / (2 * self.std**2), dim=1) + log_norm

    def exact_score_matrix(self) -> torch.Tensor | None:
        """``I/std²`` for a single Gaussian; ``None`` when S must be estimated from samples."""
        if self.n_components == 1:
            return torch.eye(self.dim, dtype=torch.float64) / self.std**2
        return None

    def _check_x(self, x) -> torch.Tensor:
        x = as_tensor(x, "x", dtype=torch.float64).cpu()  # the prior lives on the CPU, in float64
        x = x.reshape(x.shape[0], -1) if x.ndim > 1 else x.reshape(1, -1)
        if x.shape[1] != self.dim:
            raise ShapeError(f"x has dimension {x.shape[1]}, the prior {self.name!r} has d={self.dim}.")
        return x

    def __repr__(self) -> str:
        return f"GaussianMixturePrior({self.name!r}, K={self.n_components}, d={self.dim}, std={self.std:g})"


class GaussianPrior:
    """``N(mean, cov)`` in float64 with a full, positive definite ``d×d`` covariance."""

    n_components = 1

    def __init__(self, mean, cov, name: str = "gaussian"):
        mean = check_finite(as_tensor(mean, "mean", dtype=torch.float64), "mean").reshape(-1)
        cov = check_finite(as_tensor(cov, "cov", dtype=torch.float64), "cov")
        d = mean.shape[0]
        if cov.shape != (d, d):
            raise ShapeError(f"cov must be {d}×{d} to match the mean, got shape {tuple(cov.shape)}.")
        cov = (cov + cov.T) / 2
        try:
            self._chol = torch.linalg.cholesky(cov)
        except RuntimeError:
            raise ShapeError("cov must be positive definite (its Cholesky factorisation failed).") from None
        self.mean, self.cov, self.name = mean, cov, name
        self.precision = torch.cholesky_inverse(self._chol)

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    @property
    def means(self) -> torch.Tensor:
        return self.mean[None]

    def covariance(self) -> torch.Tensor:
        return self.cov

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        n = check_positive_int(n, "n")
        z = torch.randn(n, self.dim, generator=generator, dtype=torch.float64)
        return self.mean + z @ self._chol.T

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """``−Σ⁻¹(x − μ)``, ``n×d`` float64."""
        x = as_tensor(x, "x", dtype=torch.float64).cpu()
        x = x.reshape(x.shape[0], -1) if x.ndim > 1 else x.reshape(1, -1)
        if x.shape[1] != self.dim:
            raise ShapeError(f"x has dimension {x.shape[1]}, the prior {self.name!r} has d={self.dim}.")
        return -(x - self.mean) @ self.precision

    def exact_score_matrix(self) -> torch.Tensor:
        """``S = E[s sᵀ] = Σ⁻¹``."""
        return self.precision.clone()

    def __repr__(self) -> str:
        return f"GaussianPrior({self.name!r}, d={self.dim})"


def gaussian_prior(mu: float = 0.5, eta: float = 0.2, d: int = 784) -> GaussianMixturePrior:
    """``N(mu·1, eta²·I_d)``; the paper's Gaussian dataset uses mu = 0.5, eta = 0.2."""
    mu = check_scalar(mu, "mu")
    eta = check_scalar(eta, "eta", low=0.0, low_open=True)
    d = check_positive_int(d, "d")
    prior = GaussianMixturePrior(torch.full((1, d), mu, dtype=torch.float64), eta, name=f"gaussian(mu={mu:g}, eta={eta:g})")
    return prior


def smoothed_empirical_prior(data, sigma_s: float = DEFAULT_SIGMA_S, name: str | None = None) -> GaussianMixturePrior:
    """The distribution of ``x_i + N(0, sigma_s²·I)`` over the images ``x_i`` of ``data``."""
    x = as_samples(data, "data")
    sigma_s = check_scalar(sigma_s, "sigma_s (smoothing noise std)", low=0.0, low_open=True)
    label = name or getattr(data, "name", "data")
    return GaussianMixturePrior(x.reshape(x.shape[0], -1), sigma_s, name=f"smoothed {label} (sigma_s={sigma_s:g})")
