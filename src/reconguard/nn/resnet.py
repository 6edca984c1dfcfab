"""ResNet-18 with torchvision's parameter names, made twice-differentiable (GELU for ReLU, AvgPool
for MaxPool), as the spectral-bounds paper uses it (section 6.1, appendix A.1.1).

``stem="cifar"`` (default, for 32×32 inputs): conv1 is 3×3 stride 1 with no pooling, as in the
CIFAR ResNet-18 the paper cites. ``stem="imagenet"``: torchvision's 7×7 stride-2 conv1 followed by
AvgPool2d(3, 2, 1), so an ImageNet-trained torchvision state dict loads unchanged.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..errors import CorruptDataError, DataFileNotFoundError, UnknownOptionError


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.GELU()  # torchvision's name, GELU for twice-differentiability
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class Stem(nn.Module):
    """conv1 → bn1 → GELU (→ pool): the ResNet's own modules, shared, so a split keeps its weights."""

    def __init__(self, conv1: nn.Module, bn1: nn.Module, pool: nn.Module | None):
        super().__init__()
        self.conv1, self.bn1, self.pool = conv1, bn1, pool
        self.act = nn.GELU()

    def forward(self, x):
        x = self.act(self.bn1(self.conv1(x)))
        return self.pool(x) if self.pool is not None else x


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 10, in_channels: int = 3, stem: str = "cifar"):
        super().__init__()
        if stem not in ("cifar", "imagenet"):
            raise UnknownOptionError(f"stem must be 'cifar' or 'imagenet', got {stem!r}.")
        self.stem_kind = stem
        if stem == "cifar":
            self.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
            self.maxpool = None
        else:
            self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
            self.maxpool = nn.AvgPool2d(3, stride=2, padding=1)  # torchvision's name, AvgPool for MaxPool
        self.bn1 = nn.BatchNorm2d(64)
        self.layer1 = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.layer3 = nn.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
        self.layer4 = nn.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def stages(self) -> list[nn.Module]:
        """The stem then the eight BasicBlocks, in order: the split points index this list."""
        stem = Stem(self.conv1, self.bn1, self.maxpool)
        return [stem] + [b for layer in (self.layer1, self.layer2, self.layer3, self.layer4) for b in layer]

    def head(self) -> nn.Module:
        return nn.Sequential(self.avgpool, nn.Flatten(1), self.fc)

    def forward(self, x):
        for stage in self.stages():
            x = stage(x)
        return self.head()(x)


def load_state_dict_file(path: str | Path) -> dict:
    """A state dict from a local ``.pt/.pth`` (loaded with ``weights_only=True``) or ``.safetensors`` file."""
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"weights file {path} does not exist (expected a torchvision-format state dict "
                                    "saved with torch.save(model.state_dict(), path), or a .safetensors file).")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file
            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 — any unreadable file is reported the same way
        raise CorruptDataError(f"{path}: cannot read a state dict ({type(exc).__name__}: {exc}).") from exc
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise CorruptDataError(f"{path}: holds a {type(state).__name__}, not a state dict.")
    return {k.removeprefix("module."): v for k, v in state.items()}


def load_torchvision_weights(model: nn.Module, path: str | Path, skip_mismatched_head: bool = True) -> list[str]:
    """Load a torchvision-format state dict into ``model``; returns the keys skipped.

    A classifier head of another size (e.g. ImageNet's 1000 classes) is skipped when
    ``skip_mismatched_head``; any other missing, unexpected or mis-shaped key is an error.
    """
    state = load_state_dict_file(path)
    own = model.state_dict()
    skipped = []
    for key in list(state):
        if key in own and state[key].shape != own[key].shape:
            if skip_mismatched_head and key.split(".")[0] in ("fc", "classifier"):
                skipped.append(key)
                del state[key]
            else:
                hint = " (an ImageNet conv1 needs stem='imagenet')" if key == "conv1.weight" else ""
                raise CorruptDataError(f"{path}: {key} has shape {tuple(state[key].shape)}, the model expects "
                                       f"{tuple(own[key].shape)}{hint}.")
    missing = [k for k in own if k not in state and k not in {s for s in skipped}]
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in own]
    if missing or unexpected:
        raise CorruptDataError(f"{path}: not a matching state dict; missing {missing[:5]}{'…' if len(missing) > 5 else ''}, "
                               f"unexpected {unexpected[:5]}{'…' if len(unexpected) > 5 else ''}.")
    model.load_state_dict(state, strict=False)
    return skipped
