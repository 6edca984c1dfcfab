"""Experiments: recipes (YAML, presets smoke / cpu / paper) and the runs they describe."""

from .bound import BoundReport, BoundRow, bound_row, compute_bounds, default_tau
from .priors import DATASETS, PriorSetup, make_prior, setup_prior
from .instahide import AccuracyResult, AccuracyRow, run_accuracy
from .runner import KINDS, PRESETS, list_recipes, load_recipe, run_recipe
from .sweep import ATTACKS, FAMILIES, EncoderSpec, SweepPoint, SweepResult, build_encoder, expand_encoders, run_sweep

__all__ = [
    "BoundReport", "BoundRow", "bound_row", "compute_bounds", "default_tau", "DATASETS", "PriorSetup",
    "make_prior", "setup_prior", "AccuracyResult", "AccuracyRow", "run_accuracy", "KINDS", "PRESETS",
    "list_recipes", "load_recipe", "run_recipe", "ATTACKS", "FAMILIES", "EncoderSpec", "SweepPoint",
    "SweepResult", "build_encoder", "expand_encoders", "run_sweep",
]
