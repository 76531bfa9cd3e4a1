"""The papers' numbers (``baselines/`` or ``--baselines DIR``): CSV tables read with their columns checked.

The report, the papers' pages and the projection set the papers' printed numbers beside the suite's. The
folder may be someone else's (``--baselines``), so every table is read by :func:`read_baseline`: at most
:data:`BASELINE_BYTES`, UTF-8 CSV, each known file's columns present (:data:`COLUMNS`) and each cell of the kind
its column holds (a finite number, a whole number, a grid ``RxC``), or one line naming the file, the row and the
column. Its text reaches markdown only through :func:`suite.analysis.markdown.markdown_table`, which writes it as data.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.shown import shown
from .columns import column_names

if TYPE_CHECKING:
    import pandas as pd

BASELINE_BYTES = 1 << 20
"""The largest table read (the committed ones are a few KB)."""

TEXT, NUMBER, WHOLE, GRID = "text", "number", "whole", "grid"
"""What a column holds; a kind ending in ``?`` may be left empty."""


def _holds(kind: str) -> Any:
    """A column of a papers' table that holds ``kind`` (:data:`TEXT`, ...; ending ``?``: may be empty)."""
    return dataclasses.field(metadata={"kind": kind})


@dataclass(frozen=True)
class ScalingPoints:
    """``scaling_points.csv``: published scaling points (the projection's :func:`suite.analysis.projection.render.paper_points`)."""

    source: str = _holds(TEXT)
    strategy: str = _holds(TEXT)
    scaling: str = _holds(TEXT)
    procs: str = _holds(WHOLE)
    metric: str = _holds(TEXT)
    value: str = _holds(NUMBER)
    kind: str = _holds(TEXT)
    grid: str = _holds(GRID + "?")
    note: str = _holds(TEXT + "?")


@dataclass(frozen=True)
class InceptionScores:
    """``paper000_inception_scores.csv``: paper 000's Inception Scores."""

    dataset: str = _holds(TEXT)
    model: str = _holds(TEXT)
    is_mean: str = _holds(NUMBER)
    is_std: str = _holds(NUMBER + "?")
    table: str = _holds(TEXT)
    source: str = _holds(TEXT)


@dataclass(frozen=True)
class CellularSpeedups:
    """``paper001_cellular_speedups.csv``: paper 001's speedups of cellular training per grid."""

    grid: str = _holds(GRID)
    single_core_min: str = _holds(NUMBER)
    distributed_min: str = _holds(NUMBER)
    distributed_std_min: str = _holds(NUMBER + "?")
    speedup: str = _holds(NUMBER)
    source: str = _holds(TEXT)
    table: str = _holds(TEXT)


@dataclass(frozen=True)
class GridFids:
    """``paper003_fid.csv``: paper 003's FIDs per grid."""

    dataset: str = _holds(TEXT)
    grid: str = _holds(GRID)
    statistic: str = _holds(TEXT)
    fid: str = _holds(NUMBER)
    fid_std: str = _holds(NUMBER + "?")
    runs: str = _holds(WHOLE + "?")
    table: str = _holds(TEXT)
    source: str = _holds(TEXT)


POINTS = column_names(ScalingPoints)
"""The papers' tables' column names, as attributes mypy checks: ``POINTS.procs == "procs"``, ``PAPER003.fid``."""
PAPER000 = column_names(InceptionScores)
PAPER001 = column_names(CellularSpeedups)
PAPER003 = column_names(GridFids)
TABLES: dict[str, type] = {
    "scaling_points.csv": ScalingPoints,
    "paper000_inception_scores.csv": InceptionScores,
    "paper001_cellular_speedups.csv": CellularSpeedups,
    "paper003_fid.csv": GridFids,
}
"""Each table the suite reads, by its file name."""
COLUMNS: dict[str, dict[str, str]] = {
    name: {f.name: f.metadata["kind"] for f in dataclasses.fields(table)} for name, table in TABLES.items()
}
"""The columns of each table the suite reads, and what each holds."""

_GRID = re.compile(r"[1-9]\d{0,3}x[1-9]\d{0,3}")


def _cell(text: str, kind: str) -> object:
    """A cell of ``kind`` from its text; :class:`ValueError` (its reason) where it is not one."""
    optional, kind = kind.endswith("?"), kind.rstrip("?")
    if text == "":
        if optional:
            return math.nan
        raise ValueError("it is empty")
    if kind == NUMBER:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number, got {shown(text)}")
        return value
    if kind == WHOLE:
        if not re.fullmatch(r"\d{1,9}", text):
            raise ValueError(f"expected a whole number, got {shown(text)}")
        return int(text)
    if kind == GRID and not _GRID.fullmatch(text):
        raise ValueError(f"expected a grid such as 2x2, got {shown(text)}")
    return text


def read_baseline(path: Path) -> pd.DataFrame:
    """The table at ``path`` with its cells converted (numbers as floats, empty optional cells as NaN); a
    :class:`ValueError` of one line naming the file (and the row and column) where it is not a table of its kind."""
    import pandas as pd

    path = Path(path)
    try:
        size = path.stat().st_size
        if size > BASELINE_BYTES:
            raise ValueError(f"larger than {BASELINE_BYTES:,} bytes")
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise ValueError(f"{path}: not a table of the papers' numbers ({' '.join(str(error).split())[:160]})") from None
    columns = COLUMNS.get(path.name, {})
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        have = ", ".join(shown(str(c), 30) for c in list(frame.columns)[:10])
        raise ValueError(f"{path}: column {missing[0]} is missing (it has {have or 'none'})")
    for name, kind in columns.items():
        values = []
        for row, text in enumerate(frame[name]):
            try:
                values.append(_cell(text, kind))
            except ValueError as error:
                reason = str(error) if str(error).startswith(("expected", "it is")) else f"expected a number, got {shown(text)}"
                raise ValueError(f"{path}: row {row + 2}, column {name}: {reason}") from None
        if kind.rstrip("?") in (TEXT, GRID):  # text stays pandas' own strings, an empty cell missing as read_csv has it
            frame[name] = frame[name].where(frame[name] != "", None)
        else:
            frame[name] = pd.Series(values, index=frame.index)
    return frame
