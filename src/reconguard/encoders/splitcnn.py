"""``SplitCNN``: the MNIST 3-block CNN cut at a split point, then a compression block
(spectral-bounds paper, section 6.1 and appendix A.1.1).

    early  = after block 0 (32 channels),  middle = after block 1 (64),  late = after block 2 (128)

The compression block (Conv k=3 → GELU → AdaptiveAvgPool(s)) sets the embedding size ``m``
exactly. ``downstream()`` builds the matching decompression block + rest of the network + head,
for training the encoder jointly on classification.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import ShapeError, UnknownOptionError
from ..nn import CompressionBlock, DecompressionBlock, compression_plan, mnist_cnn_blocks, seeded

SPLITS = {"early": 1, "middle": 2, "late": 3}


class SplitCNN(nn.Module):
    """``N×C×H×W`` (or ``N×d``, reshaped to ``in_shape``) → ``N×m``."""

    def __init__(self, split: str = "middle", m: int = 64, in_shape: tuple[int, int, int] = (1, 28, 28),
                 num_classes: int = 10, seed: int | None = 0):
        super().__init__()
        if split not in SPLITS:
            raise UnknownOptionError(f"split must be one of {sorted(SPLITS)}, got {split!r}.")
        self.split, self.m, self.in_shape, self.num_classes, self.seed = split, int(m), tuple(in_shape), num_classes, seed
        with seeded(seed):
            blocks = mnist_cnn_blocks(in_shape[0])
            self.blocks = nn.Sequential(*blocks[: SPLITS[split]])
            with torch.no_grad():
                c, h, w = self.blocks(torch.zeros(1, *in_shape)).shape[1:]
            self._feature_shape = (c, h, w)
            c_out, pool = compression_plan(self.m, c, h, w)
            self.compress = CompressionBlock(c, c_out, pool)

    @property
    def in_dim(self) -> int:
        c, h, w = self.in_shape
        return c * h * w

    @property
    def out_dim(self) -> int:
        return self.m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 2:
            if x.shape[1] != self.in_dim:
                raise ShapeError(f"SplitCNN expects d={self.in_dim} (shape {self.in_shape}), got {x.shape[1]}.")
            x = x.reshape(x.shape[0], *self.in_shape)
        if tuple(x.shape[1:]) != self.in_shape:
            raise ShapeError(f"SplitCNN expects inputs of shape N×{'×'.join(map(str, self.in_shape))}, "
                             f"got {tuple(x.shape)}.")
        return self.compress(self.blocks(x)).flatten(1)

    def downstream(self) -> nn.Module:
        """Decompression + the rest of the CNN + linear head: ``N×m`` embeddings → logits."""
        c, h, w = self._feature_shape
        c_out = self.compress.conv.out_channels
        with torch.no_grad():
            pooled = self.compress(self.blocks(torch.zeros(1, *self.in_shape))).shape[2:]
        with seeded(None if self.seed is None else self.seed + 1):
            rest = nn.Sequential(*mnist_cnn_blocks(self.in_shape[0])[SPLITS[self.split]:])
            with torch.no_grad():
                feat = rest(torch.zeros(1, c, h, w)).numel()
            return nn.Sequential(
                nn.Unflatten(1, (c_out, *pooled)), DecompressionBlock(c_out, c, (h, w)),
                rest, nn.Flatten(1), nn.Linear(feat, self.num_classes),
            )

    def extra_repr(self) -> str:
        return f"split={self.split!r}, m={self.m}, in_shape={self.in_shape}"
