"""Every CSV the report writes reads as numbers (issue 54, item 4): the report built by the real `write_report` from
the committed digits records (read only; the report goes into a temporary folder), each CSV loaded with
`pandas.read_csv`, and every column that is not one of the named text columns of a numeric dtype (int, float, bool):
a table with no row is not written (its page names it, issue 63), no column is empty in every row, a missing value is
an empty cell (never `none`), a range is two columns, a list is JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO
from suite.analysis.report import write_report
from suite.records.results import new_record, write_record

COMMITTED = REPO / "reports" / "digits" / "records.json"

TEXT = set(
    """
    run_id config system strategy loss engine label scaling dataset name names kind pair a b quantity metric what
    field value setting settings source phase host hosts device ruler ruler_sha256 protocol comparability classes
    class_set status reason note notes is_note fid_note files seed_list threads_per_rank peak_source
    peak_raised_ranks verdict verdicts finding claim direction better check checks network model fit cost_model
    paper point grid cpu kernel_set item launcher role fitted_on quality equal_budget_unit family estimand budget_unit
    system_a system_b git_commit
    """.split()
)  # findings.csv's family, estimand in words, the budget's unit and its two systems; a commit hash (environment_per_run.csv where runs came from two commits)
"""Columns that hold words (or lists) by design; every other column must read as a number."""


def _is_text(column: str) -> bool:
    return (
        column in TEXT
        or column.startswith("machine.")  # environment_per_run.csv: what differs between runs' machines, as recorded
        or column.endswith(("_text", "_note", "_source", "_id", "_name", "_verdict", "_sha256"))
    )


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("digits-csv")
    for record in json.loads(COMMITTED.read_text()):
        write_record(root / "results" / record["run_id"], new_record(record))
    return write_report(root / "results", root / "report").parent


def _csvs(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.csv"))


def test_the_report_writes_csvs(report_dir):
    names = {p.name for p in _csvs(report_dir)}
    assert {"engine_settings.csv", "step_time.csv", "headline.csv", "runs.csv"} <= names


def test_every_csv_loads_with_its_header(report_dir):
    for path in _csvs(report_dir):
        table = pd.read_csv(path)  # an empty table's file is its header, not one newline (EmptyDataError)
        assert len(table.columns) > 0, path.name


def test_every_numeric_column_reads_as_numbers(report_dir):
    wrong = []
    for path in _csvs(report_dir):
        table = pd.read_csv(path)
        for column in table.columns:
            values = table[column]
            if _is_text(column) or values.isna().all():  # a column with no value at all has no type to check
                continue
            if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)):
                wrong.append(f"{path.name}:{column} ({values.dropna().astype(str).unique()[:3].tolist()})")
    assert not wrong, "columns that do not read as numbers: " + "; ".join(wrong)


def test_a_table_with_no_row_is_not_written_and_its_page_says_so(report_dir):
    """The digits runs ran each strategy on one engine: no engine comparison, so no engine_comparison.csv (a header
    alone, or pandas' one newline, says nothing); the engines page names it. No CSV holds a column empty in every row."""
    assert not (report_dir / "engine_comparison.csv").exists()
    page = report_dir / "details" / "engines.md"
    assert "Tables with no row here, not written: " in page.read_text() and "`engine_comparison.csv`" in page.read_text()
    from suite.analysis.report.writer import FIXED_COLUMNS  # the headline's and findings' schema: kept whole

    for path in _csvs(report_dir):
        table = pd.read_csv(path)
        assert len(table) > 0, path.name
        assert path.name in FIXED_COLUMNS or not [c for c in table.columns if table[c].isna().all()], path.name


def test_lists_and_settings_are_json(report_dir):
    settings = pd.read_csv(report_dir / "engine_settings.csv")
    assert all(isinstance(json.loads(text), dict) for text in settings["settings"].dropna())
    for path in report_dir.glob("quality_over_seeds_*.csv"):
        table = pd.read_csv(path)
        assert all(len(json.loads(text)) == n for text, n in zip(table["seed_list"], table["seeds"]))
    # the classes a model was scored against: a JSON list and their count out of num_classes (was "0-9 of 10"); the
    # page keeps its words
    quality = pd.read_csv(next(report_dir.glob("quality_classifier-*.csv")))
    assert pd.api.types.is_integer_dtype(quality["num_classes"]) and set(quality["num_classes"]) == {10}
    assert all(json.loads(text) == list(range(10)) for text in quality["classes"])
    page = (report_dir / "details" / "quality.md").read_text()
    assert "| 0-9 of 10 |" in page and "[0,1,2" not in page


def test_ranges_and_raised_ranks_are_numbers(report_dir):
    steps = pd.read_csv(report_dir / "step_time.csv")
    # no rank raised its peak in these runs: the column, empty in every row, is left out rather than written as "none"
    assert "none" not in steps.get("peak_raised_ranks", pd.Series(dtype=str)).astype(str).tolist()
    quality = next(report_dir.glob("quality_classifier-*.csv"))
    scores = pd.read_csv(quality)
    for field in ("per_class_label", "per_class_predicted"):
        assert f"{field}_n" not in scores.columns
        lo, hi = scores[f"{field}_n_min"], scores[f"{field}_n_max"]
        assert pd.api.types.is_numeric_dtype(lo) and pd.api.types.is_numeric_dtype(hi)
        assert (lo.dropna() <= hi.dropna()).all()


def test_the_findings_budget_is_a_number_with_its_unit(report_dir):
    """findings.csv's budget was "3,840 training images per system" (issue 63): now the number, the largest where the
    runs differ, and its unit, read from the records' ``budget_images``; the page keeps its words."""
    findings = pd.read_csv(report_dir / "findings.csv")
    assert {"budget", "budget_max", "budget_unit"} <= set(findings.columns)
    assert pd.api.types.is_float_dtype(findings["budget"]) and pd.api.types.is_float_dtype(findings["budget_max"])
    budgets = {r["budget_images"] for r in json.loads(COMMITTED.read_text())}
    assert len(budgets) == 1  # the committed main job: one images budget for every run
    (images,) = budgets
    assert (findings["budget"] == images).all() and (findings["budget_max"] == images).all()
    assert set(findings["budget_unit"]) == {"images"}
    assert f"{images:,} training images per system" in (report_dir / "report.md").read_text()
