"""Sample grids over training: the generator's samples at every point of its quality curve, and the real data's.

Rank 0 writes them once training has finished, from the snapshots the curve is scored on, so nothing
is added to the training window: ``samples/step_<step:08d>.png`` (one row of :data:`PER_ROW` per class
for models that generate by class, else a square grid) and ``samples/real.png``. Each PNG names its
rows in its text chunk ``rows``, so a reader labels them without knowing the model (docs/logs.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..records.results import GRID_ROWS_TEXT, REAL_GRID_FILE, SAMPLE_GRIDS_DIR, sample_grid_file
from .data import ImageData
from .sampling import GeneratorBundle, Sampler, save_image_grid
from .seeding import derive_seed

PER_ROW = 10
"""Images per row of every grid (and rows of an unconditional one)."""


def grid_scale(image_size: int) -> int:
    """Upscaling of a grid's pixels: about 48 on screen per image, at least 1 (keeps the files small)."""
    return max(1, 48 // image_size)


def save_model_grid(bundle: GeneratorBundle, path: Path, seed: int) -> None:
    """The grid of ``bundle``'s samples at ``path``: by class where the model generates by class."""
    sampler = Sampler(bundle)
    if bundle.labelled:
        images = sampler.sample_by_class(PER_ROW, seed=seed)
        rows = ",".join(str(int(c)) for c in sampler.prior_labels)
    else:
        images, rows = sampler.sample(PER_ROW * PER_ROW, seed=seed)[0], ""
    save_image_grid(images, path, scale=grid_scale(bundle.image_size), columns=PER_ROW, text={GRID_ROWS_TEXT: rows})


def save_real_grid(data: ImageData, path: Path, seed: int) -> None:
    """:data:`PER_ROW` real images of each class of ``data`` (drawn with ``seed``), one row per class."""
    rng = np.random.default_rng(derive_seed(seed, "real-grid"))
    full = [c for c in data.classes if int(np.sum(data.labels == c)) >= PER_ROW]  # a shorter class would shift the rows
    indices = [int(i) for c in full for i in rng.choice(np.flatnonzero(data.labels == c), size=PER_ROW, replace=False)]
    images, _ = data.fetch(indices)
    save_image_grid(
        images.float(), path, scale=grid_scale(data.image_size), columns=PER_ROW, text={GRID_ROWS_TEXT: ",".join(map(str, full))}
    )


def save_training_grids(
    run_dir: Path,
    curve: Sequence[tuple[float, int, int | None, GeneratorBundle]],
    final: tuple[int, GeneratorBundle],
    data: ImageData,
    seed: int,
) -> list[Path]:
    """Rank 0: the grid at every curve point (``(clock, step, images, bundle)``), the final model's at its step,
    and the real data's; every model grid from the same noise (``seed``), so the columns follow one latent over time."""
    folder = run_dir / SAMPLE_GRIDS_DIR
    written = []
    points = {step: bundle for _, step, _, bundle in curve}
    points.setdefault(final[0], final[1])
    with torch.no_grad():
        for step, bundle in sorted(points.items()):
            path = folder / sample_grid_file(step)
            save_model_grid(bundle, path, seed)
            written.append(path)
    real = folder / REAL_GRID_FILE
    save_real_grid(data, real, seed)
    return [*written, real]
