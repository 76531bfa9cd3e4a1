"""File digests: a file's size and sha256, taken when the suite writes it and checked before it is read back.

A run's model files and checkpoints are recorded with their :class:`~suite.records.record.FileDigest`; a file that
is missing, of another size or of other bytes was damaged (a full disk, a copy cut short) or replaced
(:func:`damage`, :func:`verify_file`). The size is checked first, so a truncated file is told apart without reading
it. Hashing is bounded (:data:`MAX_HASHED_BYTES`, :data:`HASH_BUDGET_S`), since a record's declared size may be
forged (a 30 GB sparse file and a record saying 30 GB).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from .record import FileDigest

MAX_HASHED_BYTES = 16 << 30
"""The largest file whose digest is checked: a generator bundle or a checkpoint of the largest networks the scenario
bounds allow is far smaller; a record that declares more is refused without reading the file."""

HASH_BUDGET_S = 120.0
"""The longest a digest check may take (about 12 GB at the 100 MB/s of a slow disk); past it the file is refused."""

_CHUNK = 1 << 20


class IntegrityError(ValueError):
    """A file is not the one the suite wrote; the message is one line naming it."""


def sha256_file(path: str | os.PathLike, limit: int | None = None, budget_s: float | None = None) -> str:
    """The sha256 of a file's bytes, in hex: of its first ``limit`` bytes at most (None: all), within ``budget_s``
    seconds (None: no limit; past it :class:`IntegrityError` naming the file)."""
    digest = hashlib.sha256()
    deadline = None if budget_s is None else time.monotonic() + budget_s
    left = limit
    with open(path, "rb") as handle:
        while left is None or left > 0:
            chunk = handle.read(_CHUNK if left is None else min(_CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            if left is not None:
                left -= len(chunk)
            if deadline is not None and time.monotonic() > deadline:
                raise IntegrityError(f"{path}: its digest took longer than {budget_s:g} s to check; not loaded")
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
    if sha256 is None:
        return None
    if size > MAX_HASHED_BYTES:
        return f"is declared {size:,} bytes, more than the {MAX_HASHED_BYTES:,} a model file or checkpoint may have here"
    try:
        actual = sha256_file(path, limit=size, budget_s=HASH_BUDGET_S)
    except IntegrityError:
        return f"took longer than {HASH_BUDGET_S:g} s to digest (a slow disk, or a file that is not what was written)"
    if actual != sha256:
        return f"has sha256 {actual[:12]}..., {sha256[:12]}... was written (damaged or replaced)"
    return None


def verify_file(path: str | os.PathLike, written: FileDigest) -> Path:
    """``path`` if it is the file ``written`` describes, else an :class:`IntegrityError` naming it."""
    problem = damage(path, written.bytes, written.sha256)
    if problem is not None:
        raise IntegrityError(f"{path}: {problem}; nothing was loaded from it")
    return Path(path)
