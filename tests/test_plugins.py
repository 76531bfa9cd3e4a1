"""Strategies, losses and engines as plugins: traits on their entries (no name compared elsewhere), entry points,
a plugin's own scenario section, and the example plugin (examples/local_sgd) run beside a built-in strategy."""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_scenario, tiny_scenario
from suite.config.entries import StrategyEntry
from suite.config.escape import one_line
from suite.config.expansion import expand, parse_scenario
from suite.config.registry import LOSSES, STRATEGIES, PluginError
from suite.config.scenario import ScenarioError
from suite.records.codec import parse_record

# --- no name compared outside its entry ---------------------------------------------------------------------


def compared_names(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant equal to one of ``names`` used in a comparison or a match pattern."""
    found = []
    for node in ast.walk(ast.parse(source)):
        parts: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif isinstance(node, ast.match_case):
            parts = [node.pattern]
        for part in parts:
            found += [(n.lineno, n.value) for n in ast.walk(part) if isinstance(n, ast.Constant) and n.value in names]
    return found


REGISTRY = ("suite/config/registry.py", "suite/config/own_entries.py")
"""The registry's tables and the suite's own engines', losses' and the other axes' entries, which name them all."""


def own_modules(*registries) -> dict[str, set[str]]:
    """The module file of each entry's implementation, and the names it may compare (its own)."""
    owned: dict[str, set[str]] = {}
    for registry in registries:
        for entry in registry:
            if entry.target:
                path = str(Path(*entry.target.partition(":")[0].split("."))) + ".py"
                owned.setdefault(path, set()).add(entry.name)
    return owned


def test_no_strategy_loss_or_engine_name_is_compared_outside_its_own_module():
    from suite.config.registry import ENGINES, STRATEGIES

    names = set(STRATEGIES.names()) | set(LOSSES.names()) | set(ENGINES.names())
    owned = own_modules(STRATEGIES, LOSSES, ENGINES)
    offending = []
    for path in sorted((REPO / "suite").rglob("*.py")):
        relative = str(path.relative_to(REPO))
        if relative in REGISTRY:
            continue
        allowed = names - owned.get(relative, set())
        offending += [f"{relative}:{line}: {name!r}" for line, name in compared_names(path.read_text(), allowed)]
    assert offending == []


def trait_modules(entry) -> set[str]:
    """The modules of an entry's implementation, of the traits it names as ``"module:function"``
    (:func:`suite.config.entries.lazy`; the settings class aside) and of a built-in strategy's entry, as paths without
    ``.py``: where its own code lives."""
    targets = [entry.target] if entry.target else []
    targets += [getattr(value, "target", None) for value in vars(entry).values()]
    if isinstance(entry, StrategyEntry) and entry.name in STRATEGIES.sources:  # a built-in's entry module
        targets.append(STRATEGIES.sources[entry.name] + ":ENTRIES")
    return {str(Path(*t.partition(":")[0].split("."))) for t in targets if isinstance(t, str)}


def owned(relative: str, modules: set[str]) -> bool:
    """Whether file ``relative`` is one of ``modules`` or lies in one that is a package."""
    return any(relative == f"{m}.py" or relative.startswith(f"{m}/") for m in modules)


def named_constants(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant equal to one of ``names`` that is not a docstring, and of every
    attribute of that name read (``run.cellular``)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings
    ] + [(node.lineno, node.attr) for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in names]


def test_no_module_but_its_owners_names_a_strategy_or_loss_section():
    """A strategy's or loss's settings section (``cellular``, ``wgan_gp``) is found, checked and read through its
    registry entry: only the registry (and its own entries' module), the entry's implementation and its trait modules (its rules) write its name,
    and the records layer, which reads older records' settings."""
    sections: dict[str, set[str]] = {}
    for entry in (*STRATEGIES, *LOSSES):
        if entry.settings is not None:
            sections.setdefault(entry.settings, set()).update(trait_modules(entry))
    assert {"cellular", "wgan_gp"} <= set(sections)
    assert "suite/strategies/cellular/rules" in sections["cellular"]  # its rules are reached through its entry
    offending = []
    for path in sorted((REPO / "suite").rglob("*.py")):
        relative = str(path.relative_to(REPO))
        if relative in REGISTRY or relative.startswith("suite/records/"):
            continue
        named = {name for name, owners in sections.items() if not owned(relative, owners)}
        offending += [f"{relative}:{line}: {name!r}" for line, name in named_constants(path.read_text(), named)]
    assert offending == []


def test_the_section_check_finds_names_but_not_docstrings():
    source = '''"""About cellular."""
def f(run):
    """cellular"""
    return getattr(run, "cellular"), {"wgan_gp": 1}, run.wgan_gp.lr
'''
    assert sorted(named_constants(source, {"cellular", "wgan_gp"})) == [(4, "cellular"), (4, "wgan_gp"), (4, "wgan_gp")]


def test_the_name_check_finds_comparisons_and_matches_but_not_other_uses():
    source = """
if run.strategy == "cellular" or loss in ("bce", "x"):
    pass
match run.engine:
    case "torch":
        pass
versions = {"torch": 1}
section = getattr(run, "cellular")
"""
    assert sorted(compared_names(source, {"cellular", "bce", "torch"})) == [(2, "bce"), (2, "cellular"), (5, "torch")]


# --- entry points -------------------------------------------------------------------------------------------

ODD = StrategyEntry("gossip", "suite.strategies.data_parallel.strategy:DataParallel", ("bce",), cost_model="gossip_rounds")
NO_COST = StrategyEntry("gossip", "suite.strategies.data_parallel.strategy:DataParallel", ("bce",))
NOT_A_STRATEGY = LOSSES["bce"]


def _points(monkeypatch, registry, value: str) -> None:
    point = importlib.metadata.EntryPoint("gossip", value, "gan_scaling_suite.strategies")
    monkeypatch.setattr(registry.importlib.metadata, "entry_points", lambda group: [point] if group == point.group else [])


def test_a_plugin_strategy_is_registered_from_its_entry_point(plugins, monkeypatch):
    _points(monkeypatch, plugins, "test_plugins:NO_COST")
    assert plugins.STRATEGIES["gossip"] is NO_COST
    assert plugins.STRATEGIES.names()[-1] == "gossip"


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "test_plugins:ODD",
            "plugin 'gossip' (gan_scaling_suite.strategies = test_plugins:ODD): strategy 'gossip' lacks what the suite "
            "needs: cost model 'gossip_rounds', which the projection does not know (one_group, class_groups, cells)",
        ),
        (
            "test_plugins:NOT_A_STRATEGY",
            "plugin 'gossip' (gan_scaling_suite.strategies = test_plugins:NOT_A_STRATEGY): expected a StrategyEntry, got LossEntry",
        ),
        (
            "test_plugins:MISSING",
            "plugin 'gossip' (gan_scaling_suite.strategies = test_plugins:MISSING): cannot be loaded: AttributeError: ",
        ),
    ],
)
def test_a_plugin_the_suite_cannot_use_is_refused_in_one_line_naming_it(plugins, monkeypatch, value, message):
    _points(monkeypatch, plugins, value)
    with pytest.raises(PluginError) as error:
        plugins.STRATEGIES.names()
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_suite_no_plugins_leaves_them_out(plugins, monkeypatch):
    _points(monkeypatch, plugins, "test_plugins:ODD")
    monkeypatch.setenv(plugins.NO_PLUGINS, "1")
    assert "gossip" not in plugins.STRATEGIES


# --- a plugin's section: validated, overridden per entry, swept ------------------------------------------------


def _local_sgd_scenario(**top) -> dict:
    runs = [
        {"strategy": "local_sgd", "procs": [2], "label": "own", "local_sgd": {"average_every": 2}},
        {"strategy": "local_sgd", "procs": [2], "sweep": {"local_sgd.average_every": [1, 8]}},
        {"strategy": "data_parallel", "procs": [2]},
    ]
    return {**tiny_scenario("plug", runs), **top}


def test_the_plugin_section_is_read_overridden_and_swept(plugins):
    runs = expand(parse_scenario(_local_sgd_scenario(local_sgd={"average_every": 4})))
    every = {r.run_id: r.section("local_sgd").average_every for r in runs if r.strategy == "local_sgd"}
    assert every == {
        "own-p2-r0": 2,
        "local_sgd-bce-mpi-average_every1-p2-r0": 1,
        "local_sgd-bce-mpi-average_every8-p2-r0": 8,
    }
    plain = next(r for r in runs if r.strategy == "data_parallel")
    assert plain.sections == {} and "sections" not in plain.to_dict()  # its strategy and loss read no section
    one = next(r for r in runs if r.run_id == "own-p2-r0")
    assert type(one).from_dict(one.to_dict()).section("local_sgd").average_every == 2


@pytest.mark.parametrize(
    "change, message",
    [
        ({"local_sgd": {"average_every": 0}}, "plug: local_sgd.average_every: must be at least 1, got 0"),
        ({"local_sgd": {"every": 3}}, "plug: local_sgd.every: unknown field; expected one of average_every"),
        (
            {"runs": [{"strategy": "data_parallel", "local_sgd": {"average_every": 2}}]},
            "plug: runs[0].local_sgd: a data_parallel entry with loss bce does not read local_sgd settings",
        ),
        (
            {"runs": [{"strategy": "local_sgd", "sweep": {"local_sgd.average_every": [2, 0]}}]},
            "plug: runs[0].sweep.local_sgd.average_every[1]: must be at least 1, got 0",
        ),
    ],
)
def test_mistakes_in_the_plugin_section_name_the_field(plugins, change, message):
    with pytest.raises(ScenarioError) as error:
        parse_scenario(_local_sgd_scenario(**change), "plug")
    assert str(error.value) == message


def test_without_the_plugin_the_scenario_fails_naming_the_strategy_and_what_waits_for_it(tmp_path, capsys):
    from suite.cli import main

    path = tmp_path / "plug.yaml"
    path.write_text(yaml.safe_dump(_local_sgd_scenario()))
    assert main(["run", str(path), "--out", str(tmp_path / "results"), "-q"]) == 2
    names = ", ".join(repr(name) for name in STRATEGIES.names())
    unknown = f"'local_sgd' is not one of {names} (a plugin's strategy needs its package installed)"
    expected = [
        f"error: {path}: 2 problems:",
        f"  runs[0].strategy: {unknown}",
        f"  runs[1].strategy: {unknown}",
        "  runs[0]: not checked until its strategy is known (nor its local_sgd)",  # the plugin's section, not lifted
        "  runs[1]: not checked until its strategy is known",
    ]
    assert capsys.readouterr().err.splitlines() == [one_line("\n".join(expected))]  # one line: suite.config.escape
    assert not (tmp_path / "results").exists()


# --- the projection -----------------------------------------------------------------------------------------


def test_a_strategy_without_a_cost_model_is_reported_as_not_projected_by_name(plugins, monkeypatch):
    from suite.analysis.projection.fit import fit_all, not_projected
    from suite.analysis.projection.validation import validate
    from suite.measure.network import PRESETS
    from suite.records.codec import parse_record
    from suite.records.record import SCHEMA_VERSION

    _points(monkeypatch, plugins, "test_plugins:NO_COST")
    data = {"schema": SCHEMA_VERSION, "run_id": "g-p2", "strategy": "gossip", "engine": "mpi", "loss": "bce", "procs": 2}
    data |= {"status": "ok", "scaling": "strong", "train_s": 1.0, "telemetry": {"busy_s_per_rank": [1.0], "timed_steps": 3}}
    record = parse_record(data)
    assert not_projected(record) == "not projected: strategy 'gossip' names no cost model the projection knows"
    assert not_projected(parse_record({**data, "strategy": "gone"})).startswith("not projected: strategy 'gone' is not installed")
    assert fit_all([record]) == []
    rows = validate([record], PRESETS["shm"])
    assert list(rows["role"]) == ["not projected: strategy 'gossip' names no cost model the projection knows"]


def test_one_allreduce_every_k_steps_costs_a_kth_of_the_communication():
    from suite.analysis.projection.model import GanModel, Problem, StepCost, predict
    from suite.measure.network import PRESETS

    model = GanModel(StepCost(0.01, 0.0), grad_bytes=4e6)
    every_step = predict(model, Problem("data_parallel", steps=100, batch=64, factor=3.0), 8, PRESETS["summit"])
    every_four = predict(model, Problem("local_sgd", steps=100, batch=64, factor=3.0, allreduce_every=4), 8, PRESETS["summit"])
    assert every_four.compute == every_step.compute and every_step.comm > 0
    assert every_four.comm == pytest.approx(every_step.comm / 4)


# --- a plugin's record part: its fields live with the plugin ----------------------------------------------------


def _local_sgd_record(**fields) -> dict:
    """The data of a local_sgd run's record, as its result.json holds it."""
    from suite.records.record import SCHEMA_VERSION

    data = {"schema": SCHEMA_VERSION, "run_id": "local_sgd-bce-mpi-p2-r0", "strategy": "local_sgd", "engine": "mpi"}
    data |= {"loss": "bce", "status": "ok", "procs": 2, "scaling": "strong", "global_batch": 8, "allreduce_every": 4}
    data |= {"telemetry": {"timed_steps": 3, "work_steps_per_rank": [5, 5], "work_images_per_rank": [20, 20]}}
    return data | fields


def _without_nulls(data: dict) -> dict:
    """``data`` without its null fields, at any depth of mappings."""
    return {k: _without_nulls(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}


def test_a_plugins_record_part_is_checked_built_written_back_and_a_flat_column(plugins, tmp_path):
    import json

    from suite_local_sgd.entry import LocalSGDRecord

    from suite.analysis.projection.fit import problem_of
    from suite.records.codec import flat_columns, record_data
    from suite.records.record import RecordError
    from suite.records.results import RECORD_FILE, read_record, records_frame, write_record

    assert plugins.STRATEGIES["local_sgd"].record_part is LocalSGDRecord
    data = _local_sgd_record()
    record = parse_record(data, "r.json")
    assert record.strategy_part == LocalSGDRecord(allreduce_every=4)  # built as the plugin's dataclass
    written = record_data(record)  # written back where it was read, at the top level (null where the run has none)
    assert written["allreduce_every"] == 4 and "strategy_part" not in written
    assert _without_nulls(written) == data and parse_record(written) == record
    write_record(tmp_path / "a", record)
    assert json.loads((tmp_path / "a" / RECORD_FILE).read_text())["allreduce_every"] == 4
    assert read_record(tmp_path / "a") == record
    with pytest.raises(RecordError, match=r"^r\.json: allreduce_every: expected an integer"):
        parse_record(_local_sgd_record(allreduce_every="often"), "r.json")
    with pytest.raises(RecordError, match=r"^r\.json: allreduce_every: must be at least 1, got 0$"):
        parse_record(_local_sgd_record(allreduce_every=0), "r.json")
    with pytest.raises(RecordError, match=r"^r\.json: averaging: unknown field"):  # a key neither part declares
        parse_record(_local_sgd_record(averaging=4), "r.json")
    assert flat_columns()["allreduce_every"] == "strategy_part.allreduce_every"
    assert records_frame([record])["allreduce_every"].tolist() == [4]
    assert problem_of(record).allreduce_every == 4  # the projection reads it through the entry's trait
    assert problem_of(parse_record(_local_sgd_record(allreduce_every=None))).allreduce_every == 1  # null: not there


def test_without_its_plugin_a_records_own_keys_are_kept_unchecked():
    from suite.records.codec import flat_columns, record_data

    assert "local_sgd" not in STRATEGIES  # SUITE_NO_PLUGINS=1 (conftest)
    data = _local_sgd_record(allreduce_every="often")
    record = parse_record(data, "r.json")
    written = record_data(record)
    assert record.strategy_part == {"allreduce_every": "often"} and _without_nulls(written) == data
    assert parse_record(written) == record
    assert "allreduce_every" not in flat_columns()


def test_a_record_part_the_suite_cannot_use_is_named():
    from dataclasses import dataclass, make_dataclass, replace

    from suite.records.codec import strategy_part_type

    base = STRATEGIES["data_parallel"]
    assert replace(base, record_part=str).problems() == ["record part <class 'str'>, which is not a dataclass"]
    required = make_dataclass("Required", [("every", int)])
    assert replace(base, record_part=required).problems() == [
        "a default for field 'every' of its record part Required (a failed run's record has none of them)"
    ]

    @dataclass
    class Clash:
        procs: int | None = None

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(STRATEGIES._entries, "data_parallel", replace(base, record_part=Clash))
        with pytest.raises(
            PluginError, match=r"^strategy 'data_parallel': its record part Clash declares 'procs', a field every record has$"
        ):
            strategy_part_type("data_parallel")


# --- the example plugin, installed, beside a built-in strategy ----------------------------------------------------


@pytest.mark.multiproc
def test_local_sgd_runs_beside_data_parallel_and_shows_in_report_projection_and_checkpoints(plugins, tmp_path):
    from suite.analysis.projection.render import run_projection
    from suite.analysis.report import write_report
    from suite.measure.network import PRESETS

    assert "local_sgd" in plugins.STRATEGIES and plugins.STRATEGIES.plugins == {"local_sgd": "suite-local-sgd"}
    runs = [
        # two process counts: the projection fits no scaling law to one
        {"strategy": "local_sgd", "procs": [1, 2], "local_sgd": {"average_every": 2}},
        {"strategy": "data_parallel", "procs": [2]},
    ]
    scenario = tiny_scenario("plug", runs, train={"steps": 5, "checkpoint_every": {"steps": 2}})
    code, records = run_scenario(tmp_path, scenario)
    assert code == 0, {k: r.get("error") for k, r in records.items()}
    local = records["local_sgd-bce-mpi-p2-r0"]
    assert local["status"] == "ok" and local["allreduce_every"] == 2 and local["generator_steps"] == 5
    assert local["checkpoints_written"] >= 1 and local["replicas_identical"] is True  # averaged at the end
    assert 0 < local["comm"]["bytes"] < records["data_parallel-bce-mpi-p2-r0"]["comm"]["bytes"]
    report = write_report(tmp_path / "results", tmp_path / "report", REPO / "baselines").read_text()
    assert "local_sgd / bce / mpi" in report
    projection = run_projection(
        [parse_record(r) for r in records.values()], PRESETS["summit"], PRESETS["shm"], [1, 2, 64], REPO / "baselines"
    )
    assert projection is not None
    projected = projection.table[projection.table["strategy"] == "local_sgd"].set_index(["scaling", "procs"])["time_s"]
    assert projected.drop(("strong", 64)).notna().all() and len(projected) == 6  # 32 images do not split over 64 ranks


def test_a_strategy_registered_after_the_schema_was_built_is_accepted(monkeypatch):
    from dataclasses import replace

    from suite.config import registry, schema
    from suite.config.scenario import RunSpec

    assert schema.build(RunSpec, {"strategy": "data_parallel"}, "run").strategy == "data_parallel"  # validator cached
    late = replace(registry.STRATEGIES["data_parallel"], name="late")
    monkeypatch.setattr(registry.STRATEGIES, "_entries", {**registry.STRATEGIES._entries, "late": late})
    assert schema.build(RunSpec, {"strategy": "late"}, "run").strategy == "late"


# --- one route: a strategy's rules, step and checkpoint size are traits of its entry ----------------------------


def _with_traits(monkeypatch, name: str, **traits) -> None:
    """Strategy ``name``'s entry with ``traits`` replaced, for this test."""
    from dataclasses import replace

    from suite.config import registry

    monkeypatch.setitem(registry.STRATEGIES._entries, name, replace(registry.STRATEGIES[name], **traits))


def test_validation_runs_a_strategys_entry_rules_and_section_rules_from_its_entry(monkeypatch):
    def one_rank(spec, path, scaling, fail):
        if max(spec.procs) > 1:
            fail(f"{path}.procs", f"this strategy trains on one rank ({scaling} scaling)")

    def features_named(section, path, scenario, fail):
        if scenario.metrics.features == "auto":
            fail(f"{path}.population", "needs metrics.features named")

    _with_traits(monkeypatch, "data_parallel", check_entry=one_rank)
    with pytest.raises(ScenarioError, match=r"^s: runs\[0\]\.procs: this strategy trains on one rank \(strong scaling\)$"):
        parse_scenario(tiny_scenario("s", [{"strategy": "data_parallel", "procs": [1, 2]}]), source="s")
    assert parse_scenario(tiny_scenario("s", [{"strategy": "data_parallel", "procs": [1]}]), source="s").runs

    from suite.config import registry

    _with_traits(monkeypatch, "cellular", scenario_rules=features_named, scenario_reads=frozenset({"metrics"}))
    assert registry.STRATEGIES["cellular"].scenario_rules is features_named
    with pytest.raises(ScenarioError, match=r"cellular\.population: needs metrics\.features named"):
        parse_scenario(tiny_scenario("s", [{"strategy": "data_parallel"}], metrics={"features": "auto"}), source="s")


def test_a_strategy_sizes_its_checkpoints_through_its_footprint_trait(monkeypatch):
    from suite.train.checkpoint import footprint

    run = expand(parse_scenario(tiny_scenario("fp", [{"strategy": "data_parallel", "procs": [2]}])))[0]
    plain = footprint(run)
    seen = []
    _with_traits(monkeypatch, "data_parallel", footprint=lambda run, sizes: seen.append(sizes) or (1, 2))
    assert footprint(run) == (1, 2) != plain
    assert 0 < seen[0].generator < seen[0].gan and seen[0].snapshots == run.metrics.curve_points + 1


# --- the built-ins take the plugin route --------------------------------------------------------------------


def test_the_built_in_strategies_and_losses_bring_their_sections_and_record_parts_as_a_plugin_does():
    """No strategy's or loss's section is a field of a scenario, a run entry or a run, and no strategy's record part a
    field of the core record: each lives in the entry's own package (its implementation's), named by the entry."""
    import dataclasses

    from suite.config.entries import record_part_type, settings_type
    from suite.config.scenario import Run, RunSpec, Scenario, strategy_sections
    from suite.records.record import CoreRecord

    assert set(strategy_sections()) == {"cellular", "wgan_gp"}
    for holder in (Scenario, RunSpec, Run):
        assert not set(strategy_sections()) & {f.name for f in dataclasses.fields(holder)}, holder
    core = {f.name for f in dataclasses.fields(CoreRecord)}
    parts = {entry.name: record_part_type(entry) for entry in STRATEGIES}
    assert {name for name, part in parts.items() if part is not None} == {"label_partitioned", "cellular"}
    for name, part in parts.items():
        package = STRATEGIES[name].target.partition(":")[0].rpartition(".")[0]
        if part is not None:
            assert part.__module__.startswith(package + ".") and not core & {f.name for f in dataclasses.fields(part)}
    for entry in (*STRATEGIES, *LOSSES):
        if entry.settings is not None:
            package = entry.target.partition(":")[0].rpartition(".")[0]
            assert settings_type(entry).__module__.startswith(package + "."), entry.name


def test_a_built_in_section_in_a_scenario_file_and_in_run_json_reads_as_ever(tmp_path):
    """``cellular:`` and ``wgan_gp:`` at a scenario's top level and in its run entries, as always; a run holds those its
    strategy and loss read, and a ``run.json`` written before they moved (at its top level) still loads."""
    import dataclasses
    import json

    from suite.config.scenario import Run

    data = tiny_scenario(
        "s",
        [
            {"strategy": "cellular", "engine": "mpi", "procs": [1], "grid": [1, 1], "cellular": {"population": 2}},
            {"strategy": "label_partitioned", "engine": "mpi", "loss": "wgan-gp", "procs": [1], "wgan_gp": {"lr": 0.002}},
            {"strategy": "data_parallel", "engine": "mpi", "procs": [1]},
        ],
    )
    data.update(cellular={"iterations": 3}, wgan_gp={"n_critic": 2})
    cell, wcgan, plain = expand(parse_scenario(data))
    assert (cell.section("cellular").iterations, cell.section("cellular").population) == (3, 2)
    assert (wcgan.section("wgan_gp").lr, wcgan.section("wgan_gp").n_critic) == (0.002, 2)
    assert set(cell.sections) == {"cellular"} and set(wcgan.sections) == {"wgan_gp"} and plain.sections == {}
    assert plain.section("wgan_gp").n_critic == 5  # a section its run does not read: its defaults
    for run in (cell, wcgan, plain):
        assert Run.from_dict(json.loads(run.to_json())) == run
    old = {k: v for k, v in cell.to_dict().items() if k != "sections"}  # the layout of run.json until now
    old |= {"wgan_gp": {"n_critic": 5, "gp_weight": 10.0, "lr": 0.0001, "betas": [0.0, 0.9]}}
    old |= {"cellular": dataclasses.asdict(cell.section("cellular"))}
    assert Run.from_dict(old).section("cellular") == cell.section("cellular")


def test_the_committed_records_read_into_their_strategies_parts_and_write_back_unchanged():
    """Every committed record (reports/*/records.json, written while the strategies' fields were the core record's)
    reads with its strategy's fields in its part, and writes back the same file: the same keys, in the same order."""
    import json

    from suite.records.codec import record_data
    from suite.records.record import part_of
    from suite.strategies.cellular.record import CellularRecord
    from suite.strategies.label_partitioned.record import LabelPartitionedRecord

    lists = sorted(REPO.glob("reports/*/records.json"))  # a report's records, as record_data wrote them
    files = sorted(REPO.glob("reports/**/result.json"))  # run folders' records, the schema's version first
    assert lists and files
    committed = [(path, data, True) for path in lists for data in json.loads(path.read_text())]
    committed += [(path, json.loads(path.read_text()), False) for path in files]
    seen = set()
    for path, data, in_order in committed:
        record = parse_record(data, str(path))
        written = record_data(record)
        assert written == data, (path, data.get("run_id"))
        if in_order:
            assert json.dumps(written) == json.dumps(data), (path, data.get("run_id"))
        part = {"cellular": CellularRecord, "label_partitioned": LabelPartitionedRecord}.get(str(record.strategy))
        if part is None:
            assert record.strategy_part is None
            continue
        assert isinstance(record.strategy_part, part) and part_of(record, part) is record.strategy_part
        seen.add(record.strategy)
        if record.status == "ok" and record.strategy == "cellular":
            assert part_of(record, CellularRecord).cells_per_rank == data["cells_per_rank"] is not None
    assert seen == {"cellular", "label_partitioned"}


def reaching(package: str) -> set[str]:
    """The files of ``suite/`` outside ``package`` (``suite/strategies/cellular``) that reach its code: import
    one of its modules, or name it or one of them in a string (the registry's built-in packages, the targets), docstrings
    aside."""
    dotted = package.replace("/", ".")
    found = set()
    for path in sorted((REPO / "suite").rglob("*.py")):
        relative = str(path.relative_to(REPO))
        if relative.startswith(package + "/") or relative == package + ".py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                absolute = module if not node.level else ".".join(relative[:-3].split("/")[: -node.level] + [module.lstrip(".")])
                if absolute == dotted or absolute.startswith(dotted + "."):
                    found.add(relative)
            elif isinstance(node, ast.Import) and any(a.name.startswith(dotted) for a in node.names):
                found.add(relative)
            elif isinstance(node, ast.Constant) and id(node) not in docstrings and isinstance(node.value, str):
                if node.value == dotted or node.value.startswith((dotted + ".", dotted + ":")):
                    found.add(relative)
    return found


def test_a_built_in_strategys_package_is_reached_from_its_registration_and_analysis_accessor_only():
    """A new record field or setting of a strategy touches its package: the rest of the suite reaches it through its
    registry entry (``suite/config/registry.py``) and analysis's one accessor of strategies' record parts."""
    allowed = {"suite/config/registry.py", "suite/analysis/strategy_fields.py"}
    cellular = reaching("suite/strategies/cellular")
    assert "suite/config/registry.py" in cellular and cellular <= allowed
    assert reaching("suite/strategies/label_partitioned") <= allowed | {"suite/running/mlperf_lines.py"}


def test_the_reach_check_resolves_relative_imports():
    assert "suite/train/strategies/base.py" not in reaching("suite/strategies/cellular")
    assert "suite/strategies/cellular/strategy.py" in reaching("suite/train/strategies/base")  # from ...train.strategies.base
