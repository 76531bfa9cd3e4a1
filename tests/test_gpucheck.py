"""suite gpu-check without a GPU: the one-line refusal, the record checks, the scenario it runs, the report.

Nothing here touches a GPU: CUDA, NVML and the capabilities are faked, records are synthetic.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import warnings

import pytest
import torch

from suite.cli import main
from suite.config.expansion import expand, load_scenario, parse_scenario
from suite.records.codec import check_record as check_schema
from suite.records.codec import parse_record
from suite.records.record import SCHEMA_VERSION, run_identity
from suite.records.results import write_record
from suite.running import gpucheck


def checks_of(data: dict) -> list:
    """``suite gpu-check``'s checks of a record with ``data``, read as every record is."""
    return gpucheck.record_checks(parse_record({"schema": SCHEMA_VERSION, **data}))


def fake_caps(horovod: str = "nccl", nccl: bool = True) -> dict:
    """What :func:`suite.measure.env.capabilities` says on a node with two GPUs; Horovod ``nccl``, ``cpu`` or ``missing``."""
    build = "NCCL (GPU)" if horovod == "nccl" else "CPU-only"
    hvd = {"version": "0.28.1", "build": build, "tensor_ops": {"nccl": horovod == "nccl"}} if horovod != "missing" else {}
    return {
        "versions": {"horovod": "0.28.1", "deepspeed": "0.19.8", "mpi4py": "4.1.2"},
        "torch": {
            "version": "2.13.0",
            "cuda_build": "13.0",
            "devices": ["Fake GPU", "Fake GPU"],
            "distributed": {"nccl": nccl},
            "nccl_version": "2.27.3",
        },
        "horovod": hvd or {"available": False, "error": "ModuleNotFoundError: No module named 'horovod'"},
        "mpi": {"vendor": "Open MPI"},
        "deepspeed": {"version": "0.19.8"},
        "nvml": {"available": True, "driver": "999.99"},
    }


def good_record(run_id: str = "data_parallel-bce-torch-p2-r0", procs: int = 2) -> dict:
    """A record as a passing GPU run writes it (the fields the check reads)."""
    rank = {"timeline": "cuda_events", "gpu_note": None}
    return {
        "run_id": run_id,
        "procs": procs,
        "status": "ok",
        "device": "Fake GPU",
        "train_s": 4.1,
        "telemetry": {
            "per_rank": [
                {
                    **rank,
                    "device": f"cuda:{i}",
                    "gpu_util": {"mean": 55.0 + i, "p95": 97.0},
                    "gpu_mem_used_bytes": {"mean": 1.5 * 2**30, "p95": 1.6 * 2**30},
                }
                for i in range(procs)
            ]
        },
        "quality": {"device": "cuda:0", "features": "classifier:digits", "n": 200},
    }


def test_refuses_in_one_line_without_a_gpu(monkeypatch, capsys, tmp_path):
    def unavailable() -> bool:
        warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old\n(found version 1)", stacklevel=1)
        return False

    monkeypatch.setattr(torch.cuda, "is_available", unavailable)
    assert main(["gpu-check", "--out", str(tmp_path / "gc")]) == gpucheck.EXIT_NO_GPU == 4
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("gpu-check: no CUDA GPU visible (torch.cuda.is_available() is False; CUDA build ")
    assert "driver on your system is too old (found version 1))" in err and err.rstrip().endswith("nothing to check")
    assert not (tmp_path / "gc").exists()  # nothing written: no report that did not come from a GPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="this test is for machines without a GPU")
def test_the_real_command_refuses_here(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "suite", "gpu-check", "--out", str(tmp_path / "gc")], capture_output=True, text=True
    )
    assert done.returncode == 4, done.stderr
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("gpu-check: no CUDA GPU visible")


def test_a_good_record_passes_every_check():
    record = good_record()
    check_schema({"schema": SCHEMA_VERSION, **record})  # the synthetic record fits the real record schema
    checks = checks_of(record)
    assert [c.name for c in checks] == ["status", "devices", "nvml", "timeline", "scoring"]
    assert all(c.ok for c in checks), [c.line() for c in checks if not c.ok]
    assert checks[1].line() == "PASS data_parallel-bce-torch-p2-r0 devices: 2 ranks on cuda:0, cuda:1"
    assert "utilisation mean 55.5 %" in checks[2].evidence and "memory used 1536-1536 MiB" in checks[2].evidence


def _ranks(record: dict) -> list[dict]:
    return record["telemetry"]["per_rank"]


BAD = {
    "two ranks on one GPU": (lambda r: _ranks(r)[1].update(device="cuda:0"), "devices", "2 ranks on cuda:0, cuda:0"),
    "ranks on the CPU": (lambda r: [x.update(device="cpu") for x in _ranks(r)], "devices", "on cpu, cpu"),
    "utilisation above 100 %": (lambda r: _ranks(r)[0]["gpu_util"].update(p95=140.0), "nvml", "highest p95 140.0 %"),
    "utilisation all zero": (
        lambda r: [x.update(gpu_util={"mean": 0.0, "p95": 0.0}) for x in _ranks(r)],
        "nvml",
        "utilisation mean 0.0 %",
    ),
    "no memory in use": (
        lambda r: _ranks(r)[1].update(gpu_mem_used_bytes={"mean": 0.0, "p95": 0.0}),
        "nvml",
        "memory used 0-1536 MiB",
    ),
    "NVML missing": (
        lambda r: [
            x.update(gpu_util=None, gpu_mem_used_bytes=None, gpu_note="NVML unavailable: libnvidia-ml.so.1") for x in _ranks(r)
        ],
        "nvml",
        "no NVML samples on ranks [0, 1]: NVML unavailable: libnvidia-ml.so.1",
    ),
    "host clock instead of CUDA events": (
        lambda r: _ranks(r)[1].update(timeline="host_clock"),
        "timeline",
        "cuda_events (rank 0), host_clock (rank 1)",
    ),
    "scored on the CPU": (lambda r: r["quality"].update(device="cpu"), "scoring", "quality scored on cpu"),
}


@pytest.mark.parametrize("case", BAD)
def test_each_fault_fails_its_check_with_a_clear_line(case):
    spoil, name, evidence = BAD[case]
    record = good_record()
    spoil(record)
    failed = [c for c in checks_of(record) if not c.ok]
    assert [c.name for c in failed] == [name]
    assert failed[0].line().startswith(f"FAIL data_parallel-bce-torch-p2-r0 {name}: ") and evidence in failed[0].evidence


def test_a_failed_run_fails_its_status_only():
    record = {"run_id": "cellular-mustangs-mpi-p2-r0", "status": "failed", "error": "rank 1 exited with 1\ndetails"}
    assert [c.line() for c in checks_of(record)] == ["FAIL cellular-mustangs-mpi-p2-r0 status: failed: rank 1 exited with 1"]


def _planned(scenario: dict) -> set[tuple]:
    return {(r.strategy, r.loss, r.engine, r.procs) for r in expand(parse_scenario(scenario, "gpu-check.yaml"))}


@pytest.mark.parametrize("horovod", ["nccl", "cpu", "missing"])
def test_the_scenario_for_two_gpus_runs_every_strategy_on_every_installed_engine(horovod):
    engines, skipped = gpucheck.gpu_engines(fake_caps(horovod))
    scenario = gpucheck.scenario_for(2, engines)
    with_horovod = ["horovod"] if horovod == "nccl" else []
    assert engines == [*with_horovod, "torch", "mpi", "deepspeed"]  # in the registry's order
    assert len(skipped) == (horovod != "nccl") and all(s.startswith("horovod") for s in skipped)
    if horovod == "cpu":
        assert skipped[0] == (
            "horovod 0.28.1: built without NCCL (build and install the NCCL build: "
            "bash ci/build_horovod_nccl.sh .venv/bin/python --install)"
        )
    every = {
        ("data_parallel", "bce"): [*with_horovod, "torch", "mpi", "deepspeed"],
        ("conditional", "bce"): [*with_horovod, "torch", "mpi", "deepspeed"],
        ("label_partitioned", "bce"): [*with_horovod, "torch", "mpi"],
        ("label_partitioned", "wgan-gp"): [*with_horovod, "torch", "mpi"],
        ("cellular", "mustangs"): ["mpi"],
    }
    assert _planned(scenario) == {(s, loss, e, p) for (s, loss), es in every.items() for e in es for p in (1, 2)}
    assert scenario["train"]["budget_s"] == gpucheck.RUN_SECONDS and scenario["metrics"]["features"] == "classifier"


def test_asked_engines_are_the_only_ones_checked_and_the_others_are_said():
    engines, skipped = gpucheck.gpu_engines(fake_caps("nccl"), ["mpi", "torch"])
    assert engines == ["torch", "mpi"]  # in the registry's order
    assert skipped == ["horovod: not asked (engines mpi, torch)", "deepspeed: not asked (engines mpi, torch)"]


def test_an_unknown_engine_is_bad_input_in_one_line(tmp_path, capsys):
    assert gpucheck.gpu_check(tmp_path / "out", engines=["torch", "nccl"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpu-check: engines: nccl not an engine (choose from horovod, torch,") and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_without_nccl_torch_is_not_a_gpu_engine():
    engines, _ = gpucheck.gpu_engines(fake_caps(nccl=False))
    assert "torch" not in engines


@pytest.mark.parametrize("gpus", [1, 3, 8, 12, 16, 20])
def test_the_scenario_is_valid_for_any_gpu_count(gpus):
    planned = _planned(gpucheck.scenario_for(gpus, ["torch", "mpi"]))
    assert {p for *_, p in planned} == {1, gpus}
    label_partitioned = {p for s, _, _, p in planned if s == "label_partitioned"}
    assert label_partitioned == ({1} if gpus in (12, 16) else {1, gpus})  # 12 or 16 ranks cannot share 10 classes evenly


@pytest.mark.multiproc
def test_a_real_cpu_record_carries_what_the_check_reads(small_sweep):
    """The worker writes the fields the checks read; on a CPU each GPU check fails, saying what it found (a record of
    the shared small sweep, tests/conftest.py: data-parallel MPI at P = 1, scored with the classifier on 150 samples)."""
    records = small_sweep.records
    assert small_sweep.code == 0 and small_sweep.scenario["metrics"]["samples"] == 150
    lines = [c.line() for c in checks_of(records["data_parallel-bce-mpi-p1-r0"])]
    assert lines[0].startswith("PASS data_parallel-bce-mpi-p1-r0 status: ok, training window ")
    assert lines[1:] == [
        "FAIL data_parallel-bce-mpi-p1-r0 devices: 1 ranks on cpu",
        "FAIL data_parallel-bce-mpi-p1-r0 nvml: no NVML samples on ranks [0]: CPU run: no GPU to measure",
        "FAIL data_parallel-bce-mpi-p1-r0 timeline: steps timed with host_clock (rank 0)",
        "FAIL data_parallel-bce-mpi-p1-r0 scoring: quality scored on cpu (classifier:digits, n 150)",
    ]


@pytest.mark.parametrize("spoil", [False, True])
def test_the_whole_check_with_fakes_writes_its_report_and_exit_code(spoil, monkeypatch, tmp_path, capsys):
    import suite.measure.env

    monkeypatch.setattr(gpucheck, "no_gpu_reason", lambda: None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(suite.measure.env, "capabilities", lambda: fake_caps())

    def fake_run(path, results, timeout):  # what `suite run` leaves: one record per run
        for i, run in enumerate(expand(load_scenario(path))):
            record = {**run_identity(run), **copy.deepcopy(good_record(run.run_id, run.procs))}
            if run.engine == "horovod":
                record.update(horovod_fields(run.strategy, run.procs))
            if spoil and i == 1:
                _ranks(record)[-1]["device"] = "cuda:0"
            (results / run.run_id).mkdir(parents=True)
            write_record(results / run.run_id, record)
        return 1 if spoil else 0

    monkeypatch.setattr(gpucheck, "_run_scenario", fake_run)
    out = tmp_path / "gc"
    assert main(["gpu-check", "--out", str(out)]) == (1 if spoil else 0)
    report = (out / "gpu-check.md").read_text()
    data = json.loads((out / "gpu-check.json").read_text())
    runs = len(expand(load_scenario(out / "gpu-check.yaml")))
    horovod = {(r.strategy, r.procs) for r in expand(load_scenario(out / "gpu-check.yaml")) if r.engine == "horovod"}
    with_sets = sum(s == "label_partitioned" for s, _ in horovod) * 2  # two losses per (strategy, procs)
    assert runs == 30 and len(data["checks"]) == 2 + 5 * runs + 8 + with_sets and data["passed"] is not spoil
    assert "- GPUs: 2 visible: Fake GPU, Fake GPU" in report and "driver 999.99, CUDA 13.0 (torch 2.13.0), NCCL 2.27.3" in report
    assert "- PASS machine nccl: torch.distributed NCCL 2.27.3" in report
    assert "(horovod 0.28.1 NCCL (GPU), deepspeed" in report
    assert "- PASS label_partitioned-bce-horovod-p1-r0 horovod process sets: P = 1, 10 classes: one set of one rank" in report
    printed = capsys.readouterr().out
    if spoil:
        assert "**FAIL: 1 of 164 checks failed**" in report
        assert printed.startswith("FAIL data_parallel-bce-horovod-p2-r0 devices: 2 ranks on cuda:0, cuda:0\n")
    else:
        assert "**PASS: all 164 checks passed**" in report and printed.startswith("gpu-check PASS")


# --- Horovod on NCCL: the engine's own checks (HorovodEngine.gpu_checks, from the record alone) ---------------------


def horovod_fields(strategy: str, procs: int, classes: int = 10, ops: list[str] | None = None) -> dict:
    """What a Horovod run on GPUs records for the checks: its build's GPU operations, the operations its allreduces
    ran with, the process sets of each split (the world first, then a label-partitioned run's class groups)."""
    splits = [{"sizes": [procs], "process_sets": [0 if procs > 1 else None]}]
    if strategy == "label_partitioned":
        k = procs // classes if procs > classes else 1
        groups = classes if procs > classes else procs
        ids = list(range(1, groups + 1)) if k > 1 else [None] * groups
        splits.append({"sizes": [k] * groups, "process_sets": ids})
    largest = procs  # the ranks of the largest group that moved bytes: one model, or a class's group (1: ranks alone)
    if strategy == "label_partitioned":
        largest = procs // classes if procs > classes else 1
    return {
        "comm": {"largest_group": largest},
        "strategy": strategy,
        "engine": "horovod",
        "classes": list(range(classes)) if strategy == "label_partitioned" else None,
        "dataset": {"name": "digits", "classes": list(range(classes))},  # the process-set check reads the run's classes
        "engine_settings": {
            "gpu_operations": "NCCL",
            "allreduce_ops": (["NCCL"] if largest > 1 else []) if ops is None else ops,
            "sets_formed": splits,
        },
    }


def horovod_record(strategy: str, procs: int, **fields) -> dict:
    record = {**good_record(f"{strategy}-bce-horovod-p{procs}-r0", procs), **horovod_fields(strategy, procs, **fields)}
    return record


def _own(record: dict) -> list[str]:
    return [c.line() for c in checks_of(record)[5:]]


def test_horovod_on_nccl_passes_with_its_evidence():
    assert _own(horovod_record("data_parallel", 2)) == [
        "PASS data_parallel-bce-horovod-p2-r0 horovod nccl: Horovod built with NCCL GPU operations; allreduces over NCCL"
    ]
    assert _own(horovod_record("data_parallel", 1)) == [
        "PASS data_parallel-bce-horovod-p1-r0 horovod nccl: Horovod built with NCCL GPU operations; no allreduce ran: "
        "every group is one rank (P = 1), nothing to reduce"
    ]


def test_a_label_partitioned_run_on_horovod_checks_its_process_sets():
    one_gpu = _own(horovod_record("label_partitioned", 1))
    assert one_gpu[1] == (
        "PASS label_partitioned-bce-horovod-p1-r0 horovod process sets: P = 1, 10 classes: one set of one rank "
        "(it trains every class alone; Horovod forms no process set for it)"
    )
    assert _own(horovod_record("label_partitioned", 2))[1].endswith(
        "P = 2, 10 classes: 2 groups of 1 rank, each training alone (no process set needed)"
    )
    twenty = _own(horovod_record("label_partitioned", 20))
    assert twenty == [
        "PASS label_partitioned-bce-horovod-p20-r0 horovod nccl: Horovod built with NCCL GPU operations; allreduces over NCCL",
        "PASS label_partitioned-bce-horovod-p20-r0 horovod process sets: P = 20, 10 classes: 10 groups of 2 ranks on "
        "process sets [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]",
    ]
    assert len(_own(horovod_record("data_parallel", 2))) == 1  # one model: no class groups to check


def _spoil_sets(r: dict, **split) -> None:
    r["engine_settings"]["sets_formed"][-1].update(split)


HOROVOD_BAD = {
    "CPU-only build": (
        "data_parallel",
        2,
        lambda r: r["engine_settings"].update(gpu_operations="none", allreduce_ops=["Gloo"]),
        "horovod nccl",
        "Horovod's build has GPU operations none, not NCCL (build and install it: bash ci/build_horovod_nccl.sh "
        ".venv/bin/python --install)",
    ),
    "allreduces on host tensors": (
        "data_parallel",
        2,
        lambda r: r["engine_settings"].update(allreduce_ops=["MPI", "NCCL"]),
        "horovod nccl",
        "allreduces over MPI, NCCL (host tensors: expected NCCL only)",
    ),
    "no allreduce in a group of two": (
        "data_parallel",
        2,
        lambda r: r["engine_settings"].update(allreduce_ops=[]),
        "horovod nccl",
        "no allreduce ran in groups of 2 ranks",
    ),
    "a record without the settings": (
        "data_parallel",
        2,
        lambda r: r.update(engine_settings={"gpu_operations": "NCCL"}),
        "horovod nccl",
        "its allreduce operations are not in the record",
    ),
    "no class groups formed": (
        "label_partitioned",
        20,
        lambda r: r["engine_settings"].update(sets_formed=r["engine_settings"]["sets_formed"][:1]),
        "horovod process sets",
        "P = 20, 10 classes: expected 10 groups of 2 ranks, formed 1 group of 20 ranks",
    ),
    "two groups on one process set": (
        "label_partitioned",
        20,
        lambda r: _spoil_sets(r, process_sets=[1, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
        "horovod process sets",
        "(expected a distinct set per group)",
    ),
    "a group without its set": (
        "label_partitioned",
        20,
        lambda r: _spoil_sets(r, process_sets=[1, 2, 3, 4, 5, 6, 7, 8, 9, None]),
        "horovod process sets",
        "process sets [1, 2, 3, 4, 5, 6, 7, 8, 9, None] (expected a distinct set per group)",
    ),
}


@pytest.mark.parametrize("case", HOROVOD_BAD)
def test_each_horovod_fault_fails_its_check(case):
    strategy, procs, spoil, name, evidence = HOROVOD_BAD[case]
    record = horovod_record(strategy, procs)
    spoil(record)
    failed = [c for c in checks_of(record) if not c.ok]
    assert [c.name for c in failed] == [name]
    assert failed[0].line().startswith(f"FAIL {strategy}-bce-horovod-p{procs}-r0 {name}: ") and evidence in failed[0].evidence


def test_machine_lines_under_rocm_name_amd_smi_hip_and_rccl(monkeypatch):
    """On a ROCm torch `suite env` reports ``amd_smi`` and ``rccl_version``; the check's machine lines read those
    (before, a ROCm gpu-check ended in a KeyError on ``nvml``)."""
    import torch

    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    caps = fake_caps()
    caps.pop("nvml")
    caps["amd_smi"] = {"available": True, "driver": "6.12.12"}
    caps["torch"].pop("nccl_version")
    caps["torch"].update(hip_build="6.4.0", rccl_version="2.22.3")
    lines = "\n".join(gpucheck._machine_lines(caps, ["torch"], []))
    assert "driver 6.12.12, HIP 6.4.0 (torch 2.13.0), RCCL 2.22.3" in lines
