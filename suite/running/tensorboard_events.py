"""TensorBoard event files from a run's record: losses, step times, throughput, quality, sample grids.

Every scalar is a number of the record (:func:`scalars` says which), at the generator step the record gives it,
and at the wall time when it happened (the training window's opening plus the window's clock), so TensorBoard's
"relative" axis reads as the training clock. Written with ``torch.utils.tensorboard`` (the ``tensorboard``
package), imported only here.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from ..records.images import ImageError, read_pixels
from ..records.nofollow import make_folder, remove_files
from ..records.results import REAL_GRID_FILE, SAMPLE_GRIDS_DIR, SAMPLES_FILE

log = logging.getLogger(__name__)

STEP_KEYS = ("step", "iteration")
"""What counts the steps of a history point (cellular: coevolution iterations)."""

NOT_SCALARS = ("epoch", "clock_s", *STEP_KEYS)
"""Fields of a history point that say when it is, not what was measured."""

SUMMARY = {
    "time/step_mean_s": ("telemetry", "step_mean"),
    "time/step_p50_s": ("telemetry", "step_p50"),
    "time/step_p95_s": ("telemetry", "step_p95"),
    "time/comm_share": ("telemetry", "comm_share"),
    "time/train_s": ("train_s",),
    "throughput/images_per_s": ("images_per_s",),
    "throughput/images_per_s_per_rank": ("images_per_s_per_rank",),
}
"""Whole-window numbers of the record, by tag, each written once at the last step."""

QUALITY = ("fid", "kid_mean", "is_mean")
"""Fields of a curve point written as ``quality/<field>``."""


@dataclass
class Scalar:
    """One point of one TensorBoard scalar: its tag, step, value and the window's clock when it was measured."""

    tag: str
    step: int
    value: float
    clock_s: float | None


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _history_points(history: Any) -> list[tuple[str, list[dict]]]:
    """``(suffix, points)`` of a history: one list, or one per class or cell (suffix ``/KEY``)."""
    if isinstance(history, list):
        return [("", history)]
    if isinstance(history, dict):
        return [(f"/{key}", points) for key, points in history.items() if isinstance(points, list)]
    return []


def _step_of(point: dict) -> int | None:
    return next((int(point[key]) for key in STEP_KEYS if _number(point.get(key))), None)


def history_scalars(history: Any) -> list[Scalar]:
    """Every number of every history point (``loss/d_loss``, ``loss/g_loss``, cellular's ``train/mixture_fid``), and
    ``time/seconds_per_step``: the window's clock between two points over the steps between them."""
    found: list[Scalar] = []
    for suffix, points in _history_points(history):
        previous: tuple[int, float] | None = None
        for point in points:
            step, clock = _step_of(point), point.get("clock_s")
            if step is None:
                continue
            for key, value in point.items():
                if key not in NOT_SCALARS and _number(value):
                    group = "loss" if key.endswith("_loss") else "train"
                    found.append(Scalar(f"{group}/{key}{suffix}", step, float(value), clock))
            if _number(clock):
                if previous is not None and step > previous[0]:
                    found.append(
                        Scalar(f"time/seconds_per_step{suffix}", step, (clock - previous[1]) / (step - previous[0]), clock)
                    )
                previous = step, clock
    return found


def final_step(record: dict[str, Any]) -> int:
    """The run's last generator step: its curve's last point, else its generator steps (summed over class GANs)."""
    curve = record.get("curve") or []
    if curve:
        return int(curve[-1]["step"])
    steps = record.get("generator_steps")
    if isinstance(steps, dict):
        return int(sum(steps.values()))
    return int(steps or 0)


def scalars(record: dict[str, Any]) -> list[Scalar]:
    """Every scalar written for ``record``: its history, its quality curve, its whole-window numbers, each rank's step time."""
    found = history_scalars(record.get("history"))
    for point in record.get("curve") or []:
        found += [
            Scalar(f"quality/{key}", int(point["step"]), float(point[key]), point.get("clock_s"))
            for key in QUALITY
            if _number(point.get(key))
        ]
    last, train_s = final_step(record), record.get("train_s")
    for tag, path in SUMMARY.items():
        value: Any = record
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if _number(value):
            found.append(Scalar(tag, last, float(value), train_s))
    for rank, part in enumerate((record.get("telemetry") or {}).get("per_rank") or []):
        mean = (part.get("step_times") or {}).get("mean")
        if _number(mean):
            found.append(Scalar(f"time/step_mean_s/rank{rank}", last, float(mean), train_s))
    return found


def sample_grids(run_dir: Path, last: int) -> list[tuple[str, int, Path]]:
    """``(tag, step, file)`` of the run's sample grids: one per curve point, the real images', and the final one."""
    folder = run_dir / SAMPLE_GRIDS_DIR
    grids: list[tuple[str, int, Path]] = []
    if (folder / REAL_GRID_FILE).is_file():
        grids.append(("real", 0, folder / REAL_GRID_FILE))
    for path in sorted(folder.glob("step_*.png")):
        number = path.stem.removeprefix("step_")
        if number.isdigit():
            grids.append(("samples", int(number), path))
    if (run_dir / SAMPLES_FILE).is_file() and not any(tag == "samples" and step == last for tag, step, _ in grids):
        grids.append(("samples", last, run_dir / SAMPLES_FILE))
    return grids


def write_events(folder: Path, record: dict[str, Any], run_dir: Path, window_opened: float | None) -> None:
    """Write ``record``'s scalars, the run folder's sample grids and the run's settings as TensorBoard events into
    ``folder``, replacing the events an earlier attempt of the run left there."""
    from torch.utils.tensorboard import SummaryWriter

    make_folder(folder)  # inside the run folder: without following a link (suite.records.nofollow)
    remove_files(folder, lambda name: name.startswith("events.out.tfevents."))
    origin = window_opened or 0.0

    def walltime(clock: float | None) -> float | None:
        return origin + clock if window_opened is not None and clock is not None else None

    last = final_step(record)
    with SummaryWriter(log_dir=str(folder)) as writer:
        settings = record.get("settings") or {}
        writer.add_text("settings", "```json\n" + json.dumps(settings, indent=2) + "\n```", 0, walltime(0.0))
        for point in scalars(record):
            writer.add_scalar(point.tag, point.value, point.step, walltime=walltime(point.clock_s))
        for tag, step, path in sample_grids(run_dir, last):
            try:
                pixels = read_pixels(path, "RGB")  # with a pixel limit: the folder may hold someone else's file
            except ImageError as error:
                log.warning("skipped %s", error)
                continue
            writer.add_image(tag, pixels, step, dataformats="HWC")
