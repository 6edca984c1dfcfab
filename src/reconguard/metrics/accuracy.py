"""Top-1 accuracy: one function for scores and for a model over a dataset."""

from __future__ import annotations

import torch
from torch import nn


def accuracy(scores_or_model: torch.Tensor | nn.Module, labels_or_data, labels: torch.Tensor | None = None,
             batch: int = 256) -> float:
    """``accuracy(scores, labels)``: the fraction of rows whose argmax is the label (``N×C`` scores).
    ``accuracy(model, dataset, labels=None)``: the model's top-1 accuracy on the dataset, in eval mode, with the
    dataset's own labels or ``labels`` in its order (e.g. the permuted labels a model was trained to give)."""
    if isinstance(scores_or_model, torch.Tensor):
        return float((scores_or_model.argmax(1).cpu() == torch.as_tensor(labels_or_data).cpu()).float().mean())
    from torch.utils.data import DataLoader

    model = scores_or_model.eval()
    device = next(iter(list(model.parameters()) + list(model.buffers()))).device
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in DataLoader(labels_or_data, batch_size=batch):
            if labels is not None:
                y = labels[seen:seen + len(x)]
            correct += int((model(x.to(device)).argmax(1).cpu() == y).sum())
            seen += len(x)
    return correct / max(seen, 1)
