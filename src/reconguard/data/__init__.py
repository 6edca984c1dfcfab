"""Datasets and priors, all available without a network.

Shipped: scikit-learn's digits (:func:`load_digits`), Gaussian priors (:func:`gaussian_prior`),
smoothed-empirical priors over any image set (:func:`smoothed_empirical_prior`). From a local
folder: :func:`load_mnist` (IDX files), :func:`load_cifar10` (python batches).
"""

from .datasets import ImageDataset
from .digits import load_digits
from .files import load_cifar10, load_fashion_mnist, load_mnist, load_named
from .patches import PatchStore, prepare_public
from .priors import DEFAULT_SIGMA_S, GaussianMixturePrior, GaussianPrior, gaussian_prior, smoothed_empirical_prior
from .smoothing import smooth

__all__ = [
    "PatchStore", "prepare_public", "ImageDataset", "load_digits", "load_mnist", "load_fashion_mnist", "load_cifar10", "load_named",
    "GaussianMixturePrior", "GaussianPrior",
    "gaussian_prior", "smoothed_empirical_prior", "smooth", "DEFAULT_SIGMA_S",
]
