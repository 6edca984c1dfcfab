"""Attacks on Mixup and InstaHide encryptions (InstaHide paper sections 2, 5.3; appendix B)."""

from .averaging import AveragingAttack, AveragingResult
from .carlini import CarliniAttack, CarliniResult
from .demask import Demasker, DemaskResult
from .measure import ChallengeScore, KSResult, ks_test, make_challenge, score_challenge
from .mixup import PairAttack, PairResult, PublicUncoverAttack, UncoverResult, uncover_public

__all__ = ["AveragingAttack", "AveragingResult", "CarliniAttack", "CarliniResult", "Demasker", "DemaskResult", "ChallengeScore", "KSResult", "ks_test", "make_challenge", "score_challenge", "PairAttack", "PairResult", "PublicUncoverAttack", "UncoverResult", "uncover_public"]
