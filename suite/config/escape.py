"""Strings from someone else, escaped where they land: a terminal, a markdown page, a code fence, a CSV cell.

A record's error, host or device name, a scenario file and a rank's status come from folders others can write.
Each is data wherever the suite shows it, never markup or a terminal command:

- :func:`terminal`: C0 and C1 control characters (ESC, which starts ANSI and OSC sequences, BEL, NUL, DEL), the
  bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) and the line and
  paragraph separators are written as ``\\xNN`` or ``\\uNNNN``; line breaks and tabs are kept only where asked.
- :func:`markdown_cell`: one line of markdown (a table's cell, a sentence): :func:`terminal` on one line, a ``<``
  that could open HTML as ``&lt;``, ``|`` escaped, ``](`` broken so that no link is made.
- :func:`code_fence`: a block fenced by more backticks than the longest run of backticks inside, so nothing in
  it closes the fence.
- :func:`csv_cell`: a text cell that a spreadsheet would take for a formula (``=``, ``+``, ``-``, ``@`` first)
  is prefixed with ``'``; controls escaped as above.

Plain text with no control or bidirectional character and no markup comes out as it went in.
"""

from __future__ import annotations

import re
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
    host name never becomes HTML), ``|`` escaped (never a new cell), ``](`` written ``]\\(`` (never a link)."""
    text = _TAG_START.sub("&lt;", one_line(text))
    return _BARE_PIPE.sub(r"\1\\|", text).replace("](", "]\\(")


def fence_for(text: str) -> str:
    """The backtick fence for ``text``: at least three, and one more than the longest run of backticks in it."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


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


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
