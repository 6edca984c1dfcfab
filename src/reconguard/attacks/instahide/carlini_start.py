"""A labelled start for Carlini's alternation: the encryptions clustered by their dominant image.

From a random assignment the alternation (``carlini_model.alternate``) improves slowly at the published size: an
encryption's row in a class of ten images is right with probability 1/10, so every image's first X is a blend of
its class, and the local moves untangle it about 1 % of the error per round — measured on RGB 32×32 photograph
crops (inside k = 4, n = 100, T = 50, labels), still falling after 134 rounds and 20 CPU-minutes.

Here (the idea of Carlini et al.'s similarity clustering, with the encryptions themselves as the features): an
encryption's largest label mass names the class of its dominant member (coefficient up to c1), and |x̃_t| looks
most like that member's |x|. Per class c, the encryptions dominated by c, their |x̃| standardised per row (zero
mean, unit norm: the coefficient's scale drops out), are split by k-means into as many clusters as c has images;
cluster j's encryptions put c's label mass on c's j-th image, every other present class's mass spread evenly over
its images. Measured (the clusters' purity: the share of encryptions whose true dominant image is their cluster's
most common one; random rows: about 0.1): photograph crops 0.52, Fashion-MNIST 0.59 (inside k = 4, n = 100, T = 50).
Cost: k-means on N·d values, O(N·d·(n/classes)·iterations).
"""

from __future__ import annotations

import torch


def cluster_start(B: torch.Tensor, labels: torch.Tensor, classes: list, seed: int = 0) -> torch.Tensor:
    """The start rows A (N×n, float64) from ``B = |x̃|`` (N×d), the soft ``labels`` (N×C: the private part's mass
    per class) and ``classes`` (the class of each of the n images)."""
    from sklearn.cluster import KMeans

    N, n = B.shape[0], len(classes)
    cls = torch.as_tensor(classes)
    labels = labels.to(torch.float64)
    A = torch.zeros(N, n, dtype=torch.float64)
    for c in torch.unique(cls).tolist():  # every present class's mass spread evenly over its images
        slots = torch.nonzero(cls == c).squeeze(1)
        A[:, slots] = labels[:, c, None] / len(slots)
    dominant = labels.argmax(1)
    Z = B - B.mean(1, keepdim=True)
    Z = (Z / Z.norm(dim=1, keepdim=True).clamp_min(1e-12)).float().numpy()
    for c in torch.unique(cls).tolist():
        slots = torch.nonzero(cls == c).squeeze(1)
        rows = torch.nonzero(dominant == c).squeeze(1)
        if len(slots) < 2 or len(rows) < len(slots):
            continue
        found = KMeans(len(slots), n_init=3, random_state=seed).fit(Z[rows.numpy()]).labels_
        A[rows[:, None], slots[None, :]] = 0.0
        A[rows, slots[torch.as_tensor(found, dtype=torch.long)]] = labels[rows, c]
    return A
