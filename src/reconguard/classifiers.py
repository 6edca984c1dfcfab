"""Classifiers for the model-inversion experiments: build by name, save with their recipe, load back.

``build_classifier("resnet18", num_classes, in_shape, width)`` — ResNet-18 / ResNet-152 / DenseNet-169
(torchvision layouts, :mod:`reconguard.nn`) or the small MNIST CNN (``cnn``); a 3×3 stride-1 stem for
images up to 64 pixels, torchvision's ImageNet stem above. A saved classifier (:func:`save_classifier`)
is one ``.pt`` file with its weights and its spec (architecture, defense and the options that change
the architecture, the Unseen-Pixels mask), so :func:`load_classifier` rebuilds exactly what was trained.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from .errors import CorruptDataError, DataFileNotFoundError, UnknownOptionError

ARCHS = ("resnet18", "resnet152", "densenet169", "cnn")


def build_classifier(arch: str, num_classes: int, in_shape, width: int | None = None, seed: int = 0) -> nn.Module:
    from .nn.densenet import densenet169
    from .nn.mnist_cnn import mnist_cnn
    from .nn.resnet import ResNet

    c, h = int(in_shape[0]), int(in_shape[-1])
    stem = "cifar" if h <= 64 else "imagenet"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        if arch in ("resnet18", "resnet152"):
            return ResNet(int(arch[6:]), num_classes, c, stem, width or 64, "relu")
        if arch == "densenet169":
            return densenet169(num_classes, c, stem)
        if arch == "cnn":
            return mnist_cnn(tuple(in_shape), num_classes)
    raise UnknownOptionError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHS)}.")


def save_classifier(path: str | Path, model: nn.Module, spec: dict, mask: torch.Tensor | None = None) -> Path:
    from .io import save_torch_atomic

    return save_torch_atomic(path, {"format": "reconguard-classifier-1", "spec": dict(spec),
                                    "state_dict": model.state_dict(), "mask": mask})


def load_classifier(path: str | Path) -> tuple[nn.Module, dict]:
    """The trained model (eval mode; an Unseen-Pixels model with its mask in front) and its spec."""
    from .defenses.registry import STRUCTURAL, make_defense
    from .defenses.unseen_pixels import MaskLayer

    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"model file {path} does not exist (write one with `reconguard train ... --out DIR`).")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise CorruptDataError(f"{path}: cannot read ({type(exc).__name__}: {exc}).") from exc
    if not isinstance(blob, dict) or blob.get("format") != "reconguard-classifier-1":
        raise CorruptDataError(f"{path}: not a reconguard classifier file (save one with save_classifier).")
    spec = blob["spec"]
    model = build_classifier(spec["arch"], spec["num_classes"], spec["in_shape"], spec.get("width"))
    if spec.get("defense") in STRUCTURAL:
        make_defense(spec["defense"], spec.get("structure") or {}).prepare(model)
    model.load_state_dict(blob["state_dict"])
    if blob.get("mask") is not None:
        model = nn.Sequential(MaskLayer(blob["mask"].shape, trainable=False, mask=blob["mask"]), model)
    return model.eval(), spec
