"""TensorBoard events written while a run trains (``logs.tensorboard``, ``suite run --tensorboard DIR``; docs/logs.md).

Every event sits on one step axis, :data:`AXIS`, the training images the whole system has seen, so
the losses, the quality curve and the window's numbers of every strategy line up. The rank that
keeps a point writes it, so no tag has two points at one step, between steps and never inside a
timed one. A write that fails (a full disk) is one warning line and the writer stops: events are
an extra, training goes on.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.registry import STRATEGIES
from ..records.nofollow import make_folder, remove_files

if TYPE_CHECKING:
    import numpy as np

    from ..config.plan import SystemSize
    from .telemetry import StepTimes

log = logging.getLogger(__name__)

AXIS = "training images seen by the whole system (the record's train_images, warm-up included)"
"""What the step of every event counts."""

EVENT_FILE_PREFIX = "events.out.tfevents."
"""How TensorBoard's event files begin (an earlier attempt's are removed as the run starts)."""

DESCRIPTIONS = {
    "loss": "mean loss since the previous progress point",
    "train/epoch": "passes over the GAN's training data so far",
    "train/mixture_fid": "the cell's mixture score during training, in the steering network's space (not the ruler's)",
    "time/step_mean_s/rank": "this rank's mean step time over its timed steps so far (the record's "
    "telemetry.per_rank[N].step_times.mean at the run's end)",
    "time/step_mean_s": "the record's telemetry.step_mean: mean step time over every rank's timed steps",
    "time/step_p50_s": "the record's telemetry.step_p50",
    "time/step_p95_s": "the record's telemetry.step_p95",
    "time/comm_share": "the record's telemetry.comm_share",
    "time/train_s": "the record's train_s: the training window, warm-up included",
    "throughput": "the record's training images per second of the training window",
    "quality": "the record's quality curve (lower is better for fid and kid_mean, higher for is_mean)",
}
"""What each tag (the longest prefix here that matches it) holds, shown in TensorBoard with the axis."""


def tag_description(tag: str) -> str:
    """The description of ``tag``: what it holds and the step axis."""
    prefix = max((p for p in DESCRIPTIONS if tag.startswith(p)), key=len, default=None)
    what = DESCRIPTIONS[prefix] if prefix is not None else tag
    return f"{what}. Step: {AXIS}."


class EventWriter:
    """One rank's TensorBoard event file in ``folder``, made at its first event (ranks that keep no point make none).

    Build it during set-up (it imports TensorBoard's writer then, not on the training clock); the strategy tells it
    the images of one step of the system (:meth:`count_steps`) as it sets up.
    """

    def __init__(self, folder: Path, strategy: str, rank: int):
        from torch.utils.tensorboard import SummaryWriter

        self._writer_class = SummaryWriter
        self.folder, self.strategy, self.rank = folder, strategy, rank
        self.step_images: int | None = None
        """Training images of one step of the system (None: a strategy without a registered step size)."""
        self._writer: Any = None
        self._described: set[str] = set()
        self.failed = False

    # --- set-up ----------------------------------------------------------------------------------------------
    def count_steps(self, size: SystemSize) -> None:
        """The system's step, as the strategy's registered rule sizes it (:mod:`suite.config.plan`)."""
        rule = STRATEGIES[self.strategy].step_images
        self.step_images = rule(size) if rule is not None else None

    def start(self, settings: dict[str, Any]) -> None:
        """Rank 0 during set-up, before any other rank writes: remove an earlier attempt's events, write the settings."""
        self._guarded(lambda: remove_files(make_folder(self.folder), lambda name: name.startswith(EVENT_FILE_PREFIX)))
        self.text("settings", "```json\n" + json.dumps(settings, indent=2) + "\n```")
        self.text("axis", f"The step of every event counts the {AXIS}.")
        self.flush()

    # --- the axis ----------------------------------------------------------------------------------------------
    def images(self, steps: int, own_step_images: int) -> int:
        """The axis at ``steps`` steps of the system: ``steps`` times its step's images (``own_step_images``, the
        caller's own images a step, where the strategy registered no step size)."""
        return steps * (self.step_images if self.step_images is not None else own_step_images)

    # --- events ------------------------------------------------------------------------------------------------
    def scalars(self, images: int, values: dict[str, float], walltime: float | None = None) -> None:
        """``{tag: value}`` at ``images``; the first event of a tag carries its description."""

        def write() -> None:
            from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata  # type: ignore[import-untyped]

            entries = []
            for tag, value in values.items():
                entry = Summary.Value(tag=tag, simple_value=float(value))
                if tag not in self._described:
                    entry.metadata.CopyFrom(
                        SummaryMetadata(
                            plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"),
                            summary_description=tag_description(tag),
                        )
                    )
                    self._described.add(tag)
                entries.append(entry)
            self._open().file_writer.add_summary(Summary(value=entries), int(images), walltime)

        if values:
            self._guarded(write)

    def step_times(self, images: int, times: StepTimes) -> None:
        """This rank's mean step time over its timed steps read so far (none before the first)."""
        if times.count:
            self.scalars(images, {f"time/step_mean_s/rank{self.rank}": times.mean})

    def text(self, tag: str, text: str, images: int = 0) -> None:
        """A text event (markdown) at ``images``."""
        self._guarded(lambda: self._open().add_text(tag, text, images))

    def image(self, tag: str, images: int, pixels: np.ndarray, walltime: float | None = None) -> None:
        """An image (height x width x RGB) at ``images``."""
        self._guarded(lambda: self._open().add_image(tag, pixels, images, walltime=walltime, dataformats="HWC"))

    def flush(self) -> None:
        """Write what is queued to disk now (a reader sees it; a run killed later keeps it)."""
        if self._writer is not None:
            self._guarded(self._writer.flush)

    def close(self) -> None:
        """Flush and close the event file (never raises)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.close()
            except Exception as error:  # an extra: nothing to stop
                log.warning("TensorBoard events of rank %d not closed: %s: %s", self.rank, type(error).__name__, error)

    # --- inside ------------------------------------------------------------------------------------------------
    def _open(self) -> Any:
        if self._writer is None:
            make_folder(self.folder)  # without following a link (suite.records.nofollow)
            # flushed by hand at every point: no timer of the writer's own flushes mid-window
            self._writer = self._writer_class(log_dir=str(self.folder), max_queue=1000, flush_secs=10**6)
        return self._writer

    def _guarded(self, write: Any) -> None:
        """Run ``write``; the first failure is one warning, and the writer writes nothing more."""
        if self.failed:
            return
        try:
            write()
        except Exception as error:  # events are an extra: the run goes on without them
            self.failed = True
            log.warning("TensorBoard events of rank %d stop (%s): %s: %s", self.rank, self.folder, type(error).__name__, error)
