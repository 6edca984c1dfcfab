"""Defenses: training regimes that plug into ``reconguard.train.fit`` through hooks."""

from .dpsgd import DPSGD
from .instahide import InstaHideTraining, accuracy, predict_encrypted, predict_plain

__all__ = ["InstaHideTraining", "DPSGD", "predict_encrypted", "predict_plain", "accuracy"]
