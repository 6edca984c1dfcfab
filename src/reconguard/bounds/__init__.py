"""Reconstruction lower bounds from the encoder's spectral geometry (spectral-bounds paper).

One API: ``estimate_fisher`` returns the representation of E[G] that fits (dense, or low-rank beyond memory;
``representation=`` overrides) and ``mse_bound``, ``noiseless_mse_bound``, ``maeng_bound``, ``ceiling`` and the
Ψ-bounds take either, with a scalar, diagonal, structured or dense S (the low-rank arithmetic lives in ``lowrank``)."""

from .fisher import FisherEstimate, RangeNullSplit, estimate_fisher, split_range_null
from .lowrank import LowRankFisher, StructuredScore, estimate_fisher_lowrank
from .mse import Bound, ceiling, maeng_bound, mse_bound, noiseless_mse_bound, rtc
from .psi import PsiTerms, noiseless_psi_bound, psi_bound, psi_terms
from .sampling import DEFAULT_LEVEL, Jackknife, block_jackknife
from .score import ScoreMatrix, ScoreQuality, ddpm_score, ddpm_timestep, estimate_score_matrix, score_matrix, score_quality

__all__ = [
    "FisherEstimate", "RangeNullSplit", "estimate_fisher", "split_range_null", "Bound", "ceiling",
    "maeng_bound", "mse_bound", "noiseless_mse_bound", "rtc", "PsiTerms", "psi_terms", "psi_bound",
    "noiseless_psi_bound", "ScoreQuality", "ScoreMatrix", "score_matrix", "estimate_score_matrix", "score_quality",
    "ddpm_score", "ddpm_timestep", "DEFAULT_LEVEL", "Jackknife", "block_jackknife", "LowRankFisher", "StructuredScore",
    "estimate_fisher_lowrank",
]
