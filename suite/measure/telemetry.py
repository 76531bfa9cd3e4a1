"""Per-rank measurements: the training window, step times split into data, compute and
communication wait, their spread, throughput, FLOPs, CPU and host memory, GPU utilisation.

The training clock runs from a barrier before the warm-up steps to one after the last step, so
``train_s`` and ``images_per_s`` count the warm-up; the timed steps (step times, their split and
spread, traffic, FLOP/s) are those after it, so that a first step's one-off costs do not enter them.
Times come from a :class:`HostTimeline` on CPUs and a :class:`CudaTimeline` on GPUs, whose events are read
lazily so that the training loop never waits on the device. Step times go into a bounded reservoir (a
uniform sample) for the median and p95; the mean and its confidence interval come from exact running
sums. Checkpoint time is counted apart (``checkpoint_s``) and a resumed run continues the clock and
statistics. docs/results.md defines each measure (images, train and evaluation images, comm, GPU
utilisation, the host's load).
"""

from __future__ import annotations

import math
import random
import resource
import socket
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import torch

from .hostload import HostLoadMeter
from .sampler import ResourceSampler, summary
from .timelines import CudaTimeline, HostTimeline, timeline_for

RESERVOIR_SIZE = 4096
"""Step times kept per rank for percentiles (a uniform sample once a window has more steps)."""
MAX_PENDING_STEPS = 256
"""Steps whose device timings may wait unread; reading them then costs one device sync."""


# --- step-time statistics ------------------------------------------------------------------------


class StepTimes:
    """Exact count, mean and variance of step times, plus a bounded uniform sample of them."""

    def __init__(self, size: int = RESERVOIR_SIZE, seed: int = 0):
        self.size = size
        self.sample: list[float] = []
        self.count = 0
        self.mean = 0.0
        self._m2 = 0.0
        self._rng = random.Random(seed)

    def add(self, seconds: float) -> None:
        self.count += 1
        delta = seconds - self.mean
        self.mean += delta / self.count
        self._m2 += delta * (seconds - self.mean)
        if len(self.sample) < self.size:
            self.sample.append(seconds)
        else:  # reservoir sampling: every step has the same chance to be kept
            j = self._rng.randrange(self.count)
            if j < self.size:
                self.sample[j] = seconds

    @property
    def std(self) -> float | None:
        return math.sqrt(self._m2 / (self.count - 1)) if self.count > 1 else None

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "mean": self.mean if self.count else None, "std": self.std, "sample": list(self.sample)}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue these statistics exactly (sums, sample, the sampler's state)."""
        return {"count": self.count, "mean": self.mean, "m2": self._m2, "sample": list(self.sample), "rng": self._rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`."""
        self.count, self.mean, self._m2, self.sample = state["count"], state["mean"], state["m2"], list(state["sample"])
        self._rng.setstate(state["rng"])


def spread(step_dicts: list[dict[str, Any]]) -> dict[str, float | None]:
    """Median, 95th percentile, mean and 95 % confidence half-width of pooled step times.

    ``step_dicts`` are :meth:`StepTimes.as_dict` results (one per rank). The mean and its
    interval use the exact per-rank counts and moments; the percentiles use the samples.
    """
    from scipy.special import stdtrit  # Student's t quantile, without the second it takes to import scipy.stats

    parts = [d for d in step_dicts if d["count"]]
    n = sum(d["count"] for d in parts)
    if n == 0:
        return {"p50": None, "p95": None, "mean": None, "ci95": None, "n": 0}
    mean = sum(d["count"] * d["mean"] for d in parts) / n
    # pooled variance: within-rank sums of squares plus between-rank spread of the means
    ss = sum((d["count"] - 1) * (d["std"] or 0.0) ** 2 + d["count"] * (d["mean"] - mean) ** 2 for d in parts)
    half = float(stdtrit(n - 1, 0.975) * math.sqrt(ss / (n - 1)) / math.sqrt(n)) if n > 1 else None
    pooled = np.concatenate([np.asarray(d["sample"], dtype=float) for d in parts])
    return {"p50": float(np.percentile(pooled, 50)), "p95": float(np.percentile(pooled, 95)), "mean": mean, "ci95": half, "n": n}


# --- the telemetry of one rank --------------------------------------------------------------------


@dataclass
class _Step:
    """One step's marks, read when the step's device work is known to be done."""

    begin: Any
    end: Any
    data: list[tuple[Any, Any]]
    comm: list[tuple[Any, Any]]
    images: int
    train_images: int = 0
    eval_images: int = 0


@dataclass
class WindowTotals:
    """What this rank did in its timed steps (those after the warm-up), and the training clock's seconds."""

    steps: int = 0
    images: int = 0
    train_images: int = 0
    eval_images: int = 0
    step_seconds: float = 0.0  # sum of step times (the timed steps' part of the clock less the time between steps)
    data: float = 0.0
    comm: float = 0.0
    compute: float = 0.0
    seconds: float = 0.0  # the training clock, barrier to barrier: warm-up and timed steps
    busy_seconds: float = 0.0  # from the end of the warm-up to this rank's last step
    comm_bytes: int = 0


@dataclass
class CommStats:
    """Communication: payload bytes handed to collectives, and the waits they caused.

    Engines call :meth:`add` with the bytes of a collective, the size of the group it ran in,
    and, where the rank was blocked, a ``(start, end)`` pair of timeline marks around the
    wait. The telemetry reads the waits into the step during which they happened.
    """

    bytes: int = 0
    largest_group: int = 0  # ranks in the largest communicator used: shows where traffic went
    waits: list[tuple[Any, Any]] = field(default_factory=list)

    def add(self, nbytes: int, group_size: int, wait: tuple[Any, Any] | None = None) -> None:
        self.bytes += int(nbytes)
        self.largest_group = max(self.largest_group, group_size)
        if wait is not None:
            self.waits.append(wait)

    def take_waits(self) -> list[tuple[Any, Any]]:
        waits, self.waits = self.waits, []
        return waits


class Telemetry:
    """Step timers, the training window and counters of one rank."""

    def __init__(self, device: torch.device, comm: CommStats, timeline: HostTimeline | CudaTimeline | None = None):
        self.device, self.comm = device, comm
        self.timeline = timeline or timeline_for(device)
        self.steps = 0  # all steps, warm-up included
        self.images = 0
        self.train_images = 0  # training images of all steps, warm-up included (see the module's docstring)
        self.eval_images = 0  # evaluation images of all steps, warm-up included
        self.warmup = {"steps": 0, "images": 0, "train_images": 0, "seconds": 0.0}
        self.window = WindowTotals()
        self.step_times = StepTimes()
        self.flops_per_step: int | None = None
        self.in_window = False
        self.paused_s = 0.0
        self.checkpoint_s = 0.0
        self._resumed: dict[str, Any] | None = None  # the checkpoint's clock and window traffic, until the window opens
        self._clock_start: float | None = None  # perf_counter when the training clock started (less a resumed clock)
        self._window_clock0 = 0.0  # the clock's reading when the warm-up ended (the timed steps began)
        self._warmup_start: float | None = None
        self._window_bytes0 = 0
        self._pending: list[_Step] = []
        self._step: _Step | None = None
        self.sampler = ResourceSampler(device)
        self.host_load = HostLoadMeter()

    # --- phases ------------------------------------------------------------------------------------
    def start_warmup(self) -> None:
        """Set-up is over (call right after a barrier): the training clock starts, and warm-up steps follow (they
        train and are on the clock, but are not timed steps)."""
        self._start_clock()  # first: starting the samplers takes a moment that is on neither clock
        self._warmup_start = time.perf_counter()

    def _start_clock(self) -> None:
        """Start the training clock (once): a resumed run's clock goes on from the checkpoint's."""
        if self._clock_start is not None:
            return
        self.sampler.start()
        self.host_load.start()  # its readings take a moment: the clock starts after them
        resumed = (self._resumed or {}).get("clock_s", 0.0)
        self._clock_start = time.perf_counter() - resumed - self.paused_s - self.checkpoint_s

    def warmup_seconds(self) -> float:
        """Seconds of warm-up so far: this segment's since :meth:`start_warmup`, plus a resumed run's earlier ones."""
        running = time.perf_counter() - self._warmup_start if self._warmup_start is not None else 0.0
        return self.warmup["seconds"] + running

    def open_window(self) -> None:
        """The warm-up is over: the timed steps begin (call right after the barrier that ends the warm-up; it starts
        the training clock too where no warm-up phase did)."""
        self.flush()
        self.comm.take_waits()  # waits of set-up (initial broadcasts) and warm-up belong to no timed step
        if self._warmup_start is not None:
            self.warmup["seconds"] += time.perf_counter() - self._warmup_start
            self._warmup_start = None
        resumed = self._resumed or {"clock_s": 0.0, "window_comm_bytes": 0}
        self._window_bytes0 = self.comm.bytes - resumed["window_comm_bytes"]
        self._start_clock()
        # a resumed run's timed steps began where its first segment's warm-up ended (0.0: a checkpoint from before
        # the warm-up was on the clock)
        self._window_clock0 = resumed.get("window_clock0", 0.0) if self._resumed is not None else self.clock()
        self.in_window = True
        self._resumed = None

    def training_done(self) -> None:
        """This rank made its last training step (before the barrier that closes the window)."""
        self.timeline.synchronize()
        self.window.busy_seconds = self.clock() - self._window_clock0

    def close_window(self) -> None:
        """Stop the training clock (call right after the barrier that follows the last step)."""
        self.window.seconds = self.clock()
        self.in_window = False
        self.sampler.stop()
        self.host_load.stop()
        self.flush()
        self.window.comm_bytes = self.comm.bytes - self._window_bytes0

    def clock(self) -> float:
        """Seconds of training since the clock started (the warm-up's start), on the host, pauses excluded (the
        x-axis of quality-over-time curves)."""
        if self._clock_start is None:
            return 0.0
        return time.perf_counter() - self._clock_start - self.paused_s - self.checkpoint_s

    @contextmanager
    def _stopped(self, counter: str) -> Iterator[None]:
        """Stop the window's clock while inside, adding the time to the attribute ``counter``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, counter, getattr(self, counter) + time.perf_counter() - start)

    def paused(self) -> AbstractContextManager[None]:
        """Stop the window's clock (evaluating a snapshot during training is not training)."""
        return self._stopped("paused_s")

    def checkpointing(self) -> AbstractContextManager[None]:
        """Stop the window's clock while a checkpoint is saved, and count that time apart."""
        return self._stopped("checkpoint_s")

    def state_dict(self) -> dict[str, Any]:
        """This rank's measurements so far, for a checkpoint (taken between window steps)."""
        self.flush()
        return {
            "clock_s": self.clock(),
            "window_clock0": self._window_clock0,
            "steps": self.steps,
            "images": self.images,
            "train_images": self.train_images,
            "eval_images": self.eval_images,
            "warmup": dict(self.warmup),
            "window": dict(self.window.__dict__),
            "step_times": self.step_times.state_dict(),
            "flops_per_step": self.flops_per_step,
            "paused_s": self.paused_s,
            "checkpoint_s": self.checkpoint_s,
            "comm_bytes": self.comm.bytes,
            "window_comm_bytes": self.comm.bytes - self._window_bytes0,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's measurements (before the window opens): the window's clock,
        totals, step times and traffic go on from where the checkpoint left them."""
        self.steps, self.images, self.warmup = state["steps"], state["images"], dict(state["warmup"])
        self.train_images, self.eval_images = state.get("train_images", 0), state.get("eval_images", 0)
        self.window = WindowTotals(**state["window"])
        self.step_times.load_state_dict(state["step_times"])
        self.flops_per_step, self.paused_s, self.checkpoint_s = state["flops_per_step"], state["paused_s"], state["checkpoint_s"]
        self.comm.bytes += state["comm_bytes"]  # traffic of the earlier segments, on top of this one's set-up
        self._resumed = {
            "clock_s": state["clock_s"],
            "window_comm_bytes": state["window_comm_bytes"],
            "window_clock0": state.get("window_clock0", 0.0),
        }

    # --- steps ---------------------------------------------------------------------------------------
    def begin_step(self) -> None:
        """Start timing a step (no-op when one is already running)."""
        if self._step is None:
            self._step = _Step(self.timeline.mark(), None, [], [], 0)

    @contextmanager
    def data(self) -> Iterator[None]:
        """Time fetching a batch and handing it to the device."""
        start = self.timeline.mark()
        yield
        if self._step is not None:
            self._step.data.append((start, self.timeline.mark()))

    def end_step(self, images: int, train_images: int = 0, eval_images: int = 0) -> None:
        """End the step :meth:`begin_step` began: ``images`` through a discriminator, of which ``train_images`` reached
        an update; ``eval_images`` scored without one (see the module's docstring)."""
        step, self._step = self._step, None
        if step is None:
            raise RuntimeError("end_step without begin_step")
        step.end, step.images, step.train_images, step.eval_images = self.timeline.mark(), images, train_images, eval_images
        step.comm = self.comm.take_waits()
        self.steps += 1
        self.images += images
        self.train_images += train_images
        self.eval_images += eval_images
        if not self.in_window:
            self.warmup["steps"] += 1
            self.warmup["images"] += images
            self.warmup["train_images"] = self.warmup.get("train_images", 0) + train_images
            return
        self._pending.append(step)
        if len(self._pending) >= MAX_PENDING_STEPS:
            self.flush()

    def flush(self) -> None:
        """Read the pending steps' times (on a GPU: one wait for the last of them)."""
        if not self._pending:
            return
        self.timeline.wait(self._pending[-1].end)
        seconds = self.timeline.seconds
        w = self.window
        for step in self._pending:
            total = seconds(step.begin, step.end)
            data = sum(seconds(a, b) for a, b in step.data)
            comm = sum(seconds(a, b) for a, b in step.comm)
            w.steps += 1
            w.images += step.images
            w.train_images += step.train_images
            w.eval_images += step.eval_images
            w.step_seconds += total
            w.data += data
            w.comm += comm
            w.compute += max(0.0, total - data - comm)
            self.step_times.add(total)
        self._pending.clear()

    def counts_flops_next(self) -> bool:
        """Whether the next :meth:`counting_flops` counts (a dispatch mode: compiled code does not run under it)."""
        return self.flops_per_step is None and not self.in_window

    @contextmanager
    def counting_flops(self) -> Iterator[None]:
        """Count the floating-point operations of the enclosed step, once per rank.

        Meant for the first warm-up step (counting slows the step down); later calls do nothing.
        """
        if not self.counts_flops_next():
            with nullcontext():
                yield
            return
        from .flops import flop_counter

        counter = flop_counter()
        with counter:
            yield
        self.flops_per_step = int(counter.get_total_flops())

    # --- the rank's measurements ---------------------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        """This rank's measurements (rank 0 merges all ranks' into the record)."""
        gpu = self.device.type == "cuda" and self.sampler.device.type == "cuda"
        peak_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        w = self.window
        return {
            "host": socket.gethostname(),  # the node this rank ran on (which nodes a run spanned)
            "device": str(self.device),  # this rank's device, e.g. cuda:1 (suite gpu-check: ranks on distinct GPUs)
            "timeline": self.timeline.kind,  # host_clock or cuda_events
            "steps": self.steps,
            "images": self.images,
            "train_images": self.train_images,
            "eval_images": self.eval_images,
            "warmup": dict(self.warmup),
            "paused_s": self.paused_s,
            "checkpoint_s": self.checkpoint_s,
            "window": {**w.__dict__},
            "step_times": self.step_times.as_dict(),
            # training images per second of the training clock, warm-up included
            "images_per_s": self.train_images / w.seconds if w.seconds > 0 and self.train_images else None,
            "host_load": self.host_load.as_dict(),
            "flops_per_step": self.flops_per_step,
            "cpu_util": summary(self.sampler.cpu_util),
            "host_mem_peak_bytes": peak_rss_kib * 1024,
            "gpu_util": summary(self.sampler.gpu_util) if gpu else None,
            "gpu_mem_used_bytes": summary(self.sampler.gpu_mem) if gpu else None,  # NVML, whole device
            "gpu_mem_peak_bytes": torch.cuda.max_memory_allocated(self.device) if gpu else None,  # this rank's tensors
            "gpu_note": self.sampler.gpu_error or (None if gpu else "CPU run: no GPU to measure"),
        }
