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

from dataclasses import asdict, dataclass, fields
from typing import Callable

import torch

from ..errors import ParameterError, UnknownOptionError
from ..observations import ClassifierAccess, EmbeddingRelease, EncryptedRelease, GradientRelease, Knowledge
from .adversarial import PGD
from .base import Recovered
from .gradients import GradientMatching
from .instahide import (AveragingAttack, CarliniAttack, Demasker, PairAttack, PublicSearchAttack, PublicUncoverAttack,
                        SimilarityNetwork)
from .instahide.release import AveragingOptions, CarliniOptions, run_averaging, run_carlini
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
    "carlini": AttackEntry(CarliniAttack, EncryptedRelease, run_carlini, CarliniOptions),
    "averaging": AttackEntry(AveragingAttack, EncryptedRelease, run_averaging, AveragingOptions),
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


def encrypted_attack_names() -> tuple[str, ...]:
    """The attacks run by name on an encrypted release (the challenge command, the encrypted audit, the suite)."""
    return attack_names(EncryptedRelease, runnable=True)


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


def pick_options(name: str, values: dict) -> dict:
    """The entries of ``values`` (e.g. a command's arguments) that are options of attack ``name``."""
    entry = attack_entry(name)
    allowed = {f.name for f in fields(entry.options)} if entry.options is not None else set()
    return {key: v for key, v in values.items() if key in allowed}


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
