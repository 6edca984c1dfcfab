"""The owner's pixel normalisation read off the recovery, for de-normalising it when it was never published.

InstaHide normalises each channel c as z = (x − m_c) / s_c before mixing. Under the default rule (``normalize=
"dataset"``: the private set's own statistics) m and s are never released, and inside mode's |x̃| = |Σ_j λ_j z_j|
carries no trace of them beyond the range: a set of images in [0, 1] becomes a set in [−m_c/s_c, (1 − m_c)/s_c].
The attack fits z unclamped, so the recovered values span that range, and

    s_c = 1 / (hi_c − lo_c),   m_c = −lo_c · s_c,     lo_c, hi_c = the q and 1 − q quantiles of channel c's values

gives back m and s wherever the private set reaches (near) black and white somewhere — 100 natural 32×32 crops or
Fashion-MNIST images do: their 0.2 % and 99.8 % quantiles are 0.00–0.003 and 0.92–1.00 per channel (benchmark seeds
0–4). The attack reads them off its *final* recovery (after ``carlini_signs.settle``). The phase step's recovery
before it still holds pixels whose global sign is wrong, and a bright pixel negated lies far below the set's range:
on one 32×32 challenge (seed 2) channel 2's 0.2 % quantile there was −1.94 against the truth's −1.18, which put its
mean at 0.412 instead of 0.287 (plain identification 0.79); the final recovery's quantiles match the truth's to
0.01 (mean 0.298, plain 1.00). The prior moves may snap a few pixels to the attacker's own box ends, which the
quantiles pass over unless more than q of a channel sits there; at worst the range read is the attacker's box,
i.e. its own statistics (``denormalize="own"``), the alternative.

The attacker's own images' statistics are off by however much its photographs differ: the benchmark's are 0.05–0.10
brighter than the private crops, which costs plain nearest-neighbour identification (32×32 crops, inside k = 4,
n = 100, T = 50, the same recoveries: seed 2 0.73 → 1.00, seed 3 0.84 → 1.00; README: five fresh challenges). A
channel whose range is not one a [0, 1] set gives (hi ≤ lo, or m outside [0, 1]) keeps the fallback statistics. A set
that never nears black or white is stretched to fill [0, 1]. A *level* — one value holding at least a tenth of a
channel's values — in the lower half of the channel's range is taken as its low end (in the upper half, its high
end): that is a background, which the prior moves set to one value (the attacker's box end, black), with the
attack's noise around it, so the quantile below it measures the noise, not black. Fashion-MNIST (inside k = 4,
n = 100, seed 0; 28 % of the recovery's pixels at the box end, the truth's background 48 %): the quantile alone maps
the background to 0.014, SSIM 0.887; with the level, 0.962 (the truth's constants: 0.958). The 32×32 crops hold no
such level and keep the quantiles. Only the box's own ends count as levels (the value the attack clamps to, from
``fallback``: −m_c/s_c and (1 − m_c)/s_c): a flat *grey* background the attack recovered as one exact value would
otherwise be taken as black and raise the contrast, so a level anywhere else is passed over and the quantiles stand.

**Cross mode** (natural images, the sign-synchronising path, ``carlini_sync``): the recovery is noisier at its tails —
pixels whose sign is still wrong, the public part's noise — so its 0.2 % quantiles read the noise, not black and white.
The ``CROSS_Q`` = 3 % quantiles are read instead and mapped to where a set of photographs has them: the same quantiles
of the attacker's own images (:func:`pixel_quantiles`; sets of photographs saturate alike — their 1 % quantiles
0.00–0.01 and 0.86–0.96 — while their means differ by 0.05–0.10, which is what the attacker's own statistics get
wrong). RGB 32×32 crops, cross k = 6, n = 100, T = 50, labels (README, "The owner's constants and the orientation,
cross mode on natural images"): q chosen on four kept recoveries, plain identification 0.68 (own statistics) → 0.79
mean (the owner's true constants: 0.80), SSIM 0.584 → 0.617 (at 2 % and 5 % within 0.02 of it; at 0.5 % half the
gain); then ten fresh challenges: 0.63 → 0.78 (true constants 0.81), standardised 0.82 → 0.83. Digits and
Fashion-MNIST cross (their own images from the owner's source, their prior telling the signs) keep the attacker's own
statistics: the rule was not measured there.
"""

from __future__ import annotations

import torch

CROSS_Q = 0.03  # cross mode: the quantiles read (module docstring, "Cross mode")


def range_stats(Z: torch.Tensor, channels: int, fallback: tuple, q: float = 0.002, level: float = 0.1,
                targets: tuple | None = None) -> tuple:
    """``(means, stds)`` per channel (tuples, as ``InstaHide.channel_stats``) from the recovered normalised images
    ``Z`` (n×d, channel-major pixels), ``fallback`` = (means, stds) per channel where the range is implausible; a value
    holding at least ``level`` of a channel, at the box's low (high) end from ``fallback`` and in the lower (upper) half of
    its range, is its low (high) end (module docstring). The q and 1 − q quantiles map to ``targets`` = (lows, highs)
    per channel in [0, 1] (default black and white; cross mode: :func:`pixel_quantiles` of the attacker's own images);
    a level maps to black (white)."""
    tol = 4 * torch.finfo(Z.dtype).eps if Z.is_floating_point() else 1e-9  # a box end read in Z's precision
    values = Z.detach().to(torch.float64).reshape(Z.shape[0], channels, -1).transpose(0, 1).reshape(channels, -1)
    means, stds = list(fallback[0]), list(fallback[1])
    for c in range(channels):
        v = values[c]
        if len(v) > 16_000_000:  # torch.quantile's input limit: an even subsample
            v = v[:: len(v) // 16_000_000 + 1]
        lo, hi = (float(x) for x in torch.quantile(v, torch.tensor([q, 1 - q], dtype=v.dtype)))
        level_values, counts = torch.unique(v, return_counts=True)
        levels = level_values[counts >= level * len(v)]  # a background: the set's black (or white), noise around it
        ends = (-fallback[0][c] / fallback[1][c], (1 - fallback[0][c]) / fallback[1][c])  # the box the attack clamps to
        low, high = (levels[((levels - e).abs() <= tol * max(1.0, abs(e))) & side] for e, side in
                     ((ends[0], levels < (lo + hi) / 2), (ends[1], levels > (lo + hi) / 2)))
        t_lo, t_hi = (0.0, 1.0) if targets is None else (float(targets[0][c]), float(targets[1][c]))
        if len(low) and float(low[0]) >= lo:
            lo, t_lo = float(low[0]), 0.0
        if len(high) and float(high[-1]) <= hi:
            hi, t_hi = float(high[-1]), 1.0
        scale = (t_hi - t_lo) / (hi - lo) if hi > lo else 0.0
        if scale > 0 and 0.0 <= t_lo - lo * scale <= 1.0:
            stds[c], means[c] = scale, t_lo - lo * scale
    return tuple(means), tuple(stds)


def pixel_quantiles(images: torch.Tensor, q: float) -> tuple:
    """``(lows, highs)``: per channel, the q and 1 − q quantiles of ``images`` (m×C×H×W in [0, 1]) — where a set of
    that kind sits at its darkest and brightest q (the targets of :func:`range_stats` in cross mode)."""
    v = torch.as_tensor(images).detach().to(torch.float64)
    v = v.reshape(v.shape[0], v.shape[1], -1).transpose(0, 1).reshape(v.shape[1], -1)
    if v.shape[1] > 16_000_000:  # torch.quantile's input limit: an even subsample
        v = v[:, :: v.shape[1] // 16_000_000 + 1]
    qs = torch.quantile(v, torch.tensor([q, 1 - q], dtype=v.dtype), dim=1)
    return tuple(qs[0].tolist()), tuple(qs[1].tolist())


def owner_stats(Z: torch.Tensor, channels: int, fallback: tuple, mode: str, own: torch.Tensor) -> tuple:
    """The owner's ``(means, stds)`` read off the final recovery ``Z``: inside, :func:`range_stats` at its defaults (the
    set reaches black and white); cross, its ``CROSS_Q`` quantiles mapped to the attacker's own images' ``own``
    (module docstring)."""
    if mode == "inside":
        return range_stats(Z, channels, fallback)
    return range_stats(Z, channels, fallback, CROSS_Q, targets=pixel_quantiles(own, CROSS_Q))
