"""Attacks from gradients: gradient matching (DLG)."""

from .matching import GradientMatching, GradientMatchingResult, model_gradients

__all__ = ["GradientMatching", "GradientMatchingResult", "model_gradients"]
