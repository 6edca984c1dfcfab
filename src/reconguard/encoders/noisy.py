"""``Enc(x) = Enc_D(x) + N(0, σ²·I_m)`` (spectral-bounds paper, section 3.1)."""

from __future__ import annotations

import torch
from torch import nn

from ..checks import check_sigma


class Noisy(nn.Module):
    """Wraps a deterministic encoder and adds Gaussian noise of std ``sigma`` to its output.

    ``.deterministic`` is ``Enc_D`` (what Jacobians are taken of); ``.sigma`` the noise std.
    Noise is drawn from ``generator`` when given (reproducible), else from a fresh default
    generator so the global RNG is never touched.
    """

    def __init__(self, encoder: nn.Module, sigma: float, generator: torch.Generator | None = None):
        super().__init__()
        self.deterministic = encoder
        self.sigma = check_sigma(sigma)
        self.generator = generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.deterministic(x)
        if self.sigma == 0:
            return e
        g = self.generator
        if g is None or g.device != e.device:
            g = torch.Generator(device=e.device)
            g.seed()
            if self.generator is None:
                self.generator = g
        return e + self.sigma * torch.randn(e.shape, generator=g, dtype=e.dtype, device=e.device)

    def extra_repr(self) -> str:
        return f"sigma={self.sigma:g}"


def split_noise(encoder: nn.Module) -> tuple[nn.Module, float]:
    """``(Enc_D, sigma)``: unwraps ``Noisy``; any other module is deterministic (σ = 0)."""
    if isinstance(encoder, Noisy):
        return encoder.deterministic, encoder.sigma
    return encoder, 0.0
