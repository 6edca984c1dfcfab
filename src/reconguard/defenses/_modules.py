"""Finding and replacing a model's submodules by dotted name, with errors that say what exists."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import ParameterError


def submodule(model: nn.Module, name: str) -> nn.Module:
    try:
        return model.get_submodule(name)
    except AttributeError:
        names = [n for n, _ in model.named_children()]
        raise ParameterError(f"the model has no submodule {name!r}; its top-level modules are {names}.") from None


def replace_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(submodule(model, parent) if parent else model, leaf, new)


def named_layers(model: nn.Module, layers) -> list[str]:
    """``layers`` or the model's own ``hsic_layers``; a clear error when neither is there."""
    layers = layers if layers is not None else getattr(model, "hsic_layers", None)
    if not layers:
        raise ParameterError("name the intermediate layers (layers=[...]): this model has no 'hsic_layers' attribute.")
    for name in layers:
        submodule(model, name)
    return list(layers)


def images_and_labels(data) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole dataset as two tensors (``.images`` / ``.labels`` when it has them)."""
    if hasattr(data, "images") and hasattr(data, "labels"):
        return data.images, data.labels
    xs, ys = zip(*[(data[i][0], data[i][1]) for i in range(len(data))])
    return torch.stack(xs), torch.as_tensor(ys)
