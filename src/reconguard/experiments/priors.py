"""The priors experiments run on, by name, and the score that goes with them.

* ``gaussian``: N(mu·1, eta²I), d = size² (section 6.1's Gaussian dataset); exact score.
* ``digits``: scikit-learn's digits at size×size plus smoothing σ_s, as its exact smoothed-empirical
  prior (an attacker who knows π knows the images).
* ``mnist`` / ``cifar10``: the same over ``n`` training images loaded from ``root`` (local files).

``score`` chooses the score used for S and by the MAP attack: ``exact`` (the prior's own),
``model:PATH`` (a ``reconguard score train`` model) or ``ddpm:FOLDER`` (a saved diffusers DDPM).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..bounds import ddpm_score, estimate_score_matrix
from ..data import DEFAULT_SIGMA_S, GaussianMixturePrior, ImageDataset, gaussian_prior, load_digits, smoothed_empirical_prior
from ..data.files import load_named
from ..errors import ParameterError, UnknownOptionError

DATASETS = ("gaussian", "digits", "mnist", "fashion-mnist", "cifar10")
DATASET_KEYS = {"gaussian": {"mu", "eta"}, "digits": {"sigma_s"}, "mnist": {"root", "sigma_s", "n"},
                "fashion-mnist": {"root", "sigma_s", "n"}, "cifar10": {"root", "sigma_s", "n"}}


@dataclass
class PriorSetup:
    name: str
    prior: GaussianMixturePrior
    in_shape: tuple[int, int, int]
    labelled: ImageDataset | None  # for training encoders on the task
    score_fn: Callable
    S: torch.Tensor
    exact: bool
    score_source: str


def make_prior(name: str, size: int, mu: float = 0.5, eta: float = 0.2, sigma_s: float = DEFAULT_SIGMA_S,
               root: str | None = None, n: int | None = None,
               channels: int = 1) -> tuple[GaussianMixturePrior, tuple, ImageDataset | None]:
    """``(prior, image shape, labelled dataset or None)``; ``channels`` applies to the Gaussian prior."""
    if name == "gaussian":
        return gaussian_prior(mu, eta, channels * size * size), (channels, size, size), None
    if name == "digits":
        ds = load_digits(size)
    elif name in ("mnist", "fashion-mnist", "cifar10"):
        if root is None and name != "fashion-mnist":
            raise ParameterError(f"dataset {name} needs root: the local folder holding its files.")
        ds = load_named(name, root=root)
        if n is not None and n < len(ds):
            ds = ds.subset(torch.randperm(len(ds), generator=torch.Generator().manual_seed(0))[:n])
    else:
        raise UnknownOptionError(f"unknown dataset {name!r}; choose one of {DATASETS}.")
    return smoothed_empirical_prior(ds, sigma_s, name=ds.name), ds.shape, ds


def setup_prior(name: str, cfg: dict, size: int, score: str = "exact", score_samples: int = 20000,
                seed: int = 0) -> PriorSetup:
    prior, shape, labelled = make_prior(name, size, **(cfg or {}))
    if score == "exact":
        fn, exact = prior.score, True
    elif score.startswith("model:"):
        from ..nn.score import ScoreModel
        model = ScoreModel.load(score[len("model:"):])
        if model.dim != prior.dim:
            raise ParameterError(f"the score model is for d={model.dim}, the {name} prior has d={prior.dim}.")
        fn, exact = (lambda v: model.score(v).detach().to(torch.float64)), False
    elif score.startswith("ddpm:"):
        from ..nn.ddpm import load_ddpm
        unet, sched = load_ddpm(score[len("ddpm:"):])
        fn, exact = ddpm_score(unet, sched, prior.std, in_shape=shape), False
    else:
        raise UnknownOptionError(f"score must be 'exact', 'model:PATH' or 'ddpm:FOLDER', got {score!r}.")
    if exact:
        S = estimate_score_matrix(prior, n=score_samples, seed=seed)
    else:
        samples = prior.sample(score_samples, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            S = estimate_score_matrix(fn, samples)
    return PriorSetup(name, prior, tuple(shape), labelled, fn, S, exact, score)
