"""The attacks on an :class:`~reconguard.observations.EncryptedRelease` that are chosen by name
(``attacks.registry``): ``carlini`` (Carlini et al. 2021, ``CarliniAttack``) and ``averaging`` (their §4 weak
averaging, after a demasking network with ``demask``). One runner each, ``(observation, knowledge, options) →
Recovered``, used by the InstaHide attack suite, ``reconguard instahide attack`` and ``reconguard audit encrypted``:
the settings of the encryptor come from the observation (k, mode, n, c1, c2, normalisation), the attacker's own
images, its model of the encryptor and its pair scores from :class:`~reconguard.observations.Knowledge`.
Both return images in [0, 1]: de-normalised with the owner's constants where the release publishes them, else —
carlini, inside, and cross on natural images (its sign-synchronising path) — with the ones read off the recovery's
range (``denormalize="range"``, the default; ``"own"``: the attacker's own images' statistics), and with the
attacker's own images' statistics otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ...errors import ParameterError
from ..base import Recovered


@dataclass(frozen=True)
class CarliniOptions:
    restarts: int | None = None     # random starts, or the sync path's k-means starts (None: the attack's own rule)
    solver: str = "auto"
    search: str = "auto"
    noise_rank: int = 20
    splits: int = 10
    split_patience: int | None = None  # stop the split moves after this many rejected in a row (None: all ``splits``)
    max_rounds: int | None = None   # one start's (X-step, assignment) rounds over all its phases at most (None: no cap)
    prior_moves: int = 8            # rounds of single-pixel moves under the attacker's image prior (carlini_signs; 0: none)
    similarity_steps: int = 0       # train Carlini et al.'s similarity network on the attacker's own images (0: none)
    search_pixels: int | str | None = "auto"  # the assignment search's random pixels (auto: carlini_options.searched_pixels)
    denormalize: str = "range"      # unpublished normalisation (inside; cross, natural): the recovery's range, or "own"
    sign_sync: bool | str = "auto"  # cross with labels: carlini_sync's start and X-step ("auto": natural images; "on"/"off")
    public_normalization: str = "auto"  # cross: the owner's public-image statistics, "private" / "own" (auto: read off the moments)
    seed: int = 0
    progress: bool = False


@dataclass(frozen=True)
class AveragingOptions:
    m: int = 5                      # neighbours averaged
    demask: bool = False            # undo the sign mask first with a network trained on the attacker's own mixes
    demask_epochs: int = 30
    demask_images: int | None = None  # own images the demasker's mixes are made of (None: all)
    seed: int = 0


def _own(know, obs):
    if know.images is None:
        raise ParameterError("this attack needs the attacker's own images of the same kind "
                             "(Knowledge(images=…), N×C×H×W in [0, 1]).")
    return torch.as_tensor(know.images, dtype=torch.float32)


def _scheme(obs, know, own, noise, convention: str = "auto"):
    """The attacker's model of the encryptor: ``know.scheme`` when given, else one built from the release's settings
    (cross mode: the public part's normalisation ``convention``, or as ``public_convention`` reads it from the
    encryptions when "auto")."""
    if know.scheme is not None:
        return know.scheme
    from ...encoders import InstaHide
    from .carlini_model import public_convention

    if convention == "auto":
        convention = "private"
        if obs.mode == "cross" and noise is not None:
            convention = public_convention(obs.encryptions, obs.labels, own, noise, obs.k, obs.c2,
                                           normalize=obs.normalization, c1=obs.c1)
    return InstaHide(obs.k, c1=obs.c1, c2=obs.c2, mode=obs.mode, public=know.public_pool, public_normalize=convention,
                     normalize=obs.normalization)


def run_carlini(obs, know, opts: CarliniOptions):
    """Carlini et al.'s attack; label-free when ``obs.labels`` is None. Pair scores: ``know.similarity`` (N×N), or a
    similarity network trained for ``opts.similarity_steps`` on the attacker's own images encrypted by
    ``_scheme``. Cross mode models the public part with ``know.noise_images`` (images like the scheme's pool)."""
    from .carlini import CarliniAttack
    from .similarity import SimilarityNetwork

    own = _own(know, obs)
    if obs.n is None:
        raise ParameterError("carlini needs n, the number of private images behind the release (challenge.json or --n).")
    noise = None if know.noise_images is None else torch.as_tensor(know.noise_images, dtype=torch.float32)
    atk = CarliniAttack(obs.k, obs.n, restarts=opts.restarts, c1=obs.c1, c2=obs.c2, mode=obs.mode, seed=opts.seed,
                        solver=opts.solver, search=opts.search, noise_rank=opts.noise_rank, splits=opts.splits,
                        split_patience=opts.split_patience, max_rounds=opts.max_rounds, prior_moves=opts.prior_moves,
                        search_pixels=opts.search_pixels, normalize=obs.normalization, denormalize=opts.denormalize, progress=opts.progress,
                        sign_sync={"on": True, "off": False}.get(opts.sign_sync, opts.sign_sync),
                        public_normalization=opts.public_normalization)
    similarity = know.similarity
    if obs.labels is None:  # a search too large fails here, before any network is trained
        atk.check_free_search(obs.n, len(obs.encryptions), obs.encryptions[0].numel(),
                              similarity is not None or bool(opts.similarity_steps))
    if similarity is None and opts.similarity_steps:
        net = SimilarityNetwork(obs.encryptions.shape[1], steps=opts.similarity_steps, seed=opts.seed,
                                progress=opts.progress)
        net.fit(_scheme(obs, know, own, noise, opts.public_normalization), own)
        similarity = net.scores(obs.encryptions)
    r = atk.run(obs.encryptions, obs.labels, own, noise_images=noise, similarity=similarity)
    return Recovered("carlini", r.images, asdict(opts),
                     {"residual": r.residual, "solver": r.solver, "search": r.search,
                      "public_normalization": r.public_normalization, "label_free": obs.labels is None})


def run_averaging(obs, know, opts: AveragingOptions):
    """Weak averaging (Carlini et al. §4): neighbours by |encryption| similarity, the private image's coefficient
    from the released labels (1/k without them); ``demask``: a ``Demasker`` trained on the attacker's own images
    encrypted by ``_scheme`` first. Without own images the estimates stay in the scheme's normalised units."""
    from ...encoders import InstaHide
    from .averaging import AveragingAttack
    from .demask import Demasker

    e = obs.encryptions
    own = None if know.images is None else torch.as_tensor(know.images, dtype=torch.float32)
    stats = None if own is None else InstaHide(obs.k, normalize=obs.normalization).channel_stats(own)
    if opts.demask:
        own = _own(know, obs)
        scheme = _scheme(obs, know, own, None)
        if not scheme.masked:
            raise ParameterError("demask: the scheme has no sign mask to undo (a Mixup release); use averaging alone.")
        use = own[:opts.demask_images or len(own)]
        labels = None if know.labels is None else torch.as_tensor(know.labels)[:len(use)]
        mixes = scheme.encrypt(use, labels, seed=opts.seed + 1, stats=stats)
        dm = Demasker(e.shape[1], epochs=opts.demask_epochs, seed=opts.seed)
        dm.fit(mixes.images * mixes.key.mask)
        e = dm.run(e).demasked
    lam = float(obs.labels.max(1).values.mean()) if obs.labels is not None else None
    r = AveragingAttack(strong=False, m=opts.m, own_coefficient=lam).run(e, k=obs.k)
    images = r.estimates.float()
    if stats is not None:  # back to pixels with the attacker's statistics
        images = (images * torch.tensor(stats[1]).reshape(1, -1, 1, 1) + torch.tensor(stats[0]).reshape(1, -1, 1, 1))
        images = images.clamp(0, 1)
    return Recovered("averaging", images, asdict(opts), {"demasked": bool(opts.demask)})
