"""``suite run --json`` and ``suite report --json``: one JSON document a machine reads instead of the pages.

``run_summary``: each run of a results folder with its status, times, images/s and FID, from its record.
``report_summary``: what a report's first page says, from the tables it wrote beside it: the systems (``headline.csv``:
times, images/s, speedup, quality, each an estimate with its interval) and the tested findings (``findings.csv``:
family, the two systems, the verdict, the ratio and its interval). Missing values are ``null``, never ``NaN``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from ..records.results import iter_records

RUN_FIELDS = ("run_id", "status", "strategy", "loss", "engine", "procs", "seed", "wall_s", "train_s", "images_per_s")
"""The fields of each run's entry, as its record names them (with ``fid``, its quality's)."""


def _plain(value: Any) -> Any:
    """A value JSON holds: numpy scalars as Python's, NaN as None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def run_summary(out: Path, exit_code: int) -> dict[str, Any]:
    """The results folder ``out``'s runs (every record in it, finished earlier or now) and the exit code of ``suite run``."""
    runs = []
    for record in iter_records(out, skip_bad=True):
        entry = {name: _plain(getattr(record, name, None)) for name in RUN_FIELDS}
        entry["fid"] = _plain(record.quality.fid) if record.quality is not None else None
        runs.append(entry)
    counts = {status: sum(r["status"] == status for r in runs) for status in sorted({str(r["status"]) for r in runs})}
    return {"results": str(out), "exit_code": exit_code, "runs_by_status": counts, "runs": runs}


def _rows(path: Path) -> list[dict[str, Any]]:
    """A report CSV's rows as plain mappings (an absent file: none, as a table with no row is not written)."""
    if not path.is_file():
        return []
    table = pd.read_csv(path)
    return [{column: _plain(value) for column, value in row.items()} for row in table.to_dict(orient="records")]


def report_summary(report: Path) -> dict[str, Any]:
    """What the first page at ``report`` (``report.md``) says, from the tables written beside it."""
    folder = report.parent
    return {
        "report": str(report),
        "systems": _rows(folder / "headline.csv"),
        "findings": _rows(folder / "findings.csv"),
    }


def dumps(document: dict[str, Any]) -> str:
    """The document as JSON text (no NaN: :func:`_plain` made every value JSON's)."""
    return json.dumps(document, indent=1, allow_nan=False)
