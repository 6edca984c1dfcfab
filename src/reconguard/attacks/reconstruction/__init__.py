"""Reconstruction attacks on embeddings: MMSE (exact, linear encoders), MAP optimisation, learned decoder."""

from .decoder import DecoderAttack, DecoderNet
from .map import BETAS_SIGMA0, MapSweepResult, map_attack, map_attack_sweep
from .mmse import gaussian_bayes_mmse, gaussian_mmse_attack, mixture_mmse_attack, mmse_attack

__all__ = ["mmse_attack", "gaussian_mmse_attack", "gaussian_bayes_mmse", "mixture_mmse_attack", "map_attack", "map_attack_sweep", "MapSweepResult",
           "BETAS_SIGMA0", "DecoderAttack", "DecoderNet"]
