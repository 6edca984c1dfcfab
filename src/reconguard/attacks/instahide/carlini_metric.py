"""The error an assignment of Carlini et al.'s attack minimises (``carlini.py``; estimated by
``carlini_model.noise_metric``): squared error with the public part's few dominant directions discounted, and its
fused nearest-option search for the label-free shared rows.
"""

from __future__ import annotations

import torch


class Metric:
    """The error of residuals R = model − |x̃| (one per row): ``‖r‖² − Σ_k c_k (v_kᵀ r)²`` — σ² times the squared
    Mahalanobis norm of r under a noise covariance σ²I + Σ_k d_k v_k v_kᵀ (Woodbury: c_k = d_k / (d_k + σ²)) —
    or the plain ‖r‖² (``V`` None). The public part of a cross-dataset mix is natural-image crops: smooth, its
    covariance concentrated in a few directions (5 of 784 hold 60 % for scikit-image crops at 28×28), which plain
    squared error counts as if every pixel were independent evidence: a large blob of public texture then outweighs
    the strokes that tell two digits of a class apart. Measured with the true images on a 100 × 50, k = 6 challenge
    (public parts normalised with their own statistics): the least-error option is the true pair for 27 % of the
    encryptions under ‖r‖², 44 % under this metric (rank 30, estimated by ``noise_metric`` from simulated mixes; 46 %
    from the true residuals' full covariance)."""

    def __init__(self, V: torch.Tensor | None = None, c: torch.Tensor | None = None):
        self.V, self.c = V, c

    def __call__(self, R: torch.Tensor) -> torch.Tensor:
        err = R.pow(2).sum(1)
        if self.V is None:
            return err
        return err - ((R @ self.V.to(R.dtype)).pow(2) * self.c.to(R.dtype)).sum(1)

    def cross(self, B: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
        """The N×O errors of every prediction row of ``P`` against every row of ``B`` (label-free shared options)."""
        out = ((B ** 2).sum(1, keepdim=True) - 2 * B @ P.T + (P ** 2).sum(1)).clamp_min(0)
        if self.V is not None:  # Σ_k c_k (b_k − p_k)², expanded the same way
            BV, PV, c = B @ self.V.to(B.dtype), P @ self.V.to(P.dtype), self.c.to(B.dtype)
            out -= (BV ** 2 @ c)[:, None] - 2 * (BV * c) @ PV.T + (PV ** 2 @ c)[None]
        return out

    def nearest(self, B: torch.Tensor, P, block: int = 2 ** 22) -> tuple[torch.Tensor, torch.Tensor]:
        """For every row of ``B``: the index of the option of least error and that error (label-free shared options,
        the same O for every encryption). ``P``: the O×d predictions, or ``(O, rows)`` with ``rows(index)`` the
        predictions of the options ``index`` (made a block at a time, never all O×d at once). Per b the error is
        ‖b‖² − Σ_k c_k (v_kᵀb)² (constant in p) plus ``[b, c∘Vᵀb, 1] · [−2p, 2Vᵀp, ‖p‖² − Σ_k c_k (v_kᵀp)²]``: one
        float32 matrix product of augmented rows per chunk of encryptions and block of options and a running minimum,
        nothing N×O kept; the chosen rows' errors are then recomputed in float64. Temporaries of ≤ ``block`` values
        (16 MB: below the mmap threshold, ``reconguard.memory``, so freed blocks are reused; one 256 × 89,100 product
        was 91 MB, the O×d predictions 365 MB, each faulted in afresh). O(N·O·(d + rank)) time, O(O·(d + rank) + block)
        memory."""
        count, rows = (len(P), P.__getitem__) if torch.is_tensor(P) else P
        V = self.V.to(B.dtype) if self.V is not None else B.new_zeros(B.shape[1], 0)
        c = self.c.to(B.dtype) if self.V is not None else B.new_zeros(0)
        d, r = B.shape[1], V.shape[1]
        right, step = torch.empty(count, d + r + 1, dtype=torch.float32), max(1, block // (2 * (d + r + 1)))
        for a in range(0, count, step):  # options a block at a time: ≤ block / 2 float64 values
            p = rows(torch.arange(a, min(count, a + step))).to(B.dtype)
            pv = p @ V
            right[a:a + len(p)] = torch.cat([-2 * p, 2 * pv, ((p ** 2).sum(1) - (pv ** 2 @ c))[:, None]], 1)
        idx, chunk, step = torch.zeros(len(B), dtype=torch.long), 256, max(1, block // 256)
        for a in range(0, len(B), chunk):  # 256 encryptions × ``step`` options at a time
            b = B[a:a + chunk]
            left = torch.cat([b, b @ V * c, torch.ones(len(b), 1, dtype=b.dtype)], 1).to(torch.float32)
            low = torch.full((len(b),), float("inf"))
            for o in range(0, count, step):
                value, at = (left @ right[o:o + step].T).min(1)
                better = value < low  # strict, as argmin: the first of equal minima (an identical option in another
                # block, a product of another shape, may round 1 ulp apart in float32: either is a least-error row)
                low, idx[a:a + chunk] = torch.where(better, value, low), torch.where(better, at + o, idx[a:a + chunk])
        return idx, self(rows(idx).to(B.dtype) - B).clamp_min(0)


PLAIN = Metric()
