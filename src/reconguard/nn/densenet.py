"""DenseNet (Huang et al. 2017) with torchvision's parameter names; DenseNet-169 is the AT-AT paper's
third architecture (appendix A.4).

``features`` holds conv0/norm0/relu0/pool0, then ``denseblockK.denselayerL`` (norm1, relu1, conv1 1×1 to
``bn_size·growth`` channels, norm2, relu2, conv2 3×3 to ``growth``) and ``transitionK`` (norm, relu,
conv 1×1 halving the channels, avg pool), then norm5; ``classifier`` is the linear head. A torchvision
``densenet169`` state dict loads with :func:`reconguard.nn.load_torchvision_weights` (after its
old-style ``norm.1`` keys are renamed, which that loader does not do: save with a recent torchvision).
``stem="cifar"`` uses a 3×3 stride-1 conv0 and no pool0 for small images.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from ..errors import UnknownOptionError


class _DenseLayer(nn.Sequential):
    def __init__(self, in_features: int, growth: int, bn_size: int):
        super().__init__(OrderedDict([
            ("norm1", nn.BatchNorm2d(in_features)), ("relu1", nn.ReLU()),
            ("conv1", nn.Conv2d(in_features, bn_size * growth, 1, bias=False)),
            ("norm2", nn.BatchNorm2d(bn_size * growth)), ("relu2", nn.ReLU()),
            ("conv2", nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))]))

    def forward(self, x):
        return torch.cat([x, super().forward(x)], 1)


class DenseNet(nn.Module):
    hsic_layers = ("features.denseblock1", "features.denseblock2", "features.denseblock3", "features.denseblock4")

    def __init__(self, block_config=(6, 12, 32, 32), growth: int = 32, num_init_features: int = 64, bn_size: int = 4,
                 num_classes: int = 1000, in_channels: int = 3, stem: str = "imagenet"):
        super().__init__()
        if stem not in ("cifar", "imagenet"):
            raise UnknownOptionError(f"stem must be 'cifar' or 'imagenet', got {stem!r}.")
        if stem == "imagenet":
            layers = [("conv0", nn.Conv2d(in_channels, num_init_features, 7, stride=2, padding=3, bias=False)),
                      ("norm0", nn.BatchNorm2d(num_init_features)), ("relu0", nn.ReLU()),
                      ("pool0", nn.MaxPool2d(3, stride=2, padding=1))]
        else:
            layers = [("conv0", nn.Conv2d(in_channels, num_init_features, 3, padding=1, bias=False)),
                      ("norm0", nn.BatchNorm2d(num_init_features)), ("relu0", nn.ReLU())]
        self.features = nn.Sequential(OrderedDict(layers))
        n = num_init_features
        for i, count in enumerate(block_config):
            block = nn.Sequential(OrderedDict((f"denselayer{j + 1}", _DenseLayer(n + j * growth, growth, bn_size))
                                              for j in range(count)))
            self.features.add_module(f"denseblock{i + 1}", block)
            n += count * growth
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", nn.Sequential(OrderedDict([
                    ("norm", nn.BatchNorm2d(n)), ("relu", nn.ReLU()), ("conv", nn.Conv2d(n, n // 2, 1, bias=False)),
                    ("pool", nn.AvgPool2d(2, stride=2))])))
                n //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(n))
        self.classifier = nn.Linear(n, num_classes)

    def forward(self, x):
        x = torch.relu(self.features(x))
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def densenet169(num_classes: int = 1000, in_channels: int = 3, stem: str = "imagenet") -> DenseNet:
    """torchvision's DenseNet-169 layout (growth 32, blocks 6/12/32/32)."""
    return DenseNet((6, 12, 32, 32), 32, 64, 4, num_classes, in_channels, stem)
