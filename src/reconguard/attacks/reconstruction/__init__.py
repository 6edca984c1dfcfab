"""Reconstruction attacks on embeddings: MMSE (exact, linear encoders), MAP optimisation, learned decoder."""

from .decoder import DecoderAttack, DecoderNet
from .map import BETAS_SIGMA0, MapAttack, MapSweepResult, map_attack_sweep
from .mmse import MMSEAttack, gaussian_bayes_mmse, gaussian_posterior_mean, mixture_posterior_mean, posterior_mean

__all__ = [
    "MMSEAttack", "posterior_mean", "gaussian_posterior_mean", "gaussian_bayes_mmse",
    "mixture_posterior_mean", "MapAttack", "map_attack_sweep", "MapSweepResult", "BETAS_SIGMA0",
    "DecoderAttack", "DecoderNet",
]
