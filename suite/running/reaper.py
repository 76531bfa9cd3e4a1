"""``python -m suite.running.reaper MARK``: once the ``suite run`` that MARK names is gone, end every process it marked.

A ``suite run`` killed with SIGKILL runs no handler: its launcher, the launcher's helpers and
the ranks would train on in its results folder. :class:`Reaper` starts this watchdog beside
``suite run``, in a session of its own (a signal to the runner's process group does not reach
it). It checks the runner (pid and start time) every :data:`POLL_S` seconds; when the runner is
gone it ends the processes marked with the runner's :data:`~suite.running.processes.OWNER_VARIABLE`
on this host: SIGTERM first (launchers then stop their ranks), SIGKILL after :data:`GRACE_S`,
until none is left. When ``suite run`` ends normally it stops its reaper, which then ends nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from .processes import ProcessId, end, marked

POLL_S = 0.25
GRACE_S = 3.0
ROUNDS = 5
"""Times the marked processes are looked for again: a launcher may start ranks while the first ones end."""


def reap(owner: ProcessId) -> int:
    """Wait until ``owner`` is gone, then end the processes it marked; returns how many there were."""
    while owner.alive():
        time.sleep(POLL_S)
    ended: set[int] = set()
    for _ in range(ROUNDS):
        found = marked(owner.mark())
        if not found:
            break
        ended.update(p.pid for p in found)
        end(found, GRACE_S)
    if ended:
        print(
            f"suite run (pid {owner.pid}) ended without stopping its launch; "
            f"ended the processes it had started (pids {', '.join(map(str, sorted(ended)))})",
            file=sys.stderr,
        )
    return len(ended)


class Reaper:
    """``with Reaper():`` the processes this process marks end soon after it, however it ends."""

    def __init__(self) -> None:
        self.owner = ProcessId.current()
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Reaper:
        package_root = str(Path(__file__).resolve().parents[2])  # the reaper runs this very code, installed or not
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "suite.running.reaper", self.owner.mark()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path},
            start_new_session=True,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()  # the runner stopped its launches itself
        self.process.wait()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    owner = ProcessId.parse(args[0]) if len(args) == 1 else None
    if owner is None:
        print("usage: python -m suite.running.reaper HOST:PID:START (the mark of a suite run)", file=sys.stderr)
        return 2
    reap(owner)
    return 0


if __name__ == "__main__":
    sys.exit(main())
