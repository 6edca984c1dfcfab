"""Adversarial examples: L∞ PGD (Madry et al. 2017), targeted or not, with ε in pixel units."""

from .pgd import PGD, AdversarialExamples, pgd

__all__ = ["PGD", "AdversarialExamples", "pgd"]
