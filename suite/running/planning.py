"""A run as ``suite run`` launches it, planned once before anything is written (:func:`plan_run`): placed, its folder
and its launch command; and its folder's ``run.json`` (:func:`prepare_run_folder`), whose sha256 the command names."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from ..config.scenario import Run, RunPlacement
from ..records.results import RUN_FILE, atomic_write, path_under
from .commands import LaunchOptions, command_for, sweep_ranks_per_node


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """A run as ``suite run`` launches it (:func:`plan_run`): placed, its folder, and its launch command."""

    run: Run
    """The expanded run with its :class:`~suite.config.scenario.RunPlacement` (what ``run.json`` holds)."""
    run_dir: Path
    """``RESULTS/RUN_ID``."""
    command: list[str]
    """The command that starts its ranks (:func:`.commands.command_for`), built once: checked, printed by a dry run,
    launched and recorded from here. It gives the worker the sha256 of :attr:`run_json` (``--run-sha256``)."""
    run_json: str
    """The text of ``run.json`` (``run.to_json()``), made once: :func:`prepare_run_folder` writes exactly these bytes
    (UTF-8) and the command names their sha256, which every rank checks against the file it reads."""

    @property
    def run_digest(self) -> str:
        """The sha256 (hex) of the ``run.json`` bytes this plan writes."""
        return _sha256(self.run_json)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def plan_run(
    run: Run, results_dir: Path, opts: LaunchOptions, placement: RunPlacement | None = None, shown: bool = False
) -> PlannedRun:
    """``run`` as ``suite run`` launches it into ``results_dir/RUN_ID``, its launch command built here and only here: with
    ``placement`` and its sweep's ranks per node (so that a worker started by hand from ``run.json`` picks the same threads
    per rank). ``shown``: the folder by its absolute path, as a dry run prints it. Writes nothing; a launcher or placement
    problem is a :class:`LaunchError`.
    """
    run_dir = path_under(results_dir, run.run_id)
    where = dataclasses.replace(placement or RunPlacement(), sweep_ranks_per_node=sweep_ranks_per_node(run, opts))
    placed = run.placed(where)
    text = placed.to_json()
    command = command_for(placed, run_dir.resolve() if shown else run_dir, opts, run_digest=_sha256(text))
    return PlannedRun(placed, run_dir, command, text)


def prepare_run_folder(planned: PlannedRun) -> Path:
    """Create the planned run's folder with its ``run.json`` (all a worker needs, also for hand launches); return the
    folder. The bytes written are :attr:`PlannedRun.run_json` in UTF-8, whose sha256 the launch command gives every
    rank: a ``run.json`` changed between this write and a rank's read is refused by the rank."""
    with atomic_write(planned.run_dir / RUN_FILE) as tmp:
        tmp.write_bytes(planned.run_json.encode("utf-8"))
    return planned.run_dir
