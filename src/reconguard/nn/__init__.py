"""Network building blocks (no torchvision)."""

from .compression import CompressionBlock, DecompressionBlock, compression_plan
from .init import seeded
from .mnist_cnn import mnist_cnn, mnist_cnn_blocks
from .resnet import ResNet18, load_state_dict_file, load_torchvision_weights
from .score import DenoiserNet, ScoreModel

__all__ = [
    "DenoiserNet", "ScoreModel", "ResNet18", "load_state_dict_file", "load_torchvision_weights",
    "CompressionBlock", "DecompressionBlock", "compression_plan", "seeded", "mnist_cnn_blocks", "mnist_cnn",
]
