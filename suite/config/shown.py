"""Values quoted in error messages, shortened: a huge or deeply nested value never gets formatted whole.

A message names the field and shows what was given (``train.steps: expected an integer, got [[1, 2, ...``);
:func:`shown` writes that value with :mod:`reprlib`, which looks at a few items of each collection, a few levels
deep and a bounded part of each string, so its cost does not grow with the value, then cuts the text at
:data:`SHOWN_CHARS` characters.
"""

from __future__ import annotations

import reprlib
from typing import Any, Iterable

SHOWN_CHARS = 80
"""The most characters of a value an error message shows."""

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxtuple = _REPR.maxlist = _REPR.maxarray = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 6
_REPR.maxstring = _REPR.maxother = SHOWN_CHARS
_REPR.maxlong = 40


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, at most ``limit`` characters (``...`` marks a cut)."""
    try:
        text = _REPR.repr(value)
    except ValueError:  # an integer past Python's digit limit for text (sys.set_int_max_str_digits)
        text = f"<an integer of about {int(abs(value).bit_length() * 0.30103) + 1} digits>" if isinstance(value, int) else "<?>"
    text = " ".join(text.splitlines())  # a repr over several lines (a tensor's, an array's) stays on the message's line
    return text if len(text) <= limit else text[: limit - 3] + "..."


LISTED_PROBLEMS = 10
"""The most problems one message lists (a list of 100,000 bad values has 100,000); the rest are counted."""


def listed(problems: Iterable[str], limit: int = LISTED_PROBLEMS) -> str:
    """Problems joined with ``; `` (repeats dropped), at most ``limit`` of them, then how many more there are."""
    unique = list(dict.fromkeys(problems))
    more = len(unique) - limit
    return "; ".join(unique[:limit]) + (f"; and {more} more" if more > 0 else "")


def shown_name(name: Any, limit: int = 40) -> str:
    """A key or field name as written in a path (``runs[0].train.NAME``), without quotes, at most ``limit`` characters
    (non-printable characters escaped)."""
    text = name[: limit + 1] if isinstance(name, str) and name[: limit + 1].isprintable() else shown(name, limit)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def itemised(problems: Iterable[str], notes: Iterable[str] = (), limit: int = LISTED_PROBLEMS) -> str:
    """A file's problems as one message: a single problem as its one line; several as a first line that counts
    them, then one indented line each (repeats dropped, at most ``limit``, then how many more), then ``notes`` (what
    was left unchecked, one line each, as many at most; a single problem's message goes without them)."""
    unique, notes = list(dict.fromkeys(problems)), list(notes)
    if len(unique) == 1:
        return unique[0]
    lines = [f"{len(unique)} problems:", *unique[:limit]]
    if len(unique) > limit:
        lines.append(f"and {len(unique) - limit} more")
    lines += notes[:limit]
    if len(notes) > limit:
        lines.append(f"and {len(notes) - limit} more entries not checked")
    return "\n  ".join(lines)
