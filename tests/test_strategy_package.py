"""A strategy is one package, built-ins included: its registry entry, its record part and the report tables its
columns join live in it, and reading a record reaches no training module.

The experiment of issue 62, done for real: one field added to the label-partitioned record part (its package's
``record.py``, changed as an engineer would, loaded in its place) reaches the report's per-run table (the Runs section
and ``runs.csv``), and the committed records still write back byte for byte, with nothing else of the suite changed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import REPO
from suite.config import registry
from suite.config.entries import record_part_type
from suite.records.codec import flat_columns, joined_columns, parse_record, record_data
from suite.records.fields import RUNS, column
from suite.records.parts import StrategyPart, assemble
from suite.records.record import part_of
from suite.records.results import records_frame

COMMITTED = REPO / "reports" / "digits" / "records.json"
PACKAGE = REPO / "suite" / "strategies" / "label_partitioned"


def _with_class_groups(tmp_path, monkeypatch) -> type:
    """The label-partitioned package's ``record.py`` with one field more, ``class_groups`` (a column that joins the
    per-run table), loaded as a module of that package in the place of its own, and its registry entry naming it."""
    source = (PACKAGE / "record.py").read_text()
    anchor = '    """Each communicator group\'s ranks, classes and replica digests."""\n'
    assert anchor in source  # the last field of the part, after which the new one goes
    source = source.replace(
        anchor, anchor + '    class_groups: Positive | None = column(tables=(RUNS,))\n    """Communicator groups trained."""\n'
    )
    imports = "from ...records.fields import Count,"
    assert imports in source  # where the new field's names are imported from
    source = source.replace(imports, "from ...records.fields import RUNS, Count, Positive,")
    path = tmp_path / "record.py"
    path.write_text(source)
    name = "suite.strategies.label_partitioned.record_with_class_groups"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    part = module.LabelPartitionedRecord
    entry = registry.STRATEGIES["label_partitioned"]
    monkeypatch.setitem(registry.STRATEGIES._entries, "label_partitioned", replace(entry, record_part=part))
    return part


def test_a_field_added_to_one_strategys_package_reaches_the_per_run_table(tmp_path, monkeypatch):
    from suite.analysis.report.sections import runs_section

    assert "class_groups" not in flat_columns() and joined_columns(RUNS) == []  # today no strategy column joins it
    part = _with_class_groups(tmp_path, monkeypatch)
    assert "class_groups" in {f.name for f in dataclasses.fields(part)}
    assert flat_columns()["class_groups"] == "strategy_part.class_groups"
    assert joined_columns(RUNS) == ["class_groups"]

    committed = json.loads(COMMITTED.read_text())
    records = [parse_record(data, str(COMMITTED)) for data in committed]
    for record, data in zip(records, committed):  # no committed record gains "class_groups": null
        assert json.dumps(record_data(record)) == json.dumps(data), data["run_id"]

    # the strategy's other edit: it hands the value in its Outcome.fields, which the worker assembles into the record
    ran = next(r for r in records if r.strategy == "label_partitioned" and r.status == "ok")
    own = part_of(ran, part)
    fields = sys.modules[part.__module__].LabelPartitionedFields(
        classes=own.classes, class_schedule=own.class_schedule, groups=own.groups, class_groups=2
    )
    with_groups = assemble("a new record", replace(ran, strategy_part=None), StrategyPart(dataclasses.asdict(fields)))
    assert isinstance(with_groups.strategy_part, part) and part_of(with_groups, part).class_groups == 2
    assert record_data(with_groups)["class_groups"] == 2  # written where the record has it
    section = runs_section(records_frame([with_groups, *records]))
    runs = section.tables["runs.csv"]
    assert list(runs.columns)[-2:] == ["class_groups", "error"]
    assert runs["class_groups"].iloc[0] == 2 and runs["class_groups"].iloc[1:].isna().all()
    assert "class_groups" in "\n".join(section.lines)


def test_a_field_an_older_record_held_as_null_is_written_back_as_it_was(tmp_path, monkeypatch):
    _with_class_groups(tmp_path, monkeypatch)
    data = next(d for d in json.loads(COMMITTED.read_text()) if d["strategy"] == "label_partitioned")
    written = record_data(parse_record({**data, "class_groups": None}, "a record"))  # a file that wrote it null
    assert "class_groups" in written and written["class_groups"] is None
    assert json.dumps(record_data(parse_record(written, "a record"))) == json.dumps(written)


def test_a_column_names_only_the_reports_tables():
    with pytest.raises(ValueError, match="no report table 'headline'"):
        column(tables=("headline",))


def test_reading_a_record_imports_no_training_module_nor_torch():
    """The records layer reads a strategy's part through its registry entry, which the registry loads from the
    strategy's package by name: neither that nor the record's check reaches ``suite.train``, the GAN or torch."""
    code = (
        "import sys\n"
        "from suite.records.results import read_records\n"
        f"records = read_records({str(COMMITTED)!r})\n"
        "assert {type(r.strategy_part).__name__ for r in records} >= {'CellularRecord', 'LabelPartitionedRecord'}\n"
        "heavy = ('torch', 'suite.train', 'suite.gan', 'suite.measure')\n"
        "print(sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + '.' for h in heavy))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_check_sees_a_training_module_imported():
    code = "import sys\nimport suite.train.flat\nprint('suite.train' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


def test_the_built_in_strategies_are_entries_of_their_own_packages():
    """Each built-in strategy's entry is defined in its package's ``entry`` module (as a plugin's), and its
    implementation and record part in that same package."""
    for entry in registry.STRATEGIES:
        if entry.name in registry.STRATEGIES.plugins:
            continue
        package = registry.STRATEGIES.sources[entry.name].rpartition(".")[0]
        assert package in registry.BUILT_IN_STRATEGIES, entry.name
        assert entry.target.startswith(package + "."), entry.name
        part = record_part_type(entry)
        assert part is None or part.__module__.startswith(package + "."), entry.name
