"""The record of a launched run that did not end as its worker recorded it: failed (a rank that raised or died, a
launch that timed out or could not reach a host), or interrupted (``suite run`` stopped, a stop request); the first line
of its error names the cause, the next where the launcher's output is and where ``--resume`` continues."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from ..config.scenario import Run
from ..measure.env import source_revision
from ..records.failures import first_failure, launch_problem, read_statuses
from ..records.nofollow import UnsafeEntry, read_text, remove_tree
from ..records.parts import Ending, FailurePart, LaunchPart, assemble, completed, identity, made_now, provenance_kept
from ..records.record import Record, utc_now
from ..records.results import CHECKPOINT_DIR, LOG_FILE, RANKS_DIR, RECORD_FILE, STOP_FILE, write_record
from .launch_part import resume_point


def launcher_output(path: Path) -> str:
    """The launcher's output so far; empty where there is none, or something other than a regular file (never followed)."""
    try:
        return read_text(path, errors="replace")
    except (OSError, UnsafeEntry):
        return ""


def _tail(path: Path, lines: int = 25) -> str:
    return "\n".join(launcher_output(path).splitlines()[-lines:])


@dataclasses.dataclass(frozen=True)
class RunEnd:
    """How a launch ended for one of its runs: its command, the exit code the run is judged by (0 for a run that
    finished before the launch's last), its wall time, and whether it timed out or was interrupted (by which signal)."""

    command: list[str]
    exit_code: int | None
    wall_s: float
    timed_out: bool = False
    interrupted: str | None = None
    started_utc: str | None = None


def end_record(record: Record | None, run: Run, run_dir: Path, end: RunEnd) -> Record:
    """The final record of a launched run, from the worker's ``record`` as the launcher read it (None: it wrote none).

    A run that ended as its worker recorded it (exit code 0) keeps the record rank 0 wrote, completed with the launch's
    part where it lacks it; any other becomes a failed or interrupted record (:func:`_failed_record`) whose error's first
    line says what ended the run, the next where the launcher's output is and where ``--resume`` continues.
    """
    if record is not None and record.status in ("ok", "diverged") and end.exit_code == 0:  # the worker's own end
        remove_tree(run_dir / RANKS_DIR)
        if record.command is not None:  # written whole by rank 0, with the launch's part
            return record
        checkpoint = resume_point(run_dir, run)[0] if record.status == "diverged" else record.checkpoint
        finished = completed(record, LaunchPart(shlex.join(end.command), end.exit_code, end.wall_s, checkpoint))
        write_record(run_dir, finished)
        return finished
    return _failed_record(record, run, run_dir, end)


def _failed_record(record: Record | None, run: Run, run_dir: Path, end: RunEnd) -> Record:
    """The failed or interrupted record of a run, written: the worker's measurements, if it recorded any, kept."""
    wall_s, exit_code = end.wall_s, end.exit_code
    log_path = run_dir / LOG_FILE
    log_text = launcher_output(log_path)
    statuses = read_statuses(run_dir)
    failure, status, details = None, "failed", [f"launcher output: {log_path}"]
    if end.interrupted:
        status, reason = "interrupted", f"interrupted by {end.interrupted} after {wall_s:.0f} s"
    elif end.timed_out:
        reason = f"timed out after {wall_s:.0f} s (raise it with --timeout)"
    elif (problem := launch_problem(log_text)) is not None:  # a host it could not reach, a partition that does not exist
        reason = problem
    elif (
        statuses
        and all(s["status"] in ("stopped", "trained") for s in statuses.values())
        and any(s["status"] == "stopped" for s in statuses.values())
    ):
        status, reason = "interrupted", f"stopped on request ({CHECKPOINT_DIR}/{STOP_FILE}) after {wall_s:.0f} s"
    elif (failure := first_failure(run_dir, log_text)) is not None:
        reason = failure.line()
    elif record is not None and record.status == "failed":
        reason = record.error or "failed"
    elif record is not None and exit_code not in (0, None):
        reason = f"the worker wrote its record but a rank exited with code {exit_code}"
    else:
        reason = f"exited with code {exit_code} before writing a result"
        details.append(f"last lines of log.txt:\n{_tail(log_path)}")
    failure_data = failure.as_dict() if failure is not None else None
    checkpoint, resume = resume_point(run_dir, run)
    ending = Ending(status, error="\n".join([reason, resume, *details]))
    launched = LaunchPart(shlex.join(end.command), exit_code, wall_s, checkpoint)
    made = made_now(run, source_revision(), end.started_utc or utc_now())  # the worker's own, where it wrote one, wins
    if record is None:
        failed = assemble(str(run_dir / RECORD_FILE), made, identity(run), ending, launched, FailurePart(failure_data))
    else:  # what the worker recorded, with the launcher's provenance where it has none
        failure_data = failure_data if failure_data is not None else record.failure
        kept, ending = provenance_kept(record, made), dataclasses.replace(ending, reason=record.reason, diverged=record.diverged)
        failed = completed(record, kept, identity(run), ending, launched, FailurePart(failure_data, record.traceback))
    write_record(run_dir, failed)
    return failed
