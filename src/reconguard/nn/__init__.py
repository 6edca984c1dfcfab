"""Network building blocks (no torchvision)."""

from .compression import CompressionBlock, DecompressionBlock, compression_plan
from .init import seeded
from .mnist_cnn import mnist_cnn_blocks

__all__ = ["CompressionBlock", "DecompressionBlock", "compression_plan", "seeded", "mnist_cnn_blocks"]
