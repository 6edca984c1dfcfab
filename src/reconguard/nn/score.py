"""A small denoising network and the score model built from it (spectral-bounds paper, section 5.2's
offline alternative to a DDPM).

Denoising score matching at one noise level σ_s: with ``x̃ = x + σ_s z``, the network ε_θ(x̃) is
trained to predict z; the minimiser is ``E[z | x̃]``, so ``s(x̃) = −ε_θ(x̃)/σ_s`` is the score of the
smoothed distribution ``π_σs`` — exactly the prior the bounds are stated for.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..errors import CorruptDataError, DataFileNotFoundError, ShapeError
from .init import seeded


class DenoiserNet(nn.Module):
    """ε_θ: ``N×C×H×W → N×C×H×W`` = Wiener part + a residual stack of 3×3 convolutions with GELU.

    The Wiener part ``σ_s·(Σ + σ_s²I)⁻¹(x̃ − μ)`` is the exact ε-predictor for a Gaussian with the
    data's mean μ and covariance Σ (``set_wiener``); its score matrix is ``(Σ + σ_s²I)⁻¹``, the
    Cramér–Rao floor of section 6.4.1. The convolutional part starts at zero and learns what the
    Gaussian misses, so training starts from a score that already passes ``score_quality``.
    """

    def __init__(self, in_shape: tuple[int, int, int], width: int = 64, depth: int = 6):
        super().__init__()
        self.in_shape, self.width, self.depth = tuple(in_shape), int(width), int(depth)
        c, h, w = self.in_shape
        d = c * h * w
        self.inp = nn.Conv2d(c, width, 3, padding=1)
        self.body = nn.ModuleList([nn.Conv2d(width, width, 3, padding=1) for _ in range(depth)])
        self.out = nn.Conv2d(width, c, 3, padding=1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.act = nn.GELU()
        self.register_buffer("wiener_mean", torch.zeros(d))
        self.register_buffer("wiener_matrix", torch.zeros(d, d))

    @torch.no_grad()
    def set_wiener(self, x: torch.Tensor, sigma_s: float) -> None:
        """Fit the Wiener part to clean images ``x`` (``N×C×H×W``) at noise ``sigma_s``."""
        flat = x.reshape(x.shape[0], -1).to(torch.float64)
        mu = flat.mean(0)
        cov = torch.cov(flat.T) if flat.shape[0] > 1 else torch.zeros(flat.shape[1], flat.shape[1], dtype=torch.float64)
        A = sigma_s * torch.linalg.inv(cov + sigma_s**2 * torch.eye(flat.shape[1], dtype=torch.float64))
        self.wiener_mean.copy_(mu.to(self.wiener_mean.dtype))
        self.wiener_matrix.copy_(A.to(self.wiener_matrix.dtype))

    def forward(self, x):
        flat = x.reshape(x.shape[0], -1)
        linear = ((flat - self.wiener_mean) @ self.wiener_matrix.T).reshape(x.shape)
        h = self.act(self.inp(x))
        for conv in self.body:
            h = h + self.act(conv(h))
        return linear + self.out(h)


class ScoreModel(nn.Module):
    """``s(x) = −ε_θ(x)/σ_s`` for flat ``N×d`` or image inputs in pixel units; ``score`` returns ``N×d``."""

    def __init__(self, net: DenoiserNet, sigma_s: float):
        super().__init__()
        self.net, self.sigma_s = net, float(sigma_s)

    @property
    def dim(self) -> int:
        c, h, w = self.net.in_shape
        return c * h * w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.score(x)

    def score(self, x: torch.Tensor) -> torch.Tensor:
        p = next(self.net.parameters())
        x = torch.as_tensor(x).to(device=p.device, dtype=p.dtype)
        if x.ndim == 2:
            if x.shape[1] != self.dim:
                raise ShapeError(f"the score model expects d={self.dim}, got {x.shape[1]}.")
            x = x.reshape(-1, *self.net.in_shape)
        return (-self.net(x) / self.sigma_s).reshape(x.shape[0], -1)

    def config(self) -> dict:
        return {"in_shape": list(self.net.in_shape), "width": self.net.width, "depth": self.net.depth,
                "sigma_s": self.sigma_s}

    def save(self, path: str | Path) -> Path:
        from ..io import save_torch_atomic

        return save_torch_atomic(path, {"kind": "reconguard-score-model", "config": self.config(),
                                        "state_dict": self.net.state_dict()})

    @classmethod
    def build(cls, in_shape, sigma_s: float, width: int = 64, depth: int = 6, seed: int | None = 0) -> "ScoreModel":
        with seeded(seed):
            return cls(DenoiserNet(in_shape, width, depth), sigma_s)

    @classmethod
    def load(cls, path: str | Path) -> "ScoreModel":
        path = Path(path)
        if not path.is_file():
            raise DataFileNotFoundError(f"score model {path} does not exist; train one with "
                                        "`reconguard score train --data digits --out PATH`.")
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            cfg = blob["config"]
            model = cls(DenoiserNet(tuple(cfg["in_shape"]), cfg["width"], cfg["depth"]), cfg["sigma_s"])
            model.net.load_state_dict(blob["state_dict"])
        except Exception as exc:  # noqa: BLE001 — unpickling, truncation, wrong keys: one clear error
            raise CorruptDataError(f"{path}: not a reconguard score model (torch.load with weights_only=True refused it: "
                                   f"{type(exc).__name__}; the file is corrupt, truncated or of another kind).") from exc
        return model.eval()
