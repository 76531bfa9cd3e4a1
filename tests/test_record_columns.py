"""Analysis reads the record's columns through names mypy checks, not strings.

A *read of a record column by a string name* is a string constant equal to a column of the report's flat table
(:func:`suite.records.codec.flat_columns`: ``"fid"``, ``"procs"``, ``"train_s"``, ...) that stands

- as the index of a subscript, alone or inside a tuple or list index: ``df["fid"]``, ``row["procs"]``,
  ``df.loc[mask, "fid"]``, ``df[["run_id", "procs"]]``;
- or as an argument (positional or keyword, alone or inside a tuple or list) of a call of one of the mapping and
  pandas methods of :data:`METHODS`: ``row.get("fid")``, ``df.groupby(["config", "procs"])``,
  ``df.agg(runs=("run_id", "count"))``, ``df.dropna(subset=["fid"])``.

Dictionary literals that build an output table (``{"run_id": r.run_id}``) are not reads and are not counted. The count
cannot tell a record column from another table's column of the same name (the papers' baseline CSVs, the headline's
own rows keyed ``"strategy"``), so it is an upper bound. Outside ``suite/records/`` the code writes
``frame[COL.fid]`` (:mod:`suite.analysis.columns`), so that a misspelt column is a mypy error and a renamed field
fails :func:`test_the_names_are_the_records_columns`.

Counts when this test was written (suite/analysis, suite/running): 294 and 34 before (by the narrower rule of the
issue, subscripts and ``.get`` only: 202 and 34); then 85 in analysis; after the headline's rows became
:class:`suite.analysis.headline.HeadlineRow` and the projection's and papers' tables got column-name dataclasses of
their own (:func:`suite.analysis.columns.column_names`), :data:`LIMITS`: 11 in analysis; then ``plots.py`` read ``COL.procs`` too, and analysis's one left reads the
``train`` section of a run's settings; the record born from typed parts (:mod:`suite.records.parts`) left 9 in
running (from 34). The other packages are held at their counts, most of them keys of their own dicts.
"""

import ast
import dataclasses
from pathlib import Path

from suite.analysis import baselines
from suite.analysis.columns import COL, Columns, column_names, names_of
from suite.analysis.headline import SHOWN_COLUMNS, HeadlineRow
from suite.records.codec import FLAT_COLUMNS, flat_columns

REPO = Path(__file__).resolve().parents[1]
METHODS = frozenset(
    {"get", "groupby", "sort_values", "set_index", "drop_duplicates", "dropna", "pivot", "pivot_table", "agg", "merge"}
    | {"value_counts", "nunique", "reindex", "filter", "sort_index", "drop", "rename", "assign", "query"}
)
"""The calls whose string arguments name columns or keys."""
LIMITS = {
    "suite/analysis": 1,
    "suite/running": 9,
    # strings there name keys of their own dicts more than record columns (a score's "fid", the host load's
    # "wall_s", a checkpoint description's "steps"): held where they are, so that none grows back
    "suite/cli": 19,
    "suite/tools": 19,  # the gate's own "label", "seed" and verdict rows' "run_id" keys, and asv's "machine" key in the gate history: names record columns share, none a record read
    "suite/train": 21,
    "suite/measure": 50,  # +1: the EMA estimand reads the real draw's "features" of its statistics (not a record)
    "suite/config": 4,
    "suite/gan": 1,
}
"""The most reads each folder may hold: what it holds now, so that none grows back (issue 53 asks for 30 in all)."""


def _strings(node: ast.AST) -> list[ast.Constant]:
    """The string constants of ``node``: itself, or the items of a tuple or list (nested)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [c for item in node.elts for c in _strings(item)]
    return []


def column_reads(tree: ast.AST, names: set[str]) -> list[ast.Constant]:
    """The reads of a column of ``names`` by a string in ``tree`` (the module's docstring says which)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            found += _strings(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                found += _strings(argument)
    return [c for c in found if c.value in names]


def _count(folder: str) -> tuple[int, list[str]]:
    names = set(flat_columns())
    where = []
    for path in sorted((REPO / folder).rglob("*.py")):
        reads = column_reads(ast.parse(path.read_text(), str(path)), names)
        where += [f"{path.relative_to(REPO)}:{c.lineno}: {c.value!r}" for c in reads]
    return len(where), where


def test_reads_of_record_columns_by_string_do_not_grow():
    for folder, limit in LIMITS.items():
        count, where = _count(folder)
        assert count <= limit, (
            f"{folder}: {count} reads of a record column by a string (at most {limit}); name it by COL:\n" + "\n".join(where)
        )


def test_the_count_sees_every_kind_of_read():
    code = (
        'df["fid"]; df.loc[m, "procs"]; df[["run_id", "x"]]; row.get("seed"); df.groupby(["config", "scaling"])\n'
        'df.agg(runs=("run_id", "count")); df.dropna(subset=["fid"]); {"fid": 1}; df[COL.fid]; df["config"]\n'
    )
    reads = column_reads(ast.parse(code), set(flat_columns()))
    assert [c.value for c in reads] == ["fid", "procs", "run_id", "seed", "scaling", "run_id", "fid"]


def test_the_names_are_the_records_columns():
    """:class:`suite.analysis.columns.Columns` names every core column and nothing the flat table lacks (a strategy's
    part may bring a column of its own, ``flat_columns``), each attribute holding its own name."""
    names = {f.name for f in dataclasses.fields(Columns)}
    assert set(FLAT_COLUMNS) <= names <= set(flat_columns())
    assert all(getattr(COL, name) == name for name in names)


def test_a_tables_column_names_are_its_attributes_a_keyword_less_its_underscore():
    @dataclasses.dataclass(frozen=True)
    class Table:
        run_id: str
        class_: str

    names = column_names(Table)
    assert (names.run_id, names.class_) == ("run_id", "class")
    assert names_of(Table) == ["run_id", "class"]


def test_the_papers_tables_are_read_with_the_columns_their_dataclasses_name():
    """A baseline CSV is checked for the columns its dataclass names (``read_baseline``), so that the names the
    report reads it by (``PAPER003.fid``) are the ones checked present."""
    assert baselines.COLUMNS["paper003_fid.csv"]["fid"] == baselines.NUMBER
    for name, table in baselines.TABLES.items():
        assert list(baselines.COLUMNS[name]) == names_of(table)
        header = (REPO / "baselines" / name).read_text().splitlines()[0].split(",")
        assert set(names_of(table)) <= set(header), name


def test_the_headline_table_has_a_column_per_shown_field_of_its_row():
    """Every shown field of a headline row is one column of the headline page's table (``strategy`` the configuration,
    ``P`` the process counts); the summaries and runs the findings test with are fields only, never columns."""
    columns = list(SHOWN_COLUMNS.values())
    assert len(set(columns)) == len(columns) < len(dataclasses.fields(HeadlineRow))
    assert SHOWN_COLUMNS["config"] == "strategy" and SHOWN_COLUMNS["procs_text"] == "P" and "fid_summary" not in SHOWN_COLUMNS
    assert columns[:3] == ["strategy", "P", "seeds"]
