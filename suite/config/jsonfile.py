"""JSON in: the one reader of the JSON files the suite reads back (run records, rank status files, probes,
checkpoint descriptions, run settings).

A results folder is shared, so any of its files may come from someone else. Reading one is bounded: its size
(``max_bytes``, :data:`MAX_BYTES` unless the reader says), its nesting (:data:`MAX_JSON_DEPTH`, counted on the text
before it is parsed: Python's parser recurses), its numbers (no ``NaN``, ``Infinity`` or ``1e400``, though Python's
parser takes them; integers within 64 bits) and its text (UTF-8). Every problem is a :class:`JsonError` (a
:class:`ValueError`: exit code 2) of one line naming the file.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

MAX_JSON_DEPTH = 64
"""Arrays and objects inside one another: the suite's own files nest fewer than 10 deep."""
MAX_BYTES = 256 << 20
"""The largest JSON file read by default (256 MiB: a ``records.json`` of some thousand runs is a few MiB)."""
_INT_BITS = 63

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class JsonError(ValueError):
    """A JSON file or text cannot be read; the message is one line naming the file (``reason``: the line without it)."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"{source}: {reason}" if source else reason)
        self.source, self.reason = source, reason


def nesting(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep arrays and objects nest in JSON ``text`` (strings skipped), counted up to ``limit + 1``."""
    skeleton = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for char in skeleton:
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


def _constant(name: str) -> Any:
    raise JsonError("", f"{name} is not a JSON number (a missing number is null)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonError("", f"{text[:40]} is too large for a number")
    return value


def _int(text: str) -> int:
    if len(text) > 20 or abs(value := int(text)) >= 1 << _INT_BITS:
        raise JsonError("", f"{text[:40]}{'...' if len(text) > 40 else ''} is too large for an integer (at most 2^63 - 1)")
    return value


def parse_json(text: str, source: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The data of JSON ``text``; :class:`JsonError` naming ``source`` where it is not JSON the suite reads (above)."""
    if nesting(text, max_depth) > max_depth:
        raise JsonError(source, f"nested more than {max_depth} levels deep; not a file the suite wrote")
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except JsonError as error:
        raise JsonError(source, error.reason) from None
    except (ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError
        raise JsonError(source, f"not valid JSON ({' '.join(str(error).split())[:200]})") from None


def read_json(path: str | os.PathLike, max_bytes: int = MAX_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The data of the JSON file at ``path``, read as bounded above; :class:`JsonError` naming it.

    A FIFO, device or folder in the file's place is refused without waiting on it. An ``OSError`` (no such file, no
    permission) is passed on as it is: the caller knows what a missing file means.
    """
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put in a file's place does not block the reader
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise JsonError(str(path), "not a regular file")
        data = handle.read(max_bytes + 1)
    return json_from_bytes(data, str(path), max_bytes, max_depth)


def json_from_bytes(data: bytes, source: str, max_bytes: int = MAX_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The data of the JSON file ``source`` whose bytes (read up to ``max_bytes + 1``) are ``data``, bounded as
    :func:`read_json` bounds a file: for a reader that must parse the very bytes it read (and hashed)."""
    if len(data) > max_bytes:
        raise JsonError(source, f"larger than {max_bytes:,} bytes; not a file the suite wrote")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JsonError(source, f"not UTF-8 text (byte {error.start})") from None
    return parse_json(text, source, max_depth)
