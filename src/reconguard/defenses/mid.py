"""MID — the mutual-information defense (Wang et al. 2020), a variational information bottleneck
inserted before the last linear layer (AT-AT paper appendix A.1: after average pooling, k = 1024, β = 0.01).

The head ``Linear(d, C)`` becomes ``Linear(d, 2k) → (μ, σ = softplus(s − 5)) → z → Linear(k, C)`` with
``z = μ + σ ε`` in training and ``z = μ`` in evaluation. The loss adds
``β · KL(N(μ, σ²) ‖ N(0, I)) / ln 2`` (bits, as in the MID code), with
``KL = ½ Σ_k (μ² + σ² − 2 ln σ − 1)`` averaged over the batch.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..checks import check_positive_int, check_scalar
from ..errors import ParameterError
from ._modules import replace_submodule, submodule
from .base import Defense


def gaussian_kl_bits(mu: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Mean over rows of KL(N(μ, diag σ²) ‖ N(0, I)) in bits."""
    return (0.5 * (mu ** 2 + std ** 2 - 2 * torch.log(std) - 1)).sum(1).mean() / math.log(2)


class VIBHead(nn.Module):
    def __init__(self, in_features: int, k: int, num_classes: int):
        super().__init__()
        self.k = k
        self.encoder = nn.Linear(in_features, 2 * k)
        self.fc = nn.Linear(k, num_classes)
        self.kl = torch.zeros(())

    def forward(self, h):
        stats = self.encoder(torch.flatten(h, 1))
        mu, std = stats[:, :self.k], nn.functional.softplus(stats[:, self.k:] - 5, beta=1)
        self.kl = gaussian_kl_bits(mu, std)
        z = mu + std * torch.randn_like(std) if self.training else mu
        return self.fc(z)


class MID(Defense):
    options = {"beta": "MID: KL weight β", "bottleneck": "MID: bottleneck size k"}
    structural = True

    def structure(self) -> dict:
        return {"bottleneck": self.bottleneck, "head": self.head}
    def __init__(self, beta: float = 0.01, bottleneck: int = 1024, head: str = "fc"):
        self.beta = check_scalar(beta, "beta", low=0.0)
        self.bottleneck = check_positive_int(bottleneck, "bottleneck")
        self.head = head
        self.vib: VIBHead | None = None

    def prepare(self, model: nn.Module) -> nn.Module:
        old = submodule(model, self.head)
        if isinstance(old, VIBHead):
            self.vib = old
            return model
        if not isinstance(old, nn.Linear):
            raise ParameterError(f"MID replaces a Linear head; {self.head!r} is a {type(old).__name__} "
                                 "(name the last linear layer with head=...).")
        self.vib = VIBHead(old.in_features, self.bottleneck, old.out_features).to(old.weight.device)
        replace_submodule(model, self.head, self.vib)
        return model

    def loss(self, model: nn.Module, batch) -> tuple[torch.Tensor, dict]:
        x, y = batch[0], batch[1]
        logits = model(x)
        ce = nn.functional.cross_entropy(logits, y)
        kl = self.vib.kl
        return ce + self.beta * kl, {"correct": float((logits.argmax(1) == y).float().sum()), "kl_bits": float(kl.detach())}
