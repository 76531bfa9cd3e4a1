"""What the suite refuses where it keeps its own files: a link, FIFO, socket or device (:class:`UnsafeEntry`), and a
folder someone else can write or owns, or a link someone else made on the way to one (:class:`SharedFolder`); each
refusal one line naming the entry and the fix (:mod:`suite.records.nofollow` walks the folders with them)."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path


class UnsafeEntry(ValueError):
    """A symbolic link, FIFO, socket or device where the suite writes or reads its own files; one line naming it."""


class SharedFolder(UnsafeEntry):
    """A folder the suite would work in that someone else can write (or owns), without the sticky bit; one line naming
    it and the fix."""


def shared_problem(info: os.stat_result, path: str | os.PathLike) -> SharedFolder | None:
    """The refusal of the folder ``path`` whose ``fstat`` is ``info`` when someone other than this user (and root) owns
    it, or can write it and it has no sticky bit; None when only its owner can change what is in it."""
    me, shown = os.geteuid(), printable_path(path)
    if info.st_uid not in (me, 0):
        return SharedFolder(
            f"{shown}: owned by user {info.st_uid}, not by you (user {me}) or root, who could swap a file or folder in "
            "it for a link while the suite works there; choose another --out, one of your own folders"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022 and not mode & stat.S_ISVTX:
        who = {0o020: "its group", 0o002: "others", 0o022: "its group and others"}[mode & 0o022]
        quoted = shlex.quote(shown)
        return SharedFolder(
            f"{shown}: writable by {who} (mode {mode:o}) without the sticky bit: anyone who can write it could swap a "
            f"file or folder in it for a link while the suite works there; run `chmod g-w,o-w {quoted}` (or "
            f"`chmod +t {quoted}`) or choose another --out"
        )
    return None


def check_private(fd: int, path: str | os.PathLike) -> None:
    """Refuse (:class:`SharedFolder`) the folder open as ``fd`` (named ``path`` in the message) when someone other than
    this user or root can change what is in it (:func:`shared_problem`), checked on the descriptor."""
    problem = shared_problem(os.fstat(fd), path)
    if problem is not None:
        raise problem


def check_link_makers(path: str | os.PathLike) -> None:
    """Refuse (:class:`SharedFolder`) ``path`` when it, or a folder on the way to it, is a symbolic link made by someone
    other than this user or root: a link the user may choose (``--out``), but one planted in a group folder under the
    name the user gave would send the suite's files into a folder of the planter's choosing (another of the user's)."""
    me, walked = os.geteuid(), Path("/")
    for part in Path(os.path.abspath(path)).parts[1:]:
        walked = walked / part
        try:
            info = os.stat(walked, follow_symlinks=False)
        except OSError:
            return  # missing from here on: made by the suite, without following a link
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in (me, 0):
            shown = printable_path(walked)
            raise SharedFolder(
                f"{shown}: a symbolic link made by user {info.st_uid}, not by you (user {me}) or root: it would send the "
                "suite's files wherever its maker points it; choose another --out, one of your own folders"
            )


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
