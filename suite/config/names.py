"""Names a user types: the one "did you mean" of the suite (:func:`did_you_mean`), and the one table of renamed
scenarios (:data:`RENAMED_PREFIXES`: the papers' ``seed000-...`` to ``seed003-...`` are ``paper000-...`` to
``paper003-...``; records made under an old name keep it, and :func:`current_name` reads it as the new one).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Iterable

from .escape import shell_word

RENAMED_PREFIXES = {"seed000": "paper000", "seed001": "paper001", "seed002": "paper002", "seed003": "paper003"}
"""Old first part of a scenario's name (and of its file's) -> the current one."""


def close_names(word: str, names: Iterable[object], n: int = 1) -> list[str]:
    """Up to ``n`` of ``names`` close to ``word`` (:func:`difflib.get_close_matches`), closest first."""
    return difflib.get_close_matches(str(word), [str(name) for name in names], n=n)


def did_you_mean(word: str, names: Iterable[object], n: int = 1) -> str:
    """`` (did you mean X?)`` (or ``X or Y``) for the names close to ``word``; empty when none is."""
    close = close_names(word, names, n)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def current_name(name: str) -> str:
    """A scenario name (or file stem) as it is called now: ``seed000-mnist`` -> ``paper000-mnist``; others unchanged."""
    first, dash, rest = name.partition("-")
    return RENAMED_PREFIXES.get(first, first) + dash + rest


def old_names(name: str) -> list[str]:
    """The names ``name`` had before a rename (``paper000-mnist`` -> ``[seed000-mnist]``); empty when it had none."""
    first, dash, rest = name.partition("-")
    return [old + dash + rest for old, new in RENAMED_PREFIXES.items() if new == first]


def did_you_mean_path(path: Path) -> str:
    """:func:`did_you_mean` for a path that does not exist, among the names in its folder (`` (did you mean
    reports/digits?)``); empty when none is close or the folder cannot be listed. Only printable names are offered: a
    folder's names are anyone's, and one with a line break or an escape would break the message's one line."""
    folder = path.parent
    try:
        names = [entry.name for entry in os.scandir(folder) if entry.name.isprintable()] if folder.is_dir() else []
    except OSError:
        return ""
    close = close_names(path.name, names)
    # printed beside commands to copy: quoted as one shell word (``results/quickstar$(id)`` runs nothing when pasted)
    return f" (did you mean {shell_word(folder / close[0] if str(folder) != '.' else close[0])}?)" if close else ""
