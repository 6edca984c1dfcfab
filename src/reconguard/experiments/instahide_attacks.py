"""Every attack on Mixup and InstaHide, side by side (InstaHide paper sections 2, 5.3, appendices B, E;
Carlini et al.): for each scheme (Mixup / InstaHide, inside / cross, k), a challenge of n private digits ×
T encryptions with fresh cryptographic keys, then each attack that applies, scored against the truth (kept
apart from the attacker) by ``identified`` (nearest neighbour among the private images and ≥ 1,000
non-members) and 1-to-1 matched SSIM, next to a ``random guess`` row (n random non-member digits
submitted as the recovery). The attacker's own digits are disjoint from the challenge.

Attacks: ``carlini`` (lifting + label-constrained assignment; inside and cross mode — in cross mode the
public part of each mix is modelled as noise), ``carlini-label-free`` (the labels ignored: coefficients on
a grid, plus one start from the clustering of a similarity network the attacker trains on its own
encryptions, ``similarity_steps``),
``averaging`` (weak, top-m by |x̃| similarity), ``demask-averaging`` (a demasking network first; InstaHide),
``ks`` (appendix E.3: is one image's encryption distribution distinguishable?), ``pairs`` (shared-image
detection AUC by inner products; Mixup).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..attacks.instahide import PairAttack, SimilarityNetwork, ks_test, make_challenge, match_recovered, score_challenge
from ..attacks.registry import run_attack
from ..data import load_digits
from ..encoders import InstaHide, Mixup
from ..encoders.instahide import paper_c1
from ..errors import ParameterError, ReconguardError, UnknownOptionError
from ..observations import EncryptedRelease, Knowledge
from ..results import RecipeResult, Result
from .params import AttackSuiteParams

@dataclass(frozen=True)
class AttackRow(Result):
    scheme: str
    mode: str
    k: int
    attack: str
    identified: float | None    # fraction of private images some output's nearest neighbour is (gallery: + non-members)
    matched_ssim: float | None  # mean SSIM of the 1-to-1 matching of private images to the outputs
    extra: dict
    seconds: float


@dataclass(frozen=True)
class AttackSuiteResult(RecipeResult):
    rows: list = field(default_factory=list)
    elapsed_s: float = 0.0
    examples: dict = field(default_factory=dict)  # scheme label → {"truth": …, attack: images}
    _skip_in_dict = ("examples",)


def _scheme(spec: dict, public_pool):
    kind, mode, k = spec.get("scheme", "instahide"), spec.get("mode", "inside"), int(spec.get("k", 4))
    if kind == "mixup":
        return Mixup(k), f"Mixup k={k}"
    if kind != "instahide":
        raise UnknownOptionError(f"scheme must be 'mixup' or 'instahide', got {kind!r}.")
    return InstaHide(k, c1=paper_c1(k), mode=mode, public=public_pool if mode == "cross" else None), \
        f"InstaHide {mode} k={k}"


GUESS = "random guess"  # the baseline row: n random non-member digits submitted as the recovery


def _matched_images(recovered: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """The output matched 1-to-1 to each private image (blank where none is)."""
    _, match = match_recovered(recovered, truth)
    blank = torch.zeros_like(truth[0], dtype=torch.float64)
    rec = recovered.to(torch.float64)
    return torch.stack([rec[j] if j >= 0 else blank for j in match.tolist()])


def suite_data(p):
    """The suite's images: digits (8×8, or resized to ``size``) or Fashion-MNIST's 60,000 training images."""
    if p.dataset == "digits":
        return load_digits(p.size if p.size not in (None, 8) else None)
    from ..data import load_named
    from ..errors import UnknownOptionError

    if p.dataset != "fashion-mnist":
        raise UnknownOptionError(f"dataset must be digits or fashion-mnist, got {p.dataset!r}.")
    data = load_named("fashion-mnist", root=p.root)
    if p.size not in (None, 28):
        from ..data import ImageDataset
        from ..data.datasets import resize_images
        data = ImageDataset(resize_images(data.images, p.size), data.labels, data.name)
    return data


@dataclass(frozen=True)
class _Challenge:
    """One scheme's challenge as the suite's attacks see it (and the owner's assignment, for ks / pairs)."""

    scheme: object
    mode: str
    enc: torch.Tensor
    labels: torch.Tensor
    owner: torch.Tensor
    own: object          # the attacker's own digits (an ImageDataset)
    stats: tuple
    noise: object        # cross mode: the attacker's images like the public pool, from photographs disjoint from it
    attacker: object     # the scheme as the attacker rebuilds it: the encryptor's settings, its own noise images
    n: int
    T: int


# the suite's names for the registry's encrypted-release attacks: (registry name, variant)
VARIANTS = {"carlini": ("carlini", False), "carlini-label-free": ("carlini", True),  # variant: the labels ignored
            "averaging": ("averaging", False), "demask-averaging": ("averaging", True)}  # variant: demasked first


def _recover(p, c: _Challenge, attack: str):
    """One registry attack (``run_attack``) on the challenge's release, with the attacker's own digits, the scheme
    it is told and (label-free Carlini) the pair scores of a similarity network trained on its own encryptions."""
    name, variant = VARIANTS[attack]
    if attack == "demask-averaging" and not c.scheme.masked:
        return None
    extra, similarity = {}, None
    free = name == "carlini" and variant
    if free and p.similarity_steps:
        net = SimilarityNetwork(c.enc.shape[1], steps=p.similarity_steps, seed=0)
        net.fit(c.attacker, c.own.images, stats=c.stats)
        sim = net.run(c.enc, c.owner[:, None] == c.owner[None, :])
        similarity = sim.scores
        if sim.auc is not None:
            extra["similarity_auc_same_owner"] = sim.auc
    obs = EncryptedRelease(c.enc, None if free else c.labels, c.scheme.k, c.mode, c.n, c.scheme.c1,
                           getattr(c.scheme, "c2", 0.3), getattr(c.scheme, "normalize", "dataset"))
    know = Knowledge(images=c.own.images, labels=c.own.labels, noise_images=c.noise, scheme=c.attacker,
                     similarity=similarity)
    options = ({"restarts": p.restarts} if name == "carlini" else
               {"m": p.m, "demask": variant, "demask_epochs": p.demask_epochs, "demask_images": p.demask_images,
                "seed": 0})
    try:
        r = run_attack(name, obs, know, options)
    except ReconguardError as exc:  # e.g. the assignment search is too large for this k
        return None, {"not run": str(exc)}
    return r.images, {**extra, **({"residual": r.detail["residual"]} if "residual" in r.detail else {})}


def _ks(p, c: _Challenge, attack: str):
    r = ks_test(torch.stack([c.enc[c.owner == i][:c.T] for i in range(c.n)]))
    return None, {"statistic_all": r.statistic_all, "pvalue_all": r.pvalue_all,
                  "statistic_other": r.statistic_other, "pvalue_other": r.pvalue_other}


def _pairs(p, c: _Challenge, attack: str):
    if c.scheme.masked:
        return None
    share = c.owner[:, None] == c.owner[None, :]
    return None, {"auc_same_owner": PairAttack(reference=c.own.images).run(c.enc, share).auc}


# each suite attack: (params, challenge, name) → (images or None, extra), or None where it does not apply
SUITE = {**{name: _recover for name in VARIANTS}, "ks": _ks, "pairs": _pairs}
ATTACKS = tuple(SUITE)


def _one_scheme(p, spec, private, own, pools, attacks):
    """``(rows, examples, label)``: the random-guess row and every attack's row on one scheme's fresh challenge.
    ``pools``: the encryptor's public pool and the attacker's noise images (disjoint photographs), or None."""
    pool, noise = pools or (None, None)
    scheme, label = _scheme(spec, pool)
    attacker = scheme if scheme.mode != "cross" else _scheme(spec, noise)[0]
    name, mode = label.split(" k=")[0].split()[0], spec.get("mode", "inside")
    with tempfile.TemporaryDirectory() as tmp:
        make_challenge(scheme, private.images, private.labels, p.n, p.T, Path(tmp) / "c", Path(tmp) / "t",
                       seed=p.seed, nonmembers=own.images)
        load = lambda f: torch.from_numpy(np.load(Path(tmp) / f))  # noqa: E731
        truth = load("t/private.npy")
        c = _Challenge(scheme, mode, load("c/encryptions.npy"), load("c/labels.npy"), load("t/assignment.npy"),
                       own, scheme.channel_stats(own.images), noise if scheme.mode == "cross" else None, attacker,
                       p.n, p.T)
        ex = {"truth": truth}
        guess = score_challenge(truth, Path(tmp) / "t").baseline
        rows = [AttackRow(name, mode, scheme.k, GUESS, guess.identified, guess.matched_ssim, {}, 0.0)]
        for attack in attacks:
            start = time.perf_counter()
            out = SUITE[attack](p, c, attack)
            if out is None:
                continue
            images, extra = out
            sc = score_challenge(images, Path(tmp) / "t") if images is not None else None
            if images is not None:
                ex[attack] = _matched_images(images, truth).float()
                if sc.n_recovered != sc.n_true:  # more outputs than private images: a guess of that size
                    extra = {**extra, "outputs": sc.n_recovered, "guess_identified": sc.baseline.identified,
                             "guess_ssim": sc.baseline.matched_ssim}
            rows.append(AttackRow(name, mode, scheme.k, attack, sc.identified if sc else None,
                                  sc.matched_ssim if sc else None, extra, time.perf_counter() - start))
    return rows, ex, label


def run_attacks(p: AttackSuiteParams, progress=None, units=None) -> tuple[list, dict]:
    """Every attack on every scheme; ``units`` (a UnitCache) keeps finished schemes for ``--resume``."""
    from .units import UnitCache, plain, restore

    units = units or UnitCache(None, {})
    digits = suite_data(p)
    perm = torch.randperm(len(digits), generator=torch.Generator().manual_seed(p.seed))
    private, own = digits.subset(perm[:1000]), digits.subset(perm[1000:])
    attacks = list(p.attacks or ATTACKS)
    bad = set(attacks) - set(ATTACKS)
    if bad:
        raise UnknownOptionError(f"unknown attacks {sorted(bad)}; known: {', '.join(ATTACKS)}.")
    pools = None
    rows, examples = [], {}
    for spec in p.schemes:
        key = repr(sorted(spec.items()))
        saved = units.get(key)
        if saved is None:
            if spec.get("mode") == "cross" and pools is None:  # the encryptor's and the attacker's: disjoint photographs
                from ..data.photos import public_pools
                pools = tuple(torch.as_tensor(q, dtype=torch.float32)
                              for q in public_pools(2000, private.shape[-1], private.shape[0], p.seed))
            new, ex, label = _one_scheme(p, spec, private, own, pools, attacks)
            units.put(key, {"rows": [plain(r) for r in new], "label": label, "examples": ex})
            saved = {"rows": new, "label": label, "examples": ex}
        else:
            saved = {**saved, "rows": [restore(AttackRow, r) for r in saved["rows"]]}
        rows += saved["rows"]
        examples[saved["label"]] = saved["examples"]
        if progress is not None:
            progress.update(1)
    return rows, examples


def run_public_search(k: int = 6, size: int = 16, source_size: int = 20, n_sources: int = 400, queries: int = 200,
                      scorers=("cosine", "shift-cosine", "ssim", "learned"), steps: int = 600, seed: int = 0,
                      progress: bool = False) -> list:
    """Section 5.3's public-image search against cross-dataset InstaHide whose public patches are random
    ``size`` crops of ``source_size`` scikit-image patches (the attacker holds the sources): private
    digits (``size``×``size``), the attacker's own digits disjoint from them; one SearchResult per scorer
    (hit rate in the top ⌈√N⌉, and chance)."""
    from ..attacks.instahide.search import PublicSearchAttack, random_crops
    from ..checks import check_positive_int
    from .instahide import public_pool

    for value, name in ((k, "k"), (size, "size"), (source_size, "source_size"), (n_sources, "sources"),
                        (queries, "queries"), (steps, "steps")):
        check_positive_int(value, name)
    if not 3 <= k <= n_sources + 2:
        raise ParameterError(f"k={k}: cross-dataset mixes need 3 ≤ k ≤ sources + 2 = {n_sources + 2} (2 private images "
                             "and k − 2 distinct public ones).")
    if size > source_size:
        raise ParameterError(f"size={size} crops cannot come from {source_size}×{source_size} sources; lower --size.")

    store = public_pool("samples", (1, source_size, source_size))
    if n_sources > len(store):
        raise ParameterError(f"n_sources={n_sources} but the scikit-image pool has {len(store)} patches.")
    g = torch.Generator().manual_seed(seed)
    sources = store.get(torch.randperm(len(store), generator=g)[:n_sources])
    digits = load_digits(size)
    perm = torch.randperm(len(digits), generator=torch.Generator().manual_seed(seed + 3))
    private, own = digits.images[perm[:queries]], digits.images[perm[1000:]]
    patches, owner = random_crops(sources, size, 1, g)
    scheme = InstaHide(k, c1=paper_c1(k), mode="cross", public=patches)
    enc = scheme.encrypt(private, seed=seed + 5)
    truth = owner[enc.key.partners[:, 2:]]
    stats = scheme.channel_stats(own)
    rows = []
    for scorer in scorers:
        attack = PublicSearchAttack(scorer, steps=steps, seed=seed, progress=progress)
        if scorer == "learned":
            attack.fit(InstaHide(k, c1=paper_c1(k), mode="cross", public=patches), own, sources, size)
        rows.append(attack.run(enc.images, sources, true_sources=truth, stats=stats))
    return rows
