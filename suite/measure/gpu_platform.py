"""The GPU platform this torch drives, NVIDIA (CUDA) or AMD (ROCm), and what differs between the two: one place.

torch's ROCm build keeps the ``cuda`` device API and runs RCCL behind the ``nccl`` backend, so the engines
choose their device and backend alike on both. What differs is named here: the toolkit and its version, the
collective library, and the monitor library the GPU samples come from (NVML or AMD SMI; where it is missing
the samples are recorded as unavailable, :func:`monitor_unavailable`). A feature this suite runs on NVIDIA
only is refused on a ROCm torch in one line (:func:`nvidia_only_problem`; docs/gpu.md, "AMD GPUs").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuPlatform:
    """One GPU platform: what torch's ``cuda`` API runs on, talks with and is monitored through."""

    name: str  # cuda | rocm
    vendor: str
    toolkit: str  # the torch.version attribute that names it: cuda | hip
    collectives: str  # the library behind torch.distributed's nccl backend
    monitor: str  # the library the busy share and memory come from
    monitor_package: str  # the Python package that reads it


PLATFORMS = {
    "cuda": GpuPlatform("cuda", "NVIDIA", "cuda", "NCCL", "NVML", "pynvml"),
    "rocm": GpuPlatform("rocm", "AMD", "hip", "RCCL", "AMD SMI", "amdsmi"),
}
"""The platforms by name: ``rocm`` where torch is a ROCm build, else ``cuda``."""


def current() -> GpuPlatform:
    """The platform of this torch build: ``rocm`` when ``torch.version.hip`` is set, else ``cuda``."""
    import torch

    return PLATFORMS["rocm" if getattr(torch.version, "hip", None) else "cuda"]


def toolkit_version() -> str | None:
    """The build's CUDA or HIP version (None for a CPU-only torch)."""
    import torch

    return getattr(torch.version, current().toolkit, None)


def monitor_unavailable(error: BaseException | str) -> str:
    """Why no GPU busy share or memory was sampled, naming the library and package: ``AMD SMI unavailable (amdsmi): ...``."""
    platform = current()
    return f"{platform.monitor} unavailable (the {platform.monitor_package} package): {error}"


def nvidia_only_problem(feature: str, why: str, amd: str | None = None) -> str | None:
    """One line refusing ``feature`` on a ROCm torch (``why``: what in it needs NVIDIA), or None on any other build;
    ``amd``: where the GPUs are known to be AMD whatever this torch is (a site preset's: ``site frontier's GPUs are
    AMD``), which refuses it on any build."""
    if amd is None:
        if current().name == "cuda":
            return None
        amd = f"this torch is a ROCm build (HIP {toolkit_version()})"
    return f"{feature} needs an NVIDIA GPU: {why}; {amd}; the torch engine runs on AMD GPUs (RCCL behind the nccl backend)"


def driver_version() -> str | None:
    """The GPU driver's version from the platform's monitor library (NVML or AMD SMI); raises when it cannot be read."""
    if current().name == "rocm":
        amdsmi: Any = importlib.import_module("amdsmi")
        amdsmi.amdsmi_init()
        try:
            handles = amdsmi.amdsmi_get_processor_handles()
            if not handles:
                return None
            info = amdsmi.amdsmi_get_gpu_driver_info(handles[0])
            return str(info.get("driver_version")) if info.get("driver_version") else None
        finally:
            amdsmi.amdsmi_shut_down()
    pynvml: Any = importlib.import_module("pynvml")
    pynvml.nvmlInit()
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)  # older pynvml returns bytes
    finally:
        pynvml.nvmlShutdown()
