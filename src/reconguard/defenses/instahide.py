"""Training and inference with InstaHide or Mixup (InstaHide paper, sections 3.1–3.3, 5.1).

``InstaHideTraining(scheme)`` is a defense for ``reconguard.train.fit``: every epoch the private
training set is re-encrypted with fresh keys (``on_epoch``), the model learns the soft labels
(soft-label cross-entropy; the loader reshuffles — re-batches — every epoch), and validation uses one
fixed encryption of the validation set. Inference: ``predict_encrypted`` averages the model's
probabilities over T encryptions of each test image (partners drawn from the test set itself, or the
public pool in cross mode; optional floor on the image's own coefficient), ``predict_plain`` runs it
on the normalised, unmixed, unmasked image.
"""

from __future__ import annotations

import torch
from torch.utils.data import TensorDataset

from ..checks import check_positive_int
from .base import Defense
from ..encoders.instahide import InstaHide
from ..errors import ParameterError


def _images_labels(data) -> tuple[torch.Tensor, torch.Tensor]:
    if hasattr(data, "images"):
        return data.images, data.labels
    x, y = data.tensors[0], data.tensors[1]
    return x, y


class InstaHideTraining(Defense):
    """A ``fit`` defense: re-encrypt the private set every epoch (``seed=None``: cryptographic keys). ``scheme`` is
    an :class:`~reconguard.encoders.InstaHide` (or Mixup) scheme; without one, InstaHide with ``k`` images per mix
    in ``mode`` (inside: private partners only)."""

    options = {"k": "InstaHide: images per mix", "mode": "InstaHide: inside or cross"}
    flag_names = {"k": "instahide-k", "mode": "instahide-mode"}
    augmentation = None  # it mixes whole images: crops would misalign the mixes' members

    def __init__(self, scheme: InstaHide | None = None, seed: int | None = None, val_seed: int = 12345, *,
                 k: int = 4, mode: str = "inside"):
        self.scheme = scheme if scheme is not None else InstaHide(k=int(k), mode=mode)
        self.seed, self.val_seed = seed, val_seed
        self.stats = None

    def _encrypt(self, data, seed):
        x, y = _images_labels(data)
        if self.stats is None:
            self.stats = self.scheme.channel_stats(x)
        enc = self.scheme.encrypt(x, y, seed=seed, stats=self.stats)
        return TensorDataset(enc.images, enc.labels)

    def on_epoch(self, train, epoch: int):
        return self._encrypt(train, None if self.seed is None else self.seed + epoch)

    def on_val(self, val, epoch: int):
        return self._encrypt(val, self.val_seed)

    def deploy(self, model):
        """Plain inference (``predict_plain``): the model sees normalised, unmixed, unmasked images."""
        if self.stats is None:
            return model
        from ..nn.normalize import Normalize

        return torch.nn.Sequential(Normalize(self.stats[0], self.stats[1], "instahide"), model).eval()

    def saved_module(self, model):
        return model[1] if isinstance(model, torch.nn.Sequential) and len(model) == 2 else model


def predict_plain(model, images: torch.Tensor, stats, batch: int = 512) -> torch.Tensor:
    """Class probabilities on normalised images (no mixing, no mask)."""
    model.eval()
    p = next(model.parameters())
    out = []
    with torch.no_grad():
        for xb in InstaHide.normalize_images(torch.as_tensor(images, dtype=torch.float32), stats).split(batch):
            out.append(torch.softmax(model(xb.to(p.device)), 1).cpu())
    return torch.cat(out)


def predict_encrypted(model, scheme: InstaHide, images: torch.Tensor, stats, T: int = 10, own_floor: float | None = None,
                      seed: int | None = 0, batch: int = 512) -> torch.Tensor:
    """Probabilities averaged over ``T`` encryptions of each image (section 3.3)."""
    T = check_positive_int(T, "T")
    if own_floor is not None and not 0 <= own_floor <= scheme.c1:
        raise ParameterError(f"own_floor must lie in [0, c1={scheme.c1}], got {own_floor}.")
    model.eval()
    p = next(model.parameters())
    total = None
    for t in range(T):
        enc = scheme.encrypt(images, None, seed=None if seed is None else seed + 7919 * t, stats=stats,
                             own_floor=own_floor)
        probs = []
        with torch.no_grad():
            for xb in enc.images.split(batch):
                probs.append(torch.softmax(model(xb.to(p.device)), 1).cpu())
        probs = torch.cat(probs)
        total = probs if total is None else total + probs
    return total / T
