"""Pictures: sample grids (Pillow) and report charts (matplotlib, headless)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from .results import atomic_write


def image_grid(images: torch.Tensor, columns: int | None = None, pad: int = 2) -> np.ndarray:
    """(N, C, H, W) images in [-1, 1] -> one uint8 (rows*H, cols*W, C) array with padding."""
    n, c, h, w = images.shape
    columns = columns or math.ceil(math.sqrt(n))
    rows = math.ceil(n / columns)
    grid = np.full((rows * (h + pad) + pad, columns * (w + pad) + pad, c), 255, dtype=np.uint8)
    pixels = ((images.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    for i in range(n):
        r, k = divmod(i, columns)
        grid[pad + r * (h + pad) : pad + r * (h + pad) + h, pad + k * (w + pad) : pad + k * (w + pad) + w] = pixels[i]
    return grid


def save_image_grid(images: torch.Tensor, path: str | Path, scale: int | None = None, columns: int | None = None) -> None:
    """Save a grid of ``images`` as a PNG, upscaled (default: to about 64 pixels per image)."""
    from PIL import Image

    scale = scale or max(1, 64 // images.shape[-1])
    grid = image_grid(images, columns)
    picture = Image.fromarray(grid[..., 0] if grid.shape[-1] == 1 else grid)
    if scale > 1:
        picture = picture.resize((picture.width * scale, picture.height * scale), Image.Resampling.NEAREST)
    with atomic_write(path) as tmp:
        picture.save(tmp)
