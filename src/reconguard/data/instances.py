"""Identity-level model inversion at CPU scale: every private class is one *instance* (issue 16).

The AT-AT paper's regime is fine-grained identities (FaceScrub: 530 people) that a generative prior cannot pick
by class shape. Here each private class is one scikit-learn digit image (``instances`` per digit of ``digits``,
e.g. 10 of each of 0–4: 50 classes), upsampled to ``size`` and seen through ``copies`` augmented copies —
random affine jitter (rotation ±12°, shift ±6 %, scale 0.9–1.1), a smooth elastic displacement, stroke width
(dilation or erosion of the ink) and pixel noise — so a classifier must learn *which* 3 it is, not that it is a
3. The public set (the attacker's prior, TL-DMI's pre-training) is every *other* digit image, of all ten digits:
it knows what digits look like, not the private instances (FFHQ vs FaceScrub).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..checks import check_positive_int
from ..errors import ParameterError
from .datasets import ImageDataset
from .digits import load_digits


def jitter(images: torch.Tensor, copies: int, generator: torch.Generator, strength: float = 1.0) -> torch.Tensor:
    """``copies`` augmented copies of each image (``N×C×H×W`` → ``N·copies×C×H×W``, image-major, in [0, 1])."""
    x = images.repeat_interleave(copies, 0)
    n, _, h, w = x.shape

    def u(*shape):
        return torch.rand(shape, generator=generator) * 2 - 1

    angle = u(n) * math.radians(12) * strength
    scale = 1 + u(n) * 0.1 * strength
    shift = u(n, 2) * 0.12 * strength
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    coarse = u(n, 2, 4, 4) * 0.06 * strength  # smooth elastic field: a 4×4 random field, upsampled
    grid = grid + F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=False).permute(0, 2, 3, 1)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    stroke = torch.rand(n, generator=generator)
    thick = F.max_pool2d(x, 3, 1, 1)
    thin = -F.max_pool2d(-x, 3, 1, 1)
    blend = torch.rand(n, 1, 1, 1, generator=generator) * 0.6 * strength
    x = torch.where((stroke < 1 / 3)[:, None, None, None], (1 - blend) * x + blend * thick,
                    torch.where((stroke > 2 / 3)[:, None, None, None], (1 - blend) * x + blend * thin, x))
    x = x + 0.03 * strength * torch.randn(x.shape, generator=generator)
    return x.clamp(0, 1)


def digits_instance_split(size: int = 32, instances: int = 10, copies: int = 40, digits=(0, 1, 2, 3, 4),
                          public_copies: int = 2, seed: int = 0):
    """:func:`instance_split` of scikit-learn's digits (``digit-instances``)."""
    return instance_split(load_digits(size), "digit-instances", size, instances, copies, digits, public_copies, seed)


def fashion_instance_split(size: int = 32, instances: int = 10, copies: int = 40, classes=(0, 1, 2, 3, 4),
                           public_copies: int = 2, seed: int = 0, root=None, public_limit: int | None = 4000):
    """:func:`instance_split` of Fashion-MNIST's training images (``fashion-instances``: each private class is one
    product photo), resized to ``size``; the public pool is at most ``public_limit`` other products."""
    from .files import load_fashion_mnist

    data = load_fashion_mnist(root, "train")
    if size != data.images.shape[-1]:
        from .datasets import resize_images
        data = ImageDataset(resize_images(data.images, size), data.labels, data.name)
    return instance_split(data, "fashion-instances", size, instances, copies, classes, public_copies, seed,
                          public_limit)


def instance_split(d: ImageDataset, name: str, size: int = 32, instances: int = 10, copies: int = 40,
                   classes=(0, 1, 2, 3, 4), public_copies: int = 2, seed: int = 0, public_limit: int | None = None):
    """:class:`~reconguard.data.splits.MIASplit` of ``instances × len(classes)`` instance classes drawn from ``d``:
    of each instance's ``copies``, 70 % train, 15 % validation, 15 % test; public = the other images of ``d`` (at
    most ``public_limit``, ``public_copies`` jittered copies each), labelled with their class."""
    from .splits import MIASplit

    size, instances, copies = (check_positive_int(v, n) for v, n in ((size, "size"), (instances, "instances"),
                                                                      (copies, "copies")))
    if copies < 4:
        raise ParameterError(f"copies = {copies}: each instance needs at least 4 copies (train, validation, test).")
    g = torch.Generator().manual_seed(seed)
    chosen = []
    for cls in classes:
        pool = torch.nonzero(d.labels == cls).squeeze(1)
        if len(pool) < instances:
            raise ParameterError(f"class {cls} has {len(pool)} images; instances = {instances} is too many.")
        chosen.append(pool[torch.randperm(len(pool), generator=g)[:instances]])
    chosen = torch.cat(chosen)
    images = jitter(d.images[chosen], copies, g)
    labels = torch.arange(len(chosen)).repeat_interleave(copies)
    n_val, n_test = max(1, round(0.15 * copies)), max(1, round(0.15 * copies))
    slot = torch.stack([torch.randperm(copies, generator=g) for _ in chosen]).reshape(-1)  # per instance
    test, val = slot < n_test, (slot >= n_test) & (slot < n_test + n_val)
    train = ~(test | val)
    rest = torch.ones(len(d), dtype=torch.bool)
    rest[chosen] = False
    rest = torch.nonzero(rest).squeeze(1)
    if public_limit is not None and len(rest) > public_limit:
        rest = rest[torch.randperm(len(rest), generator=g)[:public_limit]]
    public = jitter(d.images[rest], public_copies, g, strength=0.5)
    public_labels = d.labels[rest].repeat_interleave(public_copies)
    name = f"{name}{size}"
    return MIASplit(ImageDataset(images[train], labels[train], f"{name}-train"),
                    ImageDataset(images[val], labels[val], f"{name}-val"),
                    ImageDataset(images[test], labels[test], f"{name}-test"),
                    ImageDataset(public, public_labels, f"{name}-public"), len(chosen))
