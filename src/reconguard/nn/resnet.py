"""ResNets with torchvision's parameter names (ResNet-18 … ResNet-152).

Two uses, one class:

* the spectral-bounds paper's ResNet-18 (section 6.1, appendix A.1.1), made twice-differentiable:
  ``act="gelu"`` (GELU for ReLU, AvgPool for MaxPool) — :class:`ResNet18`'s default;
* the model-inversion classifiers of the AT-AT paper (appendix A.4): ``act="relu"``, standard
  ResNet-18 / ResNet-152 (:func:`resnet18`, :func:`resnet152`), any width for small images.

``stem="cifar"`` (for ≤ 32×32 inputs): conv1 is 3×3 stride 1 with no pooling. ``stem="imagenet"``:
torchvision's 7×7 stride-2 conv1 and 3×3 stride-2 pooling, so an ImageNet-trained torchvision state
dict loads unchanged (:func:`load_torchvision_weights`). Top-level children are registered in
torchvision's order (conv1, bn1, relu, maxpool, layer1…layer4, avgpool, fc), which is the order
TL-DMI counts "layers" in. Every residual block has ``skip_scale`` (1 = the usual skip connection;
RoLSS sets 0 on the last stage, RoLSS-SSF 0.2).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..errors import CorruptDataError, DataFileNotFoundError, UnknownOptionError

ACTIVATIONS = {"gelu": nn.GELU, "relu": lambda: nn.ReLU(inplace=False)}


def _activation(act: str) -> nn.Module:
    if act not in ACTIVATIONS:
        raise UnknownOptionError(f"act must be one of {sorted(ACTIVATIONS)}, got {act!r}.")
    return ACTIVATIONS[act]()


class BasicBlock(nn.Module):
    """Two 3×3 convolutions; ``out = act(F(x) + skip_scale · shortcut(x))``."""
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1, act: str = "gelu"):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = _activation(act)  # torchvision's name, whatever the activation
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or in_planes != planes * self.expansion:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes * self.expansion, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(planes * self.expansion))
        self.skip_scale = 1.0

    def residual(self, x):
        return self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))

    def shortcut(self, x):
        return x if self.downsample is None else self.downsample(x)

    def forward(self, x):
        out = self.residual(x)
        if self.skip_scale != 0:
            out = out + self.skip_scale * self.shortcut(x)
        return self.relu(out)


class Bottleneck(BasicBlock):
    """1×1 → 3×3 → 1×1 (×4 channels), torchvision's ResNet-50/101/152 block (stride on the 3×3)."""
    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1, act: str = "gelu"):
        nn.Module.__init__(self)
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = _activation(act)
        self.downsample = None
        if stride != 1 or in_planes != out:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))
        self.skip_scale = 1.0

    def residual(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.bn3(self.conv3(out))


class Stem(nn.Module):
    """conv1 → bn1 → act (→ pool): the ResNet's own modules, shared, so a split keeps its weights."""

    def __init__(self, conv1: nn.Module, bn1: nn.Module, pool: nn.Module | None, act: nn.Module | None = None):
        super().__init__()
        self.conv1, self.bn1, self.pool = conv1, bn1, pool
        self.act = act if act is not None else nn.GELU()

    def forward(self, x):
        x = self.act(self.bn1(self.conv1(x)))
        return self.pool(x) if self.pool is not None else x


DEPTHS = {18: (BasicBlock, (2, 2, 2, 2)), 34: (BasicBlock, (3, 4, 6, 3)), 50: (Bottleneck, (3, 4, 6, 3)),
          101: (Bottleneck, (3, 4, 23, 3)), 152: (Bottleneck, (3, 8, 36, 3))}


class ResNet(nn.Module):
    """torchvision's ResNet layout at any depth in :data:`DEPTHS`, width (64 = torchvision) and activation.

    ``hsic_layers`` names the four stage outputs (BiDO's Z_j and the HSIC metric use them).
    """

    hsic_layers = ("layer1", "layer2", "layer3", "layer4")

    def __init__(self, depth: int = 18, num_classes: int = 10, in_channels: int = 3, stem: str = "cifar",
                 width: int = 64, act: str = "gelu"):
        super().__init__()
        if stem not in ("cifar", "imagenet"):
            raise UnknownOptionError(f"stem must be 'cifar' or 'imagenet', got {stem!r}.")
        if depth not in DEPTHS:
            raise UnknownOptionError(f"depth must be one of {sorted(DEPTHS)}, got {depth!r}.")
        block, counts = DEPTHS[depth]
        self.depth, self.stem_kind, self.act_kind = depth, stem, act
        if stem == "cifar":
            self.conv1 = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = _activation(act)
        if stem == "cifar":
            self.maxpool = nn.Identity()
        elif act == "relu":
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        else:
            self.maxpool = nn.AvgPool2d(3, stride=2, padding=1)  # AvgPool for MaxPool: twice-differentiable
        planes, in_planes = width, width
        for i, n in enumerate(counts):
            blocks = []
            for j in range(n):
                blocks.append(block(in_planes, planes * (2 ** i), 2 if (j == 0 and i > 0) else 1, act))
                in_planes = planes * (2 ** i) * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)

    def stages(self) -> list[nn.Module]:
        """The stem then every residual block, in order: the split points index this list."""
        pool = None if isinstance(self.maxpool, nn.Identity) else self.maxpool
        stem = Stem(self.conv1, self.bn1, pool, self.relu)
        return [stem] + [b for layer in (self.layer1, self.layer2, self.layer3, self.layer4) for b in layer]

    def features(self, x):
        """The pooled penultimate features (what ``fc`` sees)."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)

    def head(self) -> nn.Module:
        return nn.Sequential(self.avgpool, nn.Flatten(1), self.fc)

    def forward(self, x):
        return self.fc(self.features(x))


class ResNet18(ResNet):
    """The spectral-bounds paper's twice-differentiable ResNet-18 (GELU, AvgPool)."""

    def __init__(self, num_classes: int = 10, in_channels: int = 3, stem: str = "cifar", width: int = 64,
                 act: str = "gelu"):
        super().__init__(18, num_classes, in_channels, stem, width, act)


def resnet18(num_classes: int = 1000, in_channels: int = 3, stem: str = "imagenet", width: int = 64,
             act: str = "relu") -> ResNet:
    """Standard (ReLU, MaxPool) ResNet-18; torchvision's ``resnet18`` state dicts load into the default."""
    return ResNet(18, num_classes, in_channels, stem, width, act)


def resnet152(num_classes: int = 1000, in_channels: int = 3, stem: str = "imagenet", width: int = 64,
              act: str = "relu") -> ResNet:
    """Standard ResNet-152; torchvision's ``resnet152`` state dicts load into the default."""
    return ResNet(152, num_classes, in_channels, stem, width, act)


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
