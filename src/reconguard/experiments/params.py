"""Typed, frozen recipe parameters: one dataclass per recipe kind, validated once at the edge, with their
defaults in one place (nanoGPT's ``GPTConfig`` style: typed fields with a comment on why).

:func:`parse_params` turns a recipe's merged ``params`` (YAML) into its kind's dataclass: an unknown key, a value
of the wrong type or outside its range is one clear error before anything runs. A field's range lives in its
metadata (``_num(default, low, high)``); nested settings (``attack``, ``robustness``) are dataclasses too.
Results keep the raw ``params`` dict as their ``settings`` (what the user asked for, as JSON).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import ParameterError, UnknownOptionError
from ..metrics.robustness import ATTACKS, PAPER_EPS


SEED_MAX = 2**63 - 1  # torch's generators take a signed 64-bit seed


def _ints(default, low=None, high=None):
    return field(default=default, metadata={"range": (low, high), "many": True, "base": int})


def _floats(default, low=None, high=None):
    return field(default=default, metadata={"range": (low, high), "many": True, "base": float})


def _int(default, low=None, high=None):
    return field(default=default, metadata={"range": (low, high), "many": False, "base": int})


def _float(default, low=None, high=None):
    return field(default=default, metadata={"range": (low, high), "many": False, "base": float})


def _typed(value, meta: dict, key: str, source: str):
    (low, high), many, base = meta["range"], meta["many"], meta["base"]
    if many and not isinstance(value, (list, tuple)):
        raise ParameterError(f"recipe {source}: {key} must be a list of {base.__name__}s, e.g. {key}: [{value!r}]; "
                             f"got {value!r}.")
    items = list(value) if many else [value]
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
    return tuple(out) if many else out[0]


def _from_dict(cls, value: dict | None, what: str, source: str = ""):
    value = dict(value or {})
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    bad = set(value) - set(fields)
    if bad:
        where = (f"recipe {source}: " if source else "") + ("" if what == "parameters" else f"{what}: ")
        raise UnknownOptionError(f"{where}unknown parameters {sorted(bad)}; allowed: {sorted(fields)}.")
    out = {}
    for key, v in value.items():
        meta = fields[key].metadata
        if "range" in meta and v is not None:
            v = _typed(v, meta, key, source or what)
        elif isinstance(v, list):
            v = tuple(v)
        out[key] = v
    return cls(**out)


@dataclass(frozen=True)
class AttackSettings:
    """The generative-prior model inversion (PPA-style) and its baselines."""

    candidates: int = 500          # prior samples scored per class (stage 1)
    keep: int = 20                 # kept per class for optimisation (stage 2)
    steps: int = 60                # latent optimisation steps (0: selection only)
    lr: float = 0.2                # Adam on the latents
    finals: int = 5                # reconstructions kept per class (stage 3)
    classes: tuple | None = None   # target classes (None: all)
    baseline: bool = True          # also plain gradient inversion
    selection_only: bool = True    # also the attack with 0 steps: the prior's samples the target picks
    baseline_steps: int = 200      # its pixel-optimisation steps
    generator_epochs: int = 60     # the attacker's VAE prior, trained on the public split only
    latent_dim: int = 16
    space: str = "intermediate"    # search latent + intermediate features (PPA searches W, not Z)
    feature_scale: float = 0.2
    loss: str = "poincare"         # PPA's identity loss; "ce" was stronger on 16×16 digits

    @classmethod
    def from_dict(cls, value) -> AttackSettings | None:
        return None if not value else _from_dict(cls, {} if value is True else value, "attack")


@dataclass(frozen=True)
class RobustSettings:
    """Robust accuracy (AutoAttack-style ensemble) at the paper's radii, in pixel units."""

    eps: tuple = tuple(PAPER_EPS)
    n: int = 128                   # test images attacked
    attacks: tuple = tuple(ATTACKS)
    steps: int = 10
    n_queries: int = 100           # Square attack queries

    @classmethod
    def from_dict(cls, value) -> RobustSettings | None:
        return None if not value else _from_dict(cls, {} if value is True else value, "robustness")


@dataclass(frozen=True)
class MIAParams:
    """A ``mia`` recipe: which defenses are trained on which data, and how their leakage is measured."""

    dataset: str = "digits"        # digits (classes 0–4), digit-instances / fashion-instances (one class per digit image /
    #                                Fashion-MNIST product photo), or folder
    instances: int = _int(10, 1, 150)  # digit-instances: instances of each digit 0–4 (classes = 5 × instances)
    copies: int = _int(40, 4, 10_000)  # digit-instances: augmented copies of each instance
    root: str | None = None
    public_root: str | None = None
    size: int | None = _int(None, 1, 4096)  # image side: 16 for digits, 224 for folders when not given
    split_seed: int = _int(0, 0, SEED_MAX)
    arch: str = "resnet18"
    width: int | None = _int(16, 1, 65536)  # ResNet base width (64 = torchvision)
    epochs: int = _int(30, 1, 100_000)
    public_epochs: int | None = _int(None, 0, 100_000)  # TL-DMI's public pre-training (default: epochs)
    lr: float = _float(1e-3, 1e-12, 10.0)
    defenses: tuple = ()           # names or {name, label, options, fit}
    seeds: tuple = _ints((0,), 0, SEED_MAX)
    randomised: dict | None = None  # {units, treated, control, seed}: appendix H's randomised experiment
    attack: AttackSettings | None = None
    robustness: RobustSettings | None = None
    eval_arch: str = "cnn"         # the evaluation classifier (another architecture than the targets)
    eval_epochs: int = _int(20, 0, 100_000)
    analysis: bool = True          # regressions and the treatment effect

    @classmethod
    def from_dict(cls, p: dict, source: str = "") -> MIAParams:
        p = dict(p)
        attack, robust = p.pop("attack", None), p.pop("robustness", None)
        params = _from_dict(cls, p, "parameters", source)
        return dataclasses.replace(params, attack=AttackSettings.from_dict(attack),
                                   robustness=RobustSettings.from_dict(robust))


@dataclass(frozen=True)
class SweepParams:
    """A ``sweep`` recipe (spectral-bounds paper, Figures 2–11): encoders × priors × σ (× k × τ), bounds and attacks."""

    datasets: dict | None = None   # {name: options}; default {"gaussian": {}}
    size: int = _int(8, 1, 4096)   # image side (d = size² × channels)
    encoders: tuple = ()           # encoder specs (reconguard.experiments.sweep.expand_encoders)
    sigmas: tuple = _floats((0.0, 1e-3), 0.0)
    attacks: tuple = ("mmse",)     # of ATTACKS
    ks: tuple = _ints((256,), 1, 10_000_000)  # inputs averaged for E[G]
    taus: tuple = _floats((0.0,), 0.0, 0.999999)  # null-space thresholds (fraction of λ_max); τ > 0 is the paper's
    #                                               heuristic, labelled so, never the default
    n_attack: Any = 64             # attacked samples, or {dataset: n}
    score_samples: int = _int(20000, 2, 10_000_000)  # samples averaged for S
    seed: int = _int(0, 0, SEED_MAX)
    score: str = "exact"           # exact | trained | ddpm:DIR
    plot: str = "axis"             # axis | scatter | k | tau
    map_steps: int = _int(500, 1, 1_000_000)  # the MAP attack's Adam steps (A.1.2: 500)
    decoder_epochs: int = _int(10, 1, 100_000)
    decoder_width: int = _int(128, 1, 65536)
    decoder_train: int = _int(4096, 1, 10_000_000)  # the decoder's training samples from the prior
    train_epochs: int = _int(5, 1, 100_000)  # trained split encoders
    n_examples: int = _int(8, 0, 1000)  # reconstructions shown per dataset and σ
    lpips: dict | None = None      # {trunk_weights, probes, n_inputs}: Ψ = LPIPS bounds too


@dataclass(frozen=True)
class AccuracyParams:
    """An ``instahide-accuracy`` recipe (InstaHide paper Table 1): test accuracy of each training method."""

    dataset: str = "digits"
    size: int = _int(8, 1, 4096)
    root: str | None = None        # local MNIST / CIFAR-10 folder (fashion-mnist: default Debian's package folder)
    n: int | None = _int(None, 1, 10_000_000)  # images used (default all)
    methods: tuple = ()            # {method, k, mode}
    epochs: int = _int(20, 1, 100_000)
    T: int = _int(10, 1, 100_000)  # encryptions averaged at inference
    own_floor: float | None = _float(None, 0.0, 1.0)  # test-time floor on the image's own coefficient
    public: Any = None             # cross mode's public pool: "samples" or a prepare-public folder
    dp: dict | None = None         # DP-SGD settings
    lr: float = _float(1e-3, 1e-12, 10.0)
    seed: int = _int(0, 0, SEED_MAX)


@dataclass(frozen=True)
class AttackSuiteParams:
    """An ``instahide-attacks`` recipe: every attack on challenges of each scheme, scored against the truth."""

    size: int | None = _int(None, 1, 4096)  # image side (None: the data set's own: digits 8×8, Fashion-MNIST 28×28)
    dataset: str = "digits"        # digits or fashion-mnist (Debian's dataset-fashion-mnist, or root)
    root: str | None = None
    n: int = _int(20, 1, 10_000_000)  # private images per challenge
    T: int = _int(25, 1, 100_000)  # encryptions of each
    schemes: tuple = ({"scheme": "instahide", "k": 4},)
    attacks: tuple | None = None   # default: all of the suite's attacks
    seed: int = _int(0, 0, SEED_MAX)
    m: int = _int(5, 1, 100_000)   # averaging: neighbours averaged
    demask_epochs: int = _int(10, 1, 100_000)
    demask_images: int | None = _int(None, 1, 10_000_000)  # the demasker's own images (default all)
    similarity_steps: int = _int(0, 0, 10_000_000)  # label-free Carlini: similarity network steps (0: none)
    restarts: int = _int(4, 1, 100_000)


PARAMS = {"sweep": SweepParams, "instahide-accuracy": AccuracyParams, "instahide-attacks": AttackSuiteParams,
          "mia": MIAParams}


def parse_params(kind: str, params: dict, source: str = ""):
    """The recipe kind's frozen dataclass from a merged ``params`` dict (validated: keys, types, ranges)."""
    if kind not in PARAMS:
        raise UnknownOptionError(f"recipe {source}: kind {kind!r} is not known; known: {list(PARAMS)}.")
    cls = PARAMS[kind]
    if cls is MIAParams:
        return MIAParams.from_dict(params, source)
    return _from_dict(cls, params, "parameters", source)
