"""Model-inversion attacks: a generative-prior attack in the style of PPA and plain gradient inversion."""

from .generator import VAEGenerator, train_generator
from .ppa import GenerativeInversion, GradientInversion, InversionResult, poincare_loss

__all__ = ["VAEGenerator", "train_generator", "GenerativeInversion", "GradientInversion", "InversionResult",
           "poincare_loss"]
