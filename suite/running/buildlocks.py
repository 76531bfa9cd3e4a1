"""Build locks that libraries the suite starts leave behind: torch's C++ extension lock.

DeepSpeed builds its CPU ops as torch C++ extensions on first use, under ``TORCH_EXTENSIONS_DIR``; the builder holds
the folder's ``lock`` file (torch's ``FileBaton``) and every other process waits for it to go, without a timeout. A
builder killed meanwhile leaves it, and every later run waits forever. The file names no process, so a lock is stale
when no process works in its folder and it is older than :data:`STALE_AFTER_S` (a build is without such a process for
a second or two only). :func:`check_build_locks` refuses a sweep that would wait on one, naming the command that
clears it.
"""

from __future__ import annotations

import logging
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..config.registry import ENGINES
from ..config.scenario import Run

log = logging.getLogger(__name__)

STALE_AFTER_S = 30.0
LOCK_NAME = "lock"


class StaleBuildLock(ValueError):
    """A build lock that no process holds would make the runs wait forever; the message names it and its remedy."""


@dataclass(frozen=True)
class BuildLock:
    """A lock file in an extension's build folder, and its age."""

    path: Path
    age_s: float


def extension_roots() -> list[Path]:
    """Where torch builds extensions: ``TORCH_EXTENSIONS_DIR``, else ``torch_extensions`` in the user's cache."""
    configured = os.environ.get("TORCH_EXTENSIONS_DIR")
    if configured:
        return [Path(configured)]
    return [Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "torch_extensions"]


def build_locks(roots: list[Path]) -> list[BuildLock]:
    """The lock files of the extension folders under ``roots`` (``ROOT/NAME/lock`` and ``ROOT/py*_*/NAME/lock``)."""
    now, found = time.time(), {}
    for root in roots:
        for path in [*root.glob(f"*/{LOCK_NAME}"), *root.glob(f"*/*/{LOCK_NAME}")]:
            try:
                found[path] = BuildLock(path, now - path.stat().st_mtime)
            except OSError:  # released meanwhile
                continue
    return sorted(found.values(), key=lambda lock: str(lock.path))


def worked_in(folders: list[Path]) -> set[Path]:
    """Those of ``folders`` that a running process works in: its working folder is there, or its command line names it."""
    wanted = {folder.resolve(): folder for folder in folders}
    busy = set()
    for process in psutil.process_iter(["cwd", "cmdline"]):
        cwd, command = process.info.get("cwd") or "", " ".join(process.info.get("cmdline") or [])
        for resolved, folder in wanted.items():
            if cwd == str(resolved) or cwd.startswith(f"{resolved}{os.sep}") or str(resolved) in command:
                busy.add(folder)
    return busy


def stale_build_locks(roots: list[Path] | None = None) -> list[BuildLock]:
    """The build locks under ``roots`` (default: :func:`extension_roots`) that no process holds.

    Locks that no process works on but are younger than :data:`STALE_AFTER_S` are watched until
    they are that old: one whose build goes on gains a process (or goes) by then.
    """
    roots = extension_roots() if roots is None else roots
    while True:
        locks = build_locks(roots)
        busy = worked_in([lock.path.parent for lock in locks])
        idle = [lock for lock in locks if lock.path.parent not in busy]
        young = [lock for lock in idle if lock.age_s < STALE_AFTER_S]
        if not young:
            return idle
        wait = STALE_AFTER_S - min(lock.age_s for lock in young)
        log.info("%s: no process builds there yet; watching it for %.0f s", young[0].path, wait)
        time.sleep(min(wait, 1.0) + 0.01)


def check_build_locks(runs: list[Run], roots: list[Path] | None = None) -> None:
    """Refuse, in one line naming the locks and the command that clears them, when ``runs`` include runs of an
    engine that builds extensions and a build lock no process holds would make them wait forever."""
    engines = sorted({run.engine for run in runs if ENGINES[run.engine].builds_extensions})
    if not engines:
        return
    stale = stale_build_locks(roots)
    if stale:
        oldest = max(lock.age_s for lock in stale)
        raise StaleBuildLock(
            f"stale torch extension build lock{'s' if len(stale) > 1 else ''} {', '.join(str(lock.path) for lock in stale)} "
            f"(left {_age(oldest)} ago; no process builds there): runs of the {'/'.join(engines)} engine would wait "
            f"for {'them' if len(stale) > 1 else 'it'} forever; clear with `{shlex.join(['rm', '-f', *(str(lock.path) for lock in stale)])}`"
        )


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
