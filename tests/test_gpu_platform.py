"""AMD GPUs (ROCm) with fakes, as this machine has no GPU: the platform is chosen in one place
(suite.measure.gpu_platform) from torch.version.hip; the GPU sampler names AMD SMI when it cannot read it; the driver
comes from AMD SMI (a fake amdsmi module); an engine whose GPU path needs NVIDIA (Horovod) is refused in one line
before any rank starts, and by its rank; the torch engine is not."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from conftest import tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.measure import gpu_platform
from suite.measure.sampler import ResourceSampler
from suite.running.commands import LaunchError
from suite.running.preflight import check_devices
from suite.train.engines import base
from suite.train.engines.horovod import HorovodEngine
from suite.train.engines.torch_dist import TorchEngine

HIP = "6.2.41133-dd7f95766"


@pytest.fixture
def rocm(monkeypatch):
    """A ROCm build of torch: torch.version.hip set, no CUDA version."""
    monkeypatch.setattr(torch.version, "hip", HIP, raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)


def test_the_platform_follows_torch_version_hip(monkeypatch, rocm):
    platform = gpu_platform.current()
    assert (platform.name, platform.vendor, platform.collectives, platform.monitor) == ("rocm", "AMD", "RCCL", "AMD SMI")
    assert gpu_platform.toolkit_version() == HIP
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    platform = gpu_platform.current()
    assert (platform.name, platform.collectives, platform.monitor) == ("cuda", "NCCL", "NVML")
    assert gpu_platform.toolkit_version() == "12.8"


def test_a_sampler_that_cannot_read_amd_smi_says_so_and_stops_sampling(monkeypatch, rocm):
    def no_amdsmi(device=None):
        raise ModuleNotFoundError("No module named 'amdsmi'")

    monkeypatch.setattr(torch.cuda, "utilization", no_amdsmi)
    sampler = ResourceSampler(torch.device("cuda", 0))
    sampler._sample_gpu()
    assert sampler.gpu_error == "AMD SMI unavailable (the amdsmi package): No module named 'amdsmi'"
    assert sampler.device.type == "cpu" and sampler.gpu_util == []  # not asked again


def test_a_sampler_records_what_amd_smi_reads_through_torch(monkeypatch, rocm):
    monkeypatch.setattr(torch.cuda, "utilization", lambda device=None: 87)
    monkeypatch.setattr(torch.cuda, "device_memory_used", lambda device=None: 3 * 2**30)
    sampler = ResourceSampler(torch.device("cuda", 0))
    sampler._sample_gpu()
    sampler._sample_gpu()
    assert sampler.gpu_util == [87.0, 87.0] and sampler.gpu_mem == [3.0 * 2**30] * 2 and sampler.gpu_error is None


def test_the_driver_comes_from_amd_smi_on_rocm(monkeypatch, rocm):
    calls: list[str] = []
    fake = types.ModuleType("amdsmi")
    fake.amdsmi_init = lambda: calls.append("init")  # type: ignore[attr-defined]
    fake.amdsmi_shut_down = lambda: calls.append("shut down")  # type: ignore[attr-defined]
    fake.amdsmi_get_processor_handles = lambda: ["gcd0", "gcd1"]  # type: ignore[attr-defined]
    fake.amdsmi_get_gpu_driver_info = lambda handle: {"driver_name": "amdgpu", "driver_version": f"6.8.5 ({handle})"}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    assert gpu_platform.driver_version() == "6.8.5 (gcd0)"
    assert calls == ["init", "shut down"]
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # not installed: the caller's guard reports it
    with pytest.raises(ImportError):
        gpu_platform.driver_version()


def test_an_nvidia_only_feature_is_refused_in_one_line_on_rocm_only(monkeypatch, rocm):
    refusal = HorovodEngine.gpu_refusal()
    assert refusal is not None and "\n" not in refusal
    assert refusal.startswith("the horovod engine on GPUs needs an NVIDIA GPU: its GPU operations are checked only for")
    assert refusal.endswith(
        f"this torch is a ROCm build (HIP {HIP}); the torch engine runs on AMD GPUs (RCCL behind the nccl backend)"
    )
    assert TorchEngine.gpu_refusal() is None  # torch.cuda and the nccl backend drive AMD GPUs
    monkeypatch.setattr(torch.version, "hip", None)
    assert HorovodEngine.gpu_refusal() is None  # a CUDA torch: Horovod's NCCL build is the suite's own check


def _runs(engine: str):
    return expand(parse_scenario(tiny_scenario("amd", [{"strategy": "data_parallel", "engine": engine, "procs": [2]}])))


def test_a_horovod_run_on_amd_gpus_stops_before_any_rank_starts(monkeypatch, rocm):
    monkeypatch.setattr(base, "uses_cuda", lambda: True)
    with pytest.raises(LaunchError) as refused:
        check_devices(_runs("horovod"))
    assert str(refused.value).startswith("data_parallel-bce-horovod-p2-r0: the horovod engine on GPUs needs an NVIDIA GPU")
    check_devices(_runs("torch"))  # the torch engine runs on RCCL
    monkeypatch.setattr(base, "uses_cuda", lambda: False)
    check_devices(_runs("horovod"))  # on the CPU nothing needs NVIDIA


def test_a_rank_refuses_too_when_started_by_hand(monkeypatch, rocm):
    """A worker started from run.json (not through suite run) refuses at its device choice, in one line."""
    monkeypatch.setattr(base, "uses_cuda", lambda: True)
    engine = HorovodEngine.__new__(HorovodEngine)
    base.Engine.__init__(engine)
    with pytest.raises(RuntimeError, match=r"^the horovod engine on GPUs needs an NVIDIA GPU"):
        engine.pick_device()


def test_gpu_check_leaves_an_nvidia_only_engine_out_on_rocm(monkeypatch, rocm):
    """On a ROCm torch gpu-check does not plan Horovod GPU runs it would refuse: it says why, and keeps the others."""
    from suite.config.registry import ENGINES
    from suite.running.gpucheck import gpu_engines

    # every engine's own readiness passes (as where all are installed): a property shadows the entries' field
    monkeypatch.setattr(type(ENGINES["horovod"]), "gpu_ready", property(lambda self: lambda caps: None), raising=False)
    caps = {"torch": {"hip_build": HIP}}
    checked, skipped = gpu_engines(caps)
    assert "horovod" not in checked and "torch" in checked
    assert any(line.startswith("the horovod engine on GPUs needs an NVIDIA GPU") for line in skipped)
    caps = {"torch": {"hip_build": None}}
    checked, _ = gpu_engines(caps)
    assert "horovod" in checked  # a CUDA torch: every engine whose own check passes
