"""Recipes: YAML files that name an experiment, its parameters and its presets.

A recipe has ``name``, ``title``, ``kind`` (the experiment), ``params`` (shared) and ``presets``
(``smoke`` for tests, ``cpu`` for 2 cores, ``paper`` for a GPU; each overrides ``params``).
Built-in recipes ship in ``reconguard/experiments/recipes`` and run by name; a user's own YAML
runs by path.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

import yaml

from ..errors import CorruptDataError, DataFileNotFoundError, UnknownOptionError
from .linear import SweepResult, linear_sweep
from .priors import make_prior

PRESETS = ("smoke", "cpu", "paper")
_TOP_KEYS = {"name", "title", "kind", "params", "presets"}
_LINEAR_KEYS = {"axis", "sigmas", "tau", "seed", "datasets", "size", "values", "n_attack", "score_samples"}
_DATASET_KEYS = {"gaussian": {"mu", "eta"}, "digits": {"sigma_s"}}


def list_recipes() -> list[str]:
    folder = resources.files("reconguard.experiments") / "recipes"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_recipe(name_or_path: str | Path) -> dict:
    """Read and validate a recipe (built-in name or path to a YAML file)."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise DataFileNotFoundError(f"recipe file {path} does not exist.")
        text, source = path.read_text(encoding="utf-8"), str(path)
    else:
        if str(name_or_path) not in list_recipes():
            raise UnknownOptionError(f"unknown recipe {name_or_path!r}; built-in recipes: {', '.join(list_recipes())} "
                                     "(or give the path of a YAML file).")
        text = (resources.files("reconguard.experiments") / "recipes" / f"{name_or_path}.yaml").read_text(encoding="utf-8")
        source = f"built-in {name_or_path}"
    try:
        recipe = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CorruptDataError(f"recipe {source} is not valid YAML: {exc}") from exc
    if not isinstance(recipe, dict):
        raise CorruptDataError(f"recipe {source} must be a mapping with keys {sorted(_TOP_KEYS)}.")
    unknown = set(recipe) - _TOP_KEYS
    if unknown:
        raise UnknownOptionError(f"recipe {source}: unknown keys {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}.")
    if recipe.get("kind") != "linear-sweep":
        raise UnknownOptionError(f"recipe {source}: kind {recipe.get('kind')!r} is not known; known: ['linear-sweep'].")
    for preset, over in (recipe.get("presets") or {}).items():
        if preset not in PRESETS:
            raise UnknownOptionError(f"recipe {source}: preset {preset!r} is not one of {PRESETS}.")
        _check_params({**(recipe.get("params") or {}), **(over or {})}, source)
    recipe.setdefault("name", Path(str(name_or_path)).stem)
    recipe.setdefault("title", recipe["name"])
    return recipe


def _check_params(params: dict, source: str) -> None:
    unknown = set(params) - _LINEAR_KEYS
    if unknown:
        raise UnknownOptionError(f"recipe {source}: unknown parameters {sorted(unknown)}; allowed: {sorted(_LINEAR_KEYS)}.")
    for name, cfg in (params.get("datasets") or {}).items():
        if name not in _DATASET_KEYS:
            raise UnknownOptionError(f"recipe {source}: unknown dataset {name!r}; known: {sorted(_DATASET_KEYS)}.")
        bad = set(cfg or {}) - _DATASET_KEYS[name]
        if bad:
            raise UnknownOptionError(f"recipe {source}: dataset {name} has unknown options {sorted(bad)}.")


def recipe_params(recipe: dict, preset: str = "cpu", overrides: dict | None = None) -> dict:
    if preset not in (recipe.get("presets") or {}):
        raise UnknownOptionError(f"recipe {recipe['name']!r} has no preset {preset!r}; "
                                 f"it has {sorted(recipe.get('presets') or {})}.")
    params = {**(recipe.get("params") or {}), **(recipe["presets"][preset] or {}), **(overrides or {})}
    _check_params(params, recipe["name"])
    return params


def run_recipe(name_or_path: str | Path, preset: str = "cpu", *, progress: bool = True,
               overrides: dict | None = None) -> SweepResult:
    """Run a recipe at a preset and return its result (nothing is written; see ``reconguard.report``)."""
    recipe = load_recipe(name_or_path)
    p = recipe_params(recipe, preset, overrides)
    datasets = p.get("datasets") or {"gaussian": {}}
    values, sigmas = list(p["values"]), [float(s) for s in p.get("sigmas", [0.0, 1e-3])]
    start = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(datasets) * len(values) * len(sigmas), desc=recipe["name"], unit="point")
    points, examples = [], {}
    try:
        for name, cfg in datasets.items():
            prior = make_prior(name, int(p.get("size", 8)), **(cfg or {}))
            points += linear_sweep(prior, name, p.get("axis", "m"), values, sigmas, tau=float(p.get("tau", 0.0)),
                                   n_attack=int(p.get("n_attack", 4096)), score_samples=int(p.get("score_samples", 20000)),
                                   seed=int(p.get("seed", 0)), progress=bar, examples=examples)
    finally:
        if bar is not None:
            bar.close()
    return SweepResult(recipe["name"], preset, recipe["title"], p, points, time.perf_counter() - start, examples)
