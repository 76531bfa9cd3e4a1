"""The strings that land where they could mean more than data: a safe name (a file name, a job's name, a word of a
job script), a value for a job script's directive, and text a job script quotes; each check says why in one line."""

from __future__ import annotations

import re
import unicodedata

from .shown import shown

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""A name that may become a file name or a word of a job script: ASCII letters, digits, ``.``, ``_`` and ``-``,
starting with a letter or digit, at most 100 characters (so no ``/``, ``..``, space, newline, ``;`` or ``$``)."""
SAFE_NAME_RULE = "use ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, at most 100 characters"


def name_problem(value: str) -> str | None:
    """Why ``value`` is not a :data:`SAFE_NAME` (one line, the value quoted), or None when it is one."""
    if SAFE_NAME.fullmatch(value):
        return None
    return f"{shown(value)} is not a safe name: {SAFE_NAME_RULE}"


DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9(\[][A-Za-z0-9._:,&|*()\[\]+-]{0,199}")
"""A value written into a ``#SBATCH`` line as it is (``--constraint``, ``--gpu-bind``): a safe name's characters
and Slurm's operators ``: , & | * ( ) [ ] +``, starting with a letter, a digit, ``(`` or ``[``, at most 200 characters (no space, newline, quote or ``$``)."""
DIRECTIVE_VALUE_RULE = "use ASCII letters, digits and . _ - : , & | * ( ) [ ] + (no space, quote or $), at most 200 characters"


def directive_problem(value: str) -> str | None:
    """Why ``value`` cannot be a :data:`DIRECTIVE_VALUE` (one line, the value quoted), or None when it can."""
    if DIRECTIVE_VALUE.fullmatch(value):
        return None
    return f"{shown(value)} cannot go into a job script directive: {DIRECTIVE_VALUE_RULE}"


_NOT_IN_SCRIPTS = {
    "Cc": "a control character",
    "Cf": "a format character",
    "Cs": "a lone surrogate (bytes that are not UTF-8)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
"""The Unicode categories a string written into a job script may not hold: C0 and C1 controls (newline, CR, NUL,
NEL), invisible format characters (bidirectional overrides), undecodable bytes, and line or paragraph separators."""


def script_text_problem(value: str) -> str | None:
    """Why ``value`` cannot be written into a job script, even quoted (one line, the value shortened), or None.

    A quoted word keeps ``$``, quotes, ``;`` and spaces inert, but not a line break in a comment, and a control
    character is never what a path or a host name means.
    """
    for position, char in enumerate(value, 1):
        what = _NOT_IN_SCRIPTS.get(unicodedata.category(char))
        if what is not None:
            return (
                f"{shown(value)} holds U+{ord(char):04X}, {what}, at character {position}: a job script takes no "
                "control characters, line or paragraph separators"
            )
    return None
