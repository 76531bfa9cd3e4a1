"""Running a scenario's runs one after another: the loop behind ``suite run`` (and ``suite gpu-check``).

:func:`run_scenario` refuses what it can before anything is written, then takes the results folder's lock and runs
:func:`run_sweep`: each run launched in turn, its outcome in one line; the exit code says whether any failed (1) or
diverged (``ExitCode.DIVERGED``). Below the results folder nothing is reached through a link
(:func:`suite.records.nofollow.confine`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..config.escape import one_line, shell_word
from ..config.exitcodes import ExitCode
from ..config.registry import STRATEGIES
from ..config.scenario import RunPlacement
from ..records.results import LOG_FILE
from .commands import RUN_MARK, LaunchOptions

if TYPE_CHECKING:
    from ..config.scenario import Run, Scenario
    from ..records.record import Record
    from .planning import PlannedRun

log = logging.getLogger("suite")

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
"""The time at the start of ``suite run``'s lines, to the second."""


def stamped(text: str) -> str:
    """``text`` as a timestamped log line reads (for lines printed past the logger, above a progress bar)."""
    return f"{time.strftime(TIMESTAMP_FORMAT)} {text}"


@dataclass
class SweepOptions:
    """How ``suite run`` goes through the runs (its options beyond the launcher's)."""

    dry_run: bool = False
    """Write the run folders and print each launch command; run nothing."""
    resume: bool = False
    """Continue unfinished runs from their last checkpoint."""
    rerun: bool = False
    """Train finished runs (ok or diverged) again, each old folder kept aside until its new run is ok
    (:mod:`.rerun`); without it they are skipped, saying so."""
    quiet: bool = False
    """No progress bar."""
    timeout: float = 3600.0
    """Seconds before a run is stopped and recorded as failed."""
    grace: float = 60.0
    """Seconds a run that checkpoints gets to save one and exit when the sweep is stopped."""


@dataclass(frozen=True)
class RunOptions:
    """Everything ``suite run``'s command line says besides the scenario and the runs it selects, built once."""

    launch: LaunchOptions = dataclasses.field(default_factory=LaunchOptions)
    """How the ranks are started and placed."""
    sweep: SweepOptions = dataclasses.field(default_factory=SweepOptions)
    """How the runs are gone through."""
    placement: RunPlacement = dataclasses.field(default_factory=RunPlacement)
    """What it adds to every run it launches (``--trace``, ``--mllog``, ``--tensorboard``, ``--set``'s provenance)."""


def runs_missing_data(runs: list[Run]) -> list[str]:
    """One line per dataset the runs read that is not on disk (those that download it are left to torchvision)."""
    from ..gan.data import missing_data as missing

    wanted = sorted({(r.dataset.name, r.dataset.root or "", r.dataset.split) for r in runs if not r.dataset.download})
    return [line for name, root, split in wanted if (line := missing(name, root or None, split)) is not None]


def check_rulers(runs: list[Run]) -> None:
    """Every ruler the runs will score with, and every steering network their strategies use inside training
    (never a ruler's file), is there and is the pinned file, before anything trains."""
    from ..config.registry import FEATURES
    from ..measure.metrics.rulers import find_classifier, find_steering

    scoring = [r for r in runs if r.metrics.enabled]
    for dataset in sorted({r.dataset.name for r in scoring}):
        find_classifier(dataset)  # every scored run also predicts classes with it
    for dataset, field in sorted({(r.dataset.name, f) for r in runs if (f := STRATEGIES[r.strategy].steering) is not None}):
        find_steering(dataset, field)  # cellular ranks mixtures with it
    for weights in sorted({r.metrics.inception_weights or "" for r in scoring if FEATURES[r.metrics.features].inception_weights}):
        from ..measure.metrics.inception import check_inception_weights  # torch: only where Inception scores

        check_inception_weights(weights or None)  # a file of another hash: one line with both hashes, no rank started


def run_scenario(
    scenario_file: Path,
    scenario: Scenario,
    runs: list[Run],
    others: list[Run],
    out: Path,
    options: RunOptions,
    written: dict[str, Record] | None = None,
) -> int:
    """Run ``runs`` of ``scenario`` (read from ``scenario_file``) into ``out``; ``others`` are its runs not selected.

    ``written``: the records this process already holds of ``out``'s runs, by run id (the sequential seeds' earlier
    blocks), to which each run launched now adds its final record. Everything that can refuse does so before the first
    write; each run is planned once (:func:`.planning.plan_run`) for the checks, its ``run.json`` and its launch.
    """
    from ..gan.data import DataError
    from ..measure.metrics.rulers import RulerError
    from ..records.nofollow import check_private_folder, check_tree, confine
    from .dataroots import check_data_roots
    from .finished import check_unchanged
    from .lock import ResultsLock
    from .planning import plan_run

    sweep = options.sweep
    check_private_folder(out)  # first: nobody else may change what is in it while the runs go on (records.nofollow)
    check_data_roots(runs, out, options.placement.overrides)  # a scenario's download folder: inside --out or the cache
    for run in runs:  # then: the run folders are read (finished runs) and written only if none holds a link
        check_tree(out / run.run_id)
    # every command is built here, once: a launcher problem shows before anything is written
    planned = [plan_run(run, out, options.launch, options.placement, shown=sweep.dry_run) for run in runs]
    for problem in runs_missing_data(runs):  # before any rank starts: one line naming the dataset, folder and files
        if not sweep.dry_run:
            raise DataError(problem)
        log.warning("warning: %s", problem)  # a dry run shows the commands; the real run stops here
    try:
        check_rulers(runs)
    except RulerError as error:  # a ruler missing or not the pinned file
        if not sweep.dry_run:
            raise
        log.warning("warning: %s", error)  # a dry run shows the commands; the real run stops here
    check_unchanged(out, runs, others, written)  # before the first write: a refusal leaves the folder as it was
    with ResultsLock(out) as lock, confine(out):  # below `out`, no link is followed (suite.records.nofollow)
        try:
            _put_back(out, runs, sweep)
            kept = check_before_start(planned, out, options)
        except BaseException:
            lock.discard()  # refused before the first write: the lock file and folder it made go too
            raise
        return run_sweep(scenario_file, scenario, planned, out, options, kept, written)


def _put_back(out: Path, runs: list[Run], sweep: SweepOptions) -> None:
    """Inside the lock, before the checks: put back the finished runs that a stopped ``--rerun`` set aside
    (:func:`.rerun.put_back`), each said in one line, and compare their settings with the runs' as any finished run's
    (a dry run only says what the next run will put back)."""
    from .finished import check_unchanged
    from .rerun import left_aside, put_back

    for run in runs:
        if sweep.dry_run:
            aside = left_aside(out / run.run_id)
            if aside is not None:
                log.warning("%s: a stopped --rerun left its finished run in %s; `suite run` puts it back", run.run_id, aside)
            continue
        line = put_back(out / run.run_id, continuing=sweep.rerun and sweep.resume)
        if line:
            log.warning("%s", line)
            check_unchanged(out, [run], [])


def check_before_start(planned: list[PlannedRun], out: Path, options: RunOptions) -> dict[str, str]:
    """What must hold, inside the results folder's lock, before anything is written; returns the finished runs that are
    skipped (without ``--rerun``), by their status.

    A real run needs its launchers and devices, room in the folder (:func:`.lock.check_room`) and no stale
    build lock. A dry run on a ROCm torch refuses what its GPU nodes would (:func:`.preflight.check_nvidia_only`).
    """
    from .buildlocks import check_build_locks
    from .commands import local_procs_problem
    from .lock import check_room
    from .preflight import check_devices, check_nvidia_only, check_tools
    from .rerun import finished_status

    runs = [one.run for one in planned]
    if options.sweep.dry_run:
        if os.environ.get("SUITE_DEVICE", "auto") != "cpu":  # what the GPU nodes would refuse (a ROCm torch's)
            check_nvidia_only(runs)
        if options.launch.launcher == "local":  # the command is shown, with what the real run would refuse
            for one in planned:
                if (problem := local_procs_problem(one.run, one.run.procs, options.launch)) is not None:
                    log.warning("warning: %s (the real run stops here)", problem)
        return {}
    check_tools(planned, options.launch)
    check_devices(runs)
    finished = {} if options.sweep.rerun else {run.run_id: finished_status(out / run.run_id) for run in runs}
    kept = {run_id: status for run_id, status in finished.items() if status is not None}
    check_room(out, [run for run in runs if run.run_id not in kept])
    check_build_locks([run for run in runs if run.run_id not in kept])
    return kept


def result_lines(position: str, run: Run, record: Record) -> list[str]:
    """What ``suite run`` prints for one finished launch: skipped checkpoints, then its outcome."""
    wall_s = record.wall_s or 0.0
    if record.status == "diverged":  # "RUN: diverged at step 12 on rank 0: discriminator loss inf"
        line = f"{position} {run.run_id}: {record.reason} ({wall_s:.1f}s)"
    else:
        line = f"{position} {run.run_id}: {record.status} in {wall_s:.1f}s" + (
            "" if record.status == "ok" else f": {(record.error or '').splitlines()[0]}"
        )
    resumed = record.resumed_from  # the checkpoint's description: a free-form mapping
    return [
        f"{run.run_id}: skipped {skipped}; continued from " + (f"checkpoint {resumed['index']}" if resumed else "step 0")
        for skipped in record.checkpoints_skipped or []
    ] + [line]


PROGRESS_LINE_S = 30.0
"""Seconds between the progress lines a run shows where there is no terminal (its bar shows them at once)."""

_STEP_LINE = re.compile(r": (step \d+(?:/\d+)?, \d+ images/s)")
"""The training loop's progress line, in a run's log (:meth:`suite.train.training.GanTrainer._progress`)."""


_RUN_MARK_LINE = re.compile(re.escape(RUN_MARK) + r"(\S+) \(run \d+ of \d+\)")
"""The line each rank logs as a run of a shared launch begins (:mod:`.worker`)."""


FOLLOW_READ_BYTES = 2**20
"""The most a tick reads of a launch's log: a verbose launch is caught up with over several ticks, never in one read."""


class LogFollower:
    """A launch's log read as it grows (whole lines, never through a link): the run whose mark it showed last (the
    launch's first run until a later one begins) and that run's last ``step N/M, X images/s``."""

    def __init__(self, run_dir: Path, run_id: str) -> None:
        self.path, self.run_id, self.offset = run_dir / LOG_FILE, run_id, 0
        self.step: str | None = None

    def read(self) -> None:
        """Take in what the ranks logged since the last read."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(FOLLOW_READ_BYTES)
        except OSError:
            return
        whole = data.rfind(b"\n") + 1  # a line still being written is read next time
        if whole == 0 and len(data) == FOLLOW_READ_BYTES:  # a line longer than a read is no mark or step: passed over
            self.offset += len(data)
            return
        self.offset += whole
        for line in data[:whole].decode("utf-8", errors="replace").splitlines():
            if (mark := _RUN_MARK_LINE.search(line)) is not None:
                self.run_id, self.step = mark.group(1), None
            elif (found := _STEP_LINE.search(line)) is not None:
                self.step = found.group(1)


def progress_ticker(progress: Any, run_id: str, run_dir: Path) -> Callable[[float], None]:
    """What a launch calls about once a second: the bar's note (the run training now, the launch's seconds, the run's
    last step and images/s), or, without a terminal, a log line every :data:`PROGRESS_LINE_S` seconds when a run has
    logged a new step. ``run_id`` and ``run_dir``: the launch's first run, whose log holds the launch's output."""
    follower = LogFollower(run_dir, run_id)
    at = [0.0]  # when the log was last read
    said: list[tuple[str, str] | None] = [None]  # the run and progress last logged

    def tick(elapsed: float) -> None:
        if progress is not None:
            if elapsed - at[0] >= 1.0:
                at[0] = elapsed
                follower.read()
            step = f", {follower.step}" if follower.step else ""
            progress.set_postfix_str(f"{follower.run_id} {elapsed:.0f}s{step}")
        elif elapsed - at[0] >= PROGRESS_LINE_S:
            at[0] = elapsed
            follower.read()
            if follower.step is not None and (follower.run_id, follower.step) != said[0]:
                said[0] = (follower.run_id, follower.step)
                log.info("%s: %.0fs, %s", follower.run_id, elapsed, follower.step)

    return tick


def _show(progress: Any, lines: list[str]) -> None:
    """A finished run's lines: above the progress bar (which moves on by one), else as log lines."""
    if progress:
        for text in lines:
            progress.write(stamped(text))
        progress.update(1)
    else:
        for text in lines:
            log.info(text)


def _stopped(stop: BaseException, launched: list[PlannedRun] | None) -> str:
    """What a sweep stopped by a signal says: the signal, the run it stopped (and its record's reason) or none."""
    from ..records.results import read_record
    from .rerun import stopped_line

    records = [(one, read_record(one.run_dir)) for one in launched or []]
    going = next((pair for pair in records if pair[1] is None or pair[1].status not in ("ok", "diverged")), None)
    if going is None:
        where = "no run was going"
    elif going[1] is not None and going[1].status == "interrupted":
        where = f"{going[0].run.run_id}: {going[1].error}"
    else:
        where = f"{going[0].run.run_id} has no record (it could not be written)"
    aside = stopped_line(going[0].run_dir) if going else None
    where += f"; {aside}" if aside else ""
    return f"stopped by {stop}; {where}\nfinished runs keep their results; `suite run ... --resume` continues"


def run_sweep(
    scenario_file: Path,
    scenario: Scenario,
    planned: list[PlannedRun],
    out: Path,
    options: RunOptions,
    kept: Mapping[str, str] | None = None,
    written: dict[str, Record] | None = None,
) -> int:
    """Launch the ``planned`` runs inside the results folder's lock (held by the caller, who checked
    :func:`check_before_start`), runs that can share a launch in one (:mod:`.launchgroups`); ``kept``: the finished
    runs skipped, by status. With ``--rerun`` a finished run's folder is set aside until its new run is ok
    (:mod:`.rerun`). ``written`` (where given) gets each launched run's final record, by run id."""
    from ..records.results import atomic_write_text
    from .launchgroups import dry_run_lines, group_command, plan_launches
    from .planning import prepare_run_folder
    from .reaper import Reaper
    from .rerun import skipped_line
    from .signals import SignalGuard, Stop

    kept = kept or {}
    sweep = options.sweep
    atomic_write_text(out / "scenario.yaml", Path(scenario_file).read_text())
    for one in planned:
        prepare_run_folder(one)  # run.json: all a worker needs, also for hand launches
    launches, alone = plan_launches([one for one in planned if one.run.run_id not in kept])
    if sweep.dry_run:
        for planned_launch in launches:
            print("\n".join(dry_run_lines(planned_launch, alone, group_command(planned_launch))))
        return 0
    tally = _Tally({one.run.run_id: i for i, one in enumerate(planned)}, len(planned), written=written)
    if not sweep.quiet and sys.stderr.isatty():  # a progress bar in a terminal, plain lines in logs
        from tqdm import tqdm

        tally.progress = tqdm(total=len(planned), unit="run", desc=scenario.name, dynamic_ncols=True)
    for one in planned:
        if one.run.run_id in kept:
            _show(tally.progress, [f"{tally.position(one)} {skipped_line(one.run.run_id, kept[one.run.run_id])}"])
    group: list[PlannedRun] | None = None  # the launch going on
    with Reaper(), SignalGuard() as guard:  # the reaper ends the launches should this process die unawares
        try:
            while launches:
                group = launches.pop(0)
                rest = _launch_group(group, options, tally, guard)
                if rest is None:
                    return 1
                if rest:  # a run before them failed: a fresh launch carries them
                    launches.insert(0, rest)
                group = None
        except Stop as stop:
            tally.progress and tally.progress.close()
            print(_stopped(stop, group), file=sys.stderr)
            return 128 + stop.signum
    if tally.progress:
        tally.progress.close()
    failures, diverged = tally.failures, tally.diverged
    print(
        f"results in {one_line(out)}; {len(planned) - failures - diverged} ok, {failures} failed, {diverged} diverged. "
        f"Next: suite report {shell_word(out)}"
    )
    return 1 if failures else ExitCode.DIVERGED if diverged else 0


@dataclass
class _Tally:
    """The sweep's count of outcomes, each run's position (``[i/N]``) and its progress bar."""

    positions: dict[str, int]
    total: int
    progress: Any = None
    failures: int = 0
    diverged: int = 0
    written: dict[str, Record] | None = None
    """The final records of the runs launched, by run id, where the caller keeps them."""

    def position(self, one: PlannedRun) -> str:
        return f"[{self.positions[one.run.run_id] + 1}/{self.total}]"


def _launch_group(group: list[PlannedRun], options: RunOptions, tally: _Tally, guard: Any) -> list[PlannedRun] | None:
    """One launch of the runs of ``group``, each finished run's line shown; returns the runs it did not start (a run
    before them failed), or None where a record could not be written (the sweep stops)."""
    from .launch import launch, launch_runs
    from .planning import prepare_run_folder
    from .rerun import finished_status, left_aside, set_aside, settle

    sweep, progress = options.sweep, tally.progress
    aside: dict[str, Path] = {}
    for one in group:
        if sweep.rerun and (left := left_aside(one.run_dir)) is not None:  # a stopped --rerun's, continued by --resume
            aside[one.run.run_id] = left
        if sweep.rerun and finished_status(one.run_dir) is not None:  # kept aside until the new run is ok
            aside[one.run.run_id] = set_aside(one.run_dir)
            prepare_run_folder(one)
    names = ", ".join(one.run.run_id for one in group)
    if progress:
        progress.set_postfix_str(f"{group[0].run.run_id} 0s")
    else:
        log.info(
            "%s %s: started%s", tally.position(group[0]), names, f" (one launch, {len(group)} runs)" if len(group) > 1 else ""
        )
    # the launch's output goes to its first run's log until it is cut per run: its last step line is the current run's
    tick = progress_ticker(progress, group[0].run.run_id, group[0].run_dir)
    rest: list[PlannedRun]
    try:
        if len(group) == 1:  # a launch of its own
            records, rest = (
                [launch(group[0], options.launch, timeout=sweep.timeout, tick=tick, grace=sweep.grace, guard=guard)],
                [],
            )
        else:
            records, rest = launch_runs(group, options.launch, timeout=sweep.timeout, tick=tick, grace=sweep.grace, guard=guard)
    except OSError as error:  # its log or record could not be written: the disk is full, read-only or gone
        progress and progress.close()
        at = sorted(tally.positions[one.run.run_id] + 1 for one in group)
        who = (
            f"run {at[0]} of {tally.total}, {names}, has"
            if len(group) == 1
            else f"a run of the launch of runs {at[0]}-{at[-1]} of {tally.total} ({names}) has"
        )
        print(
            f"error: {who} no record: {error}; the sweep stops here, and `suite run ... --resume` continues once that is fixed",
            file=sys.stderr,
        )
        return None
    for one, record in zip(group, records):
        ok, diverging = record.status == "ok", record.status == "diverged"
        tally.failures += not ok and not diverging
        tally.diverged += diverging
        _show(progress, result_lines(tally.position(one), one.run, record))
        if tally.written is not None:
            tally.written[one.run.run_id] = record
        if one.run.run_id in aside:
            log.info(settle(one.run.run_id, aside[one.run.run_id], record.status))
    return rest
