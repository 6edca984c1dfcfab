"""Reconstruction attacks on embeddings."""

from .mmse import mixture_mmse_attack, mmse_attack

__all__ = ["mmse_attack", "mixture_mmse_attack"]
