"""The end of a run's TensorBoard events, from its record: the quality curve, the whole-window numbers, sample grids
(:func:`write_events`), in a second event file beside the one training wrote (:mod:`suite.measure.tensorboard_writer`),
on the same step axis (:data:`~suite.measure.tensorboard_writer.AXIS`) and each point at the wall time it happened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from ..measure.tensorboard_writer import EventWriter
from ..records.codec import record_field
from ..records.images import ImageError, read_pixels
from ..records.record import Record
from ..records.results import REAL_GRID_FILE, SAMPLE_GRIDS_DIR, SAMPLES_FILE

log = logging.getLogger(__name__)

SUMMARY = {
    "time/step_mean_s": "telemetry.step_mean",
    "time/step_p50_s": "telemetry.step_p50",
    "time/step_p95_s": "telemetry.step_p95",
    "time/comm_share": "telemetry.comm_share",
    "time/train_s": "train_s",
    "throughput/images_per_s": "images_per_s",
    "throughput/images_per_s_per_rank": "images_per_s_per_rank",
}
"""Whole-window numbers of the record (a field's dotted path), by tag, each written once at the run's training images."""

QUALITY = ("fid", "kid_mean", "is_mean")
"""Fields of a curve point written as ``quality/<field>``."""


@dataclass
class Scalar:
    """One point of one TensorBoard scalar: its tag, training images, value and the training clock when it was measured."""

    tag: str
    images: int
    value: float
    clock_s: float | None


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def final_step(record: Record) -> int:
    """The run's last generator step: its curve's last point, else its generator steps (summed over class GANs)."""
    if record.curve:
        return int(record.curve[-1].step or 0)
    steps = record.generator_steps
    if isinstance(steps, dict):
        return int(sum(steps.values()))
    return int(steps or 0)


def final_images(record: Record) -> int:
    """The run's training images (``train_images``; an older record's images consumed, else its curve's last point's)."""
    last_point = record.curve[-1].images if record.curve else None
    for value in (record.train_images, record.images_consumed, last_point):
        if _number(value):
            return int(value)
    return 0


def scalars(record: Record) -> list[Scalar]:
    """Every scalar written for ``record``: its quality curve (each point at its training images; a point without them
    is left out) and its whole-window numbers."""
    found = [
        Scalar(f"quality/{key}", point.images, float(getattr(point, key)), point.clock_s)
        for point in record.curve or []
        if point.images is not None
        for key in QUALITY
        if _number(getattr(point, key))
    ]
    last, train_s = final_images(record), record.train_s
    for tag, path in SUMMARY.items():
        value = record_field(record, path)
        if _number(value):
            found.append(Scalar(tag, last, float(value), train_s))
    return found


def sample_grids(run_dir: Path, record: Record) -> list[tuple[str, int, Path]]:
    """``(tag, images, file)`` of the run's sample grids: one per curve point (at the point's images), the real images'
    (at 0) and the final one (at the run's training images)."""
    folder, last = run_dir / SAMPLE_GRIDS_DIR, final_images(record)
    at = {int(p.step or 0): p.images for p in record.curve or [] if p.images is not None}
    grids: list[tuple[str, int, Path]] = []
    if (folder / REAL_GRID_FILE).is_file():
        grids.append(("real", 0, folder / REAL_GRID_FILE))
    for path in sorted(folder.glob("step_*.png")):
        number = path.stem.removeprefix("step_")
        if number.isdigit() and int(number) in at:  # a grid of no curve point has no training images to sit at
            grids.append(("samples", at[int(number)], path))
    if (run_dir / SAMPLES_FILE).is_file() and not any(tag == "samples" and images == last for tag, images, _ in grids):
        grids.append(("samples", last, run_dir / SAMPLES_FILE))
    return grids


def write_events(folder: Path, record: Record, run_dir: Path, window_opened: float | None) -> None:
    """Rank 0, once the record is written: ``record``'s quality curve and whole-window numbers and the run folder's
    sample grids as TensorBoard events in ``folder``, beside the events training wrote there. ``window_opened`` is
    when the training window opened (seconds since 1970; :func:`suite.running.runlogs.window_opened`)."""
    # the training clock starts with the warm-up: it read 0 warm-up seconds before the window opened
    origin = window_opened - (record.warmup_s or 0.0) if window_opened is not None else None

    def walltime(clock: float | None) -> float | None:
        return origin + clock if origin is not None and clock is not None else None

    writer = EventWriter(folder, str(record.strategy), 0)
    try:
        for point in scalars(record):
            writer.scalars(point.images, {point.tag: point.value}, walltime(point.clock_s))
        for tag, images, path in sample_grids(run_dir, record):
            try:
                pixels = read_pixels(path, "RGB")  # with a pixel limit: the folder may hold someone else's file
            except ImageError as error:
                log.warning("skipped %s", error)
                continue
            writer.image(tag, images, pixels)
    finally:
        writer.close()
    if writer.failed:
        raise OSError(f"TensorBoard events not written to {folder} (see the warning above)")
