"""Attacks by name, one line each (like :mod:`reconguard.defenses.registry`): the class, the observation it
``observes`` (:mod:`reconguard.observations`) and, for the attacks the experiments choose by name, the one call
that runs it — ``run_attack(name, observation, knowledge, options) -> Result``.

The sweep's recipes and the encoder audit choose their attacks on embeddings from here (:func:`attack_names`): a
recipe swaps ``map`` for ``decoder`` by changing one word, and a new attack is one class plus one line. Each attack's
settings are a frozen dataclass, validated once and recorded in the result (``Recovered.options``).
Entries with ``runner=None`` are components (a similarity network, a demasker) or attacks whose experiments drive
them directly (the InstaHide suite, the model-inversion evaluator); their ``observes`` still says what they see.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Callable

import torch

from ..errors import ParameterError, UnknownOptionError
from ..observations import ClassifierAccess, EmbeddingRelease, EncryptedRelease, GradientRelease, Knowledge
from ..results import Result
from .adversarial import PGD
from .gradients import GradientMatching
from .instahide import (AveragingAttack, CarliniAttack, Demasker, PairAttack, PublicSearchAttack, PublicUncoverAttack,
                        SimilarityNetwork)
from .inversion import GenerativeInversion, GradientInversion
from .reconstruction import BETAS_SIGMA0, DecoderAttack, MapAttack, MMSEAttack


@dataclass(frozen=True)
class MMSEOptions:
    """The exact posterior mean under the attacker's Gaussian-mixture prior (linear encoders only)."""


@dataclass(frozen=True)
class MapOptions:
    steps: int = 500
    betas: tuple = tuple(BETAS_SIGMA0)  # tried at σ = 0 (the best against ``Knowledge.oracle``); 2σ² otherwise


@dataclass(frozen=True)
class DecoderOptions:
    epochs: int = 40
    width: int = 128
    train: int = 4096      # images drawn from the prior when the attacker brings none
    seed: int = 0


@dataclass(frozen=True)
class AveragingOptions:
    m: int = 5             # neighbours averaged


@dataclass(frozen=True)
class Recovered(Result):
    """What a registry attack returns: reconstructions (``N×d`` for embeddings, ``N×C×H×W`` for encryptions),
    its name and options, and what it chose (``detail``: e.g. the MAP attack's β)."""

    attack: str
    images: torch.Tensor
    options: dict
    detail: dict = field(default_factory=dict)
    _skip_in_dict = ("images",)


def _mmse(obs: EmbeddingRelease, know: Knowledge, opts: MMSEOptions) -> Recovered:
    from .reconstruction import mixture_posterior_mean

    rec = mixture_posterior_mean(obs.encoder, know.prior, obs.sigma)(obs.embeddings.to(torch.float64))
    return Recovered("mmse", rec, asdict(opts))


def _map(obs: EmbeddingRelease, know: Knowledge, opts: MapOptions) -> Recovered:
    from .reconstruction import map_attack_sweep

    if know.oracle is None:  # no originals to choose β against: the one β the release allows
        betas = [2 * obs.sigma**2] if obs.sigma > 0 else list(opts.betas)
        if len(betas) > 1:
            raise ParameterError("map at σ = 0 picks β from a grid against the originals: give "
                                 "Knowledge(oracle=x), or a single β in options.")
        rec = MapAttack(obs.encoder, know.score, beta=betas[0], in_shape=obs.in_shape, steps=opts.steps)
        return Recovered("map", rec.run(obs.embeddings).images.cpu(), asdict(opts), {"beta": float(betas[0])})
    r = map_attack_sweep(obs.encoder, know.oracle, obs.embeddings, know.score, obs.sigma, betas=opts.betas,
                         in_shape=obs.in_shape, steps=opts.steps)
    return Recovered("map", r.reconstructions.cpu(), asdict(opts), {"beta": r.beta, "tried": r.tried})


def _decoder(obs: EmbeddingRelease, know: Knowledge, opts: DecoderOptions) -> Recovered:
    p = next(iter(obs.encoder.parameters()), None)
    dec = DecoderAttack(obs.encoder, obs.in_shape, epochs=opts.epochs, sigma=obs.sigma, seed=opts.seed,
                        width=opts.width, device=p.device if p is not None else None)
    train = know.images
    if train is None:
        train = know.prior.sample(opts.train, generator=torch.Generator().manual_seed(opts.seed)).to(torch.float32)
    dec.fit(train)
    return Recovered("decoder", dec.run(obs.embeddings).images, asdict(opts))


def _averaging(obs: EncryptedRelease, know: Knowledge, opts: AveragingOptions) -> Recovered:
    """Weak averaging (Carlini et al. §4): neighbours by |encryption| similarity, the private image's coefficient
    taken from the released labels (1/k without them)."""
    lam = float(obs.labels.max(1).values.mean()) if obs.labels is not None else None
    r = AveragingAttack(strong=False, m=opts.m, own_coefficient=lam).run(obs.encryptions, k=obs.k)
    return Recovered("averaging", r.estimates.float(), asdict(opts))


def _predicate_mmse(obs: EmbeddingRelease, know: Knowledge) -> bool:
    from ..encoders.linear import LinearEncoder
    from ..encoders.noisy import split_noise

    return know.exact_prior and know.prior is not None and isinstance(split_noise(obs.encoder)[0], LinearEncoder)


@dataclass(frozen=True)
class AttackEntry:
    cls: type
    observes: type
    runner: Callable | None = None             # (observation, knowledge, options) -> Recovered
    options: type | None = None                # the options dataclass
    applies: Callable | None = None            # (observation, knowledge) -> bool: whether it can run at all


ATTACKS: dict[str, AttackEntry] = {
    "mmse": AttackEntry(MMSEAttack, EmbeddingRelease, _mmse, MMSEOptions, _predicate_mmse),
    "map": AttackEntry(MapAttack, EmbeddingRelease, _map, MapOptions),
    "decoder": AttackEntry(DecoderAttack, EmbeddingRelease, _decoder, DecoderOptions),
    "carlini": AttackEntry(CarliniAttack, EncryptedRelease),
    "averaging": AttackEntry(AveragingAttack, EncryptedRelease, _averaging, AveragingOptions),
    "public-search": AttackEntry(PublicSearchAttack, EncryptedRelease),
    "public-uncover": AttackEntry(PublicUncoverAttack, EncryptedRelease),
    "pairs": AttackEntry(PairAttack, EncryptedRelease),
    "similarity": AttackEntry(SimilarityNetwork, EncryptedRelease),   # a component of carlini
    "demask": AttackEntry(Demasker, EncryptedRelease),                # a component of averaging on InstaHide
    "gradient-matching": AttackEntry(GradientMatching, GradientRelease),
    "generative-inversion": AttackEntry(GenerativeInversion, ClassifierAccess),
    "gradient-inversion": AttackEntry(GradientInversion, ClassifierAccess),
    "pgd": AttackEntry(PGD, ClassifierAccess),
}


def attack_names(observes: type | None = None, runnable: bool = False) -> tuple[str, ...]:
    """The registered names (of one observation type; only those ``run_attack`` runs, with ``runnable``)."""
    return tuple(n for n, e in ATTACKS.items()
                 if (observes is None or e.observes is observes) and (not runnable or e.runner is not None))


def attack_entry(name: str) -> AttackEntry:
    if name not in ATTACKS:
        raise UnknownOptionError(f"unknown attack {name!r}; choose one of {', '.join(ATTACKS)}.")
    return ATTACKS[name]


def make_options(name: str, options: dict | None = None):
    """The attack's options dataclass from a dict; unknown keys refused with the allowed ones."""
    entry = attack_entry(name)
    if entry.options is None:
        raise UnknownOptionError(f"{name} is not run by name; use {entry.cls.__name__} directly.")
    allowed = {f.name for f in fields(entry.options)}
    bad = set(options or {}) - allowed
    if bad:
        raise UnknownOptionError(f"attack {name}: unknown options {sorted(bad)}; its options are {sorted(allowed)}.")
    return entry.options(**(options or {}))


def applies(name: str, observation, knowledge: Knowledge) -> bool:
    entry = attack_entry(name)
    return isinstance(observation, entry.observes) and (entry.applies is None or entry.applies(observation, knowledge))


def run_attack(name: str, observation, knowledge: Knowledge | None = None, options=None) -> Recovered:
    """Run attack ``name`` on ``observation`` with the attacker's ``knowledge`` and ``options`` (a dict or the
    attack's options dataclass). The observation must be of the type the attack ``observes``."""
    entry = attack_entry(name)
    if not isinstance(observation, entry.observes):
        raise ParameterError(f"attack {name} observes an {entry.observes.__name__}, got "
                             f"{type(observation).__name__}.")
    opts = options if options is not None and not isinstance(options, dict) else make_options(name, options)
    return entry.runner(observation, knowledge or Knowledge(), opts)
