"""A run's record has one writer and is read at most twice: rank 0 writes it once, whole, with the launch's part that
``suite run`` handed it before the launch (``suite.running.launch_part``); the launcher reads it once as it appears and
writes nothing more for a run that ended as its worker recorded it; the report reads it once. Counted in every process
of a real ``suite run`` by ``tests/record_io/sitecustomize.py``."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from conftest import REPO, tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.records.measured import Timing
from suite.records.parts import Ending, LaunchPart, assemble, completed, identity
from suite.records.results import RANKS_DIR, RECORD_FILE, read_record, write_record
from suite.running import run_end
from suite.running.launch_part import HANDED_FILE, LaunchStart, hand_launch, handed_launch
from suite.running.processes import OWNER_VARIABLE


def _run():
    (run,) = expand(parse_scenario(tiny_scenario("io", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}])))
    return run


def test_rank_zero_takes_the_launch_part_handed_to_it_and_the_wall_times_add_up(tmp_path, monkeypatch):
    start = LaunchStart("mpirun -np 2 python -m suite.running.worker r", "2030-01-01T00:00:00Z", time.time() - 10.0, "me")
    hand_launch(tmp_path, start)
    monkeypatch.setenv(OWNER_VARIABLE, "me")
    handed = handed_launch(tmp_path)
    assert handed is not None and handed.start == start
    first = handed.part(None)
    second = handed.part({"index": 3})
    assert (first.command, first.exit_code, second.checkpoint) == (start.command, 0, {"index": 3})
    assert 10.0 <= first.wall_s < 20.0 and 0.0 <= second.wall_s < 1.0  # the first from the launch's start
    assert first.wall_s + second.wall_s == pytest.approx(handed.since - start.started_epoch)  # they add up
    monkeypatch.setenv(OWNER_VARIABLE, "another suite run")
    assert handed_launch(tmp_path) is None  # a file another suite run left: not this launch's


def test_a_handed_launch_that_is_not_one_is_left_out_naming_the_file(tmp_path, caplog):
    (tmp_path / RANKS_DIR).mkdir()
    (tmp_path / RANKS_DIR / HANDED_FILE).write_text(json.dumps({"command": "x"}))
    assert handed_launch(tmp_path) is None
    assert str(tmp_path / RANKS_DIR / HANDED_FILE) in caplog.text and "started_epoch" in caplog.text
    assert handed_launch(tmp_path / "none") is None  # a hand launch: no part, no warning


def test_the_launcher_writes_nothing_for_a_run_rank_zero_recorded_whole(tmp_path, monkeypatch):
    run = _run()
    whole = assemble("worker", identity(run), Ending("ok"), Timing(train_s=4.0, wall_s=5.0))
    whole = completed(whole, LaunchPart("mpirun python", 0, 5.0, None))
    write_record(tmp_path, whole)
    writes = []
    monkeypatch.setattr(run_end, "write_record", lambda run_dir, record: writes.append(record))
    end = run_end.RunEnd(["mpirun", "python"], 0, 9.0)
    assert run_end.end_record(whole, run, tmp_path, end) == whole and writes == []  # kept as rank 0 wrote it
    without = assemble("worker", identity(run), Ending("ok"), Timing(train_s=4.0))  # a worker not handed the part
    assert run_end.end_record(without, run, tmp_path, end).wall_s == 9.0 and len(writes) == 1
    failed = run_end.end_record(whole, run, tmp_path, run_end.RunEnd(["mpirun", "python"], 1, 9.0))
    assert failed.status == "failed" and len(writes) == 2  # a rank exited 1 after the record: rewritten as failed


def _counted(lines: list[dict], run_id: str, process: str | None = None) -> collections.Counter:
    return collections.Counter(
        line["fn"] for line in lines if line["run"] == run_id and process in (None, line["process"]) and line.get("found", True)
    )


@pytest.mark.multiproc
def test_a_run_of_a_shared_launch_is_written_once_and_read_at_most_twice(tmp_path):
    scenario = tiny_scenario(
        "io", [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}], train={"seeds": [0, 1], "steps": 2, "threads": 1}
    )
    path, out, log = tmp_path / "io.yaml", tmp_path / "results", tmp_path / "io.jsonl"
    path.write_text(yaml.safe_dump(scenario))
    paths = [str(REPO / "tests" / "record_io"), str(REPO), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "RECORD_IO_LOG": str(log)}
    for command in (["run", str(path), "--out", str(out), "-q"], ["report", str(out), "--out", str(tmp_path / "report")]):
        done = subprocess.run([sys.executable, "-m", "suite", *command], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    run_ids = sorted(p.name for p in out.iterdir() if (p / RECORD_FILE).is_file())
    assert len(run_ids) == 2
    for run_id in run_ids:
        every, rank = _counted(lines, run_id), _counted(lines, run_id, "rank")
        assert every["write_record"] == rank["write_record"] == 1, (run_id, every)  # one writer, once
        assert every["read_record"] <= 2 and _counted(lines, run_id, "report")["read_record"] == 1, (run_id, every)
        assert every["assemble"] == 1 and every["completed"] == 0, (run_id, every)  # made once, never remade
        record = read_record(out / run_id)
        assert record.status == "ok" and "--next-run" in record.command and record.exit_code == 0 and record.wall_s > 0
        assert not (out / run_id / RANKS_DIR).exists()  # the launch's part handed in ranks/ went with it
