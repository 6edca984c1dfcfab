"""Measurements on InstaHide encryptions (InstaHide paper, appendix E.3 and appendix A's challenge).

* ``ks_test``: can encryptions of one image be told apart from those of others by their pixel
  statistics? For every image i and encryption j, a two-sample Kolmogorov–Smirnov test (scipy) of
  the pixel values of x̃_ij against the j-th encryptions of all images ("all") and of the others
  ("other").
* ``make_challenge`` / ``score_challenge``: a challenge set — n private images each encrypted T times,
  shuffled, written as NumPy arrays with the (soft) labels, the ground truth kept in a separate
  folder — and its score: for each true image the best-matching recovered image by SSIM (max / mean
  over images) and by L2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...checks import check_positive_int
from ...errors import DataFileNotFoundError, ParameterError, ShapeError
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


def make_challenge(scheme, images: torch.Tensor, labels: torch.Tensor, n: int, T: int, out: str | Path,
                   truth: str | Path, seed: int = 0) -> Path:
    """Encrypt n private images T times each (mixing within ``images``), shuffle, and write
    ``out/encryptions.npy``, ``out/labels.npy``; ``truth/private.npy``, ``truth/assignment.npy``."""
    from ...io import atomic_file

    n, T = check_positive_int(n, "n"), check_positive_int(T, "T")
    if n > len(images):
        raise ParameterError(f"n={n} private images requested but only {len(images)} given.")
    g = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(images), generator=g)[:n]
    x, y = images[pick], labels[pick]
    encs, labs = [], []
    for t in range(T):
        enc = scheme.encrypt(x, y, seed=None)  # fresh cryptographic keys; partners among the n private images
        encs.append(enc.images)
        labs.append(enc.labels)
    E, L = torch.cat(encs), torch.cat(labs)
    owner = torch.arange(n).repeat(T)
    order = torch.randperm(n * T, generator=g)
    files = {Path(out) / "encryptions.npy": E[order], Path(out) / "labels.npy": L[order],
             Path(truth) / "private.npy": x, Path(truth) / "assignment.npy": owner[order]}
    for path, arr in files.items():
        with atomic_file(path) as tmp, open(tmp, "wb") as fh:
            np.save(fh, arr.numpy())
    return Path(out)


@dataclass(frozen=True)
class ChallengeScore(Result):
    ssim_max: float
    ssim_mean: float
    l2_mean: float
    recovered_ssim_ge_05: float  # fraction of true images with a match of SSIM ≥ 0.5
    n_true: int
    n_recovered: int


def score_challenge(recovered, truth: str | Path) -> ChallengeScore:
    """Best match (by SSIM, and by L2) of every true private image among the recovered ones."""
    from ...metrics import ssim

    path = Path(truth) / "private.npy"
    if not path.is_file():
        raise DataFileNotFoundError(f"no private.npy in {truth} (written by make_challenge / `instahide challenge`).")
    true = torch.from_numpy(np.load(path)).to(torch.float64)
    rec = torch.as_tensor(recovered, dtype=torch.float64)
    rec = rec.reshape(-1, *true.shape[1:])
    if rec.shape[0] == 0:
        raise ShapeError("no recovered images to score.")
    best_ssim, best_l2 = [], []
    for t in true:
        s = ssim(rec, t.expand_as(rec))
        best_ssim.append(float(s.max()))
        best_l2.append(float(((rec - t) ** 2).flatten(1).mean(1).sqrt().min()))
    bs = np.array(best_ssim)
    return ChallengeScore(float(bs.max()), float(bs.mean()), float(np.mean(best_l2)), float((bs >= 0.5).mean()),
                          int(true.shape[0]), int(rec.shape[0]))
