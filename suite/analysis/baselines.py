"""The papers' numbers (``baselines/`` or ``--baselines DIR``): CSV tables read with their columns checked.

The report, the papers' pages and the projection set the papers' printed numbers beside the suite's. The
folder may be someone else's (``--baselines``), so every table is read by :func:`read_baseline`: at most
:data:`BASELINE_BYTES`, UTF-8 CSV, each known file's columns present (:data:`COLUMNS`) and each cell of the kind
its column holds (a finite number, a whole number, a grid ``RxC``), or one line naming the file, the row and the
column. Its text reaches markdown only through :func:`suite.analysis.markdown.markdown_table`, which writes it as data.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.shown import shown

if TYPE_CHECKING:
    import pandas as pd

BASELINE_BYTES = 1 << 20
"""The largest table read (the committed ones are a few KB)."""

TEXT, NUMBER, WHOLE, GRID = "text", "number", "whole", "grid"
"""What a column holds; a kind ending in ``?`` may be left empty."""

COLUMNS: dict[str, dict[str, str]] = {
    "scaling_points.csv": {
        "source": TEXT, "strategy": TEXT, "scaling": TEXT, "procs": WHOLE, "metric": TEXT, "value": NUMBER,
        "kind": TEXT, "grid": GRID + "?", "note": TEXT + "?",
    },
    "seed000_inception_scores.csv": {
        "dataset": TEXT, "model": TEXT, "is_mean": NUMBER, "is_std": NUMBER + "?", "table": TEXT, "source": TEXT,
    },
    "seed001_cellular_speedups.csv": {
        "grid": GRID, "single_core_min": NUMBER, "distributed_min": NUMBER, "distributed_std_min": NUMBER + "?",
        "speedup": NUMBER, "source": TEXT, "table": TEXT,
    },
    "seed003_fid.csv": {
        "dataset": TEXT, "grid": GRID, "statistic": TEXT, "fid": NUMBER, "fid_std": NUMBER + "?", "runs": WHOLE + "?",
        "table": TEXT, "source": TEXT,
    },
}  # fmt: skip
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
