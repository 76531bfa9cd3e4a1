"""How a run's work splits over its ranks, and the sizes the networks accept: the arithmetic that scenario validation
checks before anything starts and the runtime uses when it does (plain functions of plain numbers, no torch; their
errors name the rule, and validation re-raises them under the scenario field at fault).

**The images budget** (``train.budget_images``) charges *training images*: the real images that reach a
discriminator (critic) update, summed over the system's GANs (cells) and ranks, warm-up included; generated images and
the evaluation images networks score without an update do not count (docs/scenarios.md, "Equal budgets"). A budget
buys ``budget_images // step`` whole steps of the system (:func:`budget_steps`; a step is each strategy's
``step_images`` trait), of which the first ``train.warmup_steps`` are warm-up: it must buy at least one more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

DATASET_CLASSES: dict[str, int | None] = {"digits": 10, "mnist": 10, "cifar10": 10, "cifar100": 100, "imagenet": None}
"""Each dataset's class count, known before it is loaded (None: ImageNet's folders tell, checked when it loads)."""

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


Cell = tuple[int, int]

OFFSETS = {
    # the cell itself first, then north, south, west, east (and the diagonals for Moore)
    "von_neumann": [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)],
    "moore": [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)],
}


def cells(grid: Sequence[int]) -> list[Cell]:
    """All cells of an R x C grid in row-major order."""
    rows, cols = grid
    return [(i, j) for i in range(rows) for j in range(cols)]


def neighbourhood(cell: Cell, grid: Sequence[int], kind: str = "von_neumann") -> list[Cell]:
    """The cell and its torus neighbours, each once, the cell first.

    On small grids several offsets land on the same cell (on a 1x3 grid north and south are the
    cell itself); such repeats are dropped, so no individual counts twice in a tournament.
    """
    rows, cols = grid
    seen: list[Cell] = []
    for di, dj in OFFSETS[kind]:
        other = ((cell[0] + di) % rows, (cell[1] + dj) % cols)
        if other not in seen:
            seen.append(other)
    return seen


def owner(cell: Cell, grid: Sequence[int], pgrid: tuple[int, int]) -> tuple[int, int]:
    """Process-grid coordinates of the rank that owns ``cell``."""
    return cell[0] // (grid[0] // pgrid[0]), cell[1] // (grid[1] // pgrid[1])


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


def check_flat_image_size(image_size: int) -> None:
    """Raise ``ValueError`` unless ``image_size`` is a positive side: networks on flattened pixels work at any size."""
    if image_size < 1:
        raise ValueError(f"image_size {image_size} is not supported: it must be at least 1")


NATIVE_IMAGE_SIZES = {"digits": 8, "mnist": 28, "cifar10": 32, "cifar100": 32}
"""The side at which each dataset's files hold their images (``dataset.resolution: native``); ImageNet's vary."""


# --- what one step of a system draws (the images budget) -----------------------------------------------------


@dataclass(frozen=True)
class SystemSize:
    """What the settings say about the size of one step of a system; None where only the data tells."""

    batch_size: int
    """``train.batch_size``: the global batch of one GAN (per rank under weak scaling of a data-parallel model)."""
    procs: int
    """Processes of the run."""
    weak: bool
    """Weak scaling (a data-parallel model's global batch grows with the processes)."""
    critic_steps: int
    """Discriminator (critic) batches per generator step: ``wgan_gp.n_critic`` under WGAN-GP, else 1."""
    classes: int | None = None
    """Class GANs the system trains (label-partitioned)."""
    cells: int | None = None
    """Cells of the grid (cellular)."""
    batches_per_iteration: int | None = None
    """Generator steps (batches) of a cell per iteration (cellular)."""
    discriminator_skip: int = 0
    """Of those, the discriminators train on every ``discriminator_skip + 1``-th (cellular; 0: on every batch)."""


@dataclass(frozen=True)
class ModelBytes:
    """The bytes of a run's networks, as a checkpoint holds them (:func:`suite.train.checkpoint.footprint`)."""

    gan: int
    """One GAN's weights and buffers, with Adam's two moments of its parameters."""
    generator: int
    """One generator's weights and buffers (a finished file, a snapshot)."""
    buffers: int
    """One GAN's buffers (BatchNorm statistics), which every rank keeps."""
    snapshots: int
    """Generator snapshots a run keeps (``metrics.curve_points + 1``)."""
    classes: int
    """The run's classes (one GAN each where the strategy partitions them)."""


def one_model_step_images(size: SystemSize) -> int | None:
    """One generator step of one model trained by all ranks: ``critic_steps`` batches of the global batch."""
    return size.critic_steps * size.batch_size * (size.procs if size.weak else 1)


def per_class_step_images(size: SystemSize) -> int | None:
    """One generator step of every class GAN (the budget is split equally over them)."""
    return None if size.classes is None else size.classes * size.critic_steps * size.batch_size


def discriminator_batches(batches: int, skip: int) -> int:
    """Of ``batches`` consecutive batches (the first numbered 0), those a discriminator trains on when it trains on
    every ``skip + 1``-th: the batches whose real images are training images.

    >>> discriminator_batches(10, 1), discriminator_batches(3, 1), discriminator_batches(3, 0)
    (5, 2, 3)
    """
    return (batches + skip) // (skip + 1)


def budget_steps(budget_images: int, step_images: int, system: str, warmup_steps: int = 0) -> int:
    """The whole steps ``budget_images`` buys at ``step_images`` a step; :class:`TrainingError` where it buys no step
    after the ``warmup_steps`` of warm-up (a run whose every step is warm-up has no timed step).

    >>> budget_steps(1000, 320, "label_partitioned")
    3
    """
    needed = (warmup_steps + 1) * step_images
    if budget_images < needed:
        bought = budget_images // step_images
        what = (
            f"one step of {system}"
            if not warmup_steps
            else f"one step of {system} after its {warmup_steps} warm-up step" + ("s" if warmup_steps > 1 else "")
        )
        raise TrainingError(
            f"{budget_images} images buy {bought} step{'' if bought == 1 else 's'} of {step_images} images, too few for {what}: "
            f"it needs {needed} images; give at least {needed}" + (" or fewer train.warmup_steps" if warmup_steps else ""),
            "train.budget_images",
        )
    return budget_images // step_images


def budget_fraction_steps(budget_images: int, step_images: int, points: int) -> list[int]:
    """The steps at which a system has used ``1/points``, ``2/points``, ... of its images budget: the whole step
    nearest each fraction (a tie to the later step; at least step 1, at most the steps the budget buys).

    A function of the budget and the points alone, for every strategy: every system's curve is scored at the same
    budget fractions, each within half a step of the system's own size (exactly where ``budget_images / points`` is a
    whole number of its steps, e.g. 3,840 images at 6 points for steps of 32 and 320 images).

    >>> budget_fraction_steps(1000, 100, 4)
    [3, 5, 8, 10]
    """
    whole = budget_images // step_images
    return sorted(
        {
            min(whole, max(1, (2 * budget_images * k + points * step_images) // (2 * points * step_images)))
            for k in range(1, points + 1)
        }
    )
