"""Recipes: YAML files that name an experiment, its parameters and its presets.

A recipe has ``name``, ``title``, ``kind`` (``sweep``, ``instahide-accuracy``, ``instahide-attacks``,
``mia``), ``params`` (shared) and ``presets`` (``smoke``
for tests, ``cpu`` for 2 cores, ``paper`` for a GPU; each overrides ``params``). Built-in recipes
ship in ``reconguard/experiments/recipes`` and run by name; a user's own YAML runs by path.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

import torch
from ..inputs import load_yaml, read_text

from ..bounds import score_quality
from ..errors import CorruptDataError, DataFileNotFoundError, ParameterError, UnknownOptionError
from .priors import DATASET_KEYS, setup_prior
from .params import PARAMS, AccuracyParams, SweepParams, _typed, parse_params
from .sweep import ATTACKS, SweepResult, expand_encoders, run_sweep
from ..progress import progress as progress_bar

PRESETS = ("smoke", "cpu", "paper", "fashion")  # fashion: Fashion-MNIST (Debian's dataset-fashion-mnist) on 2 cores
PLOTS = ("axis", "scatter", "k", "tau")
_TOP_KEYS = {"name", "title", "kind", "params", "presets"}
KINDS = tuple(PARAMS)
_MAX_ELEMENTS = 2e9  # float64 entries a sweep may hold at once (16 GB); beyond it the run could not fit in memory


def list_recipes() -> list[str]:
    folder = resources.files("reconguard.experiments") / "recipes"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_recipe(name_or_path: str | Path) -> dict:
    """Read and validate a recipe (built-in name or path to a YAML file)."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise DataFileNotFoundError(f"recipe file {path} does not exist.")
        text, source = read_text(path, "recipe file"), str(path)
    else:
        if str(name_or_path) not in list_recipes():
            raise UnknownOptionError(f"unknown recipe {name_or_path!r}; built-in recipes: {', '.join(list_recipes())} "
                                     "(or give the path of a YAML file).")
        text = (resources.files("reconguard.experiments") / "recipes" / f"{name_or_path}.yaml").read_text(encoding="utf-8")
        source = f"built-in {name_or_path}"
    recipe = load_yaml(text, f"recipe {source}")  # duplicate keys and alias bombs refused
    if not isinstance(recipe, dict):
        raise CorruptDataError(f"recipe {source} must be a mapping with keys {sorted(_TOP_KEYS)}.")
    unknown = set(recipe) - _TOP_KEYS
    if unknown:
        raise UnknownOptionError(f"recipe {source}: unknown keys {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}.")
    if recipe.get("kind") not in KINDS:
        raise UnknownOptionError(f"recipe {source}: kind {recipe.get('kind')!r} is not known; known: {list(KINDS)}.")
    for preset, over in (recipe.get("presets") or {}).items():
        if preset not in PRESETS:
            raise UnknownOptionError(f"recipe {source}: preset {preset!r} is not one of {PRESETS}.")
        _check_params({**(recipe.get("params") or {}), **(over or {})}, source, recipe["kind"])
    recipe.setdefault("name", Path(str(name_or_path)).stem)
    recipe.setdefault("title", recipe["name"])
    return recipe


def _check_params(params: dict, source: str, kind: str = "sweep"):
    """Validate a merged ``params`` once (keys, types and ranges by its kind's dataclass, then what the
    dataclass cannot say) and return the typed, frozen parameters."""
    typed = parse_params(kind, params, source)
    if kind == "instahide-accuracy":
        from .instahide import expand_methods
        expand_methods(list(typed.methods))
    elif kind == "mia":
        from .mia import plan_jobs
        plan_jobs(typed)
    elif kind == "instahide-attacks":
        from .instahide_attacks import ATTACKS as SUITE
        bad = set(typed.attacks or []) - set(SUITE)
        if bad:
            raise UnknownOptionError(f"recipe {source}: unknown attacks {sorted(bad)}; known: {SUITE}.")
    else:
        _check_sweep(typed, source)
    return typed


def _check_sweep(p: SweepParams, source: str) -> None:
    datasets = p.datasets or {}
    for name, cfg in datasets.items():
        if name not in DATASET_KEYS:
            raise UnknownOptionError(f"recipe {source}: unknown dataset {name!r}; known: {sorted(DATASET_KEYS)}.")
        bad = set(cfg or {}) - DATASET_KEYS[name]
        if bad:
            raise UnknownOptionError(f"recipe {source}: dataset {name} has unknown options {sorted(bad)}.")
    bad_attacks = set(p.attacks) - set(ATTACKS)
    if bad_attacks:
        raise UnknownOptionError(f"recipe {source}: unknown attacks {sorted(bad_attacks)}; known: {ATTACKS}.")
    if p.plot not in PLOTS:
        raise UnknownOptionError(f"recipe {source}: plot {p.plot!r} is not one of {PLOTS}.")
    values = p.n_attack.values() if isinstance(p.n_attack, dict) else [p.n_attack]
    for v in values:
        _typed(v, {"range": (1, 10_000_000), "many": False, "base": int}, "n_attack", source)
    d = p.size * p.size * (3 if "cifar10" in datasets else 1)
    if d * d * 12 > _MAX_ELEMENTS:  # E[G], S and their jackknife blocks are d×d
        raise ParameterError(f"recipe {source}: size = {p.size} makes d×d matrices of {d}² entries that cannot fit "
                             "in memory; lower size.")
    expand_encoders(list(p.encoders))


def recipe_params(recipe: dict, preset: str = "cpu", overrides: dict | None = None) -> dict:
    if preset not in (recipe.get("presets") or {}):
        raise UnknownOptionError(f"recipe {recipe['name']!r} has no preset {preset!r}; "
                                 f"it has {sorted(recipe.get('presets') or {})}.")
    params = {**(recipe.get("params") or {}), **(recipe["presets"][preset] or {}), **(overrides or {})}
    _check_params(params, recipe["name"], recipe["kind"])
    return params


def run_recipe(name_or_path: str | Path, preset: str = "cpu", *, progress: bool = True,
               overrides: dict | None = None, device=None, units: str | Path | None = None) -> SweepResult:
    """Run a recipe at a preset and return its result (nothing is written; see ``reconguard.report``).

    ``units``: a folder where each finished unit (a sweep's encoder, a model of the mia recipes) is saved
    as it completes, and from which a rerun loads it (:mod:`reconguard.experiments.units`)."""
    from .units import UnitCache

    recipe = load_recipe(name_or_path)
    p = recipe_params(recipe, preset, overrides)
    typed = parse_params(recipe["kind"], p, recipe["name"])  # validated by recipe_params; typed from here on
    cache = UnitCache(units, {"recipe": recipe["name"], "preset": preset, "params": p})
    if recipe["kind"] == "instahide-accuracy":
        return _run_accuracy(recipe, preset, p, typed, progress, device, cache)
    if recipe["kind"] == "mia":
        from .mia import run_mia
        return run_mia(recipe, preset, p, typed, progress, device, units=cache)
    if recipe["kind"] == "instahide-attacks":
        from .instahide_attacks import AttackSuiteResult, run_attacks
        start = time.perf_counter()
        with progress_bar(desc=recipe["name"], total=len(typed.schemes), unit="scheme", enabled=progress) as bar:
            rows, examples = run_attacks(typed, bar, units=cache)
        return AttackSuiteResult(recipe["name"], preset, recipe["title"], p, rows, time.perf_counter() - start, examples)
    t = typed
    datasets = t.datasets or {"gaussian": {}}
    encoders = expand_encoders(list(t.encoders))
    if not encoders:
        raise UnknownOptionError(f"recipe {recipe['name']}: no encoders given (params.encoders).")
    start = time.perf_counter()
    points, examples, extras = [], {}, {"score_quality": {}}
    if t.lpips:
        extras["lpips_trunk"] = str(t.lpips.get("trunk_weights") or "random (no VGG-16 file given)")
    with progress_bar(desc=recipe["name"], total=len(datasets) * len(encoders) * len(t.sigmas), unit="point",
                      enabled=progress) as bar:
        for name, cfg in datasets.items():
            setup = setup_prior(name, cfg, t.size, t.score, t.score_samples, t.seed)
            if not setup.exact:
                samples = setup.prior.sample(t.score_samples, generator=torch.Generator().manual_seed(t.seed + 3))
                extras["score_quality"][name] = score_quality(setup.S, samples)
            points += run_sweep(name, setup.prior, setup.in_shape, encoders, t, score_fn=setup.score_fn, S=setup.S,
                                exact_prior=setup.exact, labelled=setup.labelled, progress=bar, examples=examples,
                                device=device, units=cache)
    return SweepResult(recipe["name"], preset, recipe["title"], p, points, time.perf_counter() - start, examples,
                       extras)


def _run_accuracy(recipe: dict, preset: str, p: dict, t: AccuracyParams, progress: bool, device, cache=None):
    from .instahide import AccuracyResult, expand_methods, public_pool, run_accuracy
    from .priors import make_prior

    cfg = {"root": t.root} if t.root is not None else {}
    if t.n is not None:
        cfg["n"] = t.n
    _, _, data = make_prior(t.dataset, t.size, **cfg)
    methods = expand_methods(list(t.methods))
    start = time.perf_counter()
    with progress_bar(desc=recipe["name"], total=len(methods), unit="model", enabled=progress) as bar:
        rows, n_train, n_test = run_accuracy(data, methods, t, public=public_pool(t.public, data.shape), device=device,
                                             progress=bar, units=cache)
    return AccuracyResult(recipe["name"], preset, recipe["title"], p, rows, time.perf_counter() - start, data.name,
                          n_train, n_test)
