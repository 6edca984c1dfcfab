"""Test accuracy with InstaHide, against vanilla training, Mixup and DP-SGD (InstaHide paper, section
5.1–5.2: Figure 3 and Table 2 — accuracy against k, inside vs cross dataset, vs the baselines).

Each method trains the same classifier with ``reconguard.train.fit`` on the same split; InstaHide and
Mixup report plain inference and encrypted inference averaged over T = 1 and T encryptions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch.utils.data import TensorDataset

from ..data import ImageDataset, PatchStore, prepare_public
from ..defenses import DPSGD, InstaHideTraining, predict_encrypted, predict_plain
from ..metrics import accuracy
from ..encoders import InstaHide, Mixup
from ..defenses.registry import DEFENSES
from ..encoders.instahide import paper_c1
from ..errors import ParameterError, UnknownOptionError
from ..nn import mnist_cnn, seeded
from ..results import RecipeResult, Result
from ..train import fit

DP_METHOD = next(n for n, (cls, _) in DEFENSES.items() if cls is DPSGD)  # DP-SGD, by its registry name
METHODS = ("vanilla", "mixup", "instahide", DP_METHOD)


@dataclass(frozen=True)
class AccuracyRow(Result):
    method: str
    k: int
    mode: str
    acc_plain: float
    acc_T1: float | None
    acc_T: float | None
    T: int
    epsilon: float | None
    epochs: int
    seconds: float

    @property
    def label(self) -> str:
        if self.method in ("vanilla", DP_METHOD):
            return self.method if self.epsilon is None else f"{self.method} (ε={self.epsilon:.2g})"
        return f"{self.method} {self.mode} k={self.k}" if self.method == "instahide" else f"mixup k={self.k}"


@dataclass(frozen=True)
class AccuracyResult(RecipeResult):
    rows: list = field(default_factory=list)
    elapsed_s: float = 0.0
    dataset: str = ""
    n_train: int = 0
    n_test: int = 0


def expand_methods(specs: list[dict]) -> list[dict]:
    out = []
    for spec in specs:
        method = spec.get("method")
        if method not in METHODS:
            raise UnknownOptionError(f"method {method!r} is not one of {METHODS}.")
        unknown = set(spec) - {"method", "k", "mode"}
        if unknown:
            raise UnknownOptionError(f"method spec has unknown keys {sorted(unknown)}; allowed: method, k, mode.")
        ks = spec.get("k", [1])
        modes = spec.get("mode", ["inside"])
        for k in (ks if isinstance(ks, list) else [ks]):
            for mode in (modes if isinstance(modes, list) else [modes]):
                out.append({"method": method, "k": int(k), "mode": mode})
    return out


def _split(data: ImageDataset, seed: int, test_fraction: float = 0.2):
    perm = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
    n_test = int(len(data) * test_fraction)
    test, rest = data.subset(perm[:n_test]), data.subset(perm[n_test:])
    n_val = max(1, int(0.1 * len(rest)))
    return rest.subset(torch.arange(n_val, len(rest))), rest.subset(torch.arange(n_val)), test


def run_accuracy(data: ImageDataset, methods: list[dict], cfg=None, *, public=None, device=None, progress=None,
                 units=None) -> tuple[list[AccuracyRow], int, int]:
    """Train and test every method with the typed settings ``cfg`` (``AccuracyParams``, whole: epochs, T, own_floor,
    dp, lr, seed); ``units`` (a UnitCache) keeps finished methods for ``--resume``."""
    from .params import AccuracyParams
    from .units import UnitCache, plain, restore

    cfg = cfg or AccuracyParams()
    epochs, T, own_floor, dp, lr, seed = cfg.epochs, cfg.T, cfg.own_floor, cfg.dp, cfg.lr, cfg.seed

    units = units or UnitCache(None, {})
    train, val, test = _split(data, seed)
    stats = InstaHide().channel_stats(train.images)
    norm = lambda d: TensorDataset(InstaHide.normalize_images(d.images, stats), d.labels)  # noqa: E731
    rows = []
    for spec in methods:
        method, k, mode = spec["method"], spec["k"], spec["mode"]
        key = repr(sorted(spec.items()))
        saved = units.get(key)
        if saved is not None:
            rows.append(restore(AccuracyRow, saved))
            if progress is not None:
                progress.update(1)
            continue
        with seeded(seed):
            model = mnist_cnn(data.shape, int(data.labels.max()) + 1)
        start = time.perf_counter()
        acc_t1 = acc_t = eps = None
        if method in ("vanilla", DP_METHOD):
            defense = DPSGD(seed=seed, **(dp or {})) if method == DP_METHOD else None
            res = fit(model, norm(train), norm(val), epochs=epochs, lr=lr, seed=seed, device=device, progress=False,
                      defense=defense)
            if method == DP_METHOD:
                eps = res.history[-1].get("epsilon")
        else:
            if method == "mixup":
                scheme = Mixup(k, num_classes=int(data.labels.max()) + 1)
            else:
                if mode == "cross" and k > 2 and public is None:
                    raise ParameterError("cross-dataset InstaHide needs a public pool (params.public).")
                scheme = InstaHide(k, c1=paper_c1(k), mode=mode, public=public,
                                   num_classes=int(data.labels.max()) + 1)
            defense = InstaHideTraining(scheme, seed=None)
            defense.stats = stats
            fit(model, train, val, epochs=epochs, lr=lr, seed=seed, device=device, progress=False, defense=defense)
            acc_t1 = accuracy(predict_encrypted(model, scheme, test.images, stats, T=1, own_floor=own_floor,
                                                seed=seed), test.labels)
            acc_t = accuracy(predict_encrypted(model, scheme, test.images, stats, T=T, own_floor=own_floor,
                                               seed=seed), test.labels)
        acc_plain = accuracy(predict_plain(model, test.images, stats), test.labels)
        rows.append(AccuracyRow(method, k, mode, acc_plain, acc_t1, acc_t, T, eps, epochs,
                                time.perf_counter() - start))
        units.put(key, plain(rows[-1]))
        if progress is not None:
            progress.update(1)
    return rows, len(train), len(test)


def public_pool(spec, shape) -> PatchStore | None:
    """``None``, a PatchStore folder, or ``"samples"``: patches cut from scikit-image's samples (cached in runs/)."""
    if spec in (None, False):
        return None
    c, h, _ = shape
    if spec == "samples":
        from pathlib import Path
        folder = Path("runs") / "public" / f"samples-{c}x{h}"
        if (folder / "patches.npy").is_file():
            return PatchStore(folder)
        return prepare_public(folder, size=h, channels=c)
    return PatchStore(spec)
