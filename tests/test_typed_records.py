"""Records travel as typed objects: read once by the one loader, their parts read as attributes.

mypy (strict on ``suite.analysis`` and ``suite.running``, ``pyproject.toml``) refuses a ``Record`` indexed by a string;
this test keeps the names that hold records from being indexed as mappings anywhere outside ``suite/records/``, and
checks that every reader hands out ``Record`` objects.
"""

import ast
import json
from pathlib import Path

from suite.records.record import SCHEMA_VERSION, Record
from suite.records.results import RECORD_FILE, RECORDS_FILE, iter_records, read_record, read_records

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suite"
READERS_OUTSIDE_SUITE = ("ci", "tests/cluster", "examples", "baselines")
"""Folders of scripts and tests that read records through the suite's readers (``make cluster-test`` runs
``tests/cluster`` outside ``make test``, so only this scan sees it there)."""
RECORD_NAMES = {"record", "records", "rec"}
"""The names the code gives a record or a list of them."""


def _string_keyed(tree: ast.AST) -> list[ast.AST]:
    """Subscripts by a string constant and ``.get("...")`` calls on a name of :data:`RECORD_NAMES` (or an item of one)."""
    found = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            target = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            target = node.func.value
        while isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Name) and target.id in RECORD_NAMES:
            found.append(node)
    return found


def _mapping_parameters(tree: ast.AST) -> list[ast.arg]:
    """Parameters named like a record but annotated as a mapping (``record: dict``, ``records: list[dict]``; records by
    run id, ``dict[str, Record]``, are records)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in [*node.args.args, *node.args.kwonlyargs]:
                text = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if arg.arg in RECORD_NAMES and "dict" in text and "Record" not in text:  # dict[str, Record]: by run id
                    found.append(arg)
    return found


def _scanned() -> list[Path]:
    """Every module outside ``suite/records/`` that may read records: the suite's and the scripts' and tests' of
    :data:`READERS_OUTSIDE_SUITE`."""
    inside = [p for p in sorted(SUITE.rglob("*.py")) if p.relative_to(SUITE).parts[0] != "records"]
    return inside + [p for folder in READERS_OUTSIDE_SUITE for p in sorted((REPO / folder).rglob("*.py"))]


def test_no_module_outside_records_reads_a_record_by_string_key():
    problems = []
    for path in _scanned():
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(REPO)
        problems += [f"{where}:{n.lineno}: {ast.unparse(n)}" for n in _string_keyed(tree)]
        problems += [f"{where}:{a.lineno}: {a.arg}: {ast.unparse(a.annotation)}" for a in _mapping_parameters(tree)]
    assert problems == []
    assert any(p.parts[-2:] == ("cluster", "test_cluster.py") for p in _scanned())


def test_the_scan_finds_what_it_looks_for():
    code = 'def f(record: dict, records: list[dict]):\n    return record["status"], records[0].get("run_id"), rec["x"]["y"]\n'  # 4: rec["x"]["y"] twice
    tree = ast.parse(code)
    assert len(_string_keyed(tree)) == 4 and [a.arg for a in _mapping_parameters(tree)] == ["record", "records"]
    assert _string_keyed(ast.parse('row["status"]; frame.get("x"); record.quality.fid')) == []


def test_every_reader_hands_out_records(tmp_path):
    data = {"schema": SCHEMA_VERSION, "run_id": "a", "status": "ok", "strategy": "data_parallel", "engine": "mpi"}
    data |= {"loss": "bce", "procs": 1, "scaling": "strong", "quality": {"features": "classifier:digits", "fid": 12.5}}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / RECORD_FILE).write_text(json.dumps(data))
    (tmp_path / RECORDS_FILE).write_text(json.dumps([data]))
    for record in [
        read_record(tmp_path / "a"),
        *iter_records(tmp_path),
        *read_records(tmp_path),
        *read_records(tmp_path / RECORDS_FILE),
    ]:
        assert isinstance(record, Record) and record.quality.fid == 12.5
