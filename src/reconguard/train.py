"""The one training loop: ``fit(model, train, val, loss=…)``.

Adam (β 0.9/0.999, lr 1e−3), batch 128, MultiStepLR, the best epoch kept by validation loss (or
accuracy), a JSON-able history, progress bars, and checkpoints a killed run resumes from (same
final numbers: model, optimiser, scheduler, RNG and loader order are all restored). The loss is a
function ``loss(model, batch) -> (loss, metrics)``; classification with cross-entropy is the default.

A ``defense`` is a plain object; fit calls whichever of these hooks it has (none is required):

* ``wrap_model(model, optimizer, train) -> (model, optimizer)`` once before training (e.g. DP-SGD);
* ``on_epoch(train, epoch) -> Dataset`` the data of this epoch (e.g. re-encrypted every epoch);
* ``wrap_loader(loader, epoch) -> iterable`` (e.g. Poisson sampling);
* ``loss(model, batch) -> (loss, metrics)`` replaces ``loss``;
* ``on_val(val, epoch) -> Dataset`` the validation data in the form the model is trained on;
* ``after_epoch(epoch, record)`` adds to the epoch's history record (e.g. ε spent).
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
from .errors import ParameterError, UnknownOptionError
from .results import Result

LossFn = Callable[[nn.Module, tuple], tuple[torch.Tensor, dict]]


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
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=g, drop_last=False)


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


def fit(model: nn.Module, train: Dataset, val: Dataset | None = None, *, loss: LossFn = classification_loss,
        epochs: int = 10, batch_size: int = 128, lr: float = 1e-3, betas=(0.9, 0.999), weight_decay: float = 0.0,
        milestones: list[int] | None = None, gamma: float = 0.1, select: str = "val_loss", seed: int = 0,
        device: torch.device | str | None = None, checkpoint: str | Path | None = None,
        progress: bool = True, defense=None) -> FitResult:
    """Train ``model`` in place and leave it at its best epoch (by ``select``: val_loss or val_acc)."""
    epochs, batch_size = check_positive_int(epochs, "epochs"), check_positive_int(batch_size, "batch_size")
    lr = check_scalar(lr, "lr", low=0.0, low_open=True)
    if select not in ("val_loss", "val_acc"):
        raise UnknownOptionError(f"select must be 'val_loss' or 'val_acc', got {select!r}.")
    if len(train) == 0:
        raise ParameterError("the training set is empty.")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr, betas=tuple(betas),
                           weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(milestones or []), gamma=gamma)
    hook = lambda name: getattr(defense, name, None) if defense is not None else None  # noqa: E731
    if checkpoint is not None and hook("wrap_model"):
        raise ParameterError("checkpoint/resume is not supported with a defense that wraps the model (e.g. DP-SGD): "
                             "its privacy accountant is not saved, so a resumed run would misreport ε.")
    train_model = model
    if hook("wrap_model"):
        train_model, opt = defense.wrap_model(model, opt, train)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(milestones or []), gamma=gamma)
    if hook("loss"):
        loss = defense.loss
    history, start = [], 0
    best = {"epoch": -1, "score": math.inf, "state": None, "val_loss": math.nan, "val_acc": math.nan}
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.is_file():
        state = torch.load(ckpt, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        history, start = list(state["history"]), int(state["epoch"]) + 1
        best.update(epoch=int(state["best_epoch"]), score=float(state["best_score"]), state=state["best_model"],
                    val_loss=float(state["best_val_loss"]), val_acc=float(state["best_val_acc"]))
    resumed_from = start
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=epochs, initial=start, desc="train", unit="epoch")
    for epoch in range(start, epochs):
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
            value, metrics = loss(train_model, batch)
            if not torch.isfinite(value):
                raise ParameterError(f"the training loss became {float(value)} at epoch {epoch}; lower lr.")
            opt.zero_grad(set_to_none=True)
            value.backward()
            opt.step()
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
            record.update(_evaluate(model, val_data, loss, batch_size, device))
            score = record["val_loss"] if select == "val_loss" else -record["val_acc"]
        else:
            score = record["train_loss"]
        history.append(record)
        if score < best["score"]:
            best.update(epoch=epoch, score=score, state=copy.deepcopy(model.state_dict()),
                        val_loss=record.get("val_loss", math.nan), val_acc=record.get("val_acc", math.nan))
        if ckpt is not None:
            from .io import save_torch_atomic
            save_torch_atomic(ckpt, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                     "scheduler": sched.state_dict(), "history": history, "epoch": epoch,
                                     "best_epoch": best["epoch"], "best_score": best["score"],
                                     "best_model": best["state"], "best_val_loss": best["val_loss"],
                                     "best_val_acc": best["val_acc"]})
        if bar is not None:
            bar.update(1)
            bar.set_postfix({k: f"{v:.3g}" for k, v in record.items() if k in ("train_loss", "val_loss", "val_acc")})
    if bar is not None:
        bar.close()
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    model.eval()
    return FitResult(history, best["epoch"], best["val_loss"], best["val_acc"], len(history), resumed_from)


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
