"""Where a phase of a step starts and ends: readings of the host clock on a CPU, CUDA events on the current stream on
a GPU (read lazily: the training loop never waits for the device to report a step)."""

from __future__ import annotations

import time
from typing import Any

import torch


class HostTimeline:
    """Marks are readings of the host clock (CPU runs; every operation is synchronous there)."""

    on_device = False
    kind = "host_clock"
    """What times the steps, as the per-rank telemetry records it."""

    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, start: float, end: float) -> float:
        return end - start

    def wait(self, mark: float) -> None:
        """Block the host until the device has reached ``mark`` (nothing to wait for on a CPU)."""

    def synchronize(self) -> None:
        """Wait for all work queued on the device (nothing on a CPU)."""


class CudaTimeline:
    """Marks are CUDA events recorded on the current stream; elapsed times come from the device.

    An event completes when the stream reaches it, so the time between two marks is what the
    stream spent between them, including waiting for a collective on another stream. Reading
    an elapsed time needs the later event to have completed (:meth:`wait`).
    """

    on_device = True
    kind = "cuda_events"
    """What times the steps, as the per-rank telemetry records it."""

    def __init__(self, device: torch.device):
        self.device = device

    def mark(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1000.0

    def wait(self, mark: Any) -> None:
        mark.synchronize()

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)


def timeline_for(device: torch.device) -> HostTimeline | CudaTimeline:
    """The timeline that times work on ``device``."""
    return CudaTimeline(device) if device.type == "cuda" else HostTimeline()
