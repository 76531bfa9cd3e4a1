"""The results folder: one ``suite run`` at a time, and room for what a sweep writes.

:class:`ResultsLock` holds ``RESULTS/.suite.lock`` (``fcntl.flock``, released by the kernel however its holder ends)
and names its holder; a stale lock is taken over once every process its holder marked is gone, and without ``flock``
(some NFS and Lustre mounts) the file alone decides (docs/reliability.md, "Stopping and the lock"). :func:`check_room`
runs before the first run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from ..config.scenario import Run
from ..records.nofollow import make_folder, open_regular
from ..records.results import LOCK_FILE, write_failed
from .processes import ProcessId, wait_until_gone

log = logging.getLogger(__name__)

MARGIN = 100 * 2**20
TAKEOVER_WAIT_S = 20.0
"""How long a stale lock's holder's processes are given to end (its reaper's SIGTERM, then SIGKILL after 3 s)."""


class ResultsFolderError(ValueError):
    """The results folder cannot take this sweep (locked, not writable, too full); the message says why."""


def _holder_text(holder: dict[str, Any]) -> str:
    return f"suite run (pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}: {holder.get('command')})"


def _holder_alive(holder: dict[str, Any]) -> bool:
    """Whether the holder (on this host) still runs: by pid and start time, or by pid alone for a file that has no start."""
    pid = int(holder.get("pid", 0))
    if holder.get("start") is not None:
        return ProcessId(socket.gethostname(), pid, int(holder["start"])).alive()
    return _pid_alive(pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class ResultsLock:
    """``with ResultsLock(folder):`` this process is the only ``suite run`` writing into ``folder``."""

    def __init__(self, folder: Path):
        self.folder, self.path = Path(folder), Path(folder) / LOCK_FILE
        self._file: TextIO | None = None
        self._made: list[Path] = []  # the lock file and the folder, where this lock made them

    @property
    def _handle(self) -> TextIO:
        """The open lock file (between ``__enter__`` and the release)."""
        assert self._file is not None, "the lock file is not open"
        return self._file

    def _read(self) -> dict[str, Any]:
        self._handle.seek(0)
        text = self._handle.read().strip()
        try:
            return json.loads(text) if text else {}
        except ValueError:
            return {"command": text[:200]}

    def _open(self) -> None:
        """Open the lock file, made if absent, never through a link (:func:`suite.records.nofollow.open_regular`: a link,
        FIFO, socket or device there is refused, naming it); ``self._made`` notes what this made."""
        if not self.folder.exists():
            self._made.append(self.folder)
        try:
            make_folder(self.folder)  # writable by nobody but its owner (records.nofollow)
        except OSError as error:
            raise ResultsFolderError(str(write_failed(self.folder, error))) from None
        try:
            try:
                fd = open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL)
                self._made.append(self.path)
            except FileExistsError:
                fd = open_regular(self.path, os.O_RDWR | os.O_APPEND)  # not truncated: the holder's name stays readable
        except OSError as error:
            raise ResultsFolderError(str(write_failed(self.path, error))) from None
        self._file = os.fdopen(fd, "a+")

    def _same_file(self) -> bool:
        """Whether the lock file's name still leads to the file this holds (a lock that refused removes the file it made)."""
        try:
            return os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(self._handle.fileno()).st_ino
        except OSError:
            return False

    def __enter__(self) -> "ResultsLock":
        for attempt in range(3):
            self._open()
            try:
                self._take()
            except BaseException:
                self._release(unlock=False)
                raise
            if self._same_file() or attempt == 2:
                return self
            self._release(unlock=True)  # locked a file its maker removed as this opened it: lock the one there now
        return self

    def discard(self) -> None:
        """Remove the lock file, and the results folder if it is left empty, where this lock made them: the sweep was
        refused before it wrote anything (call it while the lock is held)."""
        if self.path in self._made and self._same_file():
            with contextlib.suppress(OSError):
                self.path.unlink()
        if self.folder in self._made:
            with contextlib.suppress(OSError):
                self.folder.rmdir()  # only if empty

    def _take(self) -> None:
        try:
            fcntl.flock(self._handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
        except BlockingIOError:
            raise ResultsFolderError(
                f"{self.folder} is in use by {_holder_text(self._read())}; wait for it to end or choose another --out"
            ) from None
        except OSError as error:  # no flock here: the file's contents decide
            log.warning("%s: no file lock on this file system (%s); relying on the pid in %s", self.folder, error, LOCK_FILE)
            locked = False
        holder = self._read()
        if holder:
            here = holder.get("host") == socket.gethostname()
            if not locked and (not here or _holder_alive(holder)):
                raise ResultsFolderError(
                    f"{self.folder} is in use by {_holder_text(holder)}; wait for it to end, choose "
                    f"another --out, or remove {self.path} if that run is gone"
                )
            if here and holder.get("mark"):
                self._wait_for_processes_of(holder)
            log.warning("%s: taking over the lock of %s, which ended without releasing it", self.folder, _holder_text(holder))
        me = ProcessId.current()
        holder = {
            "host": me.host,
            "pid": me.pid,
            "start": me.start,
            "mark": me.mark(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(["suite", *sys.argv[1:]]),
        }
        try:
            self._handle.seek(0)
            self._handle.truncate()
            self._handle.write(json.dumps(holder))
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as error:
            raise ResultsFolderError(str(write_failed(self.path, error))) from None

    def _wait_for_processes_of(self, holder: dict[str, Any]) -> None:
        """Refuse, naming them, while processes that the gone holder started still run (they would write beside this run)."""
        left = wait_until_gone(holder["mark"], TAKEOVER_WAIT_S)
        if left:
            pids = " ".join(str(p.pid) for p in left)
            raise ResultsFolderError(
                f"{self.folder}: {_holder_text(holder)} is gone, but {len(left)} of its processes still run "
                f"after {TAKEOVER_WAIT_S:.0f} s (pids {pids}) and would write beside this run; "
                f"stop them (`kill -9 {pids}`) or choose another --out"
            )

    def _release(self, unlock: bool) -> None:
        if unlock:
            with contextlib.suppress(OSError):  # a folder gone read-only or away: closing releases the lock anyway
                self._handle.seek(0)
                self._handle.truncate()  # an empty lock file names no holder
                self._handle.flush()
                fcntl.flock(self._handle, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):
            self._handle.close()
        self._file = None

    def __exit__(self, *exc: object) -> None:
        self._release(unlock=True)


def check_room(folder: Path, runs: list[Run]) -> None:
    """Refuse, naming the folder and the numbers, when ``folder`` is not writable or lacks room for ``runs``."""
    folder = Path(folder)
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".suite-write-test.") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as error:
        if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise ResultsFolderError(
                f"{folder} is not writable ({error.strerror}); choose another --out or fix its permissions"
            ) from None
        raise ResultsFolderError(f"{write_failed(folder, error)}; choose another --out") from None  # a full disk, ...
    from ..train.checkpoint import footprint  # torch: once the folder's own checks passed

    sizes = [footprint(run) for run in runs]
    outputs = sum(files for _, files in sizes)
    checkpoints = 3 * max((ckpt for run, (ckpt, _) in zip(runs, sizes) if run.train.checkpoint_every), default=0)
    need, free = outputs + checkpoints + MARGIN, shutil.disk_usage(folder).free
    if free < need:
        raise ResultsFolderError(
            f"{folder} has {free / 2**20:,.0f} MB free, but these {len(runs)} runs need about {need / 2**20:,.0f} MB "
            f"({outputs / 2**20:,.0f} MB of models and records, {checkpoints / 2**20:,.0f} MB of checkpoints, "
            f"{MARGIN // 2**20} MB margin); free some space or choose another --out"
        )
