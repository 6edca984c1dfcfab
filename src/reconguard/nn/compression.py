"""Compression / decompression blocks that set the embedding size m (spectral-bounds paper, appendix A.1.1).

    Compress:   Conv2d(C_in → C_out, k=3) + GELU + AdaptiveAvgPool2d(s)      (m = C_out · s²)
    Decompress: Upsample(H, W) + Conv2d(C_out → C_in, k=3) + GELU

The convolutions use padding 1 so that the spatial size is kept before pooling.
"""

from __future__ import annotations

from torch import nn

from ..errors import ParameterError


def compression_plan(m: int, channels: int, height: int, width: int) -> tuple[int, int | None]:
    """``(C_out, s)`` giving exactly ``m`` outputs: no pooling when ``m`` is a multiple of H·W,
    else the largest pooled side ``s ≤ min(H, W)`` with ``s²`` dividing ``m`` (``s = 1`` always works)."""
    if m < 1:
        raise ParameterError(f"embedding size m must be >= 1, got {m}.")
    if m % (height * width) == 0:
        return m // (height * width), None
    for s in range(min(height, width), 0, -1):
        if m % (s * s) == 0:
            return m // (s * s), s
    raise AssertionError("unreachable: s = 1 divides every m")


class CompressionBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, pool: int | None):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.act = nn.GELU()
        self.pool = nn.AdaptiveAvgPool2d(pool) if pool is not None else nn.Identity()

    def forward(self, x):
        return self.pool(self.act(self.conv(x)))


class DecompressionBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, size: tuple[int, int]):
        super().__init__()
        self.up = nn.Upsample(size=size, mode="nearest")
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.conv(self.up(x)))
