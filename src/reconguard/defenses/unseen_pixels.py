"""Unseen-Pixels (AT-AT paper section 3, appendix E.2): learn a pixel mask, delete the masked pixels from
every training image *before* training, train the model on what is left.

A mask layer D (the input's shape) is prepended, ``T_mask(x) = T(x ⊙ D)``; a pixel's group is its
channels, ``D^norm_ij = ‖D_{·ij}‖₂``. Two stages, each training a fresh copy of the (untrained) model:

1. ridge base estimate: ``CE + λ₁ ‖D^norm‖₂`` → ``D̂``;
2. GL+AGL: ``CE + λ₂ Σ_ij D^norm_ij / (D̂^norm_ij)^ρ``; after every step the groups with
   ``D^norm ≤ t`` are set to 0 (t = 1e−6, then 0.0025 from epoch 10 of 100: ``switch_epoch``, a tenth of the stage by default).

The final mask is ``1[D ≠ 0]`` per pixel; the real training run sees ``x ⊙ mask`` only (``on_epoch`` /
``on_val``), and :meth:`deploy` prepends the fixed mask to the trained model so it is evaluated — and
attacked — the way it was trained. Defaults λ₁ = 0.01, λ₂ = 0.1, ρ = 1 (the paper's). ``mask_speed`` scales the mask's step (see
:class:`MaskLayer`): the paper's runs took ~30,000 steps, a digits run a few hundred.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from ..checks import check_positive_int, check_scalar
from ..errors import ParameterError
from ._modules import images_and_labels
from .base import Defense


class MaskLayer(nn.Module):
    """``x ⊙ D`` with ``D = speed · θ``: Adam moves D by about ``speed · lr`` per step whatever the gradient
    scale, so ``speed > 1`` lets a small dataset (few steps) drive pixels to zero as a large one would."""

    def __init__(self, shape, trainable: bool = True, mask: torch.Tensor | None = None, speed: float = 1.0):
        super().__init__()
        self.speed = float(speed)
        init = (torch.ones(shape) if mask is None else mask.clone().float()) / self.speed
        if trainable:
            self.theta = nn.Parameter(init)
        else:
            self.register_buffer("theta", init)

    @property
    def weight(self) -> torch.Tensor:
        return self.speed * self.theta

    def group_norm(self) -> torch.Tensor:
        return self.weight.norm(dim=0)  # channels of one pixel form a group: H×W

    def forward(self, x):
        return x * self.weight


class _MaskStage:
    """fit hooks for one mask-learning stage (penalty + per-step threshold)."""

    def __init__(self, layer: MaskLayer, penalty, threshold):
        self.layer, self.penalty, self.threshold = layer, penalty, threshold
        self.epoch = 0

    def loss(self, model, batch):
        x, y = batch[0], batch[1]
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y) + self.penalty(self.layer.group_norm())
        return loss, {"correct": float((logits.argmax(1) == y).float().sum())}

    def on_batch(self, model, step):
        t = self.threshold(self.epoch)
        if t is not None:
            with torch.no_grad():
                keep = (self.layer.group_norm() > t).to(self.layer.theta.dtype)
                self.layer.theta.mul_(keep)


class UnseenPixels(Defense):
    options = {"lam1": "Unseen-Pixels: ridge weight", "lam2": "Unseen-Pixels: adaptive group-lasso weight",
               "rho": "Unseen-Pixels: ρ", "mask_epochs": "Unseen-Pixels: epochs of each mask stage",
               "mask_speed": "Unseen-Pixels: mask step multiplier"}
    augmentation = "no-crop"  # the learned mask must line up with the pixels

    def saved_module(self, model: nn.Module) -> nn.Module:
        return model[1] if isinstance(model, nn.Sequential) and isinstance(model[0], MaskLayer) else model
    def __init__(self, lam1: float = 0.01, lam2: float = 0.1, rho: float = 1.0, t_early: float = 1e-6,
                 t_late: float = 0.0025, switch_epoch: int | None = None, mask_epochs: int = 100, lr: float = 1e-3,
                 batch_size: int = 128, mask_speed: float = 1.0, seed: int = 0, progress: bool = False):
        self.lam1 = check_scalar(lam1, "lam1 (ridge weight)", low=0.0)
        self.lam2 = check_scalar(lam2, "lam2 (adaptive group-lasso weight)", low=0.0)
        self.rho = check_scalar(rho, "rho", low=0.0)
        self.t_early, self.t_late = t_early, t_late
        self.mask_epochs = check_positive_int(mask_epochs, "mask_epochs")
        # the paper switches after epoch 10 of 100: a tenth of the stage by default
        self.switch_epoch = switch_epoch if switch_epoch is not None else max(1, round(0.1 * self.mask_epochs))
        self.lr, self.batch_size, self.seed, self.progress = lr, batch_size, seed, progress
        self.mask_speed = check_scalar(mask_speed, "mask_speed", low=0.0, low_open=True)
        self.mask: torch.Tensor | None = None  # C×H×W of 0/1
        self._initial: nn.Module | None = None

    @property
    def deleted_fraction(self) -> float:
        """The fraction of pixels (all channels of a position) the mask deletes."""
        if self.mask is None:
            raise ParameterError("no mask yet: call fit_mask(model, train) or train with this defense first.")
        return float((self.mask.norm(dim=0) == 0).float().mean())

    def fit_mask(self, model: nn.Module, train: Dataset, device=None) -> torch.Tensor:
        """Run the two stages on copies of ``model`` (as it is now, untrained) and keep the binary mask."""
        from ..train import fit

        shape = tuple(train[0][0].shape)
        ridge = MaskLayer(shape, speed=self.mask_speed)
        fit(nn.Sequential(ridge, copy.deepcopy(model)), train, None, epochs=self.mask_epochs, lr=self.lr,
            batch_size=self.batch_size, seed=self.seed, device=device, progress=self.progress, select="last",
            defense=_MaskStage(ridge, lambda g: self.lam1 * g.norm(), lambda e: None))
        base = ridge.group_norm().detach().clamp_min(1e-12)
        agl = MaskLayer(shape, speed=self.mask_speed)
        stage2 = _MaskStage(agl, lambda g: self.lam2 * (g / base ** self.rho).sum(),
                            lambda e: self.t_early if e < self.switch_epoch else self.t_late)
        fit(nn.Sequential(agl, copy.deepcopy(model)), train, None, epochs=self.mask_epochs, lr=self.lr,
            batch_size=self.batch_size, seed=self.seed + 1, device=device, progress=self.progress, select="last",
            defense=stage2)
        keep = (agl.group_norm().detach() > 0).float().cpu()
        self.mask = keep.expand(shape).clone()
        return self.mask

    # hooks for the real training run
    def prepare(self, model: nn.Module) -> nn.Module:
        self._initial = copy.deepcopy(model)
        return model

    def _masked(self, data: Dataset) -> Dataset:
        x, y = images_and_labels(data)
        return TensorDataset(x * self.mask, y)

    def on_epoch(self, train: Dataset, epoch: int) -> Dataset:
        if self.mask is None:
            self.fit_mask(self._initial, train, device=next(self._initial.parameters()).device)
        if getattr(self, "_train_cache", None) is None:
            self._train_cache = self._masked(train)
        return self._train_cache

    def on_val(self, val: Dataset, epoch: int) -> Dataset:
        if getattr(self, "_val_cache", None) is None:
            self._val_cache = self._masked(val)
        return self._val_cache

    def after_epoch(self, epoch: int, record: dict) -> None:
        record["pixels_deleted"] = self.deleted_fraction

    def deploy(self, model: nn.Module) -> nn.Module:
        """``x ↦ model(x ⊙ mask)``: the trained model with its fixed mask in front."""
        if self.mask is None:
            raise ParameterError("no mask yet: call fit_mask first.")
        return nn.Sequential(MaskLayer(self.mask.shape, trainable=False, mask=self.mask), model).eval()

    def state_dict(self) -> dict | None:
        return None if self.mask is None else {"mask": self.mask}

    def load_state_dict(self, state: dict) -> None:
        self.mask = state["mask"].clone()
