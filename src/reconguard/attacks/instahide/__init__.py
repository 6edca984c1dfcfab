"""Attacks on Mixup and InstaHide encryptions (InstaHide paper sections 2, 5.3; appendix B)."""

from .mixup import PairAttack, PairResult, PublicUncoverAttack, UncoverResult, uncover_public

__all__ = ["PairAttack", "PairResult", "PublicUncoverAttack", "UncoverResult", "uncover_public"]
