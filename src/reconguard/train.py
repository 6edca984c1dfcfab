"""The one training loop: ``fit(model, train, val, loss=…, defense=…)``.

Adam (β 0.9/0.999, lr 1e−3), batch 128, MultiStepLR, optional augmentations (:mod:`reconguard.augment`),
the checkpoint kept by validation loss, validation accuracy, a validation-accuracy window (AT-AT,
appendix B) or the last epoch, a JSON-able history, progress bars, and checkpoints a killed run
resumes from with the same final weights: model, optimiser, scheduler, the defense's own state and
the loader order are restored, and the global torch RNG is re-seeded from ``(seed, epoch)`` at the
start of every epoch, so an epoch replayed after a kill draws the same random numbers. Under
``torchrun`` (``torch.distributed`` initialised), the model is wrapped in DistributedDataParallel,
each rank reads its shard (DistributedSampler), and only rank 0 writes checkpoints and bars.

The loss is ``loss(model, batch) -> (loss, metrics)``; cross-entropy is the default.

A ``defense`` is a plain object; fit calls whichever of these hooks it has (none is required):

* ``prepare(model) -> model`` once, before the optimiser is built (change the architecture, freeze layers);
* ``wrap_model(model, optimizer, train, batch_size, epochs) -> (model, optimizer)`` once after (e.g. DP-SGD,
  whose accountant needs the sampling rate fit really uses);
* ``on_epoch(train, epoch) -> Dataset`` the data of this epoch (e.g. re-encrypted every epoch);
* ``wrap_loader(loader, epoch) -> iterable`` (e.g. Poisson sampling);
* ``loss(model, batch) -> (loss, metrics)`` replaces ``loss`` (fit sets ``defense.epoch`` and
  ``defense.total_epochs`` before each epoch);
* ``on_batch(model, step)`` after each optimiser step (e.g. thresholding a mask, a second optimiser);
* ``on_val(val, epoch) -> Dataset`` the validation data in the form the model is trained on;
* ``after_epoch(epoch, record)`` adds to the epoch's history record (e.g. ε spent);
* ``state_dict()`` / ``load_state_dict(state)`` the defense's own trained state, checkpointed with the model;
* ``finish(model)`` once at the end (remove hooks);
* attribute ``select`` (and ``acc_window``): the checkpoint rule it needs, used when fit's ``select`` is None.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from .checks import check_positive_int, check_scalar
from .errors import CorruptDataError, ParameterError, UnknownOptionError
from .progress import progress as progress_bar
from .results import Result

LossFn = Callable[[nn.Module, tuple], tuple[torch.Tensor, dict]]


HOOKS = frozenset({  # what fit calls, when a defense defines it
    "prepare", "wrap_model", "wrap_loader", "loss", "on_batch", "on_epoch", "on_val", "after_epoch", "finish",
    "state_dict", "load_state_dict",
})


def defense_hook(defense, name: str):
    """The defense's hook ``name`` (one of :data:`HOOKS`), or None when it has none (or there is no defense)."""
    if name not in HOOKS:
        raise KeyError(f"{name!r} is not a declared defense hook ({', '.join(sorted(HOOKS))}).")
    return getattr(defense, name, None) if defense is not None else None


def classification_loss(model: nn.Module, batch) -> tuple[torch.Tensor, dict]:
    """Cross-entropy on hard (class index) or soft (N×classes) labels; reports accuracy."""
    x, y = batch[0], batch[1]
    logits = model(x)
    if y.ndim == 2:
        loss = -(y * torch.log_softmax(logits, 1)).sum(1).mean()
        correct = (logits.argmax(1) == y.argmax(1)).float().sum()
    else:
        loss = nn.functional.cross_entropy(logits, y)
        correct = (logits.argmax(1) == y).float().sum()
    return loss, {"correct": float(correct)}


@dataclass(frozen=True)
class FitResult(Result):
    history: list = field(default_factory=list)  # one dict per epoch
    best_epoch: int = -1
    best_val_loss: float = math.nan
    best_val_acc: float = math.nan
    epochs_run: int = 0
    resumed_from: int = 0


def _loader(data: Dataset, batch_size: int, shuffle: bool, seed: int, epoch: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed * 100003 + epoch)  # the order depends only on (seed, epoch): resumable
    if _distributed():
        from torch.utils.data.distributed import DistributedSampler
        sampler = DistributedSampler(data, shuffle=shuffle, seed=seed, drop_last=False)
        sampler.set_epoch(epoch)
        return DataLoader(data, batch_size=batch_size, sampler=sampler, drop_last=False)
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=g, drop_last=False)


def _distributed() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _rank() -> int:
    return torch.distributed.get_rank() if _distributed() else 0


def _evaluate(model, data, loss, batch_size, device) -> dict:
    model.eval()
    total, n, correct = 0.0, 0, 0.0
    with torch.no_grad():
        for batch in DataLoader(data, batch_size=batch_size):
            batch = tuple(b.to(device) for b in batch)
            value, metrics = loss(model, batch)
            total += float(value) * batch[0].shape[0]
            n += batch[0].shape[0]
            correct += metrics.get("correct", 0.0)
    return {"val_loss": total / n, "val_acc": correct / n}


SELECT_RULES = ("val_loss", "val_acc", "val_acc_window", "last")


def _score(select: str, record: dict, acc_window) -> float:
    """Lower is better; ``inf`` means the epoch is not eligible."""
    if select == "last":
        return -float(record["epoch"])
    if "val_loss" not in record:
        return record["train_loss"]
    if select == "val_loss":
        return record["val_loss"]
    if select == "val_acc":
        return -record["val_acc"]
    lo, hi = acc_window
    return -float(record["epoch"]) if lo <= record["val_acc"] <= hi else math.inf  # the latest epoch in the window


CHECKPOINT = "train checkpoint"


def _plain(settings: dict) -> dict:
    """Settings as plain JSON values (lists, not tuples), as they come back from a checkpoint."""
    import json

    return json.loads(json.dumps(settings, default=str))


def fit(model: nn.Module, train: Dataset, val: Dataset | None = None, *, loss: LossFn = classification_loss,
        epochs: int = 10, batch_size: int = 128, lr: float = 1e-3, betas=(0.9, 0.999), weight_decay: float = 0.0,
        milestones: list[int] | None = None, gamma: float = 0.1, select: str | None = None,
        acc_window: tuple[float, float] | None = None, augment=None, seed: int = 0,
        device: torch.device | str | None = None, checkpoint: str | Path | None = None,
        history: str | Path | None = None, progress: bool = True, defense=None,
        settings: dict | None = None) -> FitResult:
    """Train ``model`` in place and leave it at its selected epoch.

    ``select``: ``val_loss`` (default), ``val_acc``, ``val_acc_window`` (the latest epoch whose
    validation accuracy lies in ``acc_window = (lo, hi)``; the lowest validation loss when none does)
    or ``last``. ``augment(x) -> x`` transforms each training batch. ``history``: a JSON file rewritten
    after every epoch. ``settings``: what the run was asked for (JSON-able), saved in the checkpoint; resuming
    with other settings is refused naming the first that differs (``epochs`` may change). Validation uses the
    plain ``loss`` (a defense's training loss, e.g. AT-AT's
    adversarial term, is not applied to validation data).
    """
    epochs, batch_size = check_positive_int(epochs, "epochs"), check_positive_int(batch_size, "batch_size")
    lr = check_scalar(lr, "lr", low=0.0, low_open=True)
    hook = lambda name: defense_hook(defense, name)  # noqa: E731
    if select is None:
        select = getattr(defense, "select", None) or "val_loss"
        acc_window = acc_window if acc_window is not None else getattr(defense, "acc_window", None)
    if select not in SELECT_RULES:
        raise UnknownOptionError(f"select must be one of {', '.join(SELECT_RULES)}; got {select!r}.")
    if select == "val_acc_window":
        if acc_window is None or len(acc_window) != 2 or not 0 <= acc_window[0] <= acc_window[1] <= 1:
            raise ParameterError(f"select='val_acc_window' needs acc_window=(lo, hi) with 0 ≤ lo ≤ hi ≤ 1, "
                                 f"got {acc_window!r}.")
    if len(train) == 0:
        raise ParameterError("the training set is empty.")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    if hook("prepare"):
        model = defense.prepare(model) or model
    model.to(device)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr, betas=tuple(betas),
                           weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(milestones or []), gamma=gamma)
    if checkpoint is not None and hook("wrap_model"):
        raise ParameterError("checkpoint/resume is not supported with a defense that wraps the model (e.g. DP-SGD): "
                             "its privacy accountant is not saved, so a resumed run would misreport ε.")
    train_model = model
    if hook("wrap_model"):
        train_model, opt = defense.wrap_model(model, opt, train, batch_size=batch_size, epochs=epochs)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(milestones or []), gamma=gamma)
    if _distributed():
        from torch.nn.parallel import DistributedDataParallel
        train_model = DistributedDataParallel(train_model)
    val_loss_fn = loss
    if hook("loss"):
        loss = defense.loss
    records, start = [], 0
    best = {"epoch": -1, "score": math.inf, "state": None, "val_loss": math.nan, "val_acc": math.nan,
            "fallback_score": math.inf}
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.is_file():
        try:
            state = torch.load(ckpt, map_location=device, weights_only=True)
        except Exception as exc:  # noqa: BLE001 — a checkpoint cut short by a kill, or not ours
            raise CorruptDataError(f"checkpoint {ckpt} cannot be read ({type(exc).__name__}); delete it to start "
                                   "over.") from None
        if settings is not None and state.get("settings") is not None:
            from .experiments.units import first_difference

            saved = {k: v for k, v in state["settings"].items() if k != "epochs"}
            asked = {k: v for k, v in _plain(settings).items() if k != "epochs"}
            if saved != asked:
                key, old, new = first_difference(saved, asked)
                raise ParameterError(f"--resume: checkpoint {ckpt} was written with {key} = {old!r}, this run asks "
                                     f"for {new!r}; resume with the same settings (only --epochs may change), or "
                                     "drop --resume to start over.")
        try:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
        except (RuntimeError, KeyError, ValueError) as exc:
            raise ParameterError(f"checkpoint {ckpt} is for another model ({str(exc).splitlines()[0][:120]}); resume "
                                 "with the settings it was written with, or drop --resume to start over.") from None
        sched.load_state_dict(state["scheduler"])
        if hook("load_state_dict") and state.get("defense") is not None:
            defense.load_state_dict(state["defense"])
        records, start = list(state["history"]), int(state["epoch"]) + 1
        best.update(epoch=int(state["best_epoch"]), score=float(state["best_score"]), state=state["best_model"],
                    fallback_score=float(state.get("best_fallback", math.inf)),
                    val_loss=float(state["best_val_loss"]), val_acc=float(state["best_val_acc"]))
    resumed_from, steps = start, 0
    bar = progress_bar(desc="train", total=epochs - start, unit="epoch", enabled=bool(progress) and _rank() == 0)
    for epoch in range(start, epochs):
        torch.manual_seed(seed * 1_000_003 + epoch)  # an epoch replayed after a kill draws the same numbers
        if defense is not None:
            defense.epoch, defense.total_epochs = epoch, epochs
        train_model.train()
        total, n, correct = 0.0, 0, 0.0
        data = defense.on_epoch(train, epoch) if hook("on_epoch") else train
        loader = _loader(data, batch_size, True, seed, epoch)
        if hook("wrap_loader"):
            loader = defense.wrap_loader(loader, epoch)
        for batch in loader:
            batch = tuple(b.to(device) for b in batch)
            if batch[0].shape[0] == 0:  # Poisson sampling can draw an empty batch
                continue
            if augment is not None:
                batch = (augment(batch[0]),) + batch[1:]
            value, metrics = loss(train_model, batch)
            if not torch.isfinite(value):
                raise ParameterError(f"the training loss became {float(value)} at epoch {epoch}; lower lr.")
            opt.zero_grad(set_to_none=True)
            value.backward()
            opt.step()
            if hook("on_batch"):
                defense.on_batch(model, steps)
            steps += 1
            total += float(value.detach()) * batch[0].shape[0]
            n += batch[0].shape[0]
            correct += metrics.get("correct", 0.0)
        sched.step()
        record = {"epoch": epoch, "train_loss": total / max(n, 1), "train_acc": correct / max(n, 1),
                  "lr": opt.param_groups[0]["lr"]}
        if hook("after_epoch"):
            defense.after_epoch(epoch, record)
        if val is not None and len(val) > 0:
            val_data = defense.on_val(val, epoch) if hook("on_val") else val
            record.update(_evaluate(model, val_data, val_loss_fn, batch_size, device))
        records.append(record)
        score = _score(select, record, acc_window)
        fallback = _score("val_loss", record, None)
        # an eligible epoch beats any ineligible one; among ineligible ones (none in the window yet) the lowest
        # validation loss is kept as the fallback
        if score < best["score"] or (best["score"] == math.inf and fallback < best["fallback_score"]):
            best.update(epoch=epoch, score=score, state=copy.deepcopy(model.state_dict()), fallback_score=fallback,
                        val_loss=record.get("val_loss", math.nan), val_acc=record.get("val_acc", math.nan))
        if ckpt is not None and _rank() == 0:
            from .io import save_torch_atomic  # listed in the folder's marker before the save: a run killed mid-save can resume
            save_torch_atomic(ckpt, {"settings": _plain(settings) if settings is not None else None,
                                     "model": model.state_dict(), "optimizer": opt.state_dict(),
                                     "scheduler": sched.state_dict(), "history": records, "epoch": epoch,
                                     "best_epoch": best["epoch"], "best_score": best["score"],
                                     "best_fallback": best["fallback_score"], "best_model": best["state"],
                                     "best_val_loss": best["val_loss"],
                                     "best_val_acc": best["val_acc"],
                                     "defense": defense.state_dict() if hook("state_dict") else None},
                              record=CHECKPOINT)  # and digested after: a checkpoint the user replaces is theirs, never resumed from
        if history is not None and _rank() == 0:
            from .io import write_json_atomic
            write_json_atomic(history, records)
        bar.update(1)
        bar.set_postfix(**{k: f"{v:.3g}" for k, v in record.items() if k in ("train_loss", "val_loss", "val_acc")})
    bar.close()
    if hook("finish"):
        defense.finish(model)
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    model.eval()
    return FitResult(records, best["epoch"], best["val_loss"], best["val_acc"], len(records), resumed_from)


def denoising_loss(sigma_s: float, seed: int = 0) -> LossFn:
    """Denoising score matching at one noise level: ``‖ε_θ(x + σ_s z) − z‖²`` (mean over pixels)."""
    g = torch.Generator().manual_seed(seed)

    def loss(net: nn.Module, batch) -> tuple[torch.Tensor, dict]:
        x = batch[0]
        z = torch.randn(x.shape, generator=g, dtype=x.dtype).to(x.device)
        return ((net(x + sigma_s * z) - z) ** 2).mean(), {}

    return loss


def train_score_model(train: Dataset, sigma_s: float = 0.1, *, val: Dataset | None = None, epochs: int = 200,
                      batch_size: int = 128, lr: float = 2e-3, width: int = 64, depth: int = 6, seed: int = 0,
                      device=None, progress: bool = True):
    """Fit a ``ScoreModel`` (``s = −ε_θ/σ_s``) to images by denoising score matching at ``sigma_s``."""
    from .nn.score import ScoreModel

    sigma_s = check_scalar(sigma_s, "sigma_s (smoothing noise std)", low=0.0, low_open=True)
    shape = tuple(train[0][0].shape)
    model = ScoreModel.build(shape, sigma_s, width, depth, seed)
    images = torch.stack([train[i][0] for i in range(len(train))])
    model.net.set_wiener(images, sigma_s)
    result = fit(model.net, train, val, loss=denoising_loss(sigma_s, seed), epochs=epochs, batch_size=batch_size,
                 lr=lr, milestones=[int(epochs * 0.6), int(epochs * 0.85)], seed=seed, device=device,
                 progress=progress)
    return model.eval(), result
