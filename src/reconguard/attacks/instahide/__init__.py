"""Attacks on Mixup and InstaHide encryptions (InstaHide paper sections 2, 5.3; appendix B)."""

from .averaging import AveragingAttack, AveragingResult
from .carlini import CarliniAttack, CarliniResult
from .similarity import SimilarityNetwork, SimilarityResult, cluster_encryptions, encryption_affinity
from .demask import Demasker, DemaskResult
from .measure import ChallengeBaseline, ChallengeScore, KSResult, ks_test, make_challenge, match_recovered, score_challenge
from .search import PublicSearchAttack, SearchResult
from .mixup import PairAttack, PairResult, PublicUncoverAttack, UncoverResult, uncover_public

__all__ = [
    "PublicSearchAttack", "SearchResult", "AveragingAttack", "AveragingResult", "CarliniAttack",
    "CarliniResult", "SimilarityNetwork", "SimilarityResult", "cluster_encryptions", "encryption_affinity",
    "Demasker",
    "DemaskResult", "ChallengeScore", "ChallengeBaseline", "KSResult", "ks_test", "make_challenge",
    "score_challenge", "match_recovered", "PairAttack", "PairResult", "PublicUncoverAttack", "UncoverResult",
    "uncover_public",
]
