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
import yaml

from ..bounds import score_quality
from ..errors import CorruptDataError, DataFileNotFoundError, ParameterError, UnknownOptionError
from .priors import DATASET_KEYS, setup_prior
from .sweep import ATTACKS, SweepResult, expand_encoders, run_sweep
from ..progress import progress as progress_bar

PRESETS = ("smoke", "cpu", "paper")
PLOTS = ("axis", "scatter", "k", "tau")
_TOP_KEYS = {"name", "title", "kind", "params", "presets"}
_PARAM_KEYS = {
    "sweep": {"datasets", "size", "encoders", "sigmas", "attacks", "ks", "taus", "n_attack", "score_samples",
              "seed", "score", "plot", "map_steps", "decoder_epochs", "decoder_width", "decoder_train",
              "train_epochs", "n_examples", "lpips"},
    "instahide-accuracy": {"dataset", "size", "root", "methods", "epochs", "T", "own_floor", "public", "dp", "lr",
                           "seed", "n"},
    "instahide-attacks": {"size", "n", "T", "schemes", "attacks", "seed", "m", "demask_epochs", "demask_images",
                          "similarity_steps", "restarts"},
    "mia": {"dataset", "root", "public_root", "size", "split_seed", "arch", "width", "epochs", "lr", "seeds", "defenses",
            "public_epochs", "attack", "robustness", "analysis", "eval_arch", "eval_epochs", "randomised"},
}
KINDS = tuple(_PARAM_KEYS)


# Types of the scalar / list parameters, checked once when a recipe is loaded (before anything runs):
# (kind of value, low, high). "int" / "float" are scalars, "ints" / "floats" lists of them; ranges are closed.
_TYPES = {
    "seed": ("int", 0, None), "size": ("int", 1, 4096), "score_samples": ("int", 2, 10_000_000),
    "map_steps": ("int", 1, 1_000_000), "decoder_epochs": ("int", 1, 100_000), "decoder_width": ("int", 1, 65536),
    "decoder_train": ("int", 1, 10_000_000), "train_epochs": ("int", 1, 100_000), "n_examples": ("int", 0, 1000),
    "sigmas": ("floats", 0.0, None), "ks": ("ints", 1, 10_000_000), "taus": ("floats", 0.0, 0.999999),
    "epochs": ("int", 1, 100_000), "T": ("int", 1, 100_000), "lr": ("float", 1e-12, 10.0), "n": ("int", 1, 10_000_000),
    "m": ("int", 1, 100_000), "demask_epochs": ("int", 1, 100_000), "demask_images": ("int", 1, 10_000_000),
    "similarity_steps": ("int", 0, 10_000_000), "restarts": ("int", 1, 100_000), "split_seed": ("int", 0, None),
    "width": ("int", 1, 65536), "public_epochs": ("int", 0, 100_000), "eval_epochs": ("int", 0, 100_000),
    "seeds": ("ints", 0, None), "own_floor": ("float", 0.0, 1.0),
}
_MAX_ELEMENTS = 2e9  # float64 entries a sweep may hold at once (16 GB); beyond it the run could not fit in memory


def _typed(value, spec, key: str, source: str):
    kind, low, high = spec
    many = kind.endswith("s")
    base = int if kind.startswith("int") else float
    if many and not isinstance(value, list):
        raise ParameterError(f"recipe {source}: {key} must be a list of {base.__name__}s, e.g. {key}: [{value!r}]; "
                             f"got {value!r}.")
    items = value if many else [value]
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (base is int and isinstance(v, float)
                                                                        and not float(v).is_integer()):
            raise ParameterError(f"recipe {source}: {key} must be {'a list of ' if many else ''}{base.__name__}"
                                 f"{'s' if many else ''}; got {v!r}.")
        v = base(v)
        if (low is not None and v < low) or (high is not None and v > high):
            rng = f"[{low}, {high if high is not None else '∞'}]"
            raise ParameterError(f"recipe {source}: {key} = {v!r} is outside {rng}.")
        out.append(v)
    return out if many else out[0]


def _check_types(params: dict, source: str, kind: str) -> None:
    for key, spec in _TYPES.items():
        if key in params and params[key] is not None:
            _typed(params[key], spec, key, source)
    n_attack = params.get("n_attack")
    if n_attack is not None:
        values = n_attack.values() if isinstance(n_attack, dict) else [n_attack]
        for v in values:
            _typed(v, ("int", 1, 10_000_000), "n_attack", source)
    size = params.get("size")
    if kind == "sweep" and isinstance(size, int) and size > 0:
        d = size * size * (3 if "cifar10" in (params.get("datasets") or {}) else 1)
        if d * d * 12 > _MAX_ELEMENTS:  # E[G], S and their jackknife blocks are d×d
            raise ParameterError(f"recipe {source}: size = {size} makes d×d matrices of {d}² entries that cannot fit "
                                 "in memory; lower size.")


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
    if recipe.get("kind") not in KINDS:
        raise UnknownOptionError(f"recipe {source}: kind {recipe.get('kind')!r} is not known; known: {list(KINDS)}.")
    for preset, over in (recipe.get("presets") or {}).items():
        if preset not in PRESETS:
            raise UnknownOptionError(f"recipe {source}: preset {preset!r} is not one of {PRESETS}.")
        _check_params({**(recipe.get("params") or {}), **(over or {})}, source, recipe["kind"])
    recipe.setdefault("name", Path(str(name_or_path)).stem)
    recipe.setdefault("title", recipe["name"])
    return recipe


def _check_params(params: dict, source: str, kind: str = "sweep") -> None:
    unknown = set(params) - _PARAM_KEYS[kind]
    if unknown:
        raise UnknownOptionError(f"recipe {source}: unknown parameters {sorted(unknown)}; "
                                 f"allowed: {sorted(_PARAM_KEYS[kind])}.")
    _check_types(params, source, kind)
    if kind == "instahide-accuracy":
        from .instahide import expand_methods
        expand_methods(params.get("methods") or [])
        return
    if kind == "mia":
        from .mia import plan_jobs
        plan_jobs(params)
        return
    if kind == "instahide-attacks":
        from .instahide_attacks import ATTACKS as SUITE
        bad = set(params.get("attacks") or []) - set(SUITE)
        if bad:
            raise UnknownOptionError(f"recipe {source}: unknown attacks {sorted(bad)}; known: {SUITE}.")
        return
    for name, cfg in (params.get("datasets") or {}).items():
        if name not in DATASET_KEYS:
            raise UnknownOptionError(f"recipe {source}: unknown dataset {name!r}; known: {sorted(DATASET_KEYS)}.")
        bad = set(cfg or {}) - DATASET_KEYS[name]
        if bad:
            raise UnknownOptionError(f"recipe {source}: dataset {name} has unknown options {sorted(bad)}.")
    bad_attacks = set(params.get("attacks") or []) - set(ATTACKS)
    if bad_attacks:
        raise UnknownOptionError(f"recipe {source}: unknown attacks {sorted(bad_attacks)}; known: {ATTACKS}.")
    if params.get("plot", "axis") not in PLOTS:
        raise UnknownOptionError(f"recipe {source}: plot {params.get('plot')!r} is not one of {PLOTS}.")
    expand_encoders(params.get("encoders") or [])


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
    cache = UnitCache(units, {"recipe": recipe["name"], "preset": preset, "params": p})
    if recipe["kind"] == "instahide-accuracy":
        return _run_accuracy(recipe, preset, p, progress, device, cache)
    if recipe["kind"] == "mia":
        from .mia import run_mia
        return run_mia(recipe, preset, p, progress, device, units=cache)
    if recipe["kind"] == "instahide-attacks":
        from .instahide_attacks import AttackSuiteResult, run_attacks
        start = time.perf_counter()
        with progress_bar(desc=recipe["name"], total=len(p.get("schemes") or [1]), unit="scheme", enabled=progress) as bar:
            rows, examples = run_attacks(p, bar, units=cache)
        return AttackSuiteResult(recipe["name"], preset, recipe["title"], p, rows, time.perf_counter() - start, examples)
    datasets = p.get("datasets") or {"gaussian": {}}
    encoders = expand_encoders(p.get("encoders") or [])
    if not encoders:
        raise UnknownOptionError(f"recipe {recipe['name']}: no encoders given (params.encoders).")
    sigmas = [float(s) for s in p.get("sigmas", [0.0, 1e-3])]
    seed, score_samples = int(p.get("seed", 0)), int(p.get("score_samples", 20000))
    start = time.perf_counter()
    points, examples, extras = [], {}, {"score_quality": {}}
    if p.get("lpips"):
        extras["lpips_trunk"] = str(p["lpips"].get("trunk_weights") or "random (no VGG-16 file given)")
    with progress_bar(desc=recipe["name"], total=len(datasets) * len(encoders) * len(sigmas), unit="point",
                      enabled=progress) as bar:
        for name, cfg in datasets.items():
            setup = setup_prior(name, cfg, int(p.get("size", 8)), p.get("score", "exact"), score_samples, seed)
            if not setup.exact:
                samples = setup.prior.sample(score_samples, generator=torch.Generator().manual_seed(seed + 3))
                extras["score_quality"][name] = score_quality(setup.S, samples)
            points += run_sweep(name, setup.prior, setup.in_shape, encoders, sigmas, score_fn=setup.score_fn, S=setup.S,
                                exact_prior=setup.exact, labelled=setup.labelled,
                                attacks=tuple(p.get("attacks", ["mmse"])), ks=tuple(int(k) for k in p.get("ks", [256])),
                                taus=tuple(float(t) for t in p.get("taus", [1e-4])),
                                n_attack=p.get("n_attack", 64), score_samples=score_samples, seed=seed,
                                n_examples=int(p.get("n_examples", 8)), cfg=p, progress=bar, examples=examples,
                                lpips=p.get("lpips") or None, device=device, units=cache)
    return SweepResult(recipe["name"], preset, recipe["title"], p, points, time.perf_counter() - start, examples,
                       extras)


def _run_accuracy(recipe: dict, preset: str, p: dict, progress: bool, device, cache=None):
    from .instahide import AccuracyResult, expand_methods, public_pool, run_accuracy
    from .priors import make_prior

    name = p.get("dataset", "digits")
    cfg = {"root": p["root"]} if "root" in p else {}
    if "n" in p:
        cfg["n"] = int(p["n"])
    _, _, data = make_prior(name, int(p.get("size", 8)), **cfg)
    methods = expand_methods(p.get("methods") or [])
    start = time.perf_counter()
    with progress_bar(desc=recipe["name"], total=len(methods), unit="model", enabled=progress) as bar:
        rows, n_train, n_test = run_accuracy(data, methods, epochs=int(p.get("epochs", 20)), T=int(p.get("T", 10)),
                                             own_floor=p.get("own_floor"), public=public_pool(p.get("public"), data.shape),
                                             dp=p.get("dp"), lr=float(p.get("lr", 1e-3)), seed=int(p.get("seed", 0)),
                                             device=device, progress=bar, units=cache)
    return AccuracyResult(recipe["name"], preset, recipe["title"], p, rows, time.perf_counter() - start, data.name,
                          n_train, n_test)
