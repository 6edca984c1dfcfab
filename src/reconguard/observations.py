"""What an attacker sees, one frozen dataclass per kind of release; every attack in
:mod:`reconguard.attacks.registry` declares which one it ``observes``.

- :class:`EmbeddingRelease` — split inference / instance encoding (spectral-bounds paper §2): ``e = Enc(x) + N(0, σ²I)``
  with the encoder (the attacker can query it), σ, the image shape and the pixel convention the encoder expects.
- :class:`EncryptedRelease` — an InstaHide / Mixup challenge (InstaHide paper §3): the encryptions, their
  released labels (or None, label-free), k, the mode, the number of private images n and the scheme's constants.
- :class:`GradientRelease` — a federated client's gradients of a known model (gradient matching).
- :class:`ClassifierAccess` — white-box access to a trained classifier (model inversion, AT-AT paper).

:class:`Knowledge` is what the attacker brings besides the observation: a prior (and its score), its own
images, and — for the attacks whose tuning the papers report with an oracle (the MAP attack's β at σ = 0) — the
originals to tune against. Observations hold references, not copies; frozen means an attack cannot rebind them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn


@dataclass(frozen=True)
class EmbeddingRelease:
    embeddings: torch.Tensor           # N×m
    encoder: nn.Module                 # takes N×d (or N×C×H×W) in [0, 1] pixels
    sigma: float = 0.0                 # the release's noise std
    in_shape: tuple | None = None      # (C, H, W) of the images
    normalize: dict | None = None      # the convention applied inside ``encoder`` (recorded, not re-applied)


@dataclass(frozen=True)
class EncryptedRelease:
    encryptions: torch.Tensor          # N×C×H×W as released (normalised, sign-masked)
    labels: torch.Tensor | None        # N×classes mixed labels; None when the attacker ignores them
    k: int
    mode: str = "inside"               # inside | cross
    n: int | None = None               # private images behind the release
    c1: float = 0.65
    c2: float = 0.3
    normalization: Any = "dataset"

    @classmethod
    def from_challenge(cls, ch, label_free: bool = False) -> "EncryptedRelease":
        """From a loaded challenge folder (:func:`reconguard.experiments.challenge.load_challenge`)."""
        return cls(ch.encryptions, None if label_free else ch.labels, ch.k, ch.mode, ch.n, ch.c1, ch.c2,
                   ch.normalization)


@dataclass(frozen=True)
class GradientRelease:
    gradients: list                    # per-parameter gradients of the model on the private batch
    model: nn.Module
    input_shape: tuple
    labels: torch.Tensor | None = None
    batch_size: int = 1


@dataclass(frozen=True)
class ClassifierAccess:
    model: nn.Module
    num_classes: int
    in_shape: tuple


@dataclass(frozen=True)
class Knowledge:
    """The attacker's side information (any field may be None)."""

    prior: Any = None                          # a prior over images (e.g. a GaussianMixturePrior)
    score: Callable | None = None              # ∇ log π, for the MAP attack
    images: torch.Tensor | None = None         # the attacker's own images (public data, decoder training)
    oracle: torch.Tensor | None = None         # the originals, where a paper tunes with them (β at σ = 0)
    exact_prior: bool = True                   # the prior is the images' true distribution (MMSE is Bayes-optimal)
    labels: torch.Tensor | None = None         # the labels of ``images``
    noise_images: torch.Tensor | None = None   # InstaHide cross mode: images like the scheme's public pool
    public_pool: Any = None                    # … and a pool to encrypt with when modelling the scheme
    scheme: Any = None                         # the attacker's model of the encryptor (an InstaHide), when told it
    similarity: torch.Tensor | None = None     # N×N pair scores of the encryptions (a SimilarityNetwork's)
