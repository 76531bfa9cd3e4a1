"""The results folder: one ``suite run`` at a time, and room for what a sweep writes.

:class:`ResultsLock` holds ``RESULTS/.suite.lock`` (``fcntl.flock``) for as long as ``suite
run`` works in the folder; the file names the holder (host, pid, start time, command), and a
second ``suite run`` on the folder refuses with that name. The kernel releases the lock however
its holder ends, so a lock file that names a holder but is not locked was left by one that died:
it is taken over with a warning. Where the file system has no ``flock`` (some NFS and Lustre
mounts) the file alone decides: a holder on this host whose pid is gone is stale; one on another
host is trusted (remove the file by hand if that job is gone).

:func:`check_room` runs before the first run: the folder must be writable and have room for
the sweep's finished files, plus three checkpoints of its largest checkpointing run (the two a
run keeps and the one being written), plus a 100 MB margin.
"""

from __future__ import annotations

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
from typing import TextIO

from ..config.scenario import Run
from ..records.results import LOCK_FILE
from ..train.checkpoint import footprint

log = logging.getLogger(__name__)

MARGIN = 100 * 2**20


class ResultsFolderError(ValueError):
    """The results folder cannot take this sweep (locked, not writable, too full); the message says why."""


def _holder_text(holder: dict) -> str:
    return f"suite run (pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}: {holder.get('command')})"


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

    @property
    def _handle(self) -> TextIO:
        """The open lock file (between ``__enter__`` and the release)."""
        assert self._file is not None, "the lock file is not open"
        return self._file

    def _read(self) -> dict:
        self._handle.seek(0)
        text = self._handle.read().strip()
        try:
            return json.loads(text) if text else {}
        except ValueError:
            return {"command": text[:200]}

    def __enter__(self) -> "ResultsLock":
        self.folder.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a+")  # not truncated: the holder's name stays readable
        try:
            fcntl.flock(self._handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
        except BlockingIOError:
            holder = self._read()
            self._release(unlock=False)
            raise ResultsFolderError(
                f"{self.folder} is in use by {_holder_text(holder)}; wait for it to end or choose another --out"
            ) from None
        except OSError as error:  # no flock here: the file's contents decide
            log.warning("%s: no file lock on this file system (%s); relying on the pid in %s", self.folder, error, LOCK_FILE)
            locked = False
        holder = self._read()
        if holder:
            here = holder.get("host") == socket.gethostname()
            if not locked and (not here or _pid_alive(int(holder.get("pid", 0)))):
                self._release(unlock=False)
                raise ResultsFolderError(
                    f"{self.folder} is in use by {_holder_text(holder)}; wait for it to end, choose "
                    f"another --out, or remove {self.path} if that run is gone"
                )
            log.warning("%s: taking over the lock of %s, which ended without releasing it", self.folder, _holder_text(holder))
        me = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(["suite", *sys.argv[1:]]),
        }
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(json.dumps(me))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return self

    def _release(self, unlock: bool) -> None:
        if unlock:
            self._handle.seek(0)
            self._handle.truncate()  # an empty lock file names no holder
            self._handle.flush()
            fcntl.flock(self._handle, fcntl.LOCK_UN)
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
        raise ResultsFolderError(
            f"{folder} is not writable ({error.strerror}); choose another --out or fix its permissions"
        ) from None
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
