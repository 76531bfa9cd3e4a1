"""Text files the suite quotes or copies from a results folder (a run's ``scenario.yaml``, ``probe.json``): bounded.

Results folders are shared, so the file may be anything: a 1 GB sparse file, bytes that are not UTF-8, a link. It is
opened without following a link (:func:`suite.records.nofollow.open_regular`), read up to its cap and one byte more,
and decoded as UTF-8; a file over the cap or not UTF-8 is a :class:`QuotedFileError`, one line naming the file.
"""

from __future__ import annotations

import os

from .nofollow import open_regular, printable_path

MAX_QUOTED_BYTES = 1 << 20
"""The largest file the report quotes (a run's ``scenario.yaml``): the scenario cap's default
(:data:`suite.config.scenario.MAX_SCENARIO_BYTES`); the shipped scenarios are under 4 KB."""


class QuotedFileError(ValueError):
    """A file to quote or copy is larger than its cap or not UTF-8 text; one line naming it."""


def read_quoted(path: str | os.PathLike, limit: int = MAX_QUOTED_BYTES, what: str = "file") -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes read: :class:`QuotedFileError` naming the
    file when it holds more or is not UTF-8 (a link, FIFO or device there is refused by :func:`open_regular`)."""
    name = printable_path(path)
    with open(open_regular(path, os.O_RDONLY), "rb") as handle:
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise QuotedFileError(f"{name}: larger than {limit:,} bytes, the most a {what} may hold here; not read")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise QuotedFileError(
            f"{name}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start}); a {what} is UTF-8 text"
        ) from None
