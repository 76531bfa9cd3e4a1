"""How a run's work splits over its ranks, and the sizes the networks accept: the arithmetic that
scenario validation checks before anything starts and the runtime uses when it does.

Plain functions of plain numbers (no torch): :func:`local_batch` (a global batch over a group),
:func:`class_plan` (classes over ranks, label-partitioned), :func:`process_grid` (a cellular grid
over ranks) and :func:`check_image_size` (what the generator and the discriminator can work at).
Their errors name the rule; validation re-raises them under the scenario field at fault.
"""

from __future__ import annotations

from typing import Sequence

MIN_IMAGE_SIZE = 20
"""Smallest image side both networks work at (see :func:`check_image_size`)."""

CLASSIFIER_FEATURE_DIM = 128
"""Features of the ``classifier`` feature network (its penultimate layer; :class:`suite.measure.metrics.features.SmallCNN`)."""


class TrainingError(RuntimeError):
    """The run's settings cannot train this GAN (e.g. fewer images than one batch).

    ``field`` names the setting at fault when there is one; the message then starts with it, and
    scenario validation re-raises ``reason`` under the field's full path.
    """

    def __init__(self, reason: str, field: str | None = None):
        super().__init__(f"{field}: {reason}" if field else reason)
        self.reason, self.field = reason, field


def local_batch(global_batch: int, ranks: int) -> int:
    """Images per rank of a global batch shared by ``ranks`` ranks; :class:`TrainingError` unless it splits evenly."""
    if global_batch % ranks:
        raise TrainingError(f"train.batch_size {global_batch} cannot be split evenly over {ranks} processes")
    return global_batch // ranks


def class_plan(classes: list[int], procs: int) -> list[tuple[list[int], list[int]]]:
    """``[(world ranks, classes)]``, one entry per communicator group (label-partitioned).

    At most as many ranks as classes: each rank owns a contiguous share of the classes, the first
    ones one class more where they do not divide evenly. More ranks: a group of ranks per class.

    >>> class_plan([0, 1, 2], 2)
    [([0], [0, 1]), ([1], [2])]
    >>> class_plan([0, 1], 4)
    [([0, 1], [0]), ([2, 3], [1])]
    """
    n = len(classes)
    if procs <= n:
        size, extra = divmod(n, procs)
        bounds = [rank * size + min(rank, extra) for rank in range(procs + 1)]
        return [([rank], [int(c) for c in classes[bounds[rank] : bounds[rank + 1]]]) for rank in range(procs)]
    if procs % n:
        raise TrainingError(
            f"{procs} processes cannot be split evenly over {n} classes; above the class count, "
            f"use a multiple of {n} (or select classes with dataset.classes)",
            "procs",
        )
    k = procs // n
    return [(list(range(i * k, (i + 1) * k)), [int(c)]) for i, c in enumerate(classes)]


def process_grid(grid: Sequence[int], procs: int) -> tuple[int, int]:
    """Split an R x C cell grid into ``procs`` equal rectangular blocks: (ranks per column, per row).

    Each rank owns a block of (R/pr) x (C/pc) cells, which keeps neighbours on the same or an
    adjacent rank. Such a split exists whenever ``procs`` divides R x C (pr = gcd(procs, R) works);
    otherwise ``ValueError``.
    """
    rows, cols = grid
    if (rows * cols) % procs:
        raise ValueError(
            f"{procs} processes cannot share a {rows}x{cols} grid evenly ({rows * cols} cells); use a divisor of {rows * cols}"
        )
    options = [
        (pr, procs // pr) for pr in range(1, procs + 1) if procs % pr == 0 and rows % pr == 0 and cols % (procs // pr) == 0
    ]
    # the most square blocks exchange the least model state
    return min(options, key=lambda o: (abs(rows / o[0] - cols / o[1]), o[0]))


def check_image_size(image_size: int) -> None:
    """Raise ``ValueError`` unless both networks work at ``image_size`` pixels.

    The generator upsamples twice from image_size/4, so the size is a multiple of 4. Below 20
    pixels the discriminator's four stride-2 convolutions end in a 1x1 map; its last BatchNorm
    then normalises each batch's mean away, and since real and generated images go through the
    discriminator in separate batches (as in the seed's code) it cannot tell them apart.
    """
    if image_size < MIN_IMAGE_SIZE or image_size % 4:
        raise ValueError(
            f"image_size {image_size} is not supported: it must be a multiple of 4 (the generator upsamples "
            f"twice from image_size/4) and at least {MIN_IMAGE_SIZE} (smaller images leave the discriminator a "
            "1x1 feature map, whose BatchNorm erases the difference between real and fake batches); "
            "e.g. 28, 32 (the papers'), 64"
        )
