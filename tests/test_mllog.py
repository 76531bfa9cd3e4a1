"""MLPerf :::MLLOG lines of a run (suite.running.mlperf_lines): the record's events and values, the disclosures MLPerf's
rules ask for, and the mlperf-logging compliance checker's verdict under the suite's rules (suite/running/mlperf_rules.yaml).
A real run's log goes through the checker in tests/test_logs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_logs import STARTED
from test_logs import _record as logs_record

from suite.records.codec import parse_record
from suite.records.record import SCHEMA_VERSION, Record
from suite.running.mlperf_lines import RULES, comm_precision, linear_precision, micro_batch, platform, write_mllog
from suite.running.runlogs import epoch_seconds


def typed(data: dict) -> Record:
    """The record with ``data``, read as every record is."""
    return parse_record({"schema": SCHEMA_VERSION, **data})


def _record() -> dict:
    """tests/test_logs.py's finished run, with the fields the MLPerf lines read besides: the machine and device, the
    precision settings, the work and the scenario."""
    return {
        **logs_record(),
        "scenario": "logs",
        "architecture": "dcgan",
        "dataset": {"name": "digits", "images": 1797},
        "device": "cpu",
        "threads_per_rank": 1,
        "machine": {"cpu_model": "Test CPU", "gpu": None, "host": "h"},
        "engine_settings": {"bf16": False},
        "train_images": 1920,
    }


def _mllog(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()
    assert all(line.startswith(":::MLLOG {") for line in lines)
    return [json.loads(line.removeprefix(":::MLLOG ")) for line in lines]


def test_mllog_lines_carry_the_record_events_and_values(tmp_path):
    record = _record()
    write_mllog(tmp_path / "mllog.txt", typed(record), epoch_seconds(STARTED))
    events = _mllog(tmp_path / "mllog.txt")
    point = ["block_start", "block_stop", "eval_start", "eval_accuracy", "eval_accuracy", "eval_accuracy", "eval_stop"]
    assert [e["key"] for e in events] == [
        "cache_clear", "init_start", "submission_org", "submission_division", "submission_benchmark",
        "submission_platform", "config_filename", "seed", "global_batch_size", "micro_batch_size",
        "gradient_accumulation_steps", "train_samples", "eval_samples", "lowest_numerical_precision_in_linear",
        "lowest_numerical_precision_in_comm", "tensor_parallelism", "pipeline_parallelism", "context_parallelism",
        "expert_parallelism", "init_stop", "run_start", *point, *point, "run_stop",
    ]  # fmt: skip
    by_key = {e["key"]: e for e in events}
    values = {key: by_key[key]["value"] for key in by_key}
    assert (values["seed"], values["global_batch_size"], values["micro_batch_size"]) == (7, 64, 32)  # 64 over 2 ranks
    assert (values["train_samples"], values["eval_samples"], values["config_filename"]) == (1797, 5, "run.json")
    assert (values["submission_org"], values["submission_division"], values["submission_benchmark"]) == (
        "gan-scaling-suite",
        "open",
        "dcgan_digits",
    )
    assert "not an MLPerf submission" in by_key["submission_org"]["metadata"]["note"]
    assert values["submission_platform"] == "2x Test CPU (1 thread per rank)" and values["cache_clear"] is False
    assert values["lowest_numerical_precision_in_linear"] == values["lowest_numerical_precision_in_comm"] == "fp32"
    accuracy = [e for e in events if e["key"] == "eval_accuracy"]
    assert [(e["metadata"]["metric"], e["value"], e["metadata"]["lower_is_better"], e["metadata"]["samples_count"]) for e in accuracy] == [
        ("FID", 210.5, True, 960), ("KID", 120.0, True, 960), ("IS", 3.5, False, 960),
        ("FID", 150.25, True, 1920), ("KID", 90.0, True, 1920), ("IS", 4.5, False, 1920),
    ]  # fmt: skip
    blocks = [e["metadata"] for e in events if e["key"] == "block_stop"]
    assert [(b["first_step"], b["step_count"], b["samples_count"]) for b in blocks] == [(0, 15, 960), (15, 15, 1920)]
    assert [e["metadata"]["samples_count"] for e in events if e["key"] == "block_start"] == [0, 960]
    # the training clock starts after set-up, with the warm-up (which trains): run_start, and the points on its clock
    start = int(epoch_seconds(STARTED) * 1000)
    assert by_key["init_start"]["time_ms"] == start and by_key["run_start"]["time_ms"] == start + 1500
    assert [e["time_ms"] for e in accuracy[::3]] == [start + 1500 + 6000, start + 1500 + 12000]
    assert by_key["run_stop"]["time_ms"] == start + 1500 + 12000
    assert by_key["run_stop"]["metadata"]["status"] == "success"
    assert {e["event_type"] for e in events if e["key"].endswith("_start")} == {"INTERVAL_START"}


def _compliance(path: Path, rules: Path = RULES) -> tuple[bool, str]:
    """The mlperf-logging compliance checker's verdict on ``path`` under ``rules`` (in-process), and its messages."""
    from mlperf_logging.compliance_checker import mlp_compliance

    checker = mlp_compliance.make_checker("training", "6.1.0", False, False)
    try:
        passed = checker.check_file(str(path), str(rules))
    finally:
        mlp_compliance.enqueued_configs.clear()  # the checker's queue of rule files is module-wide
    return passed, "\n".join([*checker.overwritable.values(), *checker.not_overwritable])


def test_mllog_lines_pass_the_compliance_checker_and_a_wrong_direction_does_not(tmp_path):
    log = tmp_path / "mllog.txt"
    write_mllog(log, typed(_record()), epoch_seconds(STARTED))
    assert _compliance(log) == (True, "")
    # a quality score whose direction is missing or wrong is refused
    lines = log.read_text().splitlines()
    flipped = [line.replace('"lower_is_better": true', '"lower_is_better": false') if '"FID"' in line else line for line in lines]
    log.write_text("\n".join(flipped) + "\n")
    passed, messages = _compliance(log)
    assert not passed and "CHECK for 'eval_accuracy' failed" in messages
    # MLPerf's own rules know no GAN benchmark: the standard ruleset looks for the benchmark's rule file in vain
    write_mllog(log, typed(_record()), epoch_seconds(STARTED))
    from mlperf_logging import compliance_checker

    standard = Path(compliance_checker.__file__).parent / "training_6.1.0" / "common.yaml"
    with pytest.raises(FileNotFoundError, match=r"training_6\.1\.0/open_dcgan_digits\.yaml"):
        _compliance(log, standard)


def test_mllog_rules_are_the_checkers_common_rules_but_for_the_benchmark_ones():
    """The suite's rules keep every rule of the installed checker's training 6.1.0 common.yaml, except those
    docs/logs.md lists as differing (the benchmark's)."""
    from mlperf_logging import compliance_checker

    def keys(path: Path) -> dict[str, dict]:
        return {r["KEY"]["NAME"]: r["KEY"] for r in yaml.load(path.read_text(), Loader=yaml.BaseLoader) if "KEY" in r}

    common = keys(Path(compliance_checker.__file__).parent / "training_6.1.0" / "common.yaml")
    ours = keys(RULES)
    assert set(ours) - set(common) == {"submission_benchmark", "gradient_accumulation_steps", "seed", "global_batch_size"}
    differing = {"submission_division", "eval_accuracy", "lowest_numerical_precision_in_attn"}
    assert {name for name in common if ours.get(name) != common[name]} == differing
    assert ours["eval_accuracy"]["CHECK"][0] == common["eval_accuracy"]["CHECK"][0]
    assert "enqueue_config" not in RULES.read_text().split("- BEGIN:")[1]  # it loads no other rules


def test_mllog_disclosures_follow_the_strategy_the_device_and_the_precision():
    record = _record()
    assert micro_batch(typed({**record, "strategy": "conditional", "procs": 4})) == 16
    groups = [{"ranks": [0, 1], "classes": [0]}, {"ranks": [2, 3], "classes": [1]}]
    assert micro_batch(typed({**record, "strategy": "label_partitioned", "procs": 4, "groups": groups})) == 32
    assert (
        micro_batch(typed({**record, "strategy": "label_partitioned", "procs": 1, "groups": [{"ranks": [0], "classes": [0, 1]}]}))
        == 64
    )
    assert micro_batch(typed({**record, "strategy": "cellular", "procs": 2})) == 64  # each cell trains on whole batches
    gpu = {**record, "device": "NVIDIA H100 80GB HBM3", "machine": {"gpu": "NVIDIA H100 80GB HBM3"}}
    assert platform(typed(gpu)) == "2x NVIDIA H100 80GB HBM3" and linear_precision(typed(gpu))[0] == "tf32"
    assert linear_precision(typed({**gpu, "engine_settings": {"bf16": True}}))[0] == "bfloat16"
    assert (
        comm_precision(
            typed(
                {
                    **record,
                    "engine": "deepspeed",
                    "engine_settings": {"zero_stage": 0, "config": {"communication_data_type": "bf16"}},
                }
            )
        )
        == "bfloat16"
    )
    assert comm_precision(typed({**record, "engine": "deepspeed", "engine_settings": {"config": None}})) == "fp32"


def test_mllog_of_a_diverged_run_without_a_curve_is_one_aborted_block_and_fails_the_checker(tmp_path):
    record = {**_record(), "status": "diverged", "reason": "diverged at step 12 on rank 0: discriminator loss inf", "curve": None}
    record["generator_steps"], record["train_images"] = 12, 768
    write_mllog(tmp_path / "mllog.txt", typed(record), epoch_seconds(STARTED))
    events = _mllog(tmp_path / "mllog.txt")
    assert [e["key"] for e in events][-3:] == ["block_start", "block_stop", "run_stop"]
    assert [
        (e["metadata"]["first_step"], e["metadata"]["step_count"], e["metadata"]["samples_count"])
        for e in events
        if e["key"] == "block_stop"
    ] == [(0, 12, 768)]
    assert events[-1]["metadata"]["status"] == "aborted" and events[-1]["metadata"]["reason"].startswith("diverged at step 12")
    assert "eval_accuracy" not in [e["key"] for e in events] and {e["value"] for e in events if e["key"] == "eval_samples"} == {0}
    # no quality was reached: not a result the benchmark's rules accept
    passed, messages = _compliance(tmp_path / "mllog.txt")
    assert not passed and "Required AT_LEAST_ONE occurrence of 'eval_accuracy'" in messages
