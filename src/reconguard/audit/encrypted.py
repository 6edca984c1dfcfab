"""Audit an encrypted release (InstaHide / Mixup encryptions with their soft labels): every attack that applies.

The folder is what ``reconguard instahide challenge`` writes (``encryptions.npy``, ``labels.npy``, and
``challenge.json`` naming k, mode and n) or the same files from elsewhere. Attacks (InstaHide paper §5,
Carlini et al. 2021): Carlini et al.'s lifting + assignment (with the labels, or label-free), weak averaging
(optionally after demasking), and — with the truth's grouping — the KS test. With the owner's truth folder every
recovery is scored like ``reconguard instahide attack --truth``: ``identified`` (the recovered images' nearest
neighbours among the private images and non-members), 1-to-1 SSIM, and the **baseline** random non-members
score. Without a truth folder the recovered images are written for the owner to judge.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..attacks.instahide import ChallengeScore, score_challenge
from ..attacks.registry import encrypted_attack_names
from ..errors import ParameterError, UnknownOptionError
from ..results import Result

ATTACKS = (*encrypted_attack_names(), "ks")  # the registry's, and the KS test (the owner's: it needs the truth)


@dataclass(frozen=True)
class RecoveryRow(Result):
    """One attack's recovery; ``score`` (``identified``, 1-to-1 SSIM and their random-non-member ``baseline``) when
    the truth was given."""

    attack: str
    description: str
    n_recovered: int
    seconds: float
    score: ChallengeScore | None = None
    caveat: str = ""  # experiments.challenge.cross_caveat: why a poor score here is no evidence of privacy


@dataclass(frozen=True)
class EncryptedAudit(Result):
    folder: str
    k: int
    mode: str
    n: int | None
    n_encryptions: int
    truth: str | None
    rows: list
    ks: dict | None
    seconds: float
    recovered: dict = field(default_factory=dict)  # attack → N×C×H×W recovered images
    public: str = "digits"  # the attacker's own images the attacks used
    _skip_in_dict = ("recovered",)

    kind = "encrypted"


def encrypted(folder, *, truth=None, public="auto", public_root=None, attacks=ATTACKS, k: int | None = None,
              mode: str | None = None, n: int | None = None, label_free: bool = False, restarts: int | None = None,
              m: int = 5, demask: bool = False, pool: str = "samples", seed: int = 0,
              progress: bool = False) -> EncryptedAudit:
    """Run ``attacks`` on the release in ``folder``; score them against ``truth`` when given. ``public``: the
    attacker's own images (a name of ``load_images``, a folder or an array); ``"auto"`` takes the release's kind —
    ``sample-photos`` (crops of scikit-image's photographs) for an RGB release, ``digits`` for a grey one — not digits
    resized and coloured for a natural-image release, whose sign prior they would weaken."""
    from ..attacks.registry import pick_options
    from ..experiments.challenge import attack_challenge, ks_challenge, load_challenge
    from .loading import load_images

    bad = set(attacks) - set(ATTACKS)
    if bad:
        raise UnknownOptionError(f"unknown attacks {sorted(bad)}; choose from {ATTACKS}.")
    start = time.perf_counter()
    ch = load_challenge(folder, k, mode, n)
    from ..data.datasets import resize_images
    from ..data.files import auto_public

    public = auto_public(public, ch.encryptions.shape[1])
    # the attacker's own images, any size and colour, brought to the challenge's
    images = resize_images(load_images(public, size=ch.encryptions.shape[-1], root=public_root),
                           ch.encryptions.shape[-1], ch.encryptions.shape[1])
    rows, recovered, ks = [], {}, None
    for name in attacks:
        if name == "ks":
            if truth is None:
                continue  # the KS test groups encryptions by their private image: only the owner can run it
            r = ks_challenge(ch, truth)
            ks = r.to_dict()
            continue
        if name == "carlini" and ch.n is None:
            raise ParameterError("carlini needs n, the number of private images (challenge.json or --n).")
        r = attack_challenge(ch, name, images, label_free=label_free, pool=pool, **pick_options(
            name, {"restarts": restarts, "m": m, "demask": demask, "seed": seed, "progress": progress}))
        recovered[name] = r.images
        score = score_challenge(r.images, truth) if truth is not None else None
        caveat = " ".join(c for c in (r.caveat, score.inverted if score is not None else "") if c)
        rows.append(RecoveryRow(name, r.description, len(r.images), r.seconds, score, caveat))
    return EncryptedAudit(str(Path(folder)), ch.k, ch.mode, ch.n, int(ch.encryptions.shape[0]),
                          None if truth is None else str(truth), rows, ks, time.perf_counter() - start, recovered,
                          public if isinstance(public, str) else f"an array of {len(images)} images")
