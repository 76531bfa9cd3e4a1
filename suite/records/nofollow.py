"""Files below a results folder, reached without following a symbolic link.

Results folders are shared and made group-writable, so anyone who can write there can put a
symbolic link, a FIFO, a socket or a device where the suite is about to write, before its owner
runs it: a link at ``RUN/checkpoints`` to someone's home would have the suite write there, and
remove files there; a FIFO at ``RUN/log.txt`` would block ``suite run`` forever. Below a results
folder the suite therefore follows no link:

- :func:`check_tree` refuses a folder that holds a link, FIFO, socket or device anywhere in it,
  naming the first it meets (``suite run`` checks every run folder it will write into before it
  writes anything);
- :func:`confine` names, for a block of this process, a folder below which every folder the suite
  makes (:func:`make_folder`, and so every atomic write, :func:`suite.records.results.atomic_write`)
  is walked to from that folder with directory descriptors, each step opened with ``O_NOFOLLOW``
  and missing ones created on the way: a link anywhere below the folder is refused, never followed;
- :func:`open_regular` opens a file with ``O_NOFOLLOW`` and ``O_NONBLOCK`` (a FIFO cannot block it)
  and refuses anything but a regular file;
- :func:`remove_files`, :func:`remove_entry` and :func:`remove_tree` remove through the folder's
  descriptor, so they never leave the folder they were meant for.

The confining folder itself (``--out``) is the user's choice and may be a link; nothing below it is
followed. A refusal is :class:`UnsafeEntry`: one line naming the entry and what it is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterator

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CONFINED: list[Path] = []
"""The folders below which this process follows no link (innermost last)."""


class UnsafeEntry(ValueError):
    """A symbolic link, FIFO, socket or device where the suite writes or reads its own files; one line naming it."""


def printable_path(path: str | os.PathLike) -> str:
    """``path`` for a one-line message: control characters (a newline in a planted name) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(path))


def kind(mode: int) -> str | None:
    """What an entry of ``mode`` (``st_mode`` of lstat) is, when it is something the suite refuses; None otherwise."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return None


def refusal(path: str | os.PathLike, what: str) -> UnsafeEntry:
    """The one line refusing ``path``, which is ``what`` (:func:`kind`)."""
    return UnsafeEntry(
        f"{printable_path(path)}: {what} where the suite keeps its own files; it follows no link and opens no FIFO, "
        "socket or device there: remove it (someone else may have put it there) or choose another --out"
    )


def check_entry(path: str | os.PathLike) -> os.stat_result | None:
    """``path``'s lstat, refused with :class:`UnsafeEntry` when it is a link, FIFO, socket or device; None when absent."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    what = kind(info.st_mode)
    if what is not None:
        raise refusal(path, what)
    return info


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
                    _check_below(below, path)
                finally:
                    os.close(below)


def _open_folder_at(dir_fd: int | None, name: str, path: Path) -> int:
    """Open the folder ``name`` (relative to ``dir_fd``) without following a link; refuse what is not a folder."""
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            with contextlib.suppress(OSError):
                what = kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
                if what is not None:
                    raise refusal(path, what) from None
        raise OSError(error.errno, error.strerror, str(path)) from None


def _walk(root: Path, parts: tuple[str, ...], create: bool) -> int:
    """A descriptor of ``root/parts`` reached from ``root`` one folder at a time, none a link; made where missing
    when ``create``. ``root`` itself is opened as the user named it (it may be a link)."""
    if create:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
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
                    os.mkdir(part, 0o777, dir_fd=fd)
                below = _open_folder_at(fd, part, path)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _confining(path: Path) -> tuple[Path, tuple[str, ...]] | None:
    """The innermost confined folder at or above ``path`` (absolute), and ``path``'s parts below it."""
    for root in reversed(_CONFINED):
        if path == root or root in path.parents:
            return root, path.relative_to(root).parts
    return None


@contextlib.contextmanager
def confine(folder: str | os.PathLike) -> Iterator[Path]:
    """Within the block, every folder this process makes or walks at or below ``folder`` (:func:`make_folder`,
    :func:`open_regular`, :func:`suite.records.results.atomic_write`) is reached from ``folder`` without following a link."""
    root = Path(os.path.abspath(folder))
    _CONFINED.append(root)
    try:
        yield root
    finally:
        _CONFINED.remove(root)


def _folder(folder: Path, create: bool) -> int:
    """A descriptor of ``folder``: walked from its confining folder (:func:`confine`), or opened plainly where none
    confines it; made first when ``create``."""
    folder = Path(os.path.abspath(folder))
    confining = _confining(folder)
    if confining is not None:
        return _walk(confining[0], confining[1], create)
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


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
    os.close(_folder(Path(folder), create=True))
    return Path(os.path.abspath(folder))


def make_folders(root: str | os.PathLike, *parts: str) -> Path:
    """Make ``root/parts``: ``root`` as named (made if missing), each part below it without following a link."""
    os.close(_walk(Path(root), parts, create=True))
    return Path(root).joinpath(*parts)


def open_regular(path: str | os.PathLike, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags, mode)`` for a regular file only: a link at ``path`` is not followed, a FIFO does not block,
    and a link, FIFO, socket or device is refused (:class:`UnsafeEntry`). Its folder is reached as :func:`make_folder`
    reaches it, but never made (a folder that is gone is :class:`FileNotFoundError` naming ``path``). The descriptor
    returned blocks as usual."""
    path = Path(path)
    try:
        folder = _folder(path.parent, create=False)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path)) from None
    try:
        try:
            what = kind(os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            what = None
        if what is not None:
            raise refusal(path, what)
        try:
            fd = os.open(path.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=folder)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENXIO):  # swapped for a link or a FIFO since the look above
                raise refusal(path, "a symbolic link" if error.errno == errno.ELOOP else "a FIFO") from None
            raise OSError(error.errno, error.strerror, str(path)) from None
    finally:
        os.close(folder)
    mode_now = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode_now):
        os.close(fd)
        raise refusal(path, kind(mode_now) or "not a regular file")
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


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
            shutil.rmtree(path.name, dir_fd=fd)  # type: ignore[call-arg]  # 3.11 has dir_fd; it does not follow links inside
        else:
            os.unlink(path.name, dir_fd=fd)
