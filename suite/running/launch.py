"""A launch: the runs of one group (:mod:`.launchgroups`; one run: its own command) started with one command, its
processes watched until it ends, and each run's final record.

Rank 0 writes each run's record once, whole, with the launch's part handed to it (:mod:`.launch_part`); the launcher
writes a record only for a run that did not end as its worker recorded it (:mod:`.run_end`). When a launch ends no
process of it is left (:mod:`.launched`, and :mod:`.reaper` should ``suite run`` itself die: docs/reliability.md,
"No orphans"); told to stop, it first lets a run that checkpoints save one within ``grace`` seconds.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from ..config.scenario import Run
from ..records.nofollow import UnsafeEntry, open_regular, remove_entry, remove_tree
from ..records.record import Record, utc_now
from ..records.results import (
    CHECKPOINT_DIR,
    LOG_FILE,
    RANKS_DIR,
    RECORD_FILE,
    STOP_FILE,
    atomic_write_text,
    read_record,
    write_failed,
)
from ..train.launchenv import node_cores, threads_per_rank
from .commands import ENV_FILE_LAUNCHERS, LaunchOptions, deepspeed_env_file, placement
from .launch_part import HANDED_FILE, LaunchStart, hand_launch
from .launched import Launched, LogWatch, remove_temporaries, stop_at_checkpoint
from .launchgroups import group_command, split_log
from .planning import PlannedRun
from .processes import OWNER_VARIABLE, ProcessId, die_with_parent
from .run_end import RunEnd, end_record, launcher_output
from .signals import SignalGuard, Stop

log = logging.getLogger(__name__)


def child_environment(run: Run, opts: LaunchOptions) -> dict[str, str]:
    """Environment of a launch: threads per rank, MPI as root, the venv's tools on PATH.

    ``OMP_NUM_THREADS`` follows the worker's own rule (:func:`suite.train.launchenv.threads_per_rank`)
    for this machine's cores; on a cluster each worker applies the rule to its node again.
    """
    from ..train.engines.base import uses_cuda  # torch: imported only when a run is launched

    env = dict(os.environ)
    cores, _ = node_cores()
    threads = threads_per_rank(run.train.threads, run.sweep_ranks_per_node or placement(run, opts)[1], cores, on_gpu=uses_cuda())
    env["OMP_NUM_THREADS"] = str(threads)
    if Path(opts.python).parent != Path("."):  # a bare name (python3 in a container) is looked up on PATH as it is
        env["PATH"] = f"{Path(opts.python).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONUNBUFFERED", "1")
    env[OWNER_VARIABLE] = ProcessId.current().mark()  # every process of the launch: ended with this one (.reaper)
    if opts.launcher == "local":
        # One node: Open MPI moves the ranks' messages through shared memory; its libfabric transport (btl ofi) is for
        # other nodes, and probing for a fabric took 1.0 of MPI_Init's 1.1 s on a host without one. A site's choice
        # (OMPI_MCA_btl set) stands; other MPIs ignore the variable.
        env.setdefault("OMPI_MCA_btl", "^ofi")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI refuses root unless told
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def launch(
    planned: PlannedRun,
    opts: LaunchOptions,
    timeout: float | None = None,
    tick: Callable[[float], None] | None = None,
    grace: float = 0.0,
    guard: SignalGuard | None = None,
) -> Record:
    """Run ``planned``'s run with its command to completion (or timeout) and return its final record
    (:func:`launch_runs` of one run)."""
    return launch_runs([planned], opts, timeout, tick, grace, guard)[0][0]


class _Progress:
    """Which run of a launch its ranks are on: the records of the runs finished so far (ok or diverged), each read once
    as it appeared, and when the launcher saw each (the next run's clock, for its time limit, starts there)."""

    def __init__(self, group: list[PlannedRun], start: float):
        self.group, self.done_at, self.records = group, [start], list[Record]()

    @property
    def current(self) -> int:
        """The index of the run going on (``len(group)`` once every run is recorded)."""
        return len(self.records)

    def look(self) -> None:
        """Keep the records of the runs recorded since the last look (a launch of one run is judged by its exit alone).
        Rank 0 wrote each whole, with the launch's part it was handed (:mod:`.launch_part`), so that a ``suite run``
        killed before the launch ends loses no finished run, and nothing is written again."""
        while len(self.group) > 1 and self.current < len(self.group):
            record = _finished(self.group[self.current].run_dir)
            if record is None:
                return
            self.records.append(record)
            self.done_at.append(time.perf_counter())

    def elapsed(self) -> float:
        """Seconds of the run going on."""
        return time.perf_counter() - self.done_at[-1]


def _finished(run_dir: Path) -> Record | None:
    """The worker's record of the run, where it is there and says the run ended (ok or diverged); else None."""
    try:
        record = read_record(run_dir) if (run_dir / RECORD_FILE).exists() else None
    except (ValueError, OSError, UnsafeEntry):
        return None
    return record if record is not None and record.status in ("ok", "diverged") else None


def _open_log(path: Path, command: list[str]) -> Any:
    """The launch's output file (unbuffered: a failed write leaves nothing to flush), its command on the first line;
    a link, FIFO, socket or device there is refused, never followed or waited on."""
    try:
        logfile = open(open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb", buffering=0)
        logfile.write(f"$ {shlex.join(command)}\n".encode())
    except OSError as error:
        raise write_failed(path, error) from None
    return logfile


def launch_runs(
    group: list[PlannedRun],
    opts: LaunchOptions,
    timeout: float | None = None,
    tick: Callable[[float], None] | None = None,
    grace: float = 0.0,
    guard: SignalGuard | None = None,
) -> tuple[list[Record], list[PlannedRun]]:
    """Run the runs of ``group`` in one launch and return the final records of the runs it started, and the runs it did not
    start (a run before them failed: launch them anew).

    ``timeout`` limits each run, from the end of the one before it; ``tick(elapsed_seconds)`` is called about once a
    second. Interrupted (:class:`Stop`, Ctrl-C), a run that checkpoints gets up to ``grace`` seconds to checkpoint and exit,
    then every process of the launch is stopped, the run going on recorded as ``interrupted``, and the exception goes on.
    """
    first = group[0]
    for one in group:
        for stale in (one.run_dir / RECORD_FILE, one.run_dir / CHECKPOINT_DIR / STOP_FILE):
            remove_entry(stale)
        remove_tree(one.run_dir / RANKS_DIR)
    command = group_command(group)
    env = child_environment(first.run, opts)
    if opts.launcher in ENV_FILE_LAUNCHERS and opts.hosts:  # ranks on other nodes, started over ssh
        env["DS_ENV_FILE"] = str(deepspeed_env_file(first.run_dir, env))
    start, started_utc = time.perf_counter(), utc_now()
    progress = _Progress(group, start)
    with _open_log(first.run_dir / LOG_FILE, command) as logfile:
        hand_launch(first.run_dir, LaunchStart(shlex.join(command), started_utc, time.time(), ProcessId.current().mark()))
        process = subprocess.Popen(
            command,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # SIGTERM when suite run dies, SIGKILL included
        )
        launched = Launched(process, [one.run_dir for one in group])
        exit_code, timed_out, interrupted = _wait(launched, progress, timeout, tick, grace, guard)
    remove_entry(first.run_dir / RANKS_DIR / HANDED_FILE)  # no worker started by hand later takes this launch's part
    for one in group:
        remove_temporaries(one.run_dir)
        remove_entry(one.run_dir / CHECKPOINT_DIR / STOP_FILE)
    progress.look()
    ending = _LaunchEnd(command, exit_code, time.perf_counter() - start, started_utc, timed_out, interrupted)
    records = _finalize_group(progress, ending)
    if interrupted is not None:
        raise interrupted
    return records, group[progress.current + 1 :]


def _wait(
    launched: Launched,
    progress: _Progress,
    timeout: float | None,
    tick: Callable[[float], None] | None,
    grace: float,
    guard: SignalGuard | None,
) -> tuple[int, bool, BaseException | None]:
    """Wait for the launch to end, or stop it (a run past ``timeout``, a host it cannot reach, an interruption);
    returns its exit code, whether a run timed out and the interruption (None: none)."""
    process, first = launched.process, progress.group[0]
    watch = LogWatch(first.run_dir / LOG_FILE)
    exit_code, timed_out, interrupted = None, False, None
    try:
        while exit_code is None and not timed_out:
            progress.look()
            timed_out = timeout is not None and progress.elapsed() > timeout
            try:
                exit_code = process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                launched.refresh()
                if (problem := watch.problem()) is not None:
                    log.warning("%s: %s; stopping the launch", first.run_dir.name, problem)
                    break
                if tick is not None:
                    tick(progress.elapsed())
    except BaseException as error:  # Stop (SIGTERM, SIGINT, SIGHUP) or Ctrl-C: stop the ranks too, and say so in the record
        interrupted = error
        if len(progress.group) == 1 and first.run.train.checkpoint_every and grace > 0:
            exit_code = stop_at_checkpoint(
                process, first.run_dir, first.run.procs, grace, lambda: guard is not None and guard.hurry
            )
    if exit_code is None:
        exit_code = launched.stop(wait=30 if timed_out else 10)
    else:
        launched.stop(wait=5)  # whatever outlived the launcher
    return exit_code, timed_out, interrupted


@dataclasses.dataclass(frozen=True)
class _LaunchEnd:
    """How a launch ended, as its runs' records say: its command, exit code, wall time, start, and what stopped it."""

    command: list[str]
    exit_code: int
    wall_s: float
    started_utc: str
    timed_out: bool
    interrupted: BaseException | None


def _finalize_group(progress: _Progress, end: _LaunchEnd) -> list[Record]:
    """The final record of every run the launch started: those it finished as rank 0 wrote them (exit code 0: each
    ended as the worker recorded it; read once, as they appeared), the one going on when it ended (if any) failed,
    timed out or interrupted, as a launch of its own would be (:func:`.run_end.end_record`); each with its part of the
    output in its ``log.txt`` (:func:`.launchgroups.split_log`)."""
    group, done = progress.group, progress.current
    started = group[: done + 1]
    if len(group) > 1:
        texts = split_log(launcher_output(group[0].run_dir / LOG_FILE), [one.run.run_id for one in started])
        for one, text in zip(started, texts):
            atomic_write_text(one.run_dir / LOG_FILE, text)
    name = None
    if end.interrupted is not None:
        name = str(end.interrupted) if isinstance(end.interrupted, Stop) else "SIGINT"
    records = []
    for index, one in enumerate(started):
        last = index == done or (done == len(group) and index == done - 1)
        going = index == done  # the run going on as the launch ended (a launch of one run: that run)
        if len(group) == 1:
            wall_s = end.wall_s
        else:  # from the end of the run before it (the first: from the launch's start), as the launcher saw them
            wall_s = (time.perf_counter() if going else progress.done_at[index + 1]) - progress.done_at[index]
        code = end.exit_code if last else 0
        try:
            recorded = read_record(one.run_dir) if going else progress.records[index]  # each record read once
            records.append(
                end_record(
                    recorded,
                    one.run,
                    one.run_dir,
                    RunEnd(end.command, code, wall_s, end.timed_out and last, name if going else None, end.started_utc),
                )
            )
        except OSError as error:
            if end.interrupted is None:
                raise
            log.error("%s: %s", one.run_dir.name, error)  # the interruption goes on; the runner says the run has no record
    return records
