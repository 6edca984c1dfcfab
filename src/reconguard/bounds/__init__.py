"""Reconstruction lower bounds from the encoder's spectral geometry (spectral-bounds paper)."""

from .fisher import FisherEstimate, RangeNullSplit, estimate_fisher, split_range_null
from .mse import Bound, ceiling, maeng_bound, mse_bound, noiseless_mse_bound, rtc
from .psi import PsiTerms, noiseless_psi_bound, psi_bound, psi_terms
from .sampling import DEFAULT_LEVEL, Jackknife, block_jackknife
from .score import ScoreMatrix, ScoreQuality, ddpm_score, ddpm_timestep, estimate_score_matrix, score_matrix, score_quality

__all__ = [
    "FisherEstimate", "RangeNullSplit", "estimate_fisher", "split_range_null", "Bound", "ceiling",
    "maeng_bound", "mse_bound", "noiseless_mse_bound", "rtc", "PsiTerms", "psi_terms", "psi_bound",
    "noiseless_psi_bound", "ScoreQuality", "ScoreMatrix", "score_matrix", "estimate_score_matrix", "score_quality",
    "ddpm_score", "ddpm_timestep", "DEFAULT_LEVEL", "Jackknife", "block_jackknife",
]
