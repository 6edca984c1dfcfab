"""Experiments: recipes (YAML, presets smoke / cpu / paper) and the runs they describe."""

from .bound import BoundReport, BoundRow, compute_bounds, default_tau
from .linear import SweepPoint, SweepResult, linear_sweep
from .priors import DATASETS, make_prior
from .runner import PRESETS, list_recipes, load_recipe, run_recipe

__all__ = ["BoundReport", "BoundRow", "compute_bounds", "default_tau", "SweepPoint", "SweepResult", "linear_sweep", "make_prior", "DATASETS", "PRESETS",
           "list_recipes", "load_recipe", "run_recipe"]
