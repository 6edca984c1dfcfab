"""What turns private data into a release: linear and split-network encoders, optionally noisy."""

from .instahide import Encryption, InstaHide, InstaHideKey, Mixup, sample_coefficients
from .linear import LinearEncoder, random_linear, random_orthogonal, skewed_eigenvalues, skewed_linear
from .noisy import Noisy, split_noise
from .split import SplitCNN, SplitNet, SplitResNet18, load_encoder, save_encoder

__all__ = [
    "InstaHide", "Mixup", "Encryption", "InstaHideKey", "sample_coefficients",
    "LinearEncoder", "random_linear", "skewed_linear", "skewed_eigenvalues", "random_orthogonal",
    "Noisy", "split_noise", "SplitNet", "SplitCNN", "SplitResNet18", "save_encoder", "load_encoder",
]
