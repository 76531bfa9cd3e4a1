"""Files below a results folder, reached without following a symbolic link, in folders nobody else can write.

Anyone who can write a folder can put a symbolic link, a FIFO, a socket or a device where the suite
is about to write, before its owner runs it or at any moment while it works there (a run folder
renamed away and a link put in its place mid-run, a report's staging folder swapped for a link): a
link at ``RUN/checkpoints`` to someone's home would have the suite write there, and remove files
there; a FIFO at ``RUN/log.txt`` would block ``suite run`` forever. So the suite works only in folders
that nobody but their owner can change (:data:`FOLDER_MODE`, :data:`FILE_MASK`, checked on the opened
descriptor, never the path: :class:`SharedFolder`), and below them it follows no link: :func:`confine` holds a
folder's descriptor and every folder below it is walked to with ``O_NOFOLLOW``; files are opened by
:func:`open_regular` and removed through their folder's descriptor. The confining folder itself (``--out``) is the
user's choice and may be a link. A refusal is :class:`UnsafeEntry`: one line naming the entry and what it is.
What the user sees is in docs/reliability.md (Folders and links).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
import stat
import sys
from pathlib import Path
from typing import IO, Callable, Iterator

from .unsafe import UnsafeEntry, check_entry, check_link_makers, check_private, kind, printable_path, refusal

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CONFINED: list[tuple[Path, int]] = []
"""The folders below which this process follows no link, each with its descriptor, opened once (innermost last)."""
FOLDER_MODE = 0o755
"""Every folder the suite makes: nobody but its owner can add, rename or remove an entry in it (the umask may take more)."""
FILE_MASK = 0o022
"""Taken from every file's permissions the suite writes: nobody but its owner can change it."""
OPENED: list[Callable[[Path, int], None]] = []
"""Test hooks: each is called with a folder's path and descriptor once the suite has opened it (:func:`_walk`,
:func:`open_folder`), so that a test can swap the folder for a link at that exact moment."""
OPENING: list[Callable[[Path, str], None]] = []
"""Test hooks: each is called with a path the suite is about to open or make by its name, and what the suite means to
find there (``"folder"`` or ``"file"``), just before it does: every folder a walk steps into (:func:`_walk`,
:func:`check_tree`, :func:`open_below`), a folder opened by its name where nothing confines it (:func:`open_folder`),
every file :func:`open_regular` opens (and so :func:`copy_regular` and :func:`read_text`), every file an atomic write or
a report's move puts in place and every staging folder (:mod:`suite.records.results`): the points every open below a
results, report, jobs, tuning or papers folder goes through."""


def about_to_open(path: Path, what: str) -> None:
    """Call the :data:`OPENING` hooks with ``path`` and ``what`` (``"folder"`` or ``"file"``)."""
    for hook in OPENING:
        hook(path, what)


def _opened(path: Path, fd: int) -> None:
    for hook in OPENED:
        hook(path, fd)


def check_private_folder(folder: str | os.PathLike) -> None:
    """:func:`check_private` of ``folder`` (opened as named: it may be a link, the user's choice, never one of someone
    else's making: :func:`check_link_makers`); nothing if absent."""
    check_link_makers(folder)
    about_to_open(Path(folder), "folder")
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        check_private(fd, folder)
    finally:
        os.close(fd)


def check_tree(folder: str | os.PathLike) -> None:
    """Refuse (:class:`UnsafeEntry`) the first link, FIFO, socket or device at or below ``folder``; nothing if it is absent.

    The walk goes through directory descriptors opened with ``O_NOFOLLOW``: it never leaves ``folder``.
    """
    folder = Path(folder)
    info = check_entry(folder)
    if info is None:
        return
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(
            errno.ENOTDIR, "a file where the suite keeps a folder; remove it or choose another --out", str(folder)
        )
    fd = _open_folder_at(None, str(folder), folder)
    try:
        check_private(fd, folder)
        _check_below(fd, folder)
    finally:
        os.close(fd)


def _check_below(fd: int, folder: Path) -> None:
    with os.scandir(fd) as entries:
        for entry in entries:
            path = folder / entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # a temporary renamed as the walk went by
                continue
            what = kind(info.st_mode)
            if what is not None:
                raise refusal(path, what)
            if stat.S_ISDIR(info.st_mode):
                try:
                    below = _open_folder_at(fd, entry.name, path)
                except FileNotFoundError:
                    continue
                try:
                    check_private(below, path)
                    _check_below(below, path)
                finally:
                    os.close(below)


def _open_folder_at(dir_fd: int | None, name: str, path: Path) -> int:
    """Open the folder ``name`` (relative to ``dir_fd``) without following a link; refuse what is not a folder."""
    about_to_open(path, "folder")
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            with contextlib.suppress(OSError):
                what = kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
                if what is not None:
                    raise refusal(path, what) from None
        raise OSError(error.errno, error.strerror, str(path)) from None


def _make_parents(root: Path) -> None:
    """``mkdir -p root``, each folder it makes with :data:`FOLDER_MODE`."""
    missing = []
    while not os.path.lexists(root) and root != root.parent:
        missing.append(root)
        root = root.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(FOLDER_MODE)


def _walk(root: Path, parts: tuple[str, ...], create: bool) -> int:
    """A descriptor of ``root/parts`` reached from ``root`` one folder at a time, none a link and each writable by
    nobody but its owner (:func:`check_private`); made where missing when ``create``. ``root`` itself is opened as the
    user named it (it may be a link)."""
    if create:
        _make_parents(root)
    return _walk_from(_open_named(root), root, parts, create)


def _open_named(folder: Path, private: bool = True) -> int:
    """A descriptor of ``folder`` opened as the user named it (it may be a link); with ``private``, checked on the
    descriptor to be writable by nobody but its owner (:func:`check_private`) and remembered as opened; a link on the
    way that someone else made is refused (:func:`check_link_makers`)."""
    check_link_makers(folder)
    about_to_open(folder, "folder")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if private:
        try:
            check_private(fd, folder)
        except BaseException:
            os.close(fd)
            raise
        _opened(folder, fd)
    return fd


def _walk_from(fd: int, root: Path, parts: tuple[str, ...], create: bool) -> int:
    """:func:`_walk` from ``fd``, a descriptor of ``root`` that this takes over (closed on the way)."""
    path = root
    try:
        for part in parts:
            if part in ("", ".", "..") or "/" in part:
                raise ValueError(f"{printable_path(path / part)}: not a folder name below {printable_path(root)}")
            path = path / part
            try:
                below = _open_folder_at(fd, part, path)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # another rank made it at the same moment
                    os.mkdir(part, FOLDER_MODE, dir_fd=fd)
                below = _open_folder_at(fd, part, path)
            os.close(fd)
            fd = below
            check_private(fd, path)
            _opened(path, fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_below(fd: int, path: str | os.PathLike, parts: tuple[str, ...], create: bool = False) -> int:
    """A descriptor of ``path/parts`` walked from ``fd``, an open descriptor of ``path`` (kept open), one folder at a
    time, none a link and each writable by nobody but its owner; made where missing when ``create``."""
    return _walk_from(os.dup(fd), Path(path), parts, create)


def _confining(path: Path) -> tuple[Path, int, tuple[str, ...]] | None:
    """The innermost confined folder at or above ``path`` (absolute), its descriptor, and ``path``'s parts below it."""
    for root, fd in reversed(_CONFINED):
        if path == root or root in path.parents:
            return root, fd, path.relative_to(root).parts
    return None


@contextlib.contextmanager
def confine(folder: str | os.PathLike, fd: int | None = None) -> Iterator[Path]:
    """Within the block, every folder this process makes or walks at or below ``folder`` (:func:`make_folder`,
    :func:`open_regular`, :func:`suite.records.results.atomic_write`) is reached from ``folder`` without following a link.

    ``folder`` is opened once, here (or is the open descriptor ``fd``, which stays the caller's), checked to be
    writable by nobody but its owner (:func:`check_private`), and every walk starts from that descriptor: a link put in
    the folder's place after this changes nothing this process writes or removes.
    """
    root = Path(os.path.abspath(folder))
    if fd is None:
        held = _walk(root, (), create=False)
    else:
        held = os.dup(fd)
        try:
            check_private(held, root)
        except BaseException:
            os.close(held)
            raise
    entry = (root, held)
    _CONFINED.append(entry)
    try:
        yield root
    finally:
        _CONFINED.remove(entry)
        os.close(held)


def _folder(folder: Path, create: bool, private: bool = False) -> int:
    """A descriptor of ``folder``: walked from its confining folder's descriptor (:func:`confine`), or opened plainly
    where none confines it (checked with :func:`check_private` when ``private``: the suite writes there); made first
    when ``create``."""
    folder = Path(os.path.abspath(folder))
    confining = _confining(folder)
    if confining is not None:
        root, fd, parts = confining
        return _walk_from(os.dup(fd), root, parts, create)
    if create:
        _make_parents(folder)
    return _open_named(folder, private)


def open_folder(folder: str | os.PathLike, create: bool = False) -> int:
    """A descriptor of ``folder`` to write in (the caller closes it): walked without following a link below a confined
    folder, and in any case writable by nobody but its owner (:class:`SharedFolder` otherwise); made when ``create``."""
    return _folder(Path(folder), create, private=True)


@contextlib.contextmanager
def _folder_if_there(folder: Path) -> Iterator[int | None]:
    """:func:`_folder`'s descriptor of ``folder``, closed after the block; None where it is absent or reached only
    through a link, FIFO, socket or device (where nothing of it is to be removed)."""
    try:
        fd = _folder(folder, create=False)
    except (FileNotFoundError, NotADirectoryError, UnsafeEntry):
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def make_folder(folder: str | os.PathLike) -> Path:
    """Make ``folder`` and its missing parents (``mkdir -p``); below a confined folder (:func:`confine`) without following
    a link. Returns ``folder`` as an absolute path, normalised (the one that was checked)."""
    os.close(_folder(Path(folder), create=True, private=True))
    return Path(os.path.abspath(folder))


@contextlib.contextmanager
def output_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """Within the block, ``folder`` is confined (:func:`confine`) from a descriptor walked from its parent: the parent
    as the user named it (made if missing), ``folder`` itself made if missing and never a link, both writable by nobody
    but their owner. The folder of ``suite tune``, ``suite papers`` and ``suite jobscript``'s scripts."""
    folder = Path(folder)
    if folder.name in ("", ".", ".."):
        folder = Path(os.path.abspath(folder))
    fd = _walk(folder.parent, (folder.name,), create=True)
    try:
        with confine(folder, fd) as root:
            yield root
    finally:
        os.close(fd)


_WRITING = os.O_WRONLY | os.O_RDWR


def open_regular(path: str | os.PathLike, flags: int, mode: int = 0o666, single: bool = False) -> int:
    """``os.open(path, flags, mode)`` for a regular file only: a link at ``path`` is not followed, a FIFO does not block,
    and a link, FIFO, socket or device is refused (:class:`UnsafeEntry`). Its folder is reached as :func:`make_folder`
    reaches it, but never made (a folder that is gone is :class:`FileNotFoundError` naming ``path``). A file opened to
    be written (or with ``single``) must have one link, and one opened to be written must be this user's (or root's):
    a hard link to someone's file is refused before anything is truncated (``O_TRUNC`` is applied after the check).
    The descriptor returned blocks as usual."""
    path = Path(path)
    writing = bool(flags & _WRITING)
    try:
        folder = _folder(path.parent, create=False, private=writing)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path)) from None
    try:
        about_to_open(path, "file")
        try:
            what = kind(os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            what = None
        if what is not None:
            raise refusal(path, what)
        try:
            opened = flags & ~os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(path.name, opened, mode, dir_fd=folder)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENXIO):  # swapped for a link or a FIFO since the look above
                raise refusal(path, "a symbolic link" if error.errno == errno.ELOOP else "a FIFO") from None
            raise OSError(error.errno, error.strerror, str(path)) from None
    finally:
        os.close(folder)
    try:
        _check_opened(fd, path, writing, single)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_opened(fd: int, path: Path, writing: bool, single: bool) -> None:
    """Refuse what ``fd`` opened unless it is a regular file; one of one link (``writing`` or ``single``), this user's
    or root's (``writing``)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise refusal(path, kind(info.st_mode) or "not a regular file")
    if (writing or single) and info.st_nlink > 1:
        raise refusal(path, f"a hard link (one of {info.st_nlink} names of one file)")
    if writing and info.st_uid not in (os.geteuid(), 0):
        raise refusal(path, f"a file of user {info.st_uid}'s")


def copy_regular(source: str | os.PathLike, target: IO[bytes], signature: bytes = b"") -> None:
    """Copy the regular file ``source`` into ``target``: opened once without following a link (:func:`open_regular`,
    one link), checked on that descriptor and read from it, never a name looked at before; refused
    (:class:`UnsafeEntry`) where it does not start with ``signature``."""
    with open(open_regular(source, os.O_RDONLY, single=True), "rb") as handle:
        head = handle.read(len(signature))
        if head != signature:
            raise UnsafeEntry(
                f"{printable_path(source)}: not the file the suite wrote there (it does not start as one); not copied"
            )
        target.write(head)
        shutil.copyfileobj(handle, target)


def temporary_name(name: str) -> str:
    """A hidden, unique name beside ``name`` for a file or folder being written (its suffix kept)."""
    return f".{name}.{secrets.token_hex(4)}{Path(name).suffix}"


def read_text(path: str | os.PathLike, errors: str = "strict") -> str:
    """The text of the regular file ``path``, opened by :func:`open_regular` (a link or FIFO there is refused)."""
    with open(open_regular(path, os.O_RDONLY), encoding="utf-8", errors=errors) as handle:
        return handle.read()


def remove_files(folder: str | os.PathLike, match: Callable[[str], bool]) -> list[str]:
    """Remove the regular files of ``folder`` whose names ``match``, through the folder's descriptor: never a file
    elsewhere (a link in ``folder`` is removed, not what it points to; a ``folder`` that is a link is left alone).
    Returns the names removed."""
    removed: list[str] = []
    with _folder_if_there(Path(folder)) as fd:
        if fd is None:
            return removed
        for name in os.listdir(fd):
            if not match(name):
                continue
            with contextlib.suppress(FileNotFoundError):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                    os.unlink(name, dir_fd=fd)
                    removed.append(name)
    return removed


def remove_entry(path: str | os.PathLike) -> None:
    """Remove the file (or link) ``path`` if there, through its folder's descriptor; a folder there is left alone."""
    path = Path(path)
    with _folder_if_there(path.parent) as fd, contextlib.suppress(FileNotFoundError):
        if fd is not None and not stat.S_ISDIR(os.stat(path.name, dir_fd=fd, follow_symlinks=False).st_mode):
            os.unlink(path.name, dir_fd=fd)


def remove_tree(path: str | os.PathLike) -> None:
    """Remove the folder ``path`` and everything in it, never following a link (a link at ``path`` is itself removed);
    nothing when ``path``'s folder is reached only through a link."""
    path = Path(path)
    with _folder_if_there(path.parent) as fd, contextlib.suppress(FileNotFoundError):
        if fd is None:
            return
        if stat.S_ISDIR(os.stat(path.name, dir_fd=fd, follow_symlinks=False).st_mode):
            remove_tree_at(fd, path.name)
        else:
            os.unlink(path.name, dir_fd=fd)


def remove_tree_at(dir_fd: int, name: str) -> None:
    """Remove the folder ``name`` of the folder open as ``dir_fd`` and everything in it, never following a link:
    ``shutil.rmtree(name, dir_fd=dir_fd)``, walked here on Python 3.10, whose ``rmtree`` has no ``dir_fd``."""
    if sys.version_info >= (3, 11):
        shutil.rmtree(name, dir_fd=dir_fd)
        return
    fd = os.open(name, _FOLDER_FLAGS, dir_fd=dir_fd)
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    remove_tree_at(fd, entry.name)
                else:
                    os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
