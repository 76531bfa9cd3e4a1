"""Files of tensors the suite writes and reads back (checkpoints, generators): reading one never runs code.

Files are written with :func:`torch.save` and read with ``torch.load(..., weights_only=True)``, which
builds tensors, numbers, strings and their containers and nothing else, unless the reader names a few
more classes (``allowed``, :meth:`suite.train.engines.base.Engine.checkpoint_types`); docs/reliability.md
("Files read back") says what is refused. Errors are one line naming the file: :class:`UnsafeFileError`
for a refused file, :class:`UnreadableFileError` for a damaged one. A file recorded with its
:class:`~suite.records.record.FileDigest` is checked against it first.
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any, Sequence

import torch

from ..records.integrity import digest_file, verify_file
from ..records.record import FileDigest
from ..records.results import atomic_write


class UnsafeFileError(ValueError):
    """A file asks for more than tensors and plain data; nothing in it was run. One line naming the file."""


class UnreadableFileError(ValueError):
    """A file is not a readable file of tensors (damaged, empty, another kind). One line naming the file."""


def save_tensors(obj: Any, path: str | os.PathLike) -> FileDigest:
    """Write ``obj`` (tensors and plain data) to ``path`` atomically, synced to disk; return its digest."""
    with atomic_write(path) as tmp:  # which syncs the file to disk before it replaces ``path``
        torch.save(obj, tmp)
        return digest_file(tmp)


def _refusal(error: pickle.UnpicklingError) -> str:
    """What the restricted unpickler refused, in a few words (torch's own message runs over a dozen lines)."""
    text = str(error)
    asked = re.search(r"GLOBAL (\S+)", text)
    if asked:
        return f"it asks for {asked[1]}, which is not a tensor or plain data"
    detail = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
    return detail[1] if detail else (text.strip().splitlines() or ["not a pickle of tensors"])[-1]


def load_tensors(
    path: str | os.PathLike,
    what: str,
    written: FileDigest | None = None,
    allowed: Sequence[type] = (),
    hint: str = "",
) -> Any:
    """The tensors and plain data in ``path`` (a ``what``: "checkpoint", "generator bundle"), on the CPU.

    ``written``: the digest recorded when the file was written, checked first. ``allowed``: classes
    the file may hold besides tensors and plain data. ``hint`` ends an error's line (what to do).
    """
    path = Path(path)
    tail = f"; {hint}" if hint else ""
    if written is not None:
        verify_file(path, written)
    if not zipfile.is_zipfile(path):
        raise UnreadableFileError(f"{path}: not a {what} (not a zip archive as torch.save writes them){tail}")
    try:
        with torch.serialization.safe_globals(list(allowed)), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols it was not written with
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UnsafeFileError(f"{path}: refused to load this {what}: {_refusal(error)}; nothing in it was run{tail}") from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UnreadableFileError(f"{path}: not a readable {what} ({first}){tail}") from None
