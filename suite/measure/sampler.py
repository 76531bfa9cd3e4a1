"""A rank's resources sampled in a background thread while it trains: GPU utilisation and memory (NVML, or AMD SMI
on a ROCm torch) and the process's CPU utilisation, each summarised as its mean and 95th percentile."""

from __future__ import annotations

import threading

import numpy as np
import psutil
import torch

from .gpu_platform import monitor_unavailable


class ResourceSampler:
    """Samples GPU utilisation/memory (NVML, or AMD SMI on a ROCm torch: :mod:`suite.measure.gpu_platform`) and
    process CPU utilisation in a thread."""

    def __init__(self, device: torch.device, interval: float = 0.2):
        self.device, self.interval = device, interval
        self.gpu_util: list[float] = []  # % of time a kernel was running (NVML utilization.gpu; AMD SMI gfx_activity)
        self.gpu_mem: list[float] = []  # device memory in use, bytes (NVML as nvidia-smi shows; AMD SMI as amd-smi shows)
        self.cpu_util: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process = psutil.Process()
        self.gpu_error: str | None = None

    def _sample_gpu(self) -> None:
        try:
            self.gpu_util.append(float(torch.cuda.utilization(self.device)))
            self.gpu_mem.append(float(torch.cuda.device_memory_used(self.device)))
        except Exception as error:  # no NVML / AMD SMI library, or no permission: report n/a, say why
            self.gpu_error = monitor_unavailable(error)
            self.device = torch.device("cpu")

    def _run(self) -> None:
        self._process.cpu_percent(None)
        while not self._stop.wait(self.interval):
            self.cpu_util.append(self._process.cpu_percent(None))
            if self.device.type == "cuda":
                self._sample_gpu()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="suite-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def summary(values: list[float]) -> dict[str, float] | None:
    """Mean and 95th percentile, or None when nothing was sampled."""
    if not values:
        return None
    return {"mean": float(np.mean(values)), "p95": float(np.percentile(values, 95))}
