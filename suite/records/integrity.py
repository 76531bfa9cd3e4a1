"""File digests: a file's size and sha256, taken when the suite writes it and checked before it is read back.

A run's model files (``generator.pt``, the class generators handed between ranks) and checkpoints
are recorded with their :class:`~suite.records.record.FileDigest` (in the run record, or in the
checkpoint's description). A file that is missing, shorter or longer, or of other bytes than the
ones written is damaged (a full disk, a copy cut short) or was replaced: :func:`damage` says which
in a few words and :func:`verify_file` refuses it in one line naming the file. The size is checked
first, so a truncated file is told apart without reading it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .record import FileDigest


class IntegrityError(ValueError):
    """A file is not the one the suite wrote; the message is one line naming it."""


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def digest_file(path: str | os.PathLike) -> FileDigest:
    """The size and sha256 of the file at ``path``, as a record keeps them."""
    return FileDigest(sha256=sha256_file(path), bytes=Path(path).stat().st_size)


def damage(path: str | os.PathLike, size: int, sha256: str | None) -> str | None:
    """Why the file at ``path`` is not the one written with ``size`` bytes and ``sha256`` (None: its size alone
    is checked, for files recorded before their hash was), e.g. ``has 1303 bytes, 2606 were written``; None if it is."""
    path = Path(path)
    if not path.is_file():
        return "is missing"
    actual_size = path.stat().st_size
    if actual_size != size:
        return f"has {actual_size} bytes, {size} were written (truncated or damaged)"
    if sha256 is not None and (actual := sha256_file(path)) != sha256:
        return f"has sha256 {actual[:12]}..., {sha256[:12]}... was written (damaged or replaced)"
    return None


def verify_file(path: str | os.PathLike, written: FileDigest) -> Path:
    """``path`` if it is the file ``written`` describes, else an :class:`IntegrityError` naming it."""
    problem = damage(path, written.bytes, written.sha256)
    if problem is not None:
        raise IntegrityError(f"{path}: {problem}; nothing was loaded from it")
    return Path(path)
