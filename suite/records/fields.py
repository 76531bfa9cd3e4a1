"""How a record part declares a field: the bounded types of its counts and durations, and the mark (:func:`column`)
that makes a field a column of the report's flat table and of the report's tables it names, with how the table shows
its value."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Callable

from pydantic import Field

from ..config.sweep import sweep_text

Count = Annotated[int, Field(ge=0)]
"""A record's count of steps, images or bytes."""
Positive = Annotated[int, Field(ge=1)]
"""A record's count that is at least 1: processes, threads, cores, a batch, a grid's side."""
Seconds = Annotated[float, Field(ge=0)]
"""A record's duration."""
Grid = Annotated[list[Positive], Field(min_length=2, max_length=2)]
"""A cellular grid or process grid: rows and columns."""


RUNS = "runs"
"""The report's per-run table (its Runs section and ``runs.csv``): a table a column may join (:func:`column`)."""
REPORT_TABLES = (RUNS,)
"""The report's tables that a strategy's column may join besides the flat table, which every column is in."""


def column(name: str | None = None, *, tables: tuple[str, ...] = (), text: Callable[[Any], Any] | None = None) -> Any:
    """A field (default None) that is a column of the flat table, named ``name`` or after the field.

    ``tables``: the report's tables (:data:`REPORT_TABLES`) that a strategy's column also joins, after the core's columns
    (:func:`suite.records.codec.joined_columns`); ``text``: how the flat table shows its value (None: as it is).
    """
    unknown = [t for t in tables if t not in REPORT_TABLES]
    if unknown:
        raise ValueError(f"column {name or ''!r}: no report table {unknown[0]!r} (one of {', '.join(REPORT_TABLES)})")
    metadata: dict[str, Any] = {"column": name or True}
    if tables:
        metadata["tables"] = tuple(tables)
    if text is not None:
        metadata["text"] = text
    return dataclasses.field(default=None, metadata=metadata)


def comma_list(value: Any) -> str | None:
    """A list of values as the flat table shows it: ``0,3,7`` (None where empty)."""
    return ",".join(map(str, value)) if value else None


def grid_text(value: Any) -> str | None:
    """A grid as the flat table shows it: ``2x3`` (None where there is none)."""
    return "x".join(map(str, value)) if value else None


def total_steps(value: Any) -> Any:
    """Generator steps as the flat table shows them: their total where a run counts them per GAN (a mapping)."""
    return sum(value.values()) if isinstance(value, dict) else value


def sweep_cell(value: Any) -> str | None:
    """A run's swept values as the flat table shows them: ``lr=0.001, n_critic=5`` (None where it has none)."""
    return sweep_text(value) or None
