"""Markdown for the report and the other analyses: numbers as text, tables, folded details."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from ..config.escape import html_text, markdown_cell

NA = "n/a"


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return NA
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        magnitude = abs(float(value))
        if magnitude != 0 and magnitude < 10**-(digits):
            return f"{float(value):.{digits - 1}e}"
        if magnitude >= 1000:
            return f"{float(value):.0f}"
        return f"{float(value):.{digits}f}".rstrip("0").rstrip(".") or "0"
    return str(value)


def cell(text: Any) -> str:
    """``text`` as data in one line of markdown (a table's cell, a sentence): :func:`suite.config.escape.markdown_cell`
    (controls and bidirectional characters escaped, a ``<`` that could open HTML as ``&lt;``, ``|`` escaped, line
    breaks joined), so that a string from a record (an error, a host name) never becomes HTML or a terminal command."""
    return markdown_cell(text)


class Markdown(str):
    """Markdown the suite wrote itself from parts it escaped (a link to a file it names): a table prints it as is."""


def link(text: str, target: str) -> Markdown:
    """``[text](target)`` as :class:`Markdown`: the text escaped as a cell, the target percent-encoded (a run
    folder's name cannot close the link or start another)."""
    return Markdown(f"[{cell(text)}]({quote(target)})")


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no extra dependency); every cell is data (:func:`cell`), but the suite's own
    links (:class:`Markdown`)."""
    if frame.empty:
        return "_(none)_\n"
    header = "| " + " | ".join(cell(c) for c in frame.columns) + " |"  # columns may be named by records (a config)
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = [
        "| " + " | ".join(v if isinstance(v, Markdown) else cell(fmt(v)) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows]) + "\n"


def given(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def significant(value: float) -> str:
    """Three significant digits without an exponent (KID ranges from 1e-4 to 1e3 across networks)."""
    return np.format_float_positional(float(value), precision=3, fractional=False, trim="-")


def std_over(std: Any, count: Any = None, size: Any = None) -> str:
    """``std (count×size)``: the standard deviation of a score over the splits or subsets of one sample.

    The spread of one estimate, printed in its own column beside the score; spread over training draws
    is printed as an interval instead (:meth:`suite.analysis.stats.summary.Summary.text`).
    """
    if not given(std):
        return NA
    return significant(std) + (f" ({fmt(count)}×{fmt(size)})" if given(count) else "")


def details(summary: str, body: str) -> str:
    """A folded block: ``summary`` as HTML text (:func:`suite.config.escape.html_text`), ``body`` markdown the caller
    escaped."""
    return f"<details><summary>{html_text(summary)}</summary>\n\n{body}\n</details>\n"
