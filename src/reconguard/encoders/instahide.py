"""InstaHide and Mixup encryption (InstaHide paper: "Mixup and its vulnerability", "InstaHide",
Algorithm 2, cross-dataset InstaHide, "Best practice").

Each private image x_i is replaced by

    x̃_i = σ_i ∘ Σ_{j<k} λ_ij · z_ij,     z_i0 = x_i,  z_ij (j ≥ 1) its partners,  σ_i ∈ {±1}^d

* **Normalisation.** Images in [0, 1] are first centred per channel, ``(x − mean)/std`` with the
  private set's channel statistics (``normalize="dataset"``, the reference pipeline's CIFAR
  normalisation computed on your data), fixed ``(mean, std)`` tuples, or ``"symmetric"`` (2x − 1).
  Public images (cross mode) get the same map by default (``public_normalize="private"``), or their own
  pool's channel statistics (``public_normalize="own"``: the reference code and the published challenge
  normalise ImageNet with ImageNet's statistics). ``Encryption.images`` are in those units, signed.
* **Coefficients.** λ_i is drawn *uniformly* from the feasible set {λ ≥ 0, Σλ = 1, max λ ≤ c1
  (and λ_0 + λ_1 ≥ c2 in cross mode)}: Dirichlet(1, …, 1) — uniform on the simplex — with whole-batch
  rejection, vectorised. The reference draws |N(0, 1)| normalised and rejects per image in a Python
  loop; its distribution has no stated meaning, uniform does. Requires c1 ≥ 1/k.
* **Partners.** As in the reference code's permutation scheme, each partner slot is a permutation of
  the private images, so in one call (an epoch) every private image appears in exactly k mixes (inside
  mode: once as itself, once in each of the k − 1 partner slots; cross mode: exactly 2), never mixed
  with itself and never twice in one mix (the reference allows both; we repair the permutations by
  swaps). Cross mode adds k − 2 public images drawn from the whole pool on every call (the reference
  only ever used the first N public images).
* **Mask.** A fresh ±1 pixel-wise mask per encryption, from ``os.urandom`` bits (a cryptographic
  source) by default; ``seed=`` makes masks, coefficients and partners reproducible (for tests), and
  the result says so (``Encryption.reproducible``). Mixup is the same with no mask.
* **Labels.** Σ_j λ_ij · onehot(y of private slot j): in cross mode only the private part (its sum is
  λ_0 + λ_1 < 1), as the paper trains "to learn only the (mixed) label of D_private images".
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

import numpy as np
import torch

from ..checks import as_tensor, check_images, check_positive_int, check_scalar
from ..errors import ParameterError, ShapeError, UnknownOptionError
from ..results import Result

MODES = ("inside", "cross")
PUBLIC_NORMALIZE = ("private", "own")  # public images normalised with the private set's statistics, or their own


def paper_c1(k: int) -> float:
    """The paper's coefficient cap 0.65, raised to 1/k where k is too small for it (k = 1 needs c1 = 1)."""
    return max(0.65, 1.0 / check_positive_int(k, "k (images per mix)"))


def check_coefficient_caps(k: int, c1: float, c2: float, mode: str) -> tuple[float, float]:
    """(c1, c2) checked for k images per mix: c1 in [1/k, 1] (k coefficients below 1/k cannot sum to 1); in cross
    mode k ≥ 2 and c2 in [0, 2·c1] (two private coefficients cannot exceed 2·c1)."""
    c1 = check_scalar(c1, "c1 (largest coefficient)", low=0.0, high=1.0, low_open=True)
    if c1 < 1.0 / k - 1e-12:
        raise ParameterError(f"c1={c1} is below 1/k={1 / k:.3g}: no coefficients sum to 1; raise c1 "
                             f"to at least 1/k (k=1 needs c1=1).")
    c2 = check_scalar(c2, "c2 (private coefficients' floor)", low=0.0, high=1.0)
    if mode == "cross":
        if k < 2:
            raise ParameterError("cross mode mixes 2 private images with k − 2 public ones: k must be ≥ 2.")
        if c2 > 2 * c1 + 1e-12:
            raise ParameterError(f"c2={c2} > 2·c1={2 * c1}: two private coefficients cannot reach it.")
    return c1, c2


_SIGNS = torch.tensor(  # byte → its 8 bits as ±1 floats (most significant bit first, as numpy.unpackbits)
    [[1.0 if (b >> (7 - i)) & 1 else -1.0 for i in range(8)] for b in range(256)], dtype=torch.float32)


@dataclass(frozen=True)
class InstaHideKey(Result):
    """The owner's one-time key: partner indices (``N×k``; column 0 is the image itself; public slots
    index the public pool), which slots are public, the coefficients and the ±1 mask (``None`` for Mixup;
    kept as packed bits, expanded on access)."""

    partners: torch.Tensor
    public: torch.Tensor
    coefficients: torch.Tensor
    packed_mask: torch.Tensor | None = None  # uint8, one bit per pixel (1 → +1)
    shape: tuple = ()
    _skip_in_dict = ("partners", "public", "coefficients", "packed_mask")

    def mixing(self, n: int) -> torch.Tensor:
        """The N×n mixing matrix of the private images (float64): entry (t, i) is image i's total coefficient in
        encryption t, public slots left out — the A of ``|x̃| = |A X|`` (inside mode) in Carlini et al.'s attack."""
        rows = torch.arange(len(self.partners))[:, None].expand_as(self.partners)
        keep = ~self.public
        return torch.zeros(len(self.partners), n, dtype=torch.float64).index_put_(
            (rows[keep], self.partners[keep]), self.coefficients[keep].to(torch.float64), accumulate=True)

    @property
    def mask(self) -> torch.Tensor | None:
        if self.packed_mask is None:
            return None
        n = int(np.prod(self.shape))
        return _SIGNS[self.packed_mask.long()].reshape(-1)[:n].to(torch.int8).reshape(self.shape)


@dataclass(frozen=True)
class Encryption(Result):
    images: torch.Tensor           # N×C×H×W, normalised units, signed
    labels: torch.Tensor           # N×classes soft labels
    key: InstaHideKey | None
    k: int
    mode: str
    masked: bool
    reproducible: bool             # True when made from a seed (not a cryptographic source)
    normalization: tuple
    _skip_in_dict = ("images", "labels", "key")


def _generator(seed: int | None) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(int(seed) if seed is not None else secrets.randbits(63))
    return g


def sample_coefficients(n: int, k: int, c1: float, c2: float | None = None, generator: torch.Generator | None = None,
                        max_rounds: int = 10000, own_floor: float | None = None) -> torch.Tensor:
    """``n×k`` rows uniform on {λ ≥ 0, Σλ = 1, max λ ≤ c1, (λ_0 + λ_1 ≥ c2), (λ_0 ≥ own_floor)}
    (Dirichlet(1) + rejection)."""
    out, have = [], 0
    for _ in range(max_rounds):
        e = -torch.log(torch.rand(max(2 * (n - have), 64), k, generator=generator, dtype=torch.float64).clamp_min(1e-300))
        lam = e / e.sum(1, keepdim=True)
        ok = lam.max(1).values <= c1
        if c2 is not None:
            ok &= lam[:, :2].sum(1) >= c2
        if own_floor is not None:
            ok &= lam[:, 0] >= own_floor
        out.append(lam[ok])
        have += int(ok.sum())
        if have >= n:
            return torch.cat(out)[:n].to(torch.float32)
    raise ParameterError(f"could not draw coefficients with k={k}, c1={c1}, c2={c2}: the feasible set is too small.")


def _distinct_rows(n: int, k: int, pool: int, exclude: torch.Tensor | None, g: torch.Generator) -> torch.Tensor:
    """``n×k`` indices in [0, pool), distinct within each row and ≠ ``exclude[row]`` (vectorised redraws)."""
    avail = pool - (1 if exclude is not None else 0)
    if k > avail:
        raise ParameterError(f"need {k} distinct partners per image but only {avail} are available; "
                             "use a smaller k or more images.")
    idx = torch.empty(n, k, dtype=torch.long)
    todo = torch.arange(n)
    while todo.numel():
        draw = torch.randint(avail, (todo.numel(), k), generator=g)
        if exclude is not None:
            draw = draw + (draw >= exclude[todo, None]).long()  # skip the image itself
        idx[todo] = draw
        s = draw.sort(1).values
        dup = (s[:, 1:] == s[:, :-1]).any(1) if k > 1 else torch.zeros(todo.numel(), dtype=torch.bool)
        todo = todo[dup]
    return idx


def _permutation_partners(n: int, cols: int, g: torch.Generator, max_rounds: int = 200) -> torch.Tensor:
    """``n×cols`` partner indices: every column a permutation of ``range(n)``, and every row free of its own
    index and of repeats. Each column starts as a random permutation; a row in conflict swaps its entry
    with a random other row when the swap leaves both rows valid."""
    if cols > n - 1:
        raise ParameterError(f"need {cols} distinct partners per image but only {n - 1} other images are available; "
                             "use a smaller k or more images.")
    out = torch.empty(n, cols, dtype=torch.long)
    own = torch.arange(n)
    for j in range(cols):
        p = torch.randperm(n, generator=g)
        taken = torch.cat([own[:, None], out[:, :j]], 1)  # n×(j+1): what row i may not receive

        def bad_rows(p):
            return ((p[:, None] == taken).any(1)).nonzero().reshape(-1).tolist()

        bad = bad_rows(p)
        for _ in range(max_rounds):
            if not bad:
                break
            for a in bad:
                for b in torch.randint(n, (32,), generator=g).tolist():
                    if p[b] not in taken[a] and p[a] not in taken[b]:
                        p[a], p[b] = p[b].clone(), p[a].clone()
                        break
            bad = bad_rows(p)
        if bad:  # tiny n: fall back to a random relabelling of cyclic shifts, always valid
            sigma = torch.randperm(n, generator=g)
            inv = torch.argsort(sigma)
            shifts = torch.randperm(n - 1, generator=g)[:cols] + 1
            return inv[(sigma[:, None] + shifts[None, :]) % n]
        out[:, j] = p
    return out


def _mask_bytes(nbytes: int, generator: torch.Generator | None) -> torch.Tensor:
    """Random bytes: from ``os.urandom`` (cryptographic) or, for a seeded run, the generator."""
    if generator is None:
        return torch.frombuffer(bytearray(os.urandom(nbytes)), dtype=torch.uint8)
    return torch.randint(0, 256, (nbytes,), generator=generator, dtype=torch.uint8)


class InstaHide:
    """``InstaHide(k, c1, c2, mode, public).encrypt(images, labels, seed=None)``; see the module docstring."""

    masked = True

    def __init__(self, k: int = 4, c1: float = 0.65, c2: float = 0.3, mode: str = "inside", public=None,
                 num_classes: int | None = None, normalize="dataset", public_normalize: str = "private"):
        self.k = check_positive_int(k, "k")
        if public_normalize not in PUBLIC_NORMALIZE:
            raise UnknownOptionError(f"public_normalize must be one of {PUBLIC_NORMALIZE}, got {public_normalize!r}.")
        self.public_normalize = public_normalize
        self._public_stats = None
        if mode not in MODES:
            raise UnknownOptionError(f"mode must be one of {MODES}, got {mode!r}.")
        self.mode = mode
        self.c1, self.c2 = check_coefficient_caps(self.k, c1, c2, mode)
        if mode == "cross":
            if self.k > 2 and public is None:
                raise ParameterError("cross mode needs a public pool (images or a PatchStore): public=…")
        self.public = public
        self.num_classes = num_classes
        self.normalize = normalize

    # --- normalisation -------------------------------------------------------------------------
    def channel_stats(self, images: torch.Tensor) -> tuple[tuple, tuple]:
        """``(mean, std)`` per channel, as this scheme's ``normalize`` setting asks."""
        if self.normalize == "dataset":
            mean = images.mean((0, 2, 3))
            std = images.std((0, 2, 3)).clamp_min(1e-3)
            return tuple(mean.tolist()), tuple(std.tolist())
        if self.normalize == "symmetric":
            c = images.shape[1]
            return (0.5,) * c, (0.5,) * c
        if isinstance(self.normalize, (tuple, list)) and len(self.normalize) == 2:
            return tuple(self.normalize[0]), tuple(self.normalize[1])
        raise UnknownOptionError("normalize must be 'dataset', 'symmetric' or a (mean, std) pair of tuples.")

    @staticmethod
    def normalize_images(x: torch.Tensor, stats) -> torch.Tensor:
        """``(x − mean)/std`` per channel, with ``stats`` from ``channel_stats``."""
        mean = torch.tensor(stats[0], dtype=x.dtype).reshape(1, -1, 1, 1)
        std = torch.tensor(stats[1], dtype=x.dtype).reshape(1, -1, 1, 1)
        return (x - mean) / std

    # --- encryption ----------------------------------------------------------------------------
    def public_stats(self, sample: int = 4096) -> tuple[tuple, tuple]:
        """The public pool's own ``(mean, std)`` per channel, from up to ``sample`` evenly spaced images."""
        if self._public_stats is None:
            pub = self.public
            idx = torch.linspace(0, len(pub) - 1, min(len(pub), sample)).round().long()
            imgs = torch.as_tensor(pub.get(idx) if hasattr(pub, "get") else pub[idx], dtype=torch.float32)
            self._public_stats = (tuple(imgs.mean((0, 2, 3)).tolist()), tuple(imgs.std((0, 2, 3)).clamp_min(1e-3).tolist()))
        return self._public_stats

    def _public_images(self, idx: torch.Tensor, shape, stats=None) -> torch.Tensor:
        """Public images in [0, 1] — or, with ``public_normalize="own"``, mapped so that the private set's
        normalisation ``stats`` turns them into ``(p − own mean)/own std``."""
        pub = self.public
        imgs = pub.get(idx) if hasattr(pub, "get") else pub[idx]
        imgs = torch.as_tensor(imgs, dtype=torch.float32)
        if tuple(imgs.shape[1:]) != tuple(shape):
            raise ShapeError(f"public images have shape {tuple(imgs.shape[1:])}, private ones {tuple(shape)}.")
        if self.public_normalize == "own" and stats is not None:
            z = self.normalize_images(imgs, self.public_stats())
            imgs = z * torch.tensor(stats[1]).reshape(1, -1, 1, 1) + torch.tensor(stats[0]).reshape(1, -1, 1, 1)
        return imgs

    def encrypt(self, images, labels=None, seed: int | None = None, stats=None, chunk: int = 256,
                own_floor: float | None = None) -> Encryption:
        """Encrypt ``images`` (``N×C×H×W`` in [0, 1]); ``own_floor`` bounds the image's own coefficient
        from below (test-time encryption). ``stats`` fixes the normalisation (else from ``images``).

        Rows are processed in cache-sized chunks: mix the raw images, normalise once (Σλ = 1, so
        normalising after mixing equals mixing normalised images), then apply the chunk's mask."""
        x = check_images(as_tensor(images, "images", dtype=torch.float32), "images")
        n = x.shape[0]
        if self.mode == "inside" and self.k > n:
            raise ParameterError(f"k={self.k} needs at least {self.k} private images, got {n}.")
        g = _generator(seed)
        stats = stats or self.channel_stats(x)
        c2 = self.c2 if self.mode == "cross" else None
        lam = sample_coefficients(n, self.k, self.c1, c2, g, own_floor=own_floor)
        own = torch.arange(n)
        public = torch.zeros(n, self.k, dtype=torch.bool)
        if self.mode == "inside":
            partners = torch.cat([own[:, None], _permutation_partners(n, self.k - 1, g)], 1)
        else:
            if n < 2:
                raise ParameterError("cross mode mixes two private images: give at least 2.")
            other = _permutation_partners(n, 1, g)
            n_pub = len(self.public) if self.k > 2 else 0
            pub = _distinct_rows(n, self.k - 2, n_pub, None, g) if self.k > 2 else torch.empty(n, 0, dtype=torch.long)
            partners = torch.cat([own[:, None], other, pub], 1)
            public[:, 2:] = True
        mean = torch.tensor(stats[0], dtype=torch.float32).reshape(1, -1, 1, 1)
        inv_std = 1.0 / torch.tensor(stats[1], dtype=torch.float32).reshape(1, -1, 1, 1)
        out = torch.empty_like(x)
        d = int(np.prod(x.shape[1:]))
        chunk = max(8, chunk - chunk % 8)  # whole bytes of mask per chunk
        packed = torch.empty((n * d + 7) // 8, dtype=torch.uint8) if self.masked else None
        mask_gen = None if seed is None else g
        lam4 = lam.reshape(n, self.k, 1, 1, 1)
        for a in range(0, n, chunk):
            rows = slice(a, min(a + chunk, n))
            acc = torch.mul(x[rows], lam4[rows, 0], out=out[rows])
            for j in range(1, self.k):
                idx = partners[rows, j]
                src = self._public_images(idx, x.shape[1:], stats) if public[0, j] else x.index_select(0, idx)
                acc.addcmul_(src, lam4[rows, j])
            acc.sub_(mean).mul_(inv_std)
            if packed is not None:
                lo, hi = a * d // 8, (a * d + acc.numel() + 7) // 8
                byts = _mask_bytes(hi - lo, mask_gen)
                packed[lo:hi] = byts
                acc.mul_(_SIGNS[byts.long()].reshape(-1)[:acc.numel()].reshape(acc.shape))
        soft = self._soft_labels(labels, partners, public, lam, n)
        key = InstaHideKey(partners, public, lam, packed, tuple(x.shape))
        return Encryption(out, soft, key, self.k, self.mode, self.masked, seed is not None, stats)

    def _soft_labels(self, labels, partners, public, lam, n) -> torch.Tensor:
        if labels is None:
            return torch.zeros(n, 0)
        y = torch.as_tensor(labels).long().reshape(-1)
        if y.shape[0] != n:
            raise ShapeError(f"{n} images but {y.shape[0]} labels.")
        classes = self.num_classes or int(y.max()) + 1
        soft = torch.zeros(n, classes)
        for j in range(self.k):
            if not public[0, j]:
                soft += lam[:, j:j + 1] * torch.nn.functional.one_hot(y[partners[:, j]], classes).float()
        return soft

    def decrypt(self, enc: Encryption) -> torch.Tensor:
        """The owner's inverse of the mask: the mixed image Σ λ_j z_j (normalised units)."""
        if enc.key is None:
            raise ParameterError("this encryption carries no key.")
        return enc.images * enc.key.mask if enc.key.mask is not None else enc.images.clone()

    def remix(self, images, key: InstaHideKey, stats) -> torch.Tensor:
        """Recompute Σ λ_j z_j from the originals and a key (what ``decrypt`` must return)."""
        x = self.normalize_images(torch.as_tensor(images, dtype=torch.float32), stats)
        out = torch.zeros_like(x)
        for j in range(key.partners.shape[1]):
            if key.public[0, j]:
                src = self.normalize_images(self._public_images(key.partners[:, j], x.shape[1:], stats), stats)
            else:
                src = x[key.partners[:, j]]
            out += key.coefficients[:, j].reshape(-1, 1, 1, 1) * src
        return out


class Mixup(InstaHide):
    """Mixup with the same API: k-way mixing (inside the private set), no mask; c1 = 1 (no cap) by default."""

    masked = False

    def __init__(self, k: int = 2, c1: float = 1.0, num_classes: int | None = None, normalize="dataset"):
        super().__init__(k=k, c1=c1, c2=0.0, mode="inside", num_classes=num_classes, normalize=normalize)
