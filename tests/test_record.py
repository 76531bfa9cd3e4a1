"""The record schema: records are checked when read, misspelt paths fail, old records still load."""

import dataclasses
import json

import pytest

from suite.config.expansion import expand, parse_scenario
from suite.records.codec import FLAT_COLUMNS, LAYOUT_PART_KEYS, check_record, parse_record, record_data, record_field
from suite.records.measured import RankTelemetry
from suite.records.record import SCHEMA_VERSION, CoreRecord, Record, RecordError, run_identity
from suite.records.results import RECORD_FILE, iter_records, new_record, read_record, write_record
from suite.records.scored import CurvePoint


def test_a_written_record_reads_back_with_the_current_schema(tmp_path):
    write_record(tmp_path / "a", new_record({"run_id": "a", "status": "ok", "telemetry": {"step_p50": 0.1}}))
    record = read_record(tmp_path / "a")
    assert record.schema == SCHEMA_VERSION and record_field(record, "telemetry.step_p50") == 0.1
    assert record.telemetry.step_p50 == 0.1
    assert record_field(record, "quality.fid") is None  # a field of the schema this record does not have
    assert json.loads((tmp_path / "a" / RECORD_FILE).read_text())["schema"] == SCHEMA_VERSION


def test_a_record_is_read_into_typed_parts_and_written_back_losing_nothing(tmp_path):
    data = {
        "schema": SCHEMA_VERSION,
        "run_id": "a",
        "status": "ok",
        "curve": [{"clock_s": 1.5, "step": 3, "fid": 40.0}],
        "telemetry": {"per_rank": [{"rank": 0, "window": {"steps": 2, "step_seconds": 0.5}, "a_newer_key": [1, 2]}]},
        "history": {"0": [{"step": 1, "d_loss": 0.5, "g_loss": None}]},
        "env": {"torch": "2.13", "free": None},
    }
    record = parse_record(data)
    assert isinstance(record, Record) and isinstance(record.curve[0], CurvePoint) and record.curve[0].fid == 40.0
    (rank,) = record.telemetry.per_rank
    assert isinstance(rank, RankTelemetry) and rank.window.steps == 2 and rank.window.seconds is None
    assert record.history["0"][0].d_loss == 0.5  # the per-class alternative of history, its points typed
    written = record_data(record)
    # every field of the schema, null where the data had no value; what the data held, a key no part declares too, kept
    assert written["telemetry"]["per_rank"][0]["a_newer_key"] == [1, 2] and written["env"] == data["env"]
    assert written["quality"] is None and written["telemetry"]["per_rank"][0]["window"]["seconds"] is None
    # its keys sit at the top, with the layout's keys of the strategies' parts (null: a record of no strategy)
    assert set(written) == {f.name for f in dataclasses.fields(Record)} - {"strategy_part"} | set(LAYOUT_PART_KEYS)
    assert parse_record(written) == record
    write_record(tmp_path / "a", record)
    assert read_record(tmp_path / "a") == record


def test_an_unknown_key_is_an_error_naming_the_file_and_the_field(tmp_path):
    (tmp_path / "a").mkdir()
    raw = {"schema": SCHEMA_VERSION, "run_id": "a", "status": "ok", "telemetry": {"step_p5O": 0.1}}
    (tmp_path / "a" / RECORD_FILE).write_text(json.dumps(raw))
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
    assert [r.run_id for r in iter_records(tmp_path)] == ["old"]
    with pytest.raises(RecordError, match="record schema 99 is newer than this suite reads"):
        check_record({"schema": 99, "run_id": "new"})


def test_flat_columns_come_from_the_marked_fields():
    assert FLAT_COLUMNS["step_p50"] == "telemetry.step_p50" and FLAT_COLUMNS["comm_s"] == "comm.seconds"
    assert FLAT_COLUMNS["dataset"] == "dataset.name" and FLAT_COLUMNS["steps"] == "generator_steps"
    assert "per_rank" not in FLAT_COLUMNS


def test_the_core_schema_has_no_plugin_field():
    """A plugin's record fields live with the plugin (its entry's ``record_part``; tests/test_plugins.py): the example
    plugin's ``allreduce_every`` is no field or column of the core record, and a built-in strategy's record that has
    one is refused, unless null, as every record wrote it before it moved."""
    assert "allreduce_every" not in {f.name for f in dataclasses.fields(CoreRecord)} | set(FLAT_COLUMNS)
    assert [f.name for f in dataclasses.fields(Record)] == [*(f.name for f in dataclasses.fields(CoreRecord)), "strategy_part"]
    identity = {"schema": SCHEMA_VERSION, "run_id": "a", "status": "ok", "strategy": "data_parallel"}
    record = parse_record({**identity, "allreduce_every": None})
    assert record.strategy_part is None and "allreduce_every" not in record_data(record)
    with pytest.raises(RecordError, match=r"^r\.json: allreduce_every: unknown field; expected one of run_id, "):
        parse_record({**identity, "allreduce_every": 2}, "r.json")
    with pytest.raises(RecordError, match=r"^r\.json: strategy_part: unknown field"):  # the attribute is no key
        parse_record({**identity, "strategy_part": {}}, "r.json")


def test_the_identity_of_a_run_is_a_record_part():
    (run,) = expand(parse_scenario({"name": "t", "runs": [{"strategy": "data_parallel"}]}))
    identity = run_identity(run)
    assert identity["run_id"] == run.run_id and identity["traced"] is False
    check_record({"schema": SCHEMA_VERSION, **identity})


def test_a_number_no_record_holds_is_written_as_null_and_the_record_still_reads(tmp_path):
    # a loss that blew up between two divergence checks: past MAX_NUMBER, like inf, it is n/a, not a refused record
    record = new_record({"run_id": "a", "status": "diverged", "diverged": {"value": 1e30}, "train_s": float("inf")})
    assert record.diverged == {"value": None} and record.train_s is None
    write_record(tmp_path / "a", record)
    assert read_record(tmp_path / "a") == record
