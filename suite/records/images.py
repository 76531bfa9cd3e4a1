"""Images the suite reads back (sample grids, ``samples.png``): opened with a pixel limit, one line naming a bad file.

A PNG states its width and height in its first bytes and decompresses to width x height pixels: 48 KB of
deflated zeros can claim 20,000 x 20,000 pixels, 400 M of them, gigabytes once decoded. Every image is
therefore opened lazily (Pillow reads the header only), its size checked against :data:`MAX_PIXELS`, and only
then decoded; a file that is no image, or a damaged one, is an :class:`ImageError` naming it. The grids the
suite writes hold a few hundred thousand pixels.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MAX_PIXELS = 1 << 25
"""The most pixels of an image the suite decodes (33.5 M: 5,792 x 5,792; a sample grid has under 1 M)."""


class ImageError(ValueError):
    """A file is not an image the suite reads (not an image, damaged, or larger than :data:`MAX_PIXELS`); one line naming it."""


def _opened(path: Path):  # type: ignore[no-untyped-def]  # a PIL.Image.Image, whose import is left to the callers
    """``path`` opened lazily, its size checked (:class:`ImageError` naming it)."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            picture = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ImageError(f"{path}: an image too large to read ({' '.join(str(error).split())[:120]})") from None
    except (OSError, ValueError, SyntaxError) as error:  # UnidentifiedImageError is an OSError
        if isinstance(error, FileNotFoundError):
            raise
        raise ImageError(f"{path}: not an image the suite reads ({' '.join(str(error).split())[:120]})") from None
    width, height = picture.size
    if width * height > MAX_PIXELS:
        picture.close()
        raise ImageError(f"{path}: {width} x {height} pixels, more than the {MAX_PIXELS:,} an image may have here; not read")
    return picture


def image_problem(path: str | os.PathLike) -> str | None:
    """Why the image at ``path`` would not be read (its header only is looked at), or None when it would."""
    try:
        _opened(Path(path)).close()
    except (ImageError, OSError) as error:
        return str(error)
    return None


def read_pixels(path: str | os.PathLike, mode: str = "L") -> np.ndarray:
    """The pixels of the image at ``path`` in Pillow's ``mode`` (``L``: grey, ``RGB``), after the size check above."""
    import numpy as np

    path = Path(path)
    with _opened(path) as picture:
        try:
            return np.asarray(picture.convert(mode))
        except (OSError, ValueError, SyntaxError) as error:  # a truncated or corrupt stream
            raise ImageError(f"{path}: a damaged image ({' '.join(str(error).split())[:120]})") from None


def read_png_text(path: str | os.PathLike, key: str) -> str:
    """The PNG text chunk ``key`` of the image at ``path`` ("" where it has none), after the size check above."""
    path = Path(path)
    with _opened(path) as picture:
        try:
            return str(getattr(picture, "text", {}).get(key, ""))
        except (OSError, ValueError, SyntaxError) as error:
            raise ImageError(f"{path}: a damaged image ({' '.join(str(error).split())[:120]})") from None
