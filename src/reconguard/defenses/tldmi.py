"""TL-DMI — transfer-learning defense (Ho et al. 2024; AT-AT paper appendix A.1): start from weights
trained on public data and fine-tune only the later layers on the private set.

"Layers" are the model's top-level children in registration order (torchvision's ResNet: conv1, bn1,
relu, maxpool, layer1, layer2, layer3, …). ``frozen`` counts them. The TL-DMI and AT-AT reference code
freezes child ``i`` when ``i <= freeze_layers``, i.e. ``freeze_layers + 1`` children: TL-DMI
(``freeze_layers = 6``) is ``TLDMI(frozen=7)``, conv1 … layer3; ``TL-DMI-5`` (``freeze_layers = 5``)
is ``frozen=6``, conv1 … layer2. ``frozen_names`` (after ``prepare``) lists them for the report.
Frozen layers get ``requires_grad = False`` and their
BatchNorm running statistics are kept fixed as well (``freeze_bn_stats``). ``pretrained``: a state dict
or a path to one (a classifier head of another size is skipped).
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from ..checks import check_positive_int
from ..errors import ParameterError
from .base import Defense


def _pin_eval(module, inputs):
    module.training = False


class TLDMI(Defense):
    options = {"frozen": "TL-DMI: number of first layers frozen",
               "pretrained": "TL-DMI: public-data weights (state dict file); default: pre-train on the public split"}
    needs_public_model = True

    def report(self) -> dict:
        return {"frozen_layers": self.frozen_names}
    def __init__(self, frozen: int = 7, pretrained=None, freeze_bn_stats: bool = True):
        self.frozen = check_positive_int(frozen, "frozen (number of first layers to freeze)")
        self.pretrained, self.freeze_bn_stats = pretrained, freeze_bn_stats
        self.frozen_names: list[str] = []

    def prepare(self, model: nn.Module) -> nn.Module:
        if self.pretrained is not None:
            self._load(model)
        children = list(model.named_children())
        if self.frozen >= len(children):
            raise ParameterError(f"frozen={self.frozen} would freeze the whole model: it has {len(children)} "
                                 f"top-level layers ({[n for n, _ in children]}).")
        self.frozen_names = [name for name, _ in children[:self.frozen]]
        for _, child in children[:self.frozen]:
            for p in child.parameters():
                p.requires_grad_(False)
            if self.freeze_bn_stats:
                for m in child.modules():
                    if isinstance(m, nn.modules.batchnorm._BatchNorm):
                        m.register_forward_pre_hook(_pin_eval)
        return model

    def _load(self, model: nn.Module) -> None:
        if isinstance(self.pretrained, (str, Path)):
            from ..nn.resnet import load_torchvision_weights
            load_torchvision_weights(model, self.pretrained)
            return
        own = model.state_dict()
        state = {k: v for k, v in self.pretrained.items() if k in own and v.shape == own[k].shape}
        model.load_state_dict(state, strict=False)
