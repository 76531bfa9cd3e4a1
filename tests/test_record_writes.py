"""The record's writes: the launcher's failed record keeps the worker's measurements and its own provenance, and a
failure after rank 0 wrote a finished record does not overwrite it."""

import json

from conftest import finalize_record, tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.records.failures import status_path
from suite.records.record import run_identity
from suite.records.results import RECORD_FILE, new_record, read_record, write_record
from suite.running.run_record import report_failure


def _run():
    (run,) = expand(parse_scenario(tiny_scenario("w", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}])))
    return run


def test_a_failed_launch_keeps_the_workers_measurements_and_the_launchers_provenance(tmp_path):
    run = _run()
    worker = {**run_identity(run), "status": "ok", "train_s": 12.5, "images_per_s": 100.0}  # no provenance of its own
    write_record(tmp_path, new_record(worker))
    record = finalize_record(run, tmp_path, ["mpirun", "python"], 1, 3.0)  # a rank exited 1 after the record
    assert record.status == "failed" and record.train_s == 12.5 and record.images_per_s == 100.0
    assert record.suite_version is not None and record.settings == json.loads(json.dumps(run.to_dict()))
    assert read_record(tmp_path) == record


def test_a_failure_after_the_finished_record_keeps_it(tmp_path):
    run = _run()
    write_record(tmp_path, new_record({**run_identity(run), "status": "ok", "train_s": 12.5}))
    report_failure(run, tmp_path, 0, "2030-01-01T00:00:00Z", RuntimeError("shutdown failed"), recorded=True)
    assert read_record(tmp_path).status == "ok" and read_record(tmp_path).train_s == 12.5
    status = json.loads(status_path(tmp_path, 0).read_text())
    assert status["status"] == "failed" and "shutdown failed" in status["error"]
    report_failure(run, tmp_path, 0, "2030-01-01T00:00:00Z", RuntimeError("training failed"))  # before the record
    assert read_record(tmp_path).status == "failed" and (tmp_path / RECORD_FILE).is_file()
