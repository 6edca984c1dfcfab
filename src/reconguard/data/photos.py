"""Crops of photographs: the offline stand-in for natural-image datasets (CIFAR-10, ImageNet crops).

:func:`photo_crops` cuts random square crops (a random side in ``sides`` pixels, then resized with anti-aliasing)
from the photographs that ship inside scikit-image, ``count×C×size×size`` in [0, 1]. ``photos`` chooses which
photographs, so that two parties (an encryptor's private images and an attacker's public pool, a prior's images
and the attacked ones) can draw from disjoint sources: :data:`PHOTO_SPLITS` names two disjoint halves.
"""

from __future__ import annotations

import numpy as np

PHOTO_SPLITS = {  # two disjoint sets of scikit-image's photographs (grey ones are used as three equal channels)
    "a": ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry"),
    "b": ("stereo_motorcycle", "retina", "camera", "coins", "grass", "gravel", "brick", "clock", "moon"),
}
PHOTOS = PHOTO_SPLITS["a"] + PHOTO_SPLITS["b"]


def _photo(name: str) -> np.ndarray:
    from skimage import data

    img = getattr(data, name)()
    img = np.asarray(img[0] if isinstance(img, tuple) else img)  # stereo_motorcycle: (left, right, disparity)
    if img.ndim == 2:
        img = np.stack([img] * 3, -1)
    img = img[..., :3]
    return img / (255.0 if img.dtype == np.uint8 or img.max() > 1 else 1.0)


def photo_crops(count: int, size: int, channels: int = 3, seed: int = 0, photos=PHOTO_SPLITS["a"],
                sides: tuple[int, int] = (40, 120)) -> np.ndarray:
    """``count`` random crops (side drawn from ``sides``, clipped to the photograph) resized to ``size×size``,
    ``count×channels×size×size`` float in [0, 1]; grey crops are the mean of the three channels."""
    from skimage.transform import resize

    rng = np.random.default_rng(seed)
    images = [_photo(p) for p in photos]
    out = []
    for i in range(count):
        im = images[i % len(images)]
        s = int(min(rng.integers(sides[0], sides[1]), im.shape[0] - 1, im.shape[1] - 1))
        y, x = rng.integers(0, im.shape[0] - s), rng.integers(0, im.shape[1] - s)
        crop = resize(im[y:y + s, x:x + s], (size, size), anti_aliasing=True)
        out.append(crop.transpose(2, 0, 1) if channels == 3 else crop.mean(-1)[None])
    return np.clip(np.array(out), 0.0, 1.0)


def public_pools(count: int, size: int, channels: int = 3, seed: int = 0,
                 sources=(PHOTO_SPLITS["a"], PHOTO_SPLITS["b"])) -> tuple[np.ndarray, np.ndarray]:
    """Two public pools cut from *disjoint* photographs (``sources``: the encryptor's, the attacker's): the images an
    InstaHide encryptor mixes in cross mode, and the ones an attacker models that public part with. The same images
    on both sides flatter the attack (issue 31), so every test and benchmark takes them from here. Each is
    ``photo_crops(count, size, channels, seed + i, photos=sources[i])``."""
    from ..errors import ParameterError

    overlap = set(sources[0]) & set(sources[1])
    if overlap:
        raise ParameterError(f"the two pools share photographs {sorted(overlap)}: give disjoint sources.")
    return tuple(photo_crops(count, size, channels, seed=seed + i, photos=p) for i, p in enumerate(sources))
