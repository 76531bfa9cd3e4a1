"""The report's one writer: what its sections return (:class:`.section.Section`: tables, files shown from the run
folders) and its pages, put on disk in the report folder; then the first page, the records it was made from and
the measured network. The figures are drawn into the folder by :mod:`suite.analysis.plots` as the sections are made.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pandas as pd

from ...config.escape import csv_text, terminal
from ...measure.network import PROBE_BYTES
from ...records.codec import record_data
from ...records.nofollow import UnsafeEntry, copy_regular, make_folder
from ...records.quoted import read_quoted
from ...records.record import Record
from ...records.results import PROBE_FILE, RECORDS_FILE, atomic_write, atomic_write_text, path_under
from .pages import DETAILS, Page, page_text
from .section import Section

log = logging.getLogger(__name__)

FIRST_PAGE = "report.md"
"""The report's first page, in the report folder."""


FIXED_COLUMNS = frozenset({"headline.csv", "findings.csv"})
"""The tables whose columns are a schema machine readers rely on (``suite report --json`` among them): every quantity
keeps its estimate, interval and draws columns, empty where no run has a value."""


def write_table(out_dir: Path, name: str, table: pd.DataFrame) -> bool:
    """``table`` as the CSV ``out_dir/name`` (no index column); its text cells as data (:func:`suite.config.escape.csv_text`:
    controls escaped, never a spreadsheet formula). A table with no row is not written (a header alone says nothing,
    and its page says why it is missing: :func:`write_section_files`); a column with no value in any row is left out
    (a GPU's busy share on CPU runs), but in :data:`FIXED_COLUMNS`. Returns whether the file was written."""
    if table.empty:
        return False
    text = table
    if name not in FIXED_COLUMNS:  # an empty cell in every row: left out
        text = text.loc[:, (text.notna() & (text.astype(str) != "")).any()]
    atomic_write_text(out_dir / name, csv_text(text))
    return True


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
"""How every PNG starts: a file the report copies as a PNG that does not is refused."""


NOT_WRITTEN = "Tables with no row here, not written: {names} (these runs hold nothing of the kind)."
"""The line a page ends with when some of its tables had no row (:func:`write_table` writes none of those)."""


def write_section_files(out_dir: Path, section: Section) -> None:
    """A section's tables as CSVs and the files it shows copied into ``out_dir`` (never out of it); a table with no
    row is not written, and a line at the end of the section names it. Each copy opens its source once without
    following a link and checks what it opened, a regular file of one link (and, for a ``.png``, a PNG), never the
    name looked at before (:func:`suite.records.nofollow.copy_regular`)."""
    empty = [name for name, table in section.tables.items() if not write_table(out_dir, name, table)]
    if empty:
        section.lines.append("\n" + NOT_WRITTEN.format(names=", ".join(f"`{name}`" for name in empty)))
    for name, source in section.copies.items():
        target = path_under(out_dir, name)
        copied = io.BytesIO()
        try:
            copy_regular(source, copied, PNG_SIGNATURE if Path(source).suffix.lower() == ".png" else b"")
        except UnsafeEntry as error:  # swapped since it was checked: not copied, named; the report of the rest goes on
            log.warning("skipped %s; %s is not in the report", error, name)
            continue
        with atomic_write(target) as tmp:
            tmp.write_bytes(copied.getvalue())


def write_pages(out_dir: Path, pages: list[Page]) -> list[Page]:
    """Write every page's files, and every page that has something to say into ``out_dir/details``; return the
    pages written."""
    for page in pages:
        write_section_files(out_dir, page.section)
    written = [page for page in pages if page.lines]
    if written:
        make_folder(out_dir / DETAILS)
    for page in written:
        atomic_write_text(out_dir / page.link, terminal(page_text(page)) + "\n")  # no control character from a record
    return written


def write_first_page(out_dir: Path, first: Section, records: list[Record], probe: Path | None) -> Path:
    """report.md and its files, the records the report was made from, and (where ``probe`` names one) the measured
    network, so that ``suite project REPORT`` fits and validates what the report shows; return report.md's path."""
    write_section_files(out_dir, first)
    path = out_dir / FIRST_PAGE
    atomic_write_text(path, terminal("\n".join(first.lines)))  # no control character from a record
    atomic_write_text(out_dir / RECORDS_FILE, json.dumps([record_data(r) for r in records], indent=1))
    if probe is not None:
        atomic_write_text(out_dir / PROBE_FILE, read_quoted(probe, PROBE_BYTES, "probe"))  # a link there: refused, not copied
    return path
