"""The launch's part of a run's record, handed to the worker before the launch starts, so that rank 0 writes the
record once, whole: the worker's parts and the launch's (its command, exit code, wall time, and the checkpoint
``--resume`` continues from).

``suite run`` writes what it knows of the launch into the first run's ``ranks/`` folder before its ranks start
(:func:`hand_launch`); rank 0 reads it (:func:`handed_launch`) and completes each run's record with it
(:meth:`HandedLaunch.part`). A worker started by hand, or by another ``suite run``, takes no launch part.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.jsonfile import JsonError, read_json
from ..config.scenario import Run
from ..records.nofollow import UnsafeEntry
from ..records.parts import LaunchPart
from ..records.results import RANKS_DIR, atomic_write_text
from ..train.resume import CheckpointError, describe_checkpoint, resume_plan
from .processes import OWNER_VARIABLE

log = logging.getLogger(__name__)

HANDED_FILE = "launch.json"
"""The launch's part as ``suite run`` hands it to rank 0, in the first run's ``ranks/`` folder (which the launcher
empties before the launch and removes after a finished run)."""


@dataclass(frozen=True)
class LaunchStart:
    """What ``suite run`` knows of a launch before its ranks start."""

    command: str
    """The launch's command, as its records name it (``shlex.join``)."""
    started_utc: str
    started_epoch: float
    """The launch's start on the ``time.time`` clock, from which rank 0 counts the first run's wall time."""
    owner: str
    """The launching ``suite run``'s mark (:data:`.processes.OWNER_VARIABLE`): a rank of another launch ignores the
    file."""


def hand_launch(run_dir: Path, start: LaunchStart) -> None:
    """Hand ``start`` to the ranks of the launch whose first run is ``run_dir``."""
    import json

    atomic_write_text(run_dir / RANKS_DIR / HANDED_FILE, json.dumps(dataclasses.asdict(start)))


@dataclass
class HandedLaunch:
    """The launch as rank 0 holds it over the runs it carries: what ``suite run`` handed, and when the last of them was
    recorded (at first: the launch's start)."""

    start: LaunchStart
    since: float

    def part(self, checkpoint: dict[str, Any] | None) -> LaunchPart:
        """The launch's part of the run rank 0 records now, which ended as its worker recorded it: exit code 0, its wall
        time since the run before it was recorded (the first: since the launch's start), ``checkpoint`` where
        ``--resume`` continues (a diverged run's)."""
        now = time.time()
        part = LaunchPart(self.start.command, 0, max(0.0, now - self.since), checkpoint)
        self.since = now
        return part


def handed_launch(run_dir: Path) -> HandedLaunch | None:
    """The launch ``suite run`` handed to this launch's ranks, or None: none there, not one (a warning line names the
    file), or another ``suite run``'s than the one this process was started by."""
    path = run_dir / RANKS_DIR / HANDED_FILE
    try:
        data = read_json(path, max_bytes=1 << 20)
    except FileNotFoundError:
        return None
    except (OSError, JsonError, UnsafeEntry) as error:
        log.warning("%s: not the launch's part (%s); the record is written without it", path, error)
        return None
    fields = {f.name: f.type for f in dataclasses.fields(LaunchStart)}
    if not isinstance(data, dict) or set(data) != set(fields) or not isinstance(data["started_epoch"], (int, float)):
        log.warning("%s: not the launch's part (expected the fields %s); the record is written without it", path, sorted(fields))
        return None
    if not all(isinstance(data[name], str) for name in ("command", "started_utc", "owner")):
        log.warning("%s: not the launch's part (command, started_utc and owner are text); it is left out", path)
        return None
    owner = os.environ.get(OWNER_VARIABLE)
    if owner is not None and owner != data["owner"]:  # a file an earlier suite run left: not this launch's
        return None
    start = LaunchStart(**data)
    return HandedLaunch(start, start.started_epoch)


def resume_point(run_dir: Path, run: Run) -> tuple[dict[str, Any] | None, str]:
    """The checkpoint ``--resume`` continues from, as the record names it, and the line that says so; a
    checkpoint description that is not one is named in that line (it never stops the sweep)."""
    try:
        plan = resume_plan(run_dir, run)
    except CheckpointError as error:
        return None, f"--resume cannot continue: {error}"
    return plan.checkpoint(), describe_checkpoint(plan.checkpoint(), plan.skipped)
