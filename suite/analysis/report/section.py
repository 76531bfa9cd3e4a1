"""What one section of the report shows, returned rather than written: its markdown lines, its tables (each
also a CSV beside report.md) and the files it shows from the run folders (samples). :mod:`.writer` puts them
on disk; figures are drawn into the report folder by :mod:`suite.analysis.plots` and named in the lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass
class Section:
    """A section's markdown lines, its tables by CSV file name and the files it copies in by their name in the
    report folder (relative to it) and their source."""

    lines: list[str] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    copies: dict[str, Path] = field(default_factory=dict)

    def __add__(self, other: Section) -> Section:
        """The two sections one after the other (on one page)."""
        return Section(self.lines + other.lines, {**self.tables, **other.tables}, {**self.copies, **other.copies})
