"""Progress a user can watch and output a machine can read (issue 63, item 4): the training loop's progress lines carry
the step and images/s; `suite run` shows the last of them on its bar or, without a terminal, as a line every 30 s;
`suite run --json` and `suite report --json` print one JSON document on stdout."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from conftest import REPO, tiny_scenario
from suite.cli import main
from suite.records.results import LOG_FILE, new_record, write_record
from suite.running import sweep


def last_step(run_dir: Path) -> str | None:
    """The last ``step N/M, X images/s`` in the log of ``run_dir``, as the launch's ticker reads it."""
    follower = sweep.LogFollower(run_dir, run_dir.name)
    follower.read()
    return follower.step


def test_the_last_progress_line_is_found_in_the_runs_log(tmp_path):
    (tmp_path / LOG_FILE).write_text(
        "$ mpirun ...\n"
        "12:00:01 rank0 INFO: data_parallel: step 40/400, 812 images/s, 3s in the training window, ETA 30s\n"
        "12:00:04 rank0 INFO: data_parallel: step 80/400, 790 images/s, 6s in the training window, ETA 27s\n"
    )
    assert last_step(tmp_path) == "step 80/400, 790 images/s"
    assert last_step(tmp_path / "absent") is None


def test_without_a_terminal_a_line_every_interval_when_the_run_moved(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(sweep, "PROGRESS_LINE_S", 10.0)
    log = tmp_path / LOG_FILE
    log.write_text("x INFO: gan: step 5, 100 images/s, 1s in the training window, 9s left\n")
    tick = sweep.progress_ticker(None, "run-a", tmp_path)
    with caplog.at_level(logging.INFO, logger=sweep.log.name):
        tick(5.0)  # before the interval: nothing
        tick(11.0)
        tick(22.0)  # the run logged nothing new: nothing
        log.write_text(log.read_text() + "x INFO: gan: step 9, 120 images/s, 2s in the training window, 8s left\n")
        tick(33.0)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["run-a: 11s, step 5, 100 images/s", "run-a: 33s, step 9, 120 images/s"]


def test_in_a_shared_launch_the_line_names_the_run_training_now(tmp_path, caplog):
    """A launch's output goes to its first run's log until it is cut per run: the progress names the run whose mark the
    ranks logged last, with that run's step (not the first run's, nor a step of the run before)."""
    from suite.running.commands import RUN_MARK

    log = tmp_path / LOG_FILE
    log.write_text("x INFO: gan: step 12/12, 40 images/s, 9s in the training window\n")
    tick = sweep.progress_ticker(None, "run-a", tmp_path)
    with caplog.at_level(logging.INFO, logger=sweep.log.name):
        tick(30.0)
        log.write_text(log.read_text() + f"rank 0 suite.running.worker: {RUN_MARK}run-b (run 2 of 2)\n")
        tick(60.0)  # run b began but logged no step yet: nothing
        log.write_text(log.read_text() + "x INFO: gan: step 3/12, 38 images/s, 1s in the training window\n")
        tick(90.0)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["run-a: 30s, step 12/12, 40 images/s", "run-b: 90s, step 3/12, 38 images/s"]


def test_a_long_log_is_followed_in_bounded_reads_that_miss_no_run_mark(tmp_path, monkeypatch):
    from suite.running.commands import RUN_MARK

    monkeypatch.setattr(sweep, "FOLLOW_READ_BYTES", 80)  # longer than each line but the one of 200 bytes
    lines = [f"x INFO: gan: step {i}/9, 50 images/s, 1s in the training window\n" for i in range(1, 4)]
    lines.insert(1, "x" * 200 + "\n")  # a line longer than a read: passed over, not waited on
    lines += [f"rank 0 w: {RUN_MARK}run-b (run 2 of 2)\n", "x INFO: gan: step 1/9, 60 images/s, 0s in the training window\n"]
    (tmp_path / LOG_FILE).write_text("".join(lines))
    follower = sweep.LogFollower(tmp_path, "run-a")
    seen = []
    for _ in range(20):
        follower.read()
        seen.append((follower.run_id, follower.step))
    assert ("run-a", "step 3/9, 50 images/s") in seen and seen[-1] == ("run-b", "step 1/9, 60 images/s")


class _Bar:
    note = ""

    def set_postfix_str(self, text: str) -> None:
        self.note = text


def test_the_bar_shows_the_runs_step_and_images_per_second(tmp_path):
    (tmp_path / LOG_FILE).write_text("x INFO: gan: step 7/20, 64 images/s, 1s in the training window, ETA 2s\n")
    bar = _Bar()
    sweep.progress_ticker(bar, "run-a", tmp_path)(3.0)
    assert bar.note == "run-a 3s, step 7/20, 64 images/s"


def test_run_json_is_one_document_on_stdout(tmp_path, capsys):
    """A dry run with --json: the commands go to stderr, stdout is the JSON document alone."""
    path = tmp_path / "j.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("j", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}])))
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--dry-run", "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["exit_code"] == 0 and document["runs"] == [] and "mpirun" in captured.err


@pytest.mark.multiproc
def test_a_run_logs_images_per_second_and_its_json_names_it(small_sweep):
    """A real run (mpi, P=1, 40 steps, of the shared small sweep: tests/conftest.py): its log holds the training loop's
    progress lines with images/s, and `suite run --json` gives its status, times and images/s."""
    document, out = small_sweep.document, small_sweep.results
    assert small_sweep.code == 0 and document["exit_code"] == 0, document
    assert sorted(run["run_id"] for run in document["runs"]) == sorted(small_sweep.records)  # every run, each once
    (run,) = [run for run in document["runs"] if run["run_id"] == "data_parallel-bce-mpi-p1-r0"]
    assert run["status"] == "ok" and run["images_per_s"] > 0 and run["train_s"] > 0
    log = (out / run["run_id"] / LOG_FILE).read_text()
    assert last_step(out / run["run_id"]) is not None, log[-2000:]


def test_report_json_says_what_the_first_page_says(tmp_path, capsys):
    for record in json.loads((REPO / "reports" / "digits" / "records.json").read_text()):
        write_record(tmp_path / "results" / record["run_id"], new_record(record))
    assert main(["report", str(tmp_path / "results"), "--out", str(tmp_path / "report"), "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert Path(document["report"]).name == "report.md" and "report written to" in captured.err
    systems = {row["strategy"] for row in document["systems"]}
    assert len(systems) >= 5 and all(isinstance(row["images_per_s_estimate"], float) for row in document["systems"])
    assert document["findings"] and {"system_a", "system_b", "verdict"} <= set(document["findings"][0])


def test_suite_run_without_a_terminal_logs_the_launchs_progress_every_interval(tmp_path, monkeypatch, caplog):
    """`suite run -q` hands each launch the ticker: while the launch runs, its log's last step line is logged every
    interval (the fake launch writes the line a rank would and ticks as the launcher's wait loop does)."""
    import contextlib

    from suite.records.record import Record
    from suite.running import launch as launching
    from suite.running import preflight

    def launch(planned, opts, tick=None, **kwargs):
        (planned.run_dir / LOG_FILE).write_text("x INFO: gan: step 12/40, 333 images/s, 2s in the training window\n")
        tick(31.0)
        return Record(status="ok", wall_s=31.0)

    monkeypatch.setattr(launching, "launch", launch)
    monkeypatch.setattr(preflight, "check_devices", lambda runs: None)  # no torch device probe
    monkeypatch.setattr("suite.running.reaper.Reaper", contextlib.nullcontext)  # no watchdog process
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("t", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}])))
    with caplog.at_level(logging.INFO, logger=sweep.log.name):
        assert main(["run", str(path), "--out", str(tmp_path / "r"), "-q"]) == 0
    assert "data_parallel-bce-mpi-p1-r0: 31s, step 12/40, 333 images/s" in caplog.text
