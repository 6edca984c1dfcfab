"""The small-scale model-inversion protocol on digits (AT-AT paper appendix A.2, scaled down).

Private set: the digits of classes 0–4 (relabelled 0–4), split 90 % train / 10 % test, and 20 % of train
held out for validation. Public set: the digits of classes 5–9 — the attacker's generator and TL-DMI's
pre-training use it, and it shares no class (identity) with the private set.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .datasets import ImageDataset
from .digits import load_digits


@dataclass(frozen=True)
class MIASplit:
    train: ImageDataset
    val: ImageDataset
    test: ImageDataset
    public: ImageDataset
    num_classes: int

    def summary(self) -> str:
        return (f"private {self.num_classes} classes: {len(self.train)} train / {len(self.val)} val / "
                f"{len(self.test)} test; public {len(self.public)} images, shape {self.train.shape}")


def split_private(data: ImageDataset, seed: int = 0, test: float = 0.1, val: float = 0.2):
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(data), generator=g)
    n_test = int(round(test * len(data)))
    n_val = int(round(val * (len(data) - n_test)))
    return (data.subset(order[n_test + n_val:]), data.subset(order[n_test:n_test + n_val]),
            data.subset(order[:n_test]))


def digits_mia_split(size: int = 16, seed: int = 0, private_classes=(0, 1, 2, 3, 4)) -> MIASplit:
    digits = load_digits(size)
    private = torch.isin(digits.labels, torch.as_tensor(list(private_classes)))
    relabel = {c: i for i, c in enumerate(private_classes)}
    priv = digits.subset(torch.nonzero(private).squeeze(1))
    priv = ImageDataset(priv.images, torch.as_tensor([relabel[int(c)] for c in priv.labels]), f"digits{size}-private")
    pub = digits.subset(torch.nonzero(~private).squeeze(1))
    others = sorted(set(range(10)) - set(private_classes))
    pub = ImageDataset(pub.images, torch.as_tensor([others.index(int(c)) for c in pub.labels]), f"digits{size}-public")
    train, val, test = split_private(priv, seed)
    return MIASplit(train, val, test, pub, len(private_classes))


def folder_mia_split(root, public_root=None, size: int = 224, seed: int = 0) -> MIASplit:
    """The paper-scale protocol from local folders: ``root/<identity>/<image>`` is the private set (split
    90/10 train/test, 20 % of train for validation); ``public_root`` (same layout, other identities)
    is the public set, or the private training set's own images when absent (then TL-DMI needs
    ``pretrained=`` weights and a generator must come from elsewhere)."""
    from .folder import ImageFolder

    private = ImageFolder(root, size)
    train, val, test = split_private(private, seed)
    public = ImageFolder(public_root, size) if public_root else train
    return MIASplit(train, val, test, public, len(private.classes))
