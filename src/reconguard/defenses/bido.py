"""BiDO — bilateral dependency optimisation (Peng et al. 2022; AT-AT paper appendix D.1):

    L = CE + λ_x Σ_j HSIC(X, Z_j) − λ_y Σ_j HSIC(Z_j, Y)

over the block outputs Z_j (the four ResNet stages by default, ``layers=`` for any model), with the
BiDO code's estimator (:func:`reconguard.metrics.hsic`, normalised-CCA, Gaussian kernel σ = 5 for X and
Z, linear kernel on one-hot Y). Standard weights (λ_x, λ_y) = (0.05, 0.5); the paper's "low-HSIC"
variants BiDO** use (0.001, 0) and (0.0001, 0).
"""

from __future__ import annotations

import torch
from torch import nn

from ..checks import check_scalar
from ..metrics.hsic import hsic
from ._modules import named_layers, submodule
from .base import Defense


class BiDO(Defense):
    options = {"lambda_x": "BiDO: weight of HSIC(X, Z)", "lambda_y": "BiDO: weight of HSIC(Z, Y)"}
    def __init__(self, lambda_x: float = 0.05, lambda_y: float = 0.5, layers=None, sigma: float = 5.0,
                 kernel_y: str = "linear"):
        self.lambda_x = check_scalar(lambda_x, "lambda_x", low=0.0)
        self.lambda_y = check_scalar(lambda_y, "lambda_y", low=0.0)
        self.layers, self.sigma, self.kernel_y = layers, sigma, kernel_y
        self._handles: list = []
        self._outputs: dict = {}

    def prepare(self, model: nn.Module) -> nn.Module:
        self.layers = named_layers(model, self.layers)
        self.finish(model)
        self._handles = [submodule(model, name).register_forward_hook(self._store(name)) for name in self.layers]
        return model

    def finish(self, model: nn.Module) -> None:
        """Remove the forward hooks (fit calls this at the end)."""
        for handle in self._handles:
            handle.remove()
        self._handles, self._outputs = [], {}

    def _store(self, name):
        def hook(module, inputs, output):
            self._outputs[name] = output
        return hook

    def loss(self, model: nn.Module, batch) -> tuple[torch.Tensor, dict]:
        x, y = batch[0], batch[1]
        self._outputs.clear()
        logits = model(x)
        ce = nn.functional.cross_entropy(logits, y)
        onehot = nn.functional.one_hot(y, logits.shape[1]).to(x.dtype)
        hx = hy = torch.zeros((), dtype=x.dtype, device=x.device)
        for name in self.layers:
            z = self._outputs[name]
            hx = hx + hsic(x, z, sigma=self.sigma)
            hy = hy + hsic(z, onehot, kernel_z=self.kernel_y, sigma=self.sigma)
        loss = ce + self.lambda_x * hx - self.lambda_y * hy
        return loss, {"correct": float((logits.argmax(1) == y).float().sum()), "hsic_x": float(hx.detach()), "hsic_y": float(hy.detach())}
