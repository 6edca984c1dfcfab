"""Build the priors experiments run on, by name: the Gaussian dataset and smoothed digits."""

from __future__ import annotations

from ..data import DEFAULT_SIGMA_S, GaussianMixturePrior, gaussian_prior, load_digits, smoothed_empirical_prior
from ..errors import UnknownOptionError

DATASETS = ("gaussian", "digits")


def make_prior(name: str, size: int, mu: float = 0.5, eta: float = 0.2,
               sigma_s: float = DEFAULT_SIGMA_S) -> GaussianMixturePrior:
    """``gaussian``: N(mu·1, eta²I) with d = size² (section 6.1's Gaussian dataset).
    ``digits``: scikit-learn's digits resized to size×size plus smoothing noise sigma_s (its exact
    smoothed-empirical prior; an attacker who knows π knows the 1,797 images)."""
    if name == "gaussian":
        return gaussian_prior(mu, eta, size * size)
    if name == "digits":
        return smoothed_empirical_prior(load_digits(size), sigma_s, name=f"digits{size}")
    raise UnknownOptionError(f"unknown dataset {name!r}; choose one of {DATASETS}.")
