"""Command lines for each launcher, and running them for a scenario's runs.

``suite run`` writes each run's ``run.json``, builds one command per run for the chosen
launcher and, unless ``--dry-run``, runs the commands one after another, each under a time
limit, with its output in ``RUN_DIR/log.txt``. Whatever happens to the processes, the run ends
with a ``result.json``: the worker's own, completed with the launcher's view (command, exit
code, wall time), or a ``failed`` record whose error starts with one line naming the rank that
failed first, its host and its exit code or signal (:mod:`suite.records.failures`), or an
``interrupted`` one when ``suite run`` was stopped. Either names the checkpoint that
``--resume`` continues from.

When a launch ends (finished, failed, timed out or stopped) no process of it is left: the
runner keeps a list of every process the launcher started (and of the ranks' own status
files), and terminates, then kills, whatever outlives the launcher; it then removes the
temporaries of writes that a killed rank left unfinished. Should ``suite run`` itself die
unawares (SIGKILL), the kernel sends its launcher SIGTERM (:func:`.processes.die_with_parent`) and
its reaper (:mod:`.reaper`) ends every process marked with ``suite run``'s
:data:`~.processes.OWNER_VARIABLE`, which the launch's environment carries to every process the
launcher starts on this host. Told to stop (a signal to ``suite
run``), it first asks a run that checkpoints to save a checkpoint (``checkpoints/STOP``) and
waits up to ``grace`` seconds for its ranks to exit.

Launchers and what they start:

==========  =========================================================  ===================
launcher    command                                                    engines
==========  =========================================================  ===================
local       per engine: horovodrun (horovod), torchrun (torch,          all
            deepspeed), mpirun (mpi), on this machine
mpirun      ``mpirun -np P [-H hosts] [--map-by ppr:K:node] ...``       all
horovodrun  ``horovodrun -np P [-H hosts] ...``                         horovod
torchrun    ``torchrun --nnodes N --nproc_per_node K ...``              torch, deepspeed
deepspeed   ``deepspeed --num_nodes N --num_gpus K ...``                deepspeed, torch
jsrun       ``jsrun -n P -a 1 -c C -g G ...`` (one rank per resource set) all
srun        ``srun -n P --ntasks-per-node K --gpus-per-task G ...``     all
==========  =========================================================  ===================
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import psutil

from ..config.scenario import Run, RunPlacement
from ..measure.env import source_revision
from ..records.failures import first_failure, launch_problem, read_statuses, signal_name
from ..records.nofollow import UnsafeEntry, open_regular, read_text, remove_entry, remove_files, remove_tree
from ..records.parts import Ending, FailurePart, LaunchPart, assemble, completed, identity, made_now, provenance_kept
from ..records.record import Record, utc_now
from ..records.results import (
    CHECKPOINT_DIR,
    LOG_FILE,
    RANKS_DIR,
    RECORD_FILE,
    RUN_FILE,
    SCRATCH_DIR,
    STOP_FILE,
    atomic_write,
    atomic_write_text,
    path_under,
    read_record,
    write_failed,
    write_record,
)
from ..train.launchenv import node_cores, threads_per_rank
from ..train.resume import CheckpointError, describe_checkpoint, resume_plan
from .commands import (  # noqa: F401  (re-exported: the launch API is imported from here)
    ENV_FILE_LAUNCHERS,
    FORWARDED,
    LAUNCH_COMMANDS,
    LAUNCHERS,
    LaunchError,
    LaunchOptions,
    command_for,
    deepspeed_env_file,
    forwarded_variables,
    local_procs_problem,
    placement,
    sweep_ranks_per_node,
)
from .processes import OWNER_VARIABLE, ProcessId, die_with_parent

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
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI refuses root unless told
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def _log_text(path: Path) -> str:
    """The launcher's output so far; empty where there is none, or something other than a regular file (never followed)."""
    try:
        return read_text(path, errors="replace")
    except (OSError, UnsafeEntry):
        return ""


def _tail(path: Path, lines: int = 25) -> str:
    return "\n".join(_log_text(path).splitlines()[-lines:])


def finalize_record(
    run: Run,
    run_dir: Path,
    command: list[str],
    exit_code: int | None,
    wall_s: float,
    timed_out: bool = False,
    interrupted: str | None = None,
    started_utc: str | None = None,
) -> Record:
    """Complete the worker's record with the launch, or write a failed (or interrupted) one; returns the record written.

    The error's first line says what ended the run (``rank 1 on node3 was killed by SIGKILL``,
    ``interrupted by SIGTERM after 12 s``, ...); the next say where the launcher's output is and
    where ``--resume`` continues; ``checkpoint`` names that checkpoint (None: from step 0). A record
    the launcher writes carries the run's provenance (settings, the code's revision, the launch's
    start ``started_utc`` and now) unless the worker's record already does.
    """
    record = read_record(run_dir)
    if record is not None and record.status in ("ok", "diverged") and exit_code == 0:  # the worker's own end
        remove_tree(run_dir / RANKS_DIR)
        checkpoint = resume_point(run_dir, run)[0] if record.status == "diverged" else record.checkpoint
        finished = completed(record, LaunchPart(shlex.join(command), exit_code, wall_s, checkpoint))
        write_record(run_dir, finished)
        return finished
    log_path = run_dir / LOG_FILE
    log_text = _log_text(log_path)
    statuses = read_statuses(run_dir)
    failure, status, details = None, "failed", [f"launcher output: {log_path}"]
    if interrupted:
        status, reason = "interrupted", f"interrupted by {interrupted} after {wall_s:.0f} s"
    elif timed_out:
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
    launched = LaunchPart(shlex.join(command), exit_code, wall_s, checkpoint)
    made = made_now(run, source_revision(), started_utc or utc_now())  # the worker's own, where it wrote one, wins
    if record is None:
        failed = assemble(str(run_dir / RECORD_FILE), made, identity(run), ending, launched, FailurePart(failure_data))
    else:  # what the worker recorded, with the launcher's provenance where it has none
        failure_data = failure_data if failure_data is not None else record.failure
        kept, ending = provenance_kept(record, made), dataclasses.replace(ending, reason=record.reason, diverged=record.diverged)
        failed = completed(record, kept, identity(run), ending, launched, FailurePart(failure_data, record.traceback))
    write_record(run_dir, failed)
    return failed


def resume_point(run_dir: Path, run: Run) -> tuple[dict[str, Any] | None, str]:
    """The checkpoint ``--resume`` continues from, as the record names it, and the line that says so; a
    checkpoint description that is not one is named in that line (it never stops the sweep)."""
    try:
        plan = resume_plan(run_dir, run)
    except CheckpointError as error:
        return None, f"--resume cannot continue: {error}"
    return plan.checkpoint(), describe_checkpoint(plan.checkpoint(), plan.skipped)


class _LogWatch:
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


class _Launched:
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


def _remove_temporaries(run_dir: Path) -> None:
    """Remove what writers that were killed left half-written (``atomic_write``'s hidden temporaries), through each
    folder's descriptor: never a file of another folder, whatever link was put in the run folder
    (:func:`suite.records.nofollow.remove_files`)."""
    for folder in (run_dir, run_dir / RANKS_DIR, run_dir / CHECKPOINT_DIR, run_dir / SCRATCH_DIR):
        remove_files(folder, lambda name: name.startswith("."))


def _stop_at_checkpoint(
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


STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals that stop ``suite run`` as :class:`Stop` (SIGHUP: the terminal or ssh session it ran in is gone)."""


class Stop(BaseException):
    """``suite run`` received a signal that stops it (:data:`STOPPING_SIGNALS`)."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = signum


class SignalGuard:
    """Within it, the first SIGTERM, SIGINT or SIGHUP raises :class:`Stop` in the main thread; later ones only
    cut a checkpoint's grace short (``hurry``), so that stopping the ranks is never interrupted."""

    def __init__(self) -> None:
        self.hurry = False
        self._received: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if self._received is None:
            self._received = signum
            raise Stop(signum)
        self.hurry = True

    def __enter__(self) -> "SignalGuard":
        for signum in STOPPING_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


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
    """Which run of a launch its ranks are on: the runs whose worker record (ok or diverged) is written, and when the
    launcher saw each (the next run's clock, for its time limit, starts there)."""

    def __init__(self, group: list[PlannedRun], start: float, command: list[str], started_utc: str):
        self.group, self.done_at, self.command, self.started_utc = group, [start], command, started_utc

    @property
    def current(self) -> int:
        """The index of the run going on (``len(group)`` once every run is recorded)."""
        return len(self.done_at) - 1

    def look(self) -> None:
        """Count the runs recorded since the last look (a launch of one run is judged by its exit alone), each
        completed with the launch's part at once (its own worker time for now, its share once the launch ends), so
        that a ``suite run`` killed before the launch ends loses no finished run."""
        while len(self.group) > 1 and self.current < len(self.group) and _finished(self.group[self.current].run_dir):
            one = self.group[self.current]
            self.done_at.append(time.perf_counter())
            with contextlib.suppress(OSError, ValueError):  # the launch's end completes it again
                mine = read_record(one.run_dir)
                own = mine.worker_s if mine is not None and mine.worker_s is not None else self.done_at[-1] - self.done_at[-2]
                finalize_record(one.run, one.run_dir, self.command, 0, own, started_utc=self.started_utc)

    def elapsed(self) -> float:
        """Seconds of the run going on."""
        return time.perf_counter() - self.done_at[-1]


def _finished(run_dir: Path) -> bool:
    """Whether the worker's record of the run is there and says the run ended (ok or diverged)."""
    try:
        record = read_record(run_dir) if (run_dir / RECORD_FILE).exists() else None
    except (ValueError, OSError, UnsafeEntry):
        return False
    return record is not None and record.status in ("ok", "diverged")


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
    """Run the runs of ``group`` in one launch (:mod:`.launchgroups`; one run: its own command) and return the final
    records of the runs it started, and the runs it did not start (a run before them failed: launch them anew).

    ``timeout`` limits each run, from the end of the run before it (the first: from the launch's start);
    ``tick(elapsed_seconds)`` is called about once a second while a run is going. When the wait is interrupted
    (:class:`Stop`, Ctrl-C), a run that checkpoints gets up to ``grace`` seconds to checkpoint and exit; then every
    process of the launch is stopped, the run going on is recorded as ``interrupted`` (those finished before it as
    they ended), and the exception goes on.
    """
    from .launchgroups import group_command

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
    progress = _Progress(group, start, command, started_utc)
    with _open_log(first.run_dir / LOG_FILE, command) as logfile:
        process = subprocess.Popen(
            command,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # SIGTERM when suite run dies, SIGKILL included
        )
        launched = _Launched(process, [one.run_dir for one in group])
        exit_code, timed_out, interrupted = _wait(launched, progress, timeout, tick, grace, guard)
    for one in group:
        _remove_temporaries(one.run_dir)
        remove_entry(one.run_dir / CHECKPOINT_DIR / STOP_FILE)
    progress.look()
    ending = _LaunchEnd(command, exit_code, time.perf_counter() - start, started_utc, timed_out, interrupted)
    records = _finalize_group(progress, ending)
    if interrupted is not None:
        raise interrupted
    return records, group[progress.current + 1 :]


def _wait(
    launched: _Launched,
    progress: _Progress,
    timeout: float | None,
    tick: Callable[[float], None] | None,
    grace: float,
    guard: SignalGuard | None,
) -> tuple[int, bool, BaseException | None]:
    """Wait for the launch to end, or stop it (a run past ``timeout``, a host it cannot reach, an interruption);
    returns its exit code, whether a run timed out and the interruption (None: none)."""
    process, first = launched.process, progress.group[0]
    watch = _LogWatch(first.run_dir / LOG_FILE)
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
            exit_code = _stop_at_checkpoint(
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
    """The final record of every run the launch started: those it finished completed (exit code 0: each ended as
    the worker recorded it), the one going on when it ended (if any) failed, timed out or interrupted, as a launch of
    its own would be; each with its share of the wall time (:func:`.launchgroups.wall_shares`) and its part of the
    output in its ``log.txt`` (:func:`.launchgroups.split_log`)."""
    from .launchgroups import split_log, wall_shares

    group, done = progress.group, progress.current
    started = group[: done + 1]
    if len(group) > 1:
        texts = split_log(_log_text(group[0].run_dir / LOG_FILE), [one.run.run_id for one in started])
        for one, text in zip(started, texts):
            atomic_write_text(one.run_dir / LOG_FILE, text)
    finished = [read_record(one.run_dir) for one in group[:done]]
    own = [r.worker_s or 0.0 if r is not None else 0.0 for r in finished]
    if done < len(group):
        own.append(time.perf_counter() - progress.done_at[-1] if len(group) > 1 else 0.0)
    walls = wall_shares(end.wall_s, own)
    name = None
    if end.interrupted is not None:
        name = str(end.interrupted) if isinstance(end.interrupted, Stop) else "SIGINT"
    records = []
    for index, one in enumerate(started):
        last = index == done or (done == len(group) and index == done - 1)
        code = end.exit_code if last else 0
        try:
            records.append(
                finalize_record(
                    one.run,
                    one.run_dir,
                    end.command,
                    code,
                    walls[index],
                    end.timed_out and last,
                    name if index == done else None,
                    end.started_utc,
                )
            )
        except OSError as error:
            if end.interrupted is None:
                raise
            log.error("%s: %s", one.run_dir.name, error)  # the interruption goes on; the runner says the run has no record
    return records


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
    """``run`` as ``suite run`` launches it into ``results_dir/RUN_ID``: with ``placement`` (what the command line
    adds) and its sweep's placement (ranks per node of its largest run, so that a worker started by hand from
    ``run.json`` picks the same threads per rank as ``suite run``), and its launch command, built here and only here.

    ``shown``: the command names the folder by its absolute path, as a dry run prints it. The folder must lie inside
    ``results_dir`` (:func:`suite.records.results.path_under`). Writes nothing; a launcher or placement problem is a
    :class:`LaunchError`.
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


def check_tools(planned: list[PlannedRun], opts: LaunchOptions) -> None:
    """Fail early, naming the missing launcher or engine package, how to install it and the runs that could run
    without it (:func:`missing_refusal`), rather than after the first runs; and a local launch of more ranks than this
    machine holds (:func:`.commands.local_procs_problem`)."""
    if opts.launcher == "local":
        for one in planned:
            if (problem := local_procs_problem(one.run, one.run.procs, opts)) is not None:
                raise LaunchError(problem)
    missing = missing_engines(planned, opts)
    if missing:
        raise LaunchError(missing_refusal(planned, missing))


def missing_engines(planned: list[PlannedRun], opts: LaunchOptions) -> dict[str, str]:
    """The planned runs that cannot start here, by run id, each with why: ``launcher not found: NAME`` (its command's
    first word is neither on PATH nor a file) or ``package not installed: NAME`` (its engine's
    :attr:`~suite.config.registry.EngineEntry.package`, looked for only where the ranks run this very interpreter, not
    in a container)."""
    from ..config.registry import ENGINES

    here = opts.container is None and Path(opts.python).resolve() == Path(sys.executable).resolve()
    found: dict[str, bool] = {}
    missing: dict[str, str] = {}
    for one in planned:
        first = one.command[0]
        if first != opts.python:
            if first not in found:
                found[first] = _found(first)
            if not found[first]:
                missing[one.run.run_id] = f"launcher not found: {first}"
                continue
        package = ENGINES[one.run.engine].package
        if here and package is not None and not _importable(package):
            missing[one.run.run_id] = f"package not installed: {package}"
    return missing


def _found(tool: str) -> bool:
    """Whether a command's first word is a program here: on PATH, or a file."""
    return shutil.which(tool) is not None or Path(tool).exists()


def _importable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def run_names(run_ids: list[str], at_most: int = 12) -> str:
    """``a, b, c`` or, past ``at_most``, the first ones and ``and N more``."""
    shown = ", ".join(run_ids[:at_most])
    return shown + (f" and {len(run_ids) - at_most} more" if len(run_ids) > at_most else "")


def missing_refusal(planned: list[PlannedRun], missing: dict[str, str]) -> str:
    """One line: what is missing, for the runs of which engines, how to install each (its registry entry's
    :attr:`~suite.config.registry.EngineEntry.install`), and the runs that could run here with ``--skip-missing``."""
    from ..config.registry import ENGINES

    whys: dict[str, list[str]] = {}  # "launcher not found" -> its names
    for why in dict.fromkeys(missing[one.run.run_id] for one in planned if one.run.run_id in missing):
        kind, name = why.split(": ", 1)
        whys.setdefault(kind, []).append(name)
    engines = sorted({one.run.engine for one in planned if one.run.run_id in missing})
    routes = "; ".join(f"{e}: {ENGINES[e].install}" if ENGINES[e].install else e for e in engines)
    several = len(engines) > 1
    what = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in whys.items())
    line = (
        f"{what}, for the runs of the "
        f"{' and '.join(engines)} engine{'s' if several else ''}: install {'them' if several else 'it'} ({routes}; "
        "`suite env` says which engines are installed)"
    )
    runnable = [one.run.run_id for one in planned if one.run.run_id not in missing]
    if not runnable:
        return line + ", or choose another engine or --launcher"
    return (
        f"{line}; the other {len(runnable)} run{'s' if len(runnable) > 1 else ''} can run here "
        f"({run_names(runnable)}): add --skip-missing to run {'them' if len(runnable) > 1 else 'it'} and skip the "
        f"{len(missing)} that cannot, or choose another engine or --launcher"
    )


def check_nvidia_only(runs: list[Run]) -> None:
    """On a ROCm torch, fail naming the first run whose engine's GPU path needs an NVIDIA GPU (its class says so:
    :attr:`suite.train.engines.base.Engine.needs_nvidia`). A dry run calls it without a GPU in sight (a login node's
    ROCm torch is the compute nodes'), unless ``SUITE_DEVICE=cpu`` keeps the runs off the GPUs."""
    from ..config.registry import ENGINES
    from ..measure.gpu_platform import current as current_platform

    if current_platform().name == "cuda":
        return
    for run in runs:
        if (refusal := ENGINES[run.engine].load().gpu_refusal()) is not None:
            raise LaunchError(f"{run.run_id}: {refusal}")


def check_devices(runs: list[Run]) -> None:
    """Fail before any rank starts, naming the run and setting, where a ``performance`` setting cannot run here, or
    where a run's engine needs an NVIDIA GPU and this torch is a ROCm build (:mod:`suite.measure.gpu_platform`)."""
    from ..config.validation import device_problem
    from ..train.engines.base import uses_cuda  # torch: imported only when runs are launched

    on_gpu = uses_cuda()
    compiler = os.environ.get("CXX") or next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if on_gpu:
        check_nvidia_only(runs)
    for run in runs:
        problem = device_problem(run.performance, on_gpu, compiler)
        if problem is not None:
            raise LaunchError(f"{run.run_id}: {problem[0]}: {problem[1]}")
