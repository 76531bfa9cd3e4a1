"""A record is assembled from typed parts: each stage returns its own part, ranks hand rank 0 theirs as dataclasses,
``suite.records.parts`` builds the record with one constructor, and no module of the suite outside ``records/`` makes
a record from plain data (``new_record``, ``parse_record``, ``check_record``): the launcher completes the worker's
record with new parts instead of turning it into a dict and back."""

import ast
import dataclasses
import json
import pickle

import pytest

from conftest import REPO, finalize_record, tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.records import codec
from suite.records.measured import RankTelemetry, Timing
from suite.records.parts import (
    Ending,
    FailurePart,
    LaunchPart,
    Scored,
    StrategyPart,
    assemble,
    completed,
    identity,
    made_now,
    provenance_kept,
)
from suite.records.record import Placement, RecordError
from suite.records.results import RECORD_FILE, new_record, read_record, write_record

FROM_DATA = {"new_record", "parse_record", "check_record"}
"""The record layer's functions that make (or check) a record from its plain data: records/ and the tests only."""


def record_from_data_calls(source: str) -> list[str]:
    """``line: name`` of every call in ``source`` of a :data:`FROM_DATA` function, however it was imported (a name, an
    alias, an attribute of a module)."""
    tree = ast.parse(source)
    aliases = {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name in FROM_DATA
    }
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = aliases.get(func.id) if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in FROM_DATA:
            calls.append(f"{node.lineno}: {name}")
    return sorted(calls, key=lambda call: int(call.split(":")[0]))


def test_no_module_outside_the_record_layer_makes_a_record_from_plain_data():
    found = {}
    for path in sorted((REPO / "suite").rglob("*.py")):
        if path.relative_to(REPO / "suite").parts[0] == "records":
            continue
        if calls := record_from_data_calls(path.read_text()):
            found[str(path.relative_to(REPO))] = calls
    assert not found, f"records made from plain data outside suite/records/ (assemble their parts instead): {found}"


def test_the_check_sees_a_record_made_from_plain_data_however_it_is_named():
    source = (
        "from suite.records.results import new_record as made, write_record\n"
        "from suite.records import codec\n"
        "def f(record):\n"
        "    write_record('.', made({'run_id': 'x'}))\n"
        "    return codec.parse_record(codec.record_data(record))\n"
    )
    assert record_from_data_calls(source) == ["4: new_record", "5: parse_record"]
    assert record_from_data_calls("from suite.records.parts import assemble\nassemble('r', None)\n") == []


def _run():
    (run,) = expand(parse_scenario(tiny_scenario("w", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}])))
    return run


def test_a_record_assembled_from_parts_is_the_record_of_their_fields():
    run = _run()
    ending, timing = Ending("ok"), Timing(setup_s=1.0, train_s=12.5)
    strategy = StrategyPart({"global_batch": 64, "generator_steps": 10, "curve": [{"clock_s": 1.0, "step": 5}]})
    scored = Scored(
        quality={"features": "inception", "fid": 30.0},
        curve=[{"clock_s": 1.0, "step": 5}, {"clock_s": 12.5, "step": 10}],
        extra_quality={"quality_best_cell": {"features": "inception", "fid": 40.0}},
    )
    record = assemble("r.json", identity(run), ending, timing, Placement(threads_per_rank=2), strategy, scored)
    assert record.run_id == run.run_id and record.status == "ok" and record.train_s == 12.5 and record.threads_per_rank == 2
    assert record.generator_steps == 10 and record.quality.fid == 30.0 and record.quality_best_cell.fid == 40.0
    assert [p.step for p in record.curve] == [5, 10]  # the scores' curve stands over the one the strategy brought
    data = {
        **dataclasses.asdict(identity(run)),
        "status": "ok",
        "setup_s": 1.0,
        "train_s": 12.5,
        "threads_per_rank": 2,
        "global_batch": 64,
        "generator_steps": 10,
        "quality": scored.quality,
        "curve": scored.curve,
        "quality_best_cell": scored.extra_quality["quality_best_cell"],
    }
    assert record == new_record(data)  # the same record as its fields' data make


def test_parts_are_frozen_and_an_assembled_record_is_checked_as_one_read():
    ending = Ending("ok")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ending.status = "failed"
    with pytest.raises(RecordError, match=r"r\.json: status: 'done' is not one of"):
        assemble("r.json", Ending("done"))
    assert assemble("r.json", Timing(train_s=float("nan")), None).train_s is None  # not a number: null, as written


def test_a_ranks_telemetry_crosses_processes_as_its_dataclass():
    measured = {"rank": 1, "steps": 4, "window": {"steps": 4, "step_seconds": 2.0, "train_images": 64}, "later": "kept"}
    part = codec.build_part(RankTelemetry, measured)
    assert part.window.steps == 4 and part.window.step_seconds == 2.0
    handed = pickle.loads(pickle.dumps(part))  # what every engine's gather does with it
    written = codec.record_data(handed)  # as the record keeps it: what its dataclasses do not declare too
    assert handed == part and written["later"] == "kept" and written["window"]["train_images"] == 64 and written["rank"] == 1


def test_the_launcher_completes_the_workers_record_with_its_parts(tmp_path):
    run = _run()
    diverged = {"step": 3, "rank": 0, "quantity": "d_loss", "value": None}
    worker = assemble(
        "worker",
        identity(run),
        Ending("diverged", reason="diverged at step 3 on rank 0", diverged=diverged),
        Timing(train_s=4.0),
        FailurePart(None, "Traceback ..."),
    )
    write_record(tmp_path, worker)
    record = finalize_record(run, tmp_path, ["mpirun", "python"], 1, 3.0)  # a rank exited 1 after the record
    assert record.status == "failed" and record.command == "mpirun python" and record.exit_code == 1 and record.wall_s == 3.0
    assert record.reason == worker.reason and record.diverged == diverged and record.traceback == "Traceback ..."
    assert record.train_s == 4.0 and record.suite_version is not None  # the worker's measurements, the launcher's provenance
    assert read_record(tmp_path) == record
    assert json.loads((tmp_path / RECORD_FILE).read_text())["command"] == "mpirun python"


def test_completing_a_record_gives_every_field_of_the_parts_and_keeps_the_others():
    run = _run()
    worker = assemble("worker", identity(run), Ending("ok"), Timing(train_s=4.0))
    made = made_now(
        run, {"suite_version": "1", "git_commit": None, "git_dirty": None, "git_note": "no git"}, "2030-01-01T00:00:00Z"
    )
    done = completed(worker, provenance_kept(worker, made), LaunchPart("mpirun python", 0, 5.0, None))
    assert (done.train_s, done.wall_s, done.exit_code, done.suite_version, done.git_note) == (4.0, 5.0, 0, "1", "no git")
    assert worker.wall_s is None and worker.suite_version is None  # a new record; the worker's is as it was
    kept = provenance_kept(dataclasses.replace(worker, suite_version="0"), made)
    assert kept.suite_version == "0" and kept.started_utc == "2030-01-01T00:00:00Z"
