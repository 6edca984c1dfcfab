"""Measurements on InstaHide encryptions (InstaHide paper, appendix E.3 and appendix A's challenge).

* ``ks_test``: can encryptions of one image be told apart from those of others by their pixel
  statistics? For every image i and encryption j, a two-sample Kolmogorov–Smirnov test (scipy) of
  the pixel values of x̃_ij against the j-th encryptions of all images ("all") and of the others
  ("other").
* ``make_challenge`` / ``score_challenge``: a challenge set — n private images each encrypted T times,
  shuffled, written as NumPy arrays with the (soft) labels, the ground truth kept in a separate
  folder with non-member images of the same kind — and its score, one a stranger cannot game:

  - ``identified``: the fraction of private images i for which some recovered image's nearest
    neighbour in the gallery (the n private images plus the non-members, ≥ 1,000 where the data
    allows) is i. Distance: L2 between per-image standardised images (zero mean, unit norm), so a
    recovery off by brightness or contrast still counts; n random digits reach about n/(n + N).
    ``identified_plain``: the same by plain L2 between the images as they are.
  - ``matched_ssim``: mean SSIM of a 1-to-1 (Hungarian) matching of private to recovered images.
    (The old "best match SSIM ≥ 0.5" was met by 97–100 % of *random* digits: every private digit
    resembles one of n others.)
  - ``baseline``: the same scores for as many random non-members as there are recovered images (at
    least n; each scored with itself left out of the gallery): what a guess of the same size reaches. An
    attack that outputs one estimate per encryption (averaging: n·T images) gets the baseline of n·T
    guesses, which identifies far more than n guesses do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...checks import check_positive_int
from ...errors import ParameterError, ShapeError
from ...results import Result


@dataclass(frozen=True)
class KSResult(Result):
    statistic_all: float
    pvalue_all: float
    statistic_other: float
    pvalue_other: float
    n_images: int
    n_encryptions: int


def ks_test(encryptions: torch.Tensor) -> KSResult:
    """``encryptions``: ``n×T×…`` (T encryptions of each of n images); mean KS statistic and p-value."""
    from scipy.stats import ks_2samp

    e = torch.as_tensor(encryptions, dtype=torch.float64)
    if e.ndim < 3 or e.shape[0] < 2:
        raise ShapeError(f"encryptions must be n×T×… with n ≥ 2 images, got {tuple(e.shape)}.")
    n, T = e.shape[0], e.shape[1]
    flat = e.reshape(n, T, -1).numpy()
    s_all, p_all, s_oth, p_oth = [], [], [], []
    for j in range(T):
        pooled = flat[:, j].reshape(-1)
        for i in range(n):
            others = np.delete(flat[:, j], i, axis=0).reshape(-1)
            r_all, r_oth = ks_2samp(flat[i, j], pooled), ks_2samp(flat[i, j], others)
            s_all.append(r_all.statistic)
            p_all.append(r_all.pvalue)
            s_oth.append(r_oth.statistic)
            p_oth.append(r_oth.pvalue)
    return KSResult(float(np.mean(s_all)), float(np.mean(p_all)), float(np.mean(s_oth)), float(np.mean(p_oth)), n, T)


MIN_NONMEMBERS = 1000  # gallery size asked for by the score (fewer are used, and recorded, when the data has fewer)


def make_challenge(scheme, images: torch.Tensor, labels: torch.Tensor, n: int, T: int, out: str | Path,
                   truth: str | Path, seed: int = 0, nonmembers: torch.Tensor | None = None,
                   key_seed: int | None = None) -> Path:
    """Encrypt n private images T times each (mixing within ``images``), shuffle, and write
    ``out/encryptions.npy``, ``out/labels.npy``; ``truth/private.npy``, ``truth/assignment.npy`` and
    ``truth/nonmembers.npy``: the images of ``images`` not picked, followed by ``nonmembers`` (more images
    of the same kind, e.g. the attacker's own) when given; ``out/challenge.json`` records k, n, T, mode,
    c1, c2, the image shape and the normalisation, which the attack commands read and check. The keys are
    fresh cryptographic randomness unless ``key_seed`` is given (reproducible challenges for tests)."""
    from ...io import atomic_file, write_json_atomic

    n, T = check_positive_int(n, "n"), check_positive_int(T, "T")
    if n > len(images):
        raise ParameterError(f"n={n} private images requested but only {len(images)} given.")
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(images), generator=g)
    pick = perm[:n]
    x, y = images[pick], labels[pick]
    others = torch.as_tensor(images[perm[n:]], dtype=torch.float32)
    if nonmembers is not None:
        extra = torch.as_tensor(nonmembers, dtype=torch.float32)
        if extra.shape[1:] != x.shape[1:]:
            raise ShapeError(f"non-member images must be N×{tuple(x.shape[1:])}, got {tuple(extra.shape)}.")
        others = torch.cat([others, extra])
    if len(others) == 0:
        raise ShapeError(f"non-member images must be N×{tuple(x.shape[1:])} with N ≥ 1, got {tuple(others.shape)}.")
    encs, labs = [], []
    for t in range(T):
        # fresh cryptographic keys (or reproducible ones from key_seed); partners among the n private images
        enc = scheme.encrypt(x, y, seed=None if key_seed is None else key_seed * 1_000_003 + t)
        encs.append(enc.images)
        labs.append(enc.labels)
    E, L = torch.cat(encs), torch.cat(labs)
    owner = torch.arange(n).repeat(T)
    order = torch.randperm(n * T, generator=g)
    files = {Path(out) / "encryptions.npy": E[order], Path(out) / "labels.npy": L[order],
             Path(truth) / "private.npy": x, Path(truth) / "assignment.npy": owner[order],
             Path(truth) / "nonmembers.npy": others}
    for path, arr in files.items():
        with atomic_file(path) as tmp, open(tmp, "wb") as fh:
            np.save(fh, arr.numpy())
    norm = scheme.normalize if isinstance(scheme.normalize, str) else [list(v) for v in scheme.normalize]
    write_json_atomic(Path(out) / "challenge.json", {
        "k": scheme.k, "n": n, "T": T, "mode": scheme.mode, "c1": scheme.c1,
        "c2": scheme.c2 if scheme.mode == "cross" else None, "masked": bool(scheme.masked),
        "shape": list(x.shape[1:]), "normalization": norm, "labels": "soft (private part)",
        "public_normalize": getattr(scheme, "public_normalize", None) if scheme.mode == "cross" else None})
    return Path(out)


def read_challenge_info(folder: str | Path) -> dict | None:
    """``challenge.json`` of a challenge folder (k, n, T, mode, c1, c2, shape, normalisation), or None."""

    from ...inputs import CHALLENGE_FIELDS, check_fields, load_json

    path = Path(folder) / "challenge.json"
    if not path.is_file():
        return None
    return check_fields(load_json(path, "challenge description"), CHALLENGE_FIELDS, str(path))


@dataclass(frozen=True)
class ChallengeBaseline(Result):
    """What random non-member images, as many as were recovered (at least n), score when submitted."""

    identified: float
    matched_ssim: float
    n_guesses: int = 0
    identified_plain: float | None = None


@dataclass(frozen=True)
class ChallengeScore(Result):
    identified: float      # fraction of private images that some recovered image's nearest neighbour is
    matched_ssim: float    # mean SSIM of the 1-to-1 matching (Hungarian) of private to recovered images
    baseline: ChallengeBaseline
    n_true: int
    n_recovered: int
    n_nonmembers: int      # non-members in the gallery (identification is harder the more there are)
    identified_plain: float | None = None  # the same by plain L2 nearest neighbour (no per-image standardisation)
    identified_inverted: float | None = None  # the same images negated (1 − x: a photographic negative), standardised

    @property
    def inverted(self) -> str:
        """A warning when the recovery negated identifies far more than as given: the attack recovered the images up
        to the one global sign that |x̃| leaves open and the attacker's own images (its prior) set wrong; "" else."""
        inv = self.identified_inverted
        if inv is None or inv < self.identified + INVERTED_MARGIN or inv < self.baseline.identified + INVERTED_MARGIN:
            return ""
        return (f"the recovered images negated (1 − x, a photographic negative) identify {100 * inv:.0f}% of the private "
                f"images against {100 * self.identified:.0f}% as given: the attack recovered them up to the global sign "
                "|x̃| leaves open, which the attacker's own images (--public) set wrong — give own images of the private "
                "kind; a poor score here is no evidence of privacy.")

    def summary(self) -> str:
        return (f"identified {100 * self.identified:.0f}% of the {self.n_true} private images (nearest neighbour "
                f"among them and {self.n_nonmembers} non-members), 1-to-1 SSIM {self.matched_ssim:.3f}; "
                f"baseline ({self.baseline.n_guesses} random non-members): identified {100 * self.baseline.identified:.0f}%, "
                f"1-to-1 SSIM {self.baseline.matched_ssim:.3f}" + (f". Warning: {self.inverted}" if self.inverted else ""))


INVERTED_MARGIN = 0.25  # ChallengeScore.inverted: how much more the negated recovery must identify to be reported


def standardise(x: torch.Tensor) -> torch.Tensor:
    """Each image (row) flattened, centred and scaled to unit norm (float64): inner products are correlations."""
    v = x.reshape(x.shape[0], -1).to(torch.float64)
    v = v - v.mean(1, keepdim=True)
    return v / v.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _identified(recovered: torch.Tensor, gallery: torch.Tensor, n_private: int,
                exclude: torch.Tensor | None = None, standardised: bool = True) -> float:
    """Fraction of the first ``n_private`` gallery images that are some recovered image's nearest neighbour (L2
    between per-image standardised images, or plain ones); ``exclude[j]``: a gallery index that recovered image j
    may not match (itself, for the baseline)."""
    prep = standardise if standardised else (lambda x: x.reshape(x.shape[0], -1).to(torch.float64))
    d = torch.cdist(prep(recovered), prep(gallery))
    if exclude is not None:
        d[torch.arange(d.shape[0]), exclude] = math.inf
    nearest = d.argmin(1)
    return float(torch.unique(nearest[nearest < n_private]).numel()) / n_private


def match_recovered(recovered, true) -> tuple[float, torch.Tensor]:
    """``(mean SSIM, match)`` of a maximum-weight 1-to-1 (Hungarian) matching of the private images to
    the recovered ones; ``match[i]`` is the recovered index given to private image i (−1 when there are
    fewer recovered images than private ones; those count SSIM 0)."""
    from scipy.optimize import linear_sum_assignment

    from ...metrics import ssim

    rec = torch.as_tensor(recovered, dtype=torch.float64)
    true = torch.as_tensor(true, dtype=torch.float64)
    sim = torch.stack([ssim(rec, t.expand_as(rec)) for t in true]).numpy()  # n_true × n_rec
    rows, cols = linear_sum_assignment(-sim)
    match = torch.full((true.shape[0],), -1, dtype=torch.long)
    match[torch.as_tensor(rows)] = torch.as_tensor(cols, dtype=torch.long)
    return float(sim[rows, cols].sum()) / true.shape[0], match


def _matched_ssim(recovered: torch.Tensor, true: torch.Tensor) -> float:
    return match_recovered(recovered, true)[0]


def _load_truth(truth: str | Path, name: str, what: str) -> torch.Tensor:
    from ...checks import load_array

    hint = (f"{what} (written by make_challenge / `reconguard instahide challenge`; an older challenge folder lacks "
            "nonmembers.npy: write it again, or pass nonmembers=)")
    return load_array(Path(truth) / f"{name}.npy", hint).to(torch.float64)


def score_challenge(recovered, truth: str | Path, nonmembers=None, seed: int = 0) -> ChallengeScore:
    """Score ``recovered`` (``R×C×H×W`` in [0, 1]) against the challenge's truth folder (module docstring)."""
    true = _load_truth(truth, "private", "the private images")
    others = (torch.as_tensor(nonmembers, dtype=torch.float64) if nonmembers is not None
              else _load_truth(truth, "nonmembers", "non-member images of the same kind"))
    rec = torch.as_tensor(recovered, dtype=torch.float64)
    if rec.numel() == 0:
        raise ShapeError("no recovered images to score.")
    if rec.numel() % true[0].numel():
        raise ShapeError(f"recovered images must be N×{tuple(true.shape[1:])}, got {tuple(rec.shape)}.")
    rec = rec.reshape(-1, *true.shape[1:])
    if not bool(torch.isfinite(rec).all()):
        raise ShapeError("the recovered images hold NaN or Inf values.")
    others = others.reshape(-1, *true.shape[1:])
    n = true.shape[0]
    gallery = torch.cat([true, others])
    g = torch.Generator().manual_seed(seed)
    size = min(max(n, rec.shape[0]), others.shape[0])
    pick = torch.randperm(others.shape[0], generator=g)[:size]
    guess = others[pick]
    baseline = ChallengeBaseline(_identified(guess, gallery, n, exclude=n + pick), _matched_ssim(guess, true), size,
                                 _identified(guess, gallery, n, exclude=n + pick, standardised=False))
    return ChallengeScore(_identified(rec, gallery, n), _matched_ssim(rec, true), baseline, n, int(rec.shape[0]),
                          int(others.shape[0]), _identified(rec, gallery, n, standardised=False),
                          _identified(1.0 - rec, gallery, n))
