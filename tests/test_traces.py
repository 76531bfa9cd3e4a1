"""``suite run --trace`` on real 2-process runs: the traces are valid Chrome-trace JSON, the DeepSpeed
communication log is written, the records say what ran, and the report links the files."""

import json
import re
from pathlib import Path

import pytest

from conftest import run_scenario, tiny_scenario
from suite.measure.tracing import PROFILED_STEPS

ENGINES = ("horovod", "torch")
MATRIX_ENGINES = ("deepspeed",)  # its first launch costs about 40 s here (`make test-matrix`, with its communication log)


def trace(folder: Path, engines: tuple[str, ...]) -> tuple[int, dict, Path]:
    runs = [{"strategy": "data_parallel", "engine": e, "procs": [2]} for e in engines]
    for run in runs:
        run.update({"horovod": {"cycle_time_ms": 3}} if run["engine"] == "horovod" else {})
    # 6 steps, 1 warm-up: a window of 5 steps, room for the profiler's warm-up step and its recorded steps
    code, records = run_scenario(folder, tiny_scenario("traced", runs, train={"steps": 6}), "--trace")
    return code, records, folder / "results"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return trace(tmp_path_factory.mktemp("traced"), ENGINES)


@pytest.fixture(scope="module")
def traced_matrix(tmp_path_factory):
    return trace(tmp_path_factory.mktemp("traced-matrix"), MATRIX_ENGINES)


def chrome_events(path: Path) -> list[dict]:
    """The events of a Chrome-trace JSON file: a list of events, or an object holding ``traceEvents``."""
    data = json.loads(path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    assert isinstance(events, list) and events, f"{path.name}: no events"
    for event in events:
        assert isinstance(event.get("ph"), str), event
        if event["ph"] in ("X", "B", "E", "i", "I"):
            assert isinstance(event["ts"], (int, float)), event
        if event["ph"] in ("X", "B", "i", "I", "M"):
            assert isinstance(event["name"], str), event
    return events


@pytest.mark.multiproc
@pytest.mark.parametrize("engine", [*ENGINES, *(pytest.param(e, marks=pytest.mark.matrix) for e in MATRIX_ENGINES)])
def test_every_rank_writes_a_profiler_trace_of_steady_steps(request, engine):
    code, records, results = request.getfixturevalue("traced_matrix" if engine in MATRIX_ENGINES else "traced")
    run_id = f"data_parallel-bce-{engine}-p2-r0"
    assert records[run_id]["status"] == "ok", records[run_id].get("error")
    assert records[run_id]["traced"] is True
    for rank in (0, 1):
        path = results / run_id / f"trace-rank{rank}.json"
        events = chrome_events(path)
        steps = {e["name"] for e in events if e["name"].startswith("ProfilerStep#")}
        assert len(steps) == PROFILED_STEPS
        assert json.loads(path.read_text())["distributedInfo"]["rank"] == rank  # for Holistic Trace Analysis
    assert code == 0


@pytest.mark.multiproc
def test_horovod_writes_its_timeline_and_runs_with_the_scenarios_settings(traced):
    _, records, results = traced
    run_id = "data_parallel-bce-horovod-p2-r0"
    events = chrome_events(results / run_id / "horovod-timeline.json")
    names = {e.get("name") for e in events}
    assert {"NEGOTIATE_ALLREDUCE", "ALLREDUCE"} <= names  # gradients, negotiated then reduced
    settings = records[run_id]["engine_settings"]
    assert settings["cycle_time_ms"] == 3.0 and settings["fusion_threshold_mb"] == 128.0 and settings["controller"] == "gloo"
    assert Path(settings["timeline"]).name == "horovod-timeline.json"
    # every record states the step's performance settings beside the engine's own (off here)
    assert {k: settings[k] for k in ("compile", "cuda_graphs", "channels_last", "bf16", "compile_mode")} == {
        "compile": False,
        "cuda_graphs": False,
        "channels_last": False,
        "bf16": False,
        "compile_mode": None,
    }


@pytest.mark.multiproc
@pytest.mark.matrix
def test_deepspeed_writes_its_communication_log(traced_matrix):
    _, records, results = traced_matrix
    run_dir = results / "data_parallel-bce-deepspeed-p2-r0"
    summary = json.loads((run_dir / "deepspeed-comms.json").read_text())["summary"]
    assert sum(size["count"] for size in summary["all_reduce"].values()) > 0
    assert "all_reduce" in (run_dir / "deepspeed-comms.txt").read_text()
    assert records[run_dir.name]["engine_settings"]["config"]["comms_logger"]["enabled"] is True


@pytest.mark.multiproc
def test_the_report_links_the_traces_and_compares_the_engines(traced):
    from suite.analysis.report import write_report

    _, _, results = traced
    report = write_report(results, results.parent / "report")
    engines = report.parent / "details" / "engines.md"  # the Engines detail page, one folder below report.md
    assert "](details/engines.md)" in report.read_text()
    text = engines.read_text()
    links = re.findall(r"\[([\w.-]+)\]\(([^)]+\.(?:json|txt))\)", text)
    assert all((engines.parent / target).is_file() and Path(target).name == name for name, target in links)
    linked = [name for name, _ in links]
    assert linked.count("trace-rank0.json") == linked.count("trace-rank1.json") == len(ENGINES)
    assert "horovod-timeline.json" in linked
    assert "## Engine comparison" in text and "include the tracing overhead" in text
    comparison = text.split("## Engine comparison")[1]
    assert all(f"| {engine} |" in comparison for engine in ENGINES)
