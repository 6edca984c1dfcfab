"""Defenses: training regimes that plug into ``reconguard.train.fit`` through hooks (not subclasses).

Model-inversion defenses of the AT-AT paper (each works on a user's own ``nn.Module``):
:class:`ATAT`, :class:`AdversarialTraining`, :class:`MID`, :class:`BiDO`, :class:`TLDMI`, :class:`NegLS`,
:class:`RoLSS` (and :func:`RoLSS_SSF`), :class:`TrapMID`, :class:`UnseenPixels`, :class:`PermutedLabels`.
Instance-encoding defenses: :class:`InstaHideTraining`, :class:`DPSGD`.
"""

from .adversarial import ATAT, AdversarialTraining
from .base import Defense, NoDefense
from .bido import BiDO
from .dpsgd import DPSGD
from .instahide import InstaHideTraining, predict_encrypted, predict_plain
from .mid import MID
from .negls import NegLS
from .permuted import PermutedLabels
from .rolss import RoLSS, RoLSS_SSF
from .tldmi import TLDMI
from .trapmid import TrapMID
from .unseen_pixels import UnseenPixels

__all__ = ["Defense", "NoDefense", "InstaHideTraining", "DPSGD", "predict_encrypted", "predict_plain", "ATAT",
           "AdversarialTraining", "MID", "BiDO", "TLDMI", "NegLS", "RoLSS", "RoLSS_SSF", "TrapMID", "UnseenPixels",
           "PermutedLabels"]
