"""Atomic writes: a file (:func:`atomic_write`, :func:`atomic_write_text`) or a folder of files
(:func:`staged_folder`) written whole or not at all. Every file the suite writes goes to a temporary file in the same
folder, is synced and renamed into place, so a reader never sees a half-written file, and a crash or a full disk leaves
the previous version intact; below a confined results folder no link is followed (:mod:`.nofollow`). A write that fails
raises :class:`WriteFailed`, whose message is one line: the file, why, and what it needs."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Callable, Iterator

from .nofollow import (
    FILE_MASK,
    UnsafeEntry,
    about_to_open,
    check_tree,
    confine,
    open_below,
    open_folder,
    printable_path,
    remove_tree_at,
    temporary_name,
)

_NEEDS = {
    errno.ENOSPC: "free space on its file system",
    errno.EDQUOT: "room in its quota",
    errno.EROFS: "a file system mounted read-write",
    errno.EACCES: "write permission on its folder",
    errno.EPERM: "write permission on its folder",
    errno.ENOENT: "its folder, which is gone",
    errno.ESTALE: "its folder, which is gone (a stale network file handle)",
    errno.EIO: "a disk that works (an I/O error)",
}


class WriteFailed(OSError):
    """A file could not be written; ``str()`` is one line: the file, the system's reason and what the write needs."""

    def __str__(self) -> str:
        needs = _NEEDS.get(self.errno or 0)
        return f"could not write {self.filename} ({self.strerror})" + (f"; it needs {needs}" if needs else "")


def write_failed(path: str | os.PathLike, error: OSError) -> WriteFailed:
    """``error``, met while writing ``path``, as a :class:`WriteFailed` naming ``path``."""
    if isinstance(error, WriteFailed):
        return error
    return WriteFailed(error.errno, error.strerror or str(error), str(path))


def _sync(fd: int) -> None:
    """Make a rename in the folder open as ``fd`` durable (where the file system allows a folder to be synced)."""
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _through(folder_fd: int, name: str, folder: Path) -> Path:
    """A path to ``name`` in the folder open as ``folder_fd`` that leads there whatever is put at ``folder``'s name
    since (``/proc/self/fd``); ``folder / name`` where the system has no such paths."""
    held = Path(f"/proc/self/fd/{folder_fd}")
    return held / name if held.is_dir() else folder / name


def _sync_file(folder_fd: int, name: str) -> None:
    """fsync the regular file ``name`` of the folder open as ``folder_fd`` (opened without following a link)."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_mode(mode: int) -> int:
    """``mode`` less the umask and less any write for others than the owner (:data:`.nofollow.FILE_MASK`)."""
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask & ~FILE_MASK


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: int = 0o666) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block succeeds it is synced to disk and replaces ``path``.

    Readers see the old file or the new one, never a part; a failure leaves the old file and no
    temporary behind (an ``OSError`` comes out as :class:`WriteFailed`, naming ``path``). The
    temporary keeps ``path``'s suffix, for writers that go by it (``np.savez``, Pillow), and a unique name, so
    concurrent writers do not collide. ``path``'s folder is opened once (:func:`.nofollow.open_folder`: below a
    confined results folder no link is followed, and nobody but its owner may write it); the temporary is made
    there with ``O_EXCL | O_NOFOLLOW``, the path yielded leads through that folder's descriptor (a link put at the
    folder's name meanwhile is not followed) and the rename is made through it too (a link at ``path`` itself is
    replaced, never written through). ``mode``: the file's permissions before the umask; nobody but the owner may
    write it, whatever the umask (:data:`.nofollow.FILE_MASK`).
    """
    path = Path(path)
    folder_fd = name = None
    try:
        folder_fd = open_folder(path.parent, create=True)
        about_to_open(path, "file")  # replaced by the rename below, never opened: a link there is replaced
        name = temporary_name(path.name)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder_fd)
        try:
            os.fchmod(fd, _file_mode(mode))  # made 0600; results are meant to be read by others
        finally:
            os.close(fd)
        yield _through(folder_fd, name, Path(os.path.abspath(path.parent)))
        _sync_file(folder_fd, name)
        os.replace(name, path.name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        name = None
        _sync(folder_fd)
    except OSError as error:
        raise write_failed(path, error) from error
    finally:
        if folder_fd is not None:
            if name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=folder_fd)
            os.close(folder_fd)


def atomic_write_text(path: str | os.PathLike, text: str, mode: int = 0o666) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`), synced to disk."""
    with atomic_write(path, mode) as tmp:
        tmp.write_text(text)


class StagingReplaced(UnsafeEntry):
    """A staging folder's name no longer leads to the folder the suite made (someone put something in its place)."""


@contextlib.contextmanager
def staged_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty folder beside ``folder`` to write files into; when the block succeeds each file is
    synced and moved into ``folder`` (its subfolders too), replacing the file of the same name.

    A block that fails (a full disk) leaves ``folder`` as it was. The staging folder sits beside
    ``folder``, at the same depth, so paths written relative to it are right in ``folder`` too.
    Neither ``folder`` nor anything in it is reached through a link: a link, FIFO, socket or device
    at or below it is refused before the block runs (:func:`.nofollow.check_tree`). Its parent must be
    writable by nobody but its owner (or have the sticky bit; :class:`.unsafe.SharedFolder` otherwise);
    the staging folder is made there ``0700`` with a unique name, opened once, and confined
    (:func:`.nofollow.confine`: the suite's writes into it go through that descriptor); the moves list it through
    that descriptor and rename each file through folder descriptors walked without following a link, so a link
    put at the staging folder's name, or in ``folder``, moves nothing from elsewhere; a staging folder whose name
    no longer leads to it when the block ends is refused (:class:`StagingReplaced`) and nothing is moved.
    """
    folder = Path(os.path.abspath(folder))
    check_tree(folder)
    parent_fd = staging_fd = name = None
    try:
        parent_fd = open_folder(folder.parent, create=True)
        name = temporary_name(folder.name)
        staging = folder.parent / name
        about_to_open(staging, "folder")
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        except OSError as error:  # something already there (made by no one but its owner): not ours to remove
            name = None
            raise write_failed(staging, error) from error
        staging_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
        for hook in STAGED:
            hook(staging)
        with confine(staging, staging_fd):
            yield staging
        made, now = os.fstat(staging_fd), os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        if (made.st_dev, made.st_ino) != (now.st_dev, now.st_ino):
            raise StagingReplaced(
                f"{printable_path(staging)}: the staging folder of {printable_path(folder)} was replaced while it was "
                "written (by someone who can write its folder); nothing was moved in"
            )
        target_fd = open_below(parent_fd, folder.parent, (folder.name,), create=True)
        try:
            _move_in(staging_fd, target_fd, folder)
            _sync(target_fd)
        finally:
            os.close(target_fd)
    except OSError as error:
        raise write_failed(getattr(error, "filename", None) or folder, error) from error
    finally:
        if staging_fd is not None:
            os.close(staging_fd)
        if parent_fd is not None:
            if name is not None:  # the staging folder made: removed if it is still a folder (a FIFO or link put in
                with contextlib.suppress(OSError):  # its place is left: rmtree would open a FIFO and wait on it)
                    if stat.S_ISDIR(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
                        remove_tree_at(parent_fd, name)  # never follows a link
            os.close(parent_fd)


STAGED: list[Callable[[Path], None]] = []
"""Test hooks: each is called with a staging folder's path as soon as :func:`staged_folder` has made it."""


def _move_in(source_fd: int, target_fd: int, target: Path) -> None:
    """Move every regular file below the folder open as ``source_fd`` into the folder open as ``target_fd`` (``target``
    in messages), subfolders made there as they are met: each synced, then renamed through the two descriptors. A link,
    FIFO or anything else in the staging folder is left where it is."""
    with os.scandir(source_fd) as scanned:
        entries = sorted(scanned, key=lambda e: e.name)
    for entry in entries:
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISREG(info.st_mode):
            _sync_file(source_fd, entry.name)
            about_to_open(target / entry.name, "file")  # replaced, never opened: a link there is replaced
            os.replace(entry.name, entry.name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
        elif stat.S_ISDIR(info.st_mode):
            below = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source_fd)
            try:
                into = open_below(target_fd, target, (entry.name,), create=True)
                try:
                    _move_in(below, into, target / entry.name)
                    _sync(into)
                finally:
                    os.close(into)
            finally:
                os.close(below)
