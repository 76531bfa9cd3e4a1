"""Strings from someone else, escaped where they land: a terminal, a markdown page, HTML in markdown, a code fence, a
CSV cell, a plot's text, a file name, a shell word. This module is the one escaping route of the suite: every sink
of each kind calls its function here (``tests/test_sinks.py`` plants hostile strings in every string field of a
record and reads every page, CSV and terminal line).

A record's error, host or device name, a scenario file and a rank's status come from folders others can write.
Each is data wherever the suite shows it, never markup or a terminal command:
one function per kind of sink (each says what it escapes).

Plain text with no control or bidirectional character and no markup comes out as it went in.
"""

from __future__ import annotations

import hashlib
import html
import re
import shlex
from typing import Any

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""The bidirectional marks, embeddings, overrides and isolates: they reorder what a reader sees (``Trojan Source``)."""

_UNSAFE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\u2028\u2029{_BIDI}]")
"""What :func:`terminal` escapes besides line breaks and tabs: controls (C0, DEL, C1), separators, bidi."""

_UNSAFE_ALL = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f\u2028\u2029{_BIDI}]")
""":data:`_UNSAFE` with line breaks and tabs."""

_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
"""A ``<`` that could open HTML (a tag, a closing tag, a comment, a declaration); ``p < 0.05`` and ``P <= 10`` cannot."""

_BACKTICKS = re.compile(r"`+")

_BARE_PIPE = re.compile(r"(?<!\\)((?:\\\\)*)\|")
"""A ``|`` after an even number of backslashes: one that would end a table's cell (an escaped one is left, so that
escaping twice changes nothing)."""

_BARE_URL = re.compile(r"(?i)(?<=[a-z0-9+.-])(:)(?=//)|(?<![\\\w.])(www)(\.)")
"""What GitHub's markdown would make a link of without brackets: ``scheme://`` and ``www.``."""

_BLOCK_START = re.compile(r"^([ \t]*)(#{1,6}(?=\s|$)|>|[-+*](?=\s|$)|\d{1,9}(?=[.)](?:\s|$))|[-*_=](?=[-*_=\s]*$)|`{3}|~{3})")
"""After any indentation, a first character that could start a block in markdown (a heading, a quote, a list item, a rule, a fence) or the
digits of an ordered list's marker (whose ``.`` or ``)`` is escaped)."""

PLOT_TEXT_CHARS = 160
"""The most characters of a record's string a plot shows (a longer one ends with ``...``)."""
FILE_PART_CHARS = 60
"""The most characters a record's string gives a file name (well under a file system's 255 bytes)."""

_FORMULA_START = ("=", "+", "-", "@")
"""A CSV cell beginning with one of these is a formula to a spreadsheet."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: Any, keep_lines: bool = True) -> str:
    """``text`` safe to print: control, bidirectional and separator characters as ``\\xNN`` / ``\\uNNNN``
    escapes; line breaks (``\\n``) and tabs kept where ``keep_lines`` (a carriage return is always escaped)."""
    text = str(text)
    if keep_lines:
        return _UNSAFE.sub(_escaped, text.replace("\r", "\\x0d"))
    return _UNSAFE_ALL.sub(_escaped, text)


def one_line(text: Any) -> str:
    """``text`` on one line for a terminal or a log: line breaks as spaces, then :func:`terminal`."""
    return terminal(str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " "), keep_lines=False)


def markdown_cell(text: Any) -> str:
    """``text`` as data in one line of markdown (a table's cell, a sentence): line breaks as spaces, controls and
    bidirectional characters escaped (:func:`terminal`), a ``<`` that could open HTML as ``&lt;`` (an error or a
    host name never becomes HTML), ``|`` escaped (never a new cell), ``](`` written ``]\\(`` (never a link or an
    image), ``://`` and ``www.`` written ``\\://`` and ``www\\.`` (never an autolink), and a first character that
    would start a block escaped (never a heading, quote or list)."""
    text = _TAG_START.sub("&lt;", one_line(text))
    text = _BARE_PIPE.sub(r"\1\\|", text).replace("](", "]\\(")
    text = _BARE_URL.sub(lambda m: "\\:" if m.group(1) else "www\\.", text)
    return _BLOCK_START.sub(_block_escaped, text, count=1)  # "-1.5" starts no block; "0." would (a list)


def _block_escaped(match: re.Match[str]) -> str:
    space, found = match.groups()
    return space + (found + "\\" if found[0].isdigit() else "\\" + found)


def html_text(text: Any) -> str:
    """``text`` as data inside HTML in a markdown page (a ``<summary>``, an attribute's value): :func:`one_line`, then
    ``&``, ``<``, ``>``, ``"`` and ``'`` as entities."""
    return html.escape(one_line(text), quote=True)


def plot_text(text: Any) -> str:
    """``text`` for a matplotlib label, legend or title: :func:`one_line` (no control reaches a glyph warning on the
    terminal), ``$`` escaped (matplotlib would parse ``$...$`` as mathtext, and a malformed one stops the plot), cut
    to :data:`PLOT_TEXT_CHARS` characters."""
    shown = one_line(text)
    if len(shown) > PLOT_TEXT_CHARS:
        shown = shown[: PLOT_TEXT_CHARS - 3] + "..."
    return shown.replace("$", r"\$")


def file_part(text: Any) -> str:
    """``text`` as a part of a file name: every character but ASCII letters and digits as ``-`` (none at either
    end); longer than :data:`FILE_PART_CHARS`, its start and the first 10 hex digits of its sha256 (so two long
    names that share a start are still two files)."""
    text = str(text)
    part = "".join(c if c.isascii() and c.isalnum() else "-" for c in text).strip("-")
    if len(part) <= FILE_PART_CHARS:
        return part
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return part[: FILE_PART_CHARS - 11].rstrip("-") + "-" + digest


def shell_word(text: Any) -> str:
    """A path or word printed beside a command meant to be copied: :func:`shlex.quote` (``results/x$(id)`` comes out
    ``'results/x$(id)'``), then :func:`one_line` (controls escaped)."""
    return one_line(shlex.quote(str(text)))


def fence_for(text: str) -> str:
    """The backtick fence for ``text``: at least three, and one more than the longest run of backticks in it."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def code_span(text: Any) -> str:
    """``text`` as an inline code span in markdown (a path, a ruler's name): :func:`one_line`, between more backticks
    than its longest run of backticks (padded with a space where it starts or ends with one), so nothing in it ends the
    span; inside, nothing is HTML, a link or a heading."""
    body = one_line(text)
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def code_fence(text: Any, info: str = "") -> str:
    """``text`` as a fenced code block (ending with a line break) that nothing inside can close (:func:`fence_for`),
    its controls and bidirectional characters escaped (:func:`terminal`; line breaks and tabs kept). ``info``: the
    language word after the opening fence (``yaml``)."""
    body = terminal(text).strip("\n")
    fence = fence_for(body)
    return f"{fence}{info}\n{body}\n{fence}\n"


def csv_cell(value: Any) -> Any:
    """A text ``value`` for a CSV file: controls and bidirectional characters escaped (line breaks too: one row per
    line), and a leading ``=``, ``+``, ``-`` or ``@`` prefixed with ``'`` so that a spreadsheet reads text, not a
    formula (a number that is text, ``-1.5``, is left as it is). Values that are not text come back unchanged."""
    if not isinstance(value, str):
        return value
    text = terminal(value, keep_lines=False)
    if text.startswith(_FORMULA_START) and not _is_number(text):
        return "'" + text
    return text


def csv_text(table: Any) -> str:
    """A pandas ``table`` as CSV text (no index column), every text cell and every column name through
    :func:`csv_cell`: the one route of every CSV the suite writes from records (the report's tables, ``tuning.csv``).
    Columns that hold no text (numbers) are written as they are."""

    def textual(column: Any) -> bool:  # object, string or pandas 3's str columns (their kind is "O")
        return getattr(column.dtype, "kind", "") in ("O", "S", "U")

    shown = table.apply(lambda column: column.map(csv_cell) if textual(column) else column)
    shown.columns = [csv_cell(str(name)) for name in shown.columns]
    return str(shown.to_csv(index=False))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
