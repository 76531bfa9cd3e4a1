"""Logs in other tools' formats (suite.running.runlogs): TensorBoard events, written while training and read back
mid-run on one step axis (training images) and as the record's numbers, :::MLLOG lines that read back as the record's
numbers, the settings that ask for them, and timestamped `suite run` lines."""

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
from suite.config.scenario import RunPlacement, ScenarioError
from suite.records.results import new_record
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


def test_tensorboard_end_of_run_scalars_and_images_sit_at_the_record_training_images(tmp_path):
    record = new_record({**_record(), "train_images": 1920})
    run_dir = tmp_path / "run"
    _png(run_dir / "samples" / "real.png", 200)
    _png(run_dir / "samples" / "step_00000015.png", 100)
    _png(run_dir / "samples" / "step_00000011.png", 100)  # the step of no curve point: no images to sit at
    _png(run_dir / "samples.png", 50)  # the final grid, at the run's training images (no step_00000030.png)
    (tmp_path / "tb").mkdir()
    (tmp_path / "tb" / "events.out.tfevents.1.host.1.0").write_bytes(b"")  # training's own: written beside, not removed
    opened = window_opened(record)
    write_events(tmp_path / "tb", record, run_dir, opened)
    assert (tmp_path / "tb" / "events.out.tfevents.1.host.1.0").exists()
    events = _events(tmp_path / "tb")
    # one axis: the training images of the curve points and of the whole run, not generator steps
    assert _series(events, "quality/fid") == [(960, 210.5), (1920, 150.25)]
    assert _series(events, "quality/is_mean") == [(960, 3.5), (1920, 4.5)]
    assert _series(events, "throughput/images_per_s") == [(1920, 530.25)]
    assert _series(events, "time/step_mean_s") == [(1920, 0.375)]
    # the history and the step times between its points are training's own events now (none from the record)
    assert not [t for t in events.Tags()["scalars"] if t.startswith(("loss/", "time/seconds_per_step"))]
    # wall time: the training clock's start (the worker's start plus set-up) plus the clock
    assert [e.wall_time for e in events.Scalars("quality/fid")] == [epoch_seconds(STARTED) + 1.5 + c for c in (6.0, 12.0)]
    assert [(e.step, e.width, e.height) for e in events.Images("samples")] == [(960, 8, 6), (1920, 8, 6)]
    assert [e.step for e in events.Images("real")] == [0]
    assert "the record's quality curve" in events.SummaryMetadata("quality/fid").summary_description
    assert "training images seen by the whole system" in events.SummaryMetadata("time/step_mean_s").summary_description


# --- events written while training (suite.measure.tensorboard_writer) --------------------------------------------


def _live(tmp_path, strategy: str, train: dict, classes=None, limit=None, points: int = 2):
    """A strategy set up on one process as the worker sets it up, writing events into ``tmp_path/tb``, its warm-up
    done and its window open: (run, strategy, telemetry, writer)."""
    from test_training import SoloEngine

    from suite.gan.data import load_dataset
    from suite.measure.telemetry import CommStats, Telemetry
    from suite.measure.tensorboard_writer import EventWriter
    from suite.train.strategies.base import create

    dataset = {"name": "digits", "image_size": 20, "limit": limit, "classes": classes}
    scenario = {
        "name": "live",
        "dataset": dataset,
        "train": {"epochs": 50, "batch_size": 16, "warmup_steps": 1, **train},
        "metrics": {"enabled": False, "curve_points": points},
        "runs": [{"strategy": strategy, "engine": "mpi"}],
    }
    run = expand(parse_scenario(scenario))[0]
    engine = SoloEngine()
    telemetry = Telemetry(engine.device, CommStats())
    data = load_dataset("digits", 20, classes=classes, limit=limit)
    made = create(run, engine, data, telemetry, tmp_path / "scratch")
    writer = made.events = EventWriter(tmp_path / "tb", run.strategy, 0)
    writer.start(run.to_dict())
    made.setup()
    telemetry.start_warmup()
    made.warm_up()
    telemetry.open_window()
    return run, made, telemetry, writer


def test_tensorboard_events_are_read_back_mid_run_on_the_training_images_axis(tmp_path):
    _, made, telemetry, writer = _live(tmp_path, "data_parallel", {"steps": 6}, limit=48, points=2)
    trainer = made.trainer
    trainer.open_window()
    while not trainer.result.snapshots:  # to the first curve point, training not over
        assert not trainer.advance()
    assert trainer.result.steps == 3 < trainer.max_steps
    events = _events(tmp_path / "tb")  # the writer is open: what it wrote was flushed at the curve point
    step_images = 16  # one generator step of the one model: a global batch
    losses = _series(events, "loss/d_loss")
    assert losses and [s for s, _ in losses] == [h["step"] * step_images for h in trainer.result.history]
    assert [v for _, v in losses] == [pytest.approx(h["d_loss"]) for h in trainer.result.history]
    # at the curve point: the training images the system has seen (the telemetry's count, warm-up included)
    at_curve = _series(events, "time/step_mean_s/rank0")[-1]
    assert at_curve[0] == 3 * step_images == telemetry.train_images
    assert at_curve[1] == pytest.approx(telemetry.step_times.mean)  # the record's per-rank definition
    # an epoch ends every 3 steps (48 images, batches of 16): passes over the data so far
    assert (3 * step_images, 1.0) in _series(events, "train/epoch")
    assert "training images seen by the whole system" in events.SummaryMetadata("loss/d_loss").summary_description
    assert "training images" in events.Tensors("axis/text_summary")[0].tensor_proto.string_val[0].decode()
    while not trainer.advance():
        pass
    telemetry.training_done()
    telemetry.close_window()
    events = _events(tmp_path / "tb")
    # the last point's step times are the rank's record ones: the end of run's pooled mean equals them on one rank
    from suite.measure.telemetry import spread

    last = _series(events, "time/step_mean_s/rank0")[-1]
    assert last == (6 * step_images, pytest.approx(telemetry.as_dict()["step_times"]["mean"]))
    assert last[1] == pytest.approx(spread([telemetry.step_times.as_dict()])["mean"])
    assert "time/seconds_per_step" not in events.Tags()["scalars"]  # the clock between points is not a step time
    writer.close()


def test_tensorboard_class_gans_losses_and_quality_share_the_system_images_axis(tmp_path):
    run, made, telemetry, writer = _live(tmp_path, "label_partitioned", {"steps": 3}, classes=[0, 1, 2], points=2)
    made.train()
    telemetry.training_done()
    telemetry.close_window()
    outcome = made.finalize()
    writer.close()
    step_images = 3 * 16  # a step of the system: one generator step of each of the 3 class GANs
    events = _events(tmp_path / "tb")
    for label in (0, 1, 2):
        points = outcome.fields["history"][str(label)]
        assert _series(events, f"loss/g_loss/class{label}") == [
            (p["step"] * step_images, pytest.approx(p["g_loss"])) for p in points
        ]
    assert max(s for s, _ in _series(events, "loss/d_loss/class2")) == 3 * step_images == telemetry.train_images
    # the end of the run: its curve (as scored from these snapshots) on the same axis
    curve = [{"step": step, "images": images, "clock_s": clock, "fid": 100.0 - step} for clock, step, images, _ in outcome.curve]
    record = new_record({"strategy": run.strategy, "train_images": telemetry.train_images, "curve": curve, "train_s": 1.0})
    write_events(tmp_path / "tb", record, tmp_path / "run", None)
    fid = _series(_events(tmp_path / "tb"), "quality/fid")
    assert [s for s, _ in fid] == [2 * step_images, 3 * step_images]  # not the summed class steps (6, 9)
    assert _steps_twice(_events(tmp_path / "tb")) == {}


def _steps_twice(events) -> dict[str, list[int]]:
    """The tags of ``events`` with two points at one step, or a step going back, and their steps."""
    found = {}
    for tag in events.Tags()["scalars"]:
        steps = [e.step for e in events.Scalars(tag)]
        if any(later <= earlier for earlier, later in zip(steps, steps[1:])):
            found[tag] = steps
    return found


@pytest.mark.parametrize("schedule", ["interleaved", "sequential"])
def test_tensorboard_has_one_point_a_step_in_every_tag_when_a_rank_trains_several_class_gans(tmp_path, schedule):
    _, made, telemetry, writer = _live(
        tmp_path, "label_partitioned", {"steps": 3, "class_schedule": schedule}, classes=[0, 1, 2], points=2
    )
    made.train()
    telemetry.training_done()
    telemetry.close_window()
    made.finalize()
    writer.close()
    events = _events(tmp_path / "tb")
    assert _steps_twice(events) == {}
    tags = events.Tags()["scalars"]
    # each class GAN under its own tags; the rank's step times once, ending at the record's per-rank mean
    assert {f"loss/d_loss/class{c}" for c in (0, 1, 2)} <= set(tags) and "loss/d_loss" not in tags
    last = _series(events, "time/step_mean_s/rank0")[-1]
    assert last == (3 * 3 * 16, pytest.approx(telemetry.step_times.mean))


def test_tensorboard_events_survive_a_full_disk_as_one_warning(tmp_path, caplog):
    from suite.measure.tensorboard_writer import EventWriter

    (tmp_path / "tb").write_text("a file where the folder should be")
    writer = EventWriter(tmp_path / "tb", "data_parallel", 0)
    writer.scalars(16, {"loss/d_loss": 0.5})
    writer.scalars(32, {"loss/d_loss": 0.5})
    writer.flush()
    assert writer.failed and len([r for r in caplog.records if "TensorBoard events of rank 0 stop" in r.message]) == 1


def _mllog(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()
    assert all(line.startswith(":::MLLOG {") for line in lines)
    return [json.loads(line.removeprefix(":::MLLOG ")) for line in lines]


def test_logs_settings_come_from_the_scenario_and_only_the_command_line_names_a_folder(tmp_path):
    data = tiny_scenario("logs", [{"strategy": "data_parallel", "procs": [1]}], logs={"tensorboard": True, "mllog": True})
    (run,) = expand(parse_scenario(data))
    assert (run.logs.tensorboard, run.logs.mllog, run.tensorboard_dir) == (True, True, None)
    assert tensorboard_folder(run, tmp_path / "r") == tmp_path / "r" / "tensorboard"
    placed = run.placed(RunPlacement(tensorboard_dir=str(tmp_path / "tb")))  # what suite run --tensorboard DIR does
    assert tensorboard_folder(placed, tmp_path / "r") == tmp_path / "tb" / placed.run_id
    assert "logs" not in run.settings() and "tensorboard_dir" not in run.settings()  # they change no training
    with pytest.raises(ScenarioError, match=r"^<scenario>: logs.tensorboard_dir: unknown field"):
        parse_scenario({**data, "logs": {"tensorboard_dir": "/elsewhere"}})
    (plain,) = expand(parse_scenario(tiny_scenario("logs", [{"strategy": "data_parallel", "procs": [1]}])))
    assert tensorboard_folder(plain, tmp_path) is None


def test_a_missing_package_is_one_line_naming_it(monkeypatch):
    from suite.running import runlogs
    from suite.running.commands import LaunchError

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
    # one axis, the training images: the losses training wrote at its progress points, the record's curve and totals
    batch = record["global_batch"]
    assert _series(events, "loss/d_loss") == [
        (h["step"] * batch, pytest.approx(h["d_loss"], rel=1e-6)) for h in record["history"]
    ]
    # 64 samples are too few for FID under the classifier's 128 features: the curve has KID, and so have the logs
    assert [p["fid"] for p in record["curve"]] == [None, None] and "quality/fid" not in events.Tags()["scalars"]
    assert _series(events, "quality/kid_mean") == [(p["images"], pytest.approx(p["kid_mean"], rel=1e-6)) for p in record["curve"]]
    last = record["train_images"]
    assert last == record["curve"][-1]["images"] == record["history"][-1]["step"] * batch
    assert _series(events, "throughput/images_per_s") == [(last, pytest.approx(record["images_per_s"], rel=1e-6))]
    # step times as the record has them: rank 0's own mean as training ends, the pooled mean at the end of the run
    per_rank = record["telemetry"]["per_rank"][0]["step_times"]["mean"]
    assert _series(events, "time/step_mean_s/rank0")[-1] == (last, pytest.approx(per_rank, rel=1e-6))
    assert _series(events, "time/step_mean_s") == [(last, pytest.approx(record["telemetry"]["step_mean"], rel=1e-6))]
    # the grid training saved at each curve point (samples/step_*.png), the last one the final model's
    assert [e.step for e in events.Images("samples")] == [p["images"] for p in record["curve"]]
    assert [e.step for e in events.Images("real")] == [0]
    assert len(list((tb / run_id).glob("events.out.tfevents.*"))) == 2  # training's own, and the end of the run's
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
