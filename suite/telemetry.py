"""Per-rank measurements: step time split into data, compute and communication wait;
throughput; CPU and host memory; GPU utilisation and memory from NVML.

What is measured, precisely:

* A **step** is one generator update and the discriminator updates before it.
* **data** is time spent fetching and moving a batch; **comm** is time the rank was blocked in
  communication (see each engine for how that is observed); **compute** is the rest of the
  step's wall time. On CUDA each step ends with a device synchronisation so that the times
  belong to the step that caused them.
* The **timed window** starts after ``warmup_steps`` steps; throughput and per-step times come
  from the window only, and the record says how many steps it covers.
* **images** counts images that went through a discriminator: real plus generated.
* **GPU utilisation** is NVML's busy percentage of this rank's own device, and GPU memory
  NVML's memory in use on it, sampled every ``interval`` seconds in a background thread (mean
  and p95); the peak of this rank's tensors comes from PyTorch's allocator. On a CPU they are
  ``None``: never estimated.
"""

from __future__ import annotations

import resource
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import psutil
import torch


class ResourceSampler:
    """Samples GPU utilisation/memory (NVML) and process CPU utilisation in a thread."""

    def __init__(self, device: torch.device, interval: float = 0.2):
        self.device, self.interval = device, interval
        self.gpu_util: list[float] = []  # % of time a kernel was running (NVML utilization.gpu)
        self.gpu_mem: list[float] = []  # device memory in use, bytes (NVML, as nvidia-smi shows)
        self.cpu_util: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process = psutil.Process()
        self.gpu_error: str | None = None

    def _sample_gpu(self) -> None:
        try:
            self.gpu_util.append(float(torch.cuda.utilization(self.device)))
            self.gpu_mem.append(float(torch.cuda.device_memory_used(self.device)))
        except Exception as error:  # no NVML library, or no permission: report n/a, say why
            self.gpu_error = f"NVML unavailable: {error}"
            self.device = torch.device("cpu")

    def _run(self) -> None:
        self._process.cpu_percent(None)
        while not self._stop.wait(self.interval):
            self.cpu_util.append(self._process.cpu_percent(None))
            if self.device.type == "cuda":
                self._sample_gpu()

    def __enter__(self) -> "ResourceSampler":
        self._thread = threading.Thread(target=self._run, name="suite-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def summary(values: list[float]) -> dict[str, float] | None:
    """Mean and 95th percentile, or None when nothing was sampled."""
    if not values:
        return None
    return {"mean": float(np.mean(values)), "p95": float(np.percentile(values, 95))}


class Telemetry:
    """Step timers and counters of one rank."""

    def __init__(self, device: torch.device, comm, warmup_steps: int):
        self.device, self.comm, self.warmup_steps = device, comm, warmup_steps
        self.steps = 0
        self.images = 0
        self.phase = {"data": 0.0, "compute": 0.0, "comm": 0.0}
        self.window = {"steps": 0, "images": 0, "seconds": 0.0, "data": 0.0, "compute": 0.0, "comm": 0.0}
        self.comm_bytes_window = 0
        self.train_start: float | None = None
        self.train_seconds = 0.0
        self.in_step = False
        self._step_start = 0.0
        self._step_data = 0.0
        self._step_comm0 = (0.0, 0)
        self.sampler = ResourceSampler(device)

    def clock(self) -> float:
        """Seconds of training so far on this rank (the x-axis of quality-over-time curves)."""
        return 0.0 if self.train_start is None else time.perf_counter() - self.train_start

    def start(self) -> None:
        self.train_start = time.perf_counter()
        self.sampler.__enter__()

    def stop(self) -> None:
        self.train_seconds = self.clock()
        self.sampler.__exit__(None, None, None)

    def begin_step(self) -> None:
        """Start timing a step (no-op when one is already running)."""
        if self.in_step:
            return
        self.in_step = True
        self._step_start = time.perf_counter()
        self._step_data = 0.0
        self._step_comm0 = (self.comm.seconds, self.comm.bytes)

    @contextmanager
    def data(self) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self._step_data += time.perf_counter() - start

    def end_step(self, images: int) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.in_step = False
        seconds = time.perf_counter() - self._step_start
        comm = self.comm.seconds - self._step_comm0[0]
        compute = max(0.0, seconds - self._step_data - comm)
        for name, value in (("data", self._step_data), ("comm", comm), ("compute", compute)):
            self.phase[name] += value
        self.steps += 1
        self.images += images
        if self.steps > self.warmup_steps:
            w = self.window
            w["steps"] += 1
            w["images"] += images
            w["seconds"] += seconds
            w["data"] += self._step_data
            w["comm"] += comm
            w["compute"] += compute
            self.comm_bytes_window += self.comm.bytes - self._step_comm0[1]

    def as_dict(self) -> dict:
        """This rank's measurements (rank 0 merges all ranks' into the record)."""
        gpu = self.device.type == "cuda" and self.sampler.device.type == "cuda"
        peak_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {
            "train_s": self.train_seconds,
            "steps": self.steps,
            "images": self.images,
            "phase_s": dict(self.phase),
            "window": dict(self.window),
            "comm_bytes_window": self.comm_bytes_window,
            "images_per_s": self.window["images"] / self.window["seconds"] if self.window["seconds"] > 0 else None,
            "cpu_util": summary(self.sampler.cpu_util),
            "host_mem_peak_bytes": peak_rss_kib * 1024,
            "gpu_util": summary(self.sampler.gpu_util) if gpu else None,
            "gpu_mem_used_bytes": summary(self.sampler.gpu_mem) if gpu else None,  # NVML, whole device
            "gpu_mem_peak_bytes": torch.cuda.max_memory_allocated(self.device) if gpu else None,  # this rank's tensors
            "gpu_note": self.sampler.gpu_error or (None if gpu else "CPU run: no GPU to measure"),
        }
