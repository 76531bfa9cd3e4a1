"""`suite env`: versions and capabilities as JSON, with unavailable pieces said, not hidden."""

import json

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
    info = json.loads(capsys.readouterr().out)
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
