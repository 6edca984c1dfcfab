"""One image file in, 8-bit RGB or greyscale out: the one place reconguard decodes image files.

Pillow decodes; the image's mode is converted here, once, by name: RGBA / LA / a palette with transparency are
composited on white (the colour an absent background shows), CMYK / YCbCr / LAB / HSV / palette to RGB, 1-bit to
greyscale. Modes with more than 8 bits a channel (``I;16``, ``I``, ``F``) are refused with the fix, not guessed at:
scaling them is the user's choice. A file Pillow cannot read is refused by name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import CorruptDataError

_TO_RGB = ("P", "CMYK", "YCbCr", "LAB", "HSV", "RGBX")
_WITH_ALPHA = ("RGBA", "LA", "PA", "RGBa", "La")


def read_image(path: str | Path) -> np.ndarray:
    """``H×W`` (greyscale) or ``H×W×3`` (RGB) uint8 pixels of an image file."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as im:
            im.load()
            mode = im.mode
            if mode in ("RGB", "L"):
                out = im.copy()
            elif mode == "1":
                out = im.convert("L")
            elif mode in _WITH_ALPHA or (mode == "P" and "transparency" in im.info):
                rgba = im.convert("RGBA")
                out = Image.alpha_composite(Image.new("RGBA", im.size, (255, 255, 255, 255)), rgba)
                out = out.convert("L" if mode in ("LA", "La") else "RGB")
            elif mode in _TO_RGB:
                out = im.convert("RGB")
            else:
                raise CorruptDataError(f"{path}: image mode {mode} (more than 8 bits a channel) is not read; save it "
                                       "as 8-bit RGB or greyscale (e.g. PNG) after scaling it the way you want.")
            arr = np.asarray(out, dtype=np.uint8)
    except CorruptDataError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise CorruptDataError(f"{path} is not a readable image ({type(exc).__name__}); remove or replace it.") from None
    if arr.size == 0:
        raise CorruptDataError(f"{path}: an empty image.")
    return arr
