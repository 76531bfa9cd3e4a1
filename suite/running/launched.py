"""A launch's processes while it goes on: the launcher's output watched for a host it cannot reach
(:class:`LogWatch`), every process it started listed and, when the launch ends, stopped (:class:`Launched`), the ranks
asked to checkpoint before they are stopped (:func:`stop_at_checkpoint`), and the half-written temporaries of killed
writers removed (:func:`remove_temporaries`)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

import psutil

from ..records.failures import launch_problem, read_statuses
from ..records.nofollow import UnsafeEntry, open_regular, remove_files
from ..records.results import CHECKPOINT_DIR, RANKS_DIR, SCRATCH_DIR, STOP_FILE, atomic_write_text

log = logging.getLogger(__name__)


class LogWatch:
    """Reads the launcher's output as it grows, for a host it cannot reach (:func:`suite.failures.launch_problem`):
    the ranks that did start would otherwise wait for the missing ones until their rendezvous times out."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, ""

    def problem(self) -> str | None:
        """The problem the complete lines written since the last call name, or None."""
        try:
            with open(open_regular(self.path, os.O_RDONLY), errors="replace") as f:  # never a FIFO put in its place
                f.seek(self.offset)
                text = self.partial + f.read()
                self.offset = f.tell()
        except (OSError, UnsafeEntry):
            return None
        complete, _, self.partial = text.rpartition("\n")
        return launch_problem(complete)


class Launched:
    """A launcher's process and every process it started, as seen while the run went on.

    The launcher's descendants are listed about once a second, so that processes it moved to
    sessions of their own (Horovod's) can still be stopped after their parents are gone; when
    stopping, the ranks that wrote status files on this host are added.
    """

    def __init__(self, process: subprocess.Popen[bytes], run_dirs: list[Path]):
        self.process, self.run_dirs = process, run_dirs
        self.started = time.time()
        self.known: dict[int, psutil.Process] = {}

    def refresh(self) -> None:
        """Add the launcher's descendants started since the last look."""
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.process.pid).children(recursive=True):
                self.known.setdefault(child.pid, child)

    def _add_ranks(self) -> None:
        """Add the ranks of this launch that run on this host, by their status files."""
        host = socket.gethostname()
        for run_dir in self.run_dirs:
            for status in read_statuses(run_dir).values():
                if status.get("host") == host and status["pid"] not in self.known:
                    with contextlib.suppress(psutil.Error):
                        rank = psutil.Process(status["pid"])
                        if rank.create_time() >= self.started - 1 and str(run_dir) in " ".join(rank.cmdline()):
                            self.known[rank.pid] = rank

    def alive(self) -> list[psutil.Process]:
        """The known processes still running (the launcher itself aside)."""
        running = []
        for p in self.known.values():
            with contextlib.suppress(psutil.Error):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    running.append(p)
        return running

    def stop(self, wait: float = 10.0) -> int:
        """Terminate the launcher's process group and every known process; kill what is left after ``wait``
        seconds. Returns the launcher's exit code."""
        self.refresh()
        self._add_ranks()
        procs = self.alive()
        if procs and self.process.poll() is not None:
            log.warning(
                "%s: %d processes outlived the launcher (pids %s); stopping them",
                self.run_dirs[0].name,
                len(procs),
                ", ".join(str(p.pid) for p in procs),
            )
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.terminate()
        deadline = time.monotonic() + wait
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=wait)
        _, left = psutil.wait_procs(procs, timeout=max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(left, timeout=5)
        return self.process.wait()


def remove_temporaries(run_dir: Path) -> None:
    """Remove what writers that were killed left half-written (``atomic_write``'s hidden temporaries), through each
    folder's descriptor: never a file of another folder, whatever link was put in the run folder
    (:func:`suite.records.nofollow.remove_files`)."""
    for folder in (run_dir, run_dir / RANKS_DIR, run_dir / CHECKPOINT_DIR, run_dir / SCRATCH_DIR):
        remove_files(folder, lambda name: name.startswith("."))


def stop_at_checkpoint(
    process: subprocess.Popen[bytes], run_dir: Path, procs: int, grace: float, hurry: Callable[[], bool]
) -> int | None:
    """Ask the ranks to checkpoint and exit (``checkpoints/STOP``); their launcher's exit code, or None
    when they are not done within ``grace`` seconds, ``hurry()`` turns true, or every rank is past
    training already (its last checkpoint is written; nothing more to save)."""
    try:
        atomic_write_text(run_dir / CHECKPOINT_DIR / STOP_FILE, f"asked by suite run (pid {os.getpid()}) at {time.ctime()}\n")
    except OSError as error:
        log.warning("%s: cannot ask the ranks to checkpoint: %s", run_dir.name, error)
        return None
    log.warning(
        "%s: asking the ranks to checkpoint and stop (up to %.0f s; signal again to stop them at once)", run_dir.name, grace
    )
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not hurry():
        statuses = read_statuses(run_dir)
        if len(statuses) == procs and all(s["status"] == "trained" for s in statuses.values()):
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            return process.wait(timeout=1.0)
    return None
