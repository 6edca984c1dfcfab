"""Permuted labels (Zhang et al. 2017; AT-AT paper section 3, appendix A.3.1): train to memorise a fixed
random permutation of the training labels. The model rote-memorises every image (train accuracy → 1)
and learns nothing transferable (test accuracy at chance). Validation keeps the true labels, so the
checkpoint is the last epoch (``select = "last"``); the paper trains with lr 1e−4.
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset, TensorDataset

from ._modules import images_and_labels
from .base import Defense


class PermutedLabels(Defense):
    augmentation = None  # memorising a random labelling is about the exact images
    labels_meaningful = False  # AttAcc is not defined (the paper reports L2 only)

    def train_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return labels[self.permutation]
    select = "last"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._data: Dataset | None = None
        self.permutation: torch.Tensor | None = None

    def on_epoch(self, train: Dataset, epoch: int) -> Dataset:
        if self._data is None:
            x, y = images_and_labels(train)
            g = torch.Generator().manual_seed(self.seed)
            self.permutation = torch.randperm(len(y), generator=g)
            self._data = TensorDataset(x, y[self.permutation])
        return self._data
