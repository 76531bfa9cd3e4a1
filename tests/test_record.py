"""The record schema: records are checked when read, misspelt paths fail, old records still load."""

import json

import pytest

from suite.config.expansion import expand, parse_scenario
from suite.records.record import FLAT_COLUMNS, SCHEMA_VERSION, RecordError, check_record, record_field, run_identity
from suite.records.results import iter_records, read_record, write_record


def test_a_written_record_reads_back_with_the_current_schema(tmp_path):
    write_record(tmp_path / "a", {"run_id": "a", "status": "ok", "telemetry": {"step_p50": 0.1}})
    record = read_record(tmp_path / "a")
    assert record["schema"] == SCHEMA_VERSION and record_field(record, "telemetry.step_p50") == 0.1
    assert record_field(record, "quality.fid") is None  # a field of the schema this record does not have


def test_an_unknown_key_is_an_error_naming_the_file_and_the_field(tmp_path):
    write_record(tmp_path / "a", {"run_id": "a", "status": "ok", "telemetry": {"step_p5O": 0.1}})
    with pytest.raises(RecordError, match=r"result.json: telemetry.step_p5O: unknown field"):
        read_record(tmp_path / "a")
    with pytest.raises(RecordError, match="telemetry.step_p50: expected a number"):
        check_record({"schema": SCHEMA_VERSION, "telemetry": {"step_p50": "fast"}})


def test_a_misspelt_path_fails_instead_of_reading_none():
    with pytest.raises(RecordError, match="has no field 'step_p5O'"):
        record_field({"telemetry": {}}, "telemetry.step_p5O")
    assert record_field({"env": {"torch": "2.13"}}, "env.torch") == "2.13"  # below a free-form field: any key


def test_old_records_load_and_newer_ones_are_refused(tmp_path):
    old = tmp_path / "old" / "result.json"
    old.parent.mkdir()
    identity = {"status": "ok", "strategy": "data_parallel", "engine": "torch", "loss": "bce", "procs": 1, "scaling": "strong"}
    old.write_text(json.dumps({"schema": 1, "run_id": "old", **identity, "telemetry": {"comm_s": 0.1}}))  # a key schema 1 had
    assert [r["run_id"] for r in iter_records(tmp_path)] == ["old"]
    with pytest.raises(RecordError, match="record schema 99 is newer than this suite reads"):
        check_record({"schema": 99, "run_id": "new"})


def test_flat_columns_come_from_the_marked_fields():
    assert FLAT_COLUMNS["step_p50"] == "telemetry.step_p50" and FLAT_COLUMNS["comm_s"] == "comm.seconds"
    assert FLAT_COLUMNS["dataset"] == "dataset.name" and FLAT_COLUMNS["steps"] == "generator_steps"
    assert "per_rank" not in FLAT_COLUMNS


def test_the_identity_of_a_run_is_a_record_part():
    (run,) = expand(parse_scenario({"name": "t", "runs": [{"strategy": "data_parallel"}]}))
    identity = run_identity(run)
    assert identity["run_id"] == run.run_id and identity["traced"] is False
    check_record({"schema": SCHEMA_VERSION, **identity})
