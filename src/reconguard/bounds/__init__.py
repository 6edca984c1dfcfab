"""Reconstruction lower bounds from the encoder's spectral geometry (spectral-bounds paper)."""

from .fisher import FisherEstimate, RangeNullSplit, estimate_fisher, split_range_null
from .lowrank import (LowRankFisher, StructuredScore, estimate_fisher_lowrank, lowrank_ceiling, lowrank_maeng_bound,
                      lowrank_mse_bound, lowrank_noiseless_bound)
from .mse import Bound, ceiling, maeng_bound, mse_bound, noiseless_mse_bound, rtc
from .psi import PsiTerms, noiseless_psi_bound, psi_bound, psi_terms
from .sampling import DEFAULT_LEVEL, Jackknife, block_jackknife
from .score import ScoreMatrix, ScoreQuality, ddpm_score, ddpm_timestep, estimate_score_matrix, score_matrix, score_quality

__all__ = [
    "FisherEstimate", "RangeNullSplit", "estimate_fisher", "split_range_null", "Bound", "ceiling",
    "maeng_bound", "mse_bound", "noiseless_mse_bound", "rtc", "PsiTerms", "psi_terms", "psi_bound",
    "noiseless_psi_bound", "ScoreQuality", "ScoreMatrix", "score_matrix", "estimate_score_matrix", "score_quality",
    "ddpm_score", "ddpm_timestep", "DEFAULT_LEVEL", "Jackknife", "block_jackknife", "LowRankFisher", "StructuredScore",
    "estimate_fisher_lowrank", "lowrank_mse_bound", "lowrank_noiseless_bound", "lowrank_maeng_bound", "lowrank_ceiling",
]
