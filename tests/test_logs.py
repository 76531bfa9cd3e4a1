"""Logs in other tools' formats (suite.running.runlogs): TensorBoard events and :::MLLOG lines that read back as the
record's numbers, the settings that ask for them, and timestamped `suite run` lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.config.scenario import ScenarioError
from suite.running.mlperf_lines import RULES
from suite.running.runlogs import check_available, epoch_seconds, tensorboard_folder, window_opened
from suite.running.tensorboard_events import write_events

ROOT = Path(__file__).resolve().parent.parent
STARTED = "2026-01-02T03:04:05Z"


def _record() -> dict:
    """A finished run's record, with the fields the logs read (numbers chosen so that no two coincide)."""
    return {
        "run_id": "dp-p2-r0",
        "strategy": "data_parallel",
        "engine": "mpi",
        "loss": "bce",
        "procs": 2,
        "seed": 7,
        "global_batch": 64,
        "dataset": {"images": 1797},
        "status": "ok",
        "started_utc": STARTED,
        "setup_s": 1.5,
        "warmup_s": 0.25,
        "train_s": 12.0,
        "images_per_s": 530.25,
        "images_per_s_per_rank": 265.125,
        "generator_steps": 30,
        "telemetry": {
            "step_mean": 0.375,
            "step_p50": 0.36,
            "step_p95": 0.51,
            "comm_share": 0.2,
            "per_rank": [{"step_times": {"mean": 0.37}}, {"step_times": {"mean": 0.38}}],
        },
        "history": [
            {"step": 10, "epoch": 0, "clock_s": 4.0, "d_loss": 0.69, "g_loss": 0.71},
            {"step": 20, "epoch": 1, "clock_s": 8.5, "d_loss": 0.61, "g_loss": 0.93},
            {"step": 30, "epoch": 2, "clock_s": 12.0, "d_loss": 0.55, "g_loss": 1.07},
        ],
        "curve": [
            {"clock_s": 6.0, "step": 15, "images": 960, "fid": 210.5, "kid_mean": 120.0, "is_mean": 3.5, "features": "f", "n": 5},
            {
                "clock_s": 12.0,
                "step": 30,
                "images": 1920,
                "fid": 150.25,
                "kid_mean": 90.0,
                "is_mean": 4.5,
                "features": "f",
                "n": 5,
            },
        ],
        "settings": {"run_id": "dp-p2-r0"},
    }


def _png(path: Path, shade: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (8, 6), shade).save(path)


def _events(folder: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    return events


def _series(events, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_tensorboard_scalars_and_images_read_back_as_the_record(tmp_path):
    record = _record()
    run_dir = tmp_path / "run"
    _png(run_dir / "samples" / "real.png", 200)
    _png(run_dir / "samples" / "step_00000015.png", 100)
    _png(run_dir / "samples.png", 50)  # the final grid, at step 30 (no step_00000030.png)
    opened = window_opened(record)
    write_events(tmp_path / "tb", record, run_dir, opened)
    events = _events(tmp_path / "tb")
    assert _series(events, "loss/d_loss") == [(10, pytest.approx(0.69)), (20, pytest.approx(0.61)), (30, pytest.approx(0.55))]
    assert _series(events, "loss/g_loss") == [(10, pytest.approx(0.71)), (20, pytest.approx(0.93)), (30, pytest.approx(1.07))]
    assert _series(events, "time/seconds_per_step") == [(20, pytest.approx(0.45)), (30, pytest.approx(0.35))]
    assert _series(events, "quality/fid") == [(15, 210.5), (30, 150.25)]
    assert _series(events, "quality/is_mean") == [(15, 3.5), (30, 4.5)]
    assert _series(events, "throughput/images_per_s") == [(30, 530.25)]
    assert _series(events, "time/step_mean_s") == [(30, 0.375)]
    assert _series(events, "time/step_mean_s/rank1") == [(30, pytest.approx(0.38))]
    assert "epoch" not in " ".join(events.Tags()["scalars"])  # when a point is, not what it measured
    # wall time: the window's opening (start + set-up + warm-up) plus the window's clock
    assert [e.wall_time for e in events.Scalars("loss/d_loss")] == [epoch_seconds(STARTED) + 1.75 + c for c in (4.0, 8.5, 12.0)]
    assert [(e.step, e.width, e.height) for e in events.Images("samples")] == [(15, 8, 6), (30, 8, 6)]
    assert [e.step for e in events.Images("real")] == [0]
    # a second attempt of the run replaces the first one's events
    record["history"] = record["history"][:1]
    write_events(tmp_path / "tb", record, run_dir, opened)
    assert _series(_events(tmp_path / "tb"), "loss/d_loss") == [(10, pytest.approx(0.69))]


def test_tensorboard_history_per_class_gets_one_tag_per_class(tmp_path):
    record = _record()
    record["history"] = {
        "3": [{"step": 5, "clock_s": 1.0, "d_loss": 0.5, "g_loss": 0.25}],
        "7": [{"step": 5, "clock_s": 1.0, "d_loss": 0.125, "g_loss": 2.0}],
    }
    write_events(tmp_path / "tb", record, tmp_path, None)
    events = _events(tmp_path / "tb")
    assert _series(events, "loss/d_loss/3") == [(5, 0.5)] and _series(events, "loss/g_loss/7") == [(5, 2.0)]


def _mllog(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()
    assert all(line.startswith(":::MLLOG {") for line in lines)
    return [json.loads(line.removeprefix(":::MLLOG ")) for line in lines]


def test_logs_settings_come_from_the_scenario_and_only_the_command_line_names_a_folder(tmp_path):
    data = tiny_scenario("logs", [{"strategy": "data_parallel", "procs": [1]}], logs={"tensorboard": True, "mllog": True})
    (run,) = expand(parse_scenario(data))
    assert (run.logs.tensorboard, run.logs.mllog, run.tensorboard_dir) == (True, True, None)
    assert tensorboard_folder(run, tmp_path / "r") == tmp_path / "r" / "tensorboard"
    run.tensorboard_dir = str(tmp_path / "tb")
    assert tensorboard_folder(run, tmp_path / "r") == tmp_path / "tb" / run.run_id
    assert "logs" not in run.settings() and "tensorboard_dir" not in run.settings()  # they change no training
    with pytest.raises(ScenarioError, match=r"^<scenario>: logs.tensorboard_dir: unknown field"):
        parse_scenario({**data, "logs": {"tensorboard_dir": "/elsewhere"}})
    (plain,) = expand(parse_scenario(tiny_scenario("logs", [{"strategy": "data_parallel", "procs": [1]}])))
    assert tensorboard_folder(plain, tmp_path) is None


def test_a_missing_package_is_one_line_naming_it(monkeypatch):
    from suite.running import runlogs
    from suite.running.launch import LaunchError

    (run,) = expand(parse_scenario(tiny_scenario("logs", [{"strategy": "data_parallel", "procs": [1]}], logs={"mllog": True})))
    monkeypatch.setattr(runlogs.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(LaunchError, match=r"^--mllog / logs.mllog needs the mlperf-logging package: pip install mlperf-logging"):
        check_available([run])


@pytest.mark.multiproc
def test_a_short_run_leaves_events_and_mllog_lines_equal_to_its_record_and_timestamped_lines(tmp_path):
    scenario = tiny_scenario(
        "logs",
        [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}],
        train={"steps": 4},
        metrics={"enabled": True, "features": "classifier", "samples": 64, "curve_points": 2},
    )
    path = tmp_path / "logs.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out, tb = tmp_path / "results", tmp_path / "tb"
    done = subprocess.run(
        [sys.executable, "-m", "suite", "run", str(path), "--out", str(out), "--tensorboard", str(tb), "--mllog", "-q"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    run_id = "data_parallel-bce-mpi-p1-r0"
    record = json.loads((out / run_id / "result.json").read_text())
    assert record["settings"]["tensorboard_dir"] == str(tb.resolve()) and record["settings"]["logs"]["mllog"] is True
    events = _events(tb / run_id)
    assert _series(events, "loss/d_loss") == [(h["step"], pytest.approx(h["d_loss"], rel=1e-6)) for h in record["history"]]
    # 64 samples are too few for FID under the classifier's 128 features: the curve has KID, and so have the logs
    assert [p["fid"] for p in record["curve"]] == [None, None] and "quality/fid" not in events.Tags()["scalars"]
    assert _series(events, "quality/kid_mean") == [(p["step"], pytest.approx(p["kid_mean"], rel=1e-6)) for p in record["curve"]]
    assert _series(events, "throughput/images_per_s") == [
        (record["curve"][-1]["step"], pytest.approx(record["images_per_s"], rel=1e-6))
    ]
    # the grid training saved at each curve point (samples/step_*.png), the last one the final model's
    assert [e.step for e in events.Images("samples")] == [p["step"] for p in record["curve"]]
    assert [e.step for e in events.Images("real")] == [0]
    mllog = _mllog(out / run_id / "mllog.txt")
    accuracy = [e for e in mllog if e["key"] == "eval_accuracy"]
    assert [(e["value"], e["metadata"]["metric"]) for e in accuracy if e["metadata"]["metric"] != "IS"] == [
        (p["kid_mean"], "KID") for p in record["curve"]
    ]
    # the log passes the MLPerf compliance checker under the suite's rules, as docs/logs.md runs it
    checked = subprocess.run(
        [sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training", "--ruleset", "6.1.0"]
        + ["--config", str(RULES), "--log_output", str(tmp_path / "checker.log"), str(out / run_id / "mllog.txt")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0 and checked.stderr.splitlines()[-1] == "INFO - SUCCESS", checked.stderr
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    lines = [line for line in done.stderr.splitlines() if "[1/1]" in line]
    assert len(lines) == 2 and re.fullmatch(rf"{stamp} \[1/1\] {run_id}: started", lines[0])
    assert re.fullmatch(rf"{stamp} \[1/1\] {run_id}: ok in [0-9.]+s", lines[1])
    worker_lines = [line for line in (out / run_id / "log.txt").read_text().splitlines() if "suite.running.worker: " in line]
    assert worker_lines and all(re.match(rf"{stamp},\d+ rank 0 suite.running.worker: ", line) for line in worker_lines)
