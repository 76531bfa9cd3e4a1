"""`suite env`: versions and capabilities as JSON, with unavailable pieces said, not hidden."""

import json

import pytest

from conftest import REPO
from suite.cli import main
from suite.measure.env import versions


def test_versions_name_the_benchmark_relevant_packages():
    found = versions()
    for name in ("python", "torch", "torchvision", "horovod", "deepspeed", "mpi4py", "pandas", "pytorch-fid"):
        assert name in found
    assert found["torch"] and found["torch"].startswith("2.")


def test_env_command_prints_capabilities_as_json(capsys):
    assert main(["env"]) == 0
    printed = capsys.readouterr()
    info = json.loads(printed.out)
    horovod = info["horovod"]
    from suite.measure.env import horovod_line

    assert printed.err == horovod_line(horovod) + "\n" and horovod["build"] in printed.err
    # the build and its GPU operations agree (this machine: the CPU-only build; a GPU node: the NCCL one)
    assert (horovod["build"] == "NCCL (GPU)") == (horovod["gpu_operations"] == "NCCL")
    assert set(info) >= {"versions", "platform", "torch", "horovod", "mpi", "deepspeed", "nvml"}
    assert info["torch"]["distributed"]["gloo"] is True
    horovod = info["horovod"]
    assert horovod["frameworks"]["pytorch"] is True
    assert horovod["controllers"] == {"mpi": True, "gloo": True}  # what ci/build_horovod.sh builds
    assert set(horovod["tensor_ops"]) == {"nccl", "ddl", "ccl", "cuda", "rocm"}
    assert info["mpi"]["vendor"] and "\x00" not in info["mpi"]["library"]
    # NVML: either devices, or a reason it is unavailable; never a silent gap
    assert info["nvml"].get("available") is True or "error" in info["nvml"]


def test_the_machine_block_names_cpu_kernels_versions_and_a_fingerprint(monkeypatch):
    import torch

    from suite.measure.env import machine, numerics_digest

    info = machine()
    assert info["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and info["torch"] == torch.__version__
    assert info["cores"] and info["cpu_model"] and len(info["fingerprint"]) == 16
    assert info["gpu"] is None and info["cuda"] is None  # no GPU here: nothing made up
    assert machine()["fingerprint"] == info["fingerprint"]  # a digest of the machine, not of the moment
    assert numerics_digest() == numerics_digest() and len(numerics_digest()) == 16


def test_one_machine_has_one_fingerprint_however_its_processes_were_launched(monkeypatch):
    from suite.measure import env

    plain = env.machine()
    # what differs by launcher: an environment variable passed on or not, the MPI library loaded or not
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setattr(env, "_mpi_library", lambda: "Open MPI v5.0.11")
    launched = env.machine()
    assert (launched["onednn_max_isa"], launched["mpi"]) == ("AVX2", "Open MPI v5.0.11")  # recorded per run
    assert launched["fingerprint"] == plain["fingerprint"]
    assert env.fingerprint({**plain, "gpu": "NVIDIA H100"}) != plain["fingerprint"]  # another machine is another
    # the committed digits runs, one machine (their stored fingerprints, written before, told horovodrun's ranks,
    # which never loaded MPI, from mpirun's)
    records = json.loads((REPO / "reports" / "digits" / "records.json").read_text())
    assert len({env.fingerprint(r["machine"]) for r in records}) == 1


def _fake_horovod(monkeypatch, nccl: int) -> None:
    """``horovod`` and ``horovod.torch`` replaced by what ``suite env`` asks of them: a build with or without NCCL."""
    import sys
    import types

    built = {name: (lambda: False) for name in ("ddl_built", "ccl_built", "rocm_built")}
    fake = types.SimpleNamespace(
        nccl_built=lambda: nccl, cuda_built=lambda: bool(nccl), mpi_built=lambda: True, gloo_built=lambda: True, **built
    )
    package = types.SimpleNamespace(__version__="0.28.1", torch=fake)
    monkeypatch.setitem(sys.modules, "horovod", package)
    monkeypatch.setitem(sys.modules, "horovod.torch", fake)


@pytest.mark.parametrize("gpu", [False, True])
def test_env_says_an_nccl_build_without_a_gpu_runs_on_the_cpu(monkeypatch, gpu):
    import torch

    from suite.measure import env

    _fake_horovod(monkeypatch, nccl=22907)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    info = env._horovod()
    assert (info["build"], info["gpu_operations"], info["gpu_available"]) == ("NCCL (GPU)", "NCCL", gpu)
    expected = "horovod 0.28.1: NCCL (GPU) build"
    if not gpu:
        expected += "; NCCL build without a visible GPU: runs on the CPU with its Gloo/MPI operations"
    assert env.horovod_line(info) == expected


def test_env_names_a_horovod_that_cannot_be_imported():
    from suite.measure import env

    failed = env._guard(lambda: (_ for _ in ()).throw(OSError("libmpi.so.40: cannot open shared object file")))
    assert env.horovod_line(failed) == "horovod: not importable (OSError: libmpi.so.40: cannot open shared object file)"


def test_the_cpu_numerics_digest_is_kept_per_kernel_choice_and_computed_once(monkeypatch, tmp_path):
    import torch

    from suite.measure import env

    monkeypatch.setenv("SUITE_CACHE", str(tmp_path))
    computed = []
    real = env._numerics_digest
    monkeypatch.setattr(env, "_numerics_digest", lambda device: computed.append(device) or real(device))
    first = env.numerics_digest()
    assert env.numerics_digest() == first and len(computed) == 1  # the second run reads it back
    (kept,) = (tmp_path / "numerics").glob("*.json")
    threads = torch.get_num_threads()
    try:  # another thread count picks other kernels: its own digest, computed
        torch.set_num_threads(threads + 1)
        env.numerics_digest()
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # so does oneDNN's cap
        env.numerics_digest()
    finally:
        torch.set_num_threads(threads)
    assert len(computed) == 3 and len(list((tmp_path / "numerics").glob("*.json"))) == 3
    kept.write_text("{not json")  # a damaged entry is computed again, never trusted
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert env.numerics_digest() == first and len(computed) == 4
