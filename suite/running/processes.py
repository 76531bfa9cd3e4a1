"""The processes of a ``suite run``: who they are, how they are marked, and ending them.

A pid alone does not name a process: the kernel reuses pids. A process is named by its host,
its pid and its start time (``/proc/PID/stat`` field 22, clock ticks after boot): a
:class:`ProcessId`. ``suite run`` marks every process it starts with the environment variable
:data:`OWNER_VARIABLE` holding its own ProcessId; launchers pass their environment on to the
ranks and helpers they start, so :func:`marked` finds all of them on this host, whatever
session or parent they ended up with. Linux only (``/proc``); elsewhere nothing is found.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NoReturn

import psutil

OWNER_VARIABLE = "SUITE_RUN_OWNER"
"""Set in the environment of every process ``suite run`` starts: the :meth:`ProcessId.mark` of that ``suite run``."""

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of ``pid`` from ``/proc/PID/stat``, or None when there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # field 2, the command name, may hold spaces and parentheses: count from after its closing one (field 3)
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[19])


@dataclass(frozen=True)
class ProcessId:
    """One process for as long as it lives: its host, pid and start time (ticks after boot)."""

    host: str
    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        """The process ``pid`` of this host now, or None when there is none."""
        stat = _stat(pid)
        return cls(socket.gethostname(), pid, stat[1]) if stat else None

    @classmethod
    def current(cls) -> ProcessId:
        """This process (start time 0 where ``/proc`` is missing)."""
        return cls.of(os.getpid()) or cls(socket.gethostname(), os.getpid(), 0)

    def alive(self) -> bool:
        """Whether this very process still runs (on this host: a zombie or a new process under the same pid is not it)."""
        stat = _stat(self.pid)
        return stat is not None and stat[0] not in ("Z", "X") and stat[1] == self.start

    def mark(self) -> str:
        """The value of :data:`OWNER_VARIABLE` for the processes this one starts (``host:pid:start``)."""
        return f"{self.host}:{self.pid}:{self.start}"

    @classmethod
    def parse(cls, mark: str) -> ProcessId | None:
        """The ProcessId a :meth:`mark` names, or None when ``mark`` is not one."""
        host, _, rest = mark.rpartition(":")
        host, _, pid = host.rpartition(":")
        if not (host and pid.isdigit() and rest.isdigit()):
            return None
        return cls(host, int(pid), int(rest))


def marked(mark: str) -> list[psutil.Process]:
    """The running processes of this host whose environment has ``OWNER_VARIABLE=mark`` (this process aside)."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error):  # gone meanwhile, or another user's
            if process.environ().get(OWNER_VARIABLE) == mark and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def end(processes: list[psutil.Process], grace: float) -> list[psutil.Process]:
    """SIGTERM ``processes`` (a launcher then stops its own ranks), SIGKILL what is left after ``grace``
    seconds; returns those still running after that (none, unless the kernel cannot end them)."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, left = psutil.wait_procs(processes, timeout=grace)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    _, left = psutil.wait_procs(left, timeout=5)
    return list(left)


def die_with_parent(signum: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child receives ``signum`` when its parent (this
    process) dies, SIGKILL included (``prctl(PR_SET_PDEATHSIG)``; Linux only, elsewhere it does nothing).

    The parent is this thread, for the kernel: call Popen from the thread that outlives the child.
    """
    if not sys.platform.startswith("linux"):
        return lambda: None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    parent = os.getpid()

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the call: the signal would never come
            os.kill(os.getpid(), signum)

    return set_parent_death_signal


def wait_until_gone(mark: str, timeout: float, poll: float = 0.5) -> list[psutil.Process]:
    """Wait up to ``timeout`` seconds for the processes marked ``mark`` to end; returns those still running."""
    deadline = time.monotonic() + timeout
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(poll)
    return left


def leave_now(code: int) -> NoReturn:
    """End this process with ``code`` at once, its work done: logs and streams flushed, MPI finalized where mpi4py
    started it (mpirun counts a rank that ends without ``MPI_Finalize`` as failed), the interpreter not finalized.

    Finalizing an interpreter that imported torch took 0.95 s from the last atexit handler to the process's end on 2
    cores: a second of every rank of every launch, and of every ``suite`` command that trained or scored, after
    everything was written. The suite registers no atexit handler of its own.
    """
    import logging

    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            stream.flush()
    os._exit(int(code))
