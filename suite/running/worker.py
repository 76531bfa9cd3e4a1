"""The per-rank entry point: ``python -m suite.running.worker RUN_DIR`` (or its short name, ``python -m suite.worker``).

Every rank reads ``RUN_DIR/run.json`` (checked against the sha256 ``suite run`` gives it, ``--run-sha256``:
:func:`read_run`), starts the engine, sets up the run's strategy, warms it up and trains on the training clock
(between two barriers, the warm-up inside), and hands its measurements to rank 0, which packages the trained model;
every rank then scores a share of its models and snapshots (:mod:`suite.running.scoring`), and rank 0 writes
``RUN_DIR/result.json``. ``--next-run RUN_DIR SHA256`` (repeatable) hands the launch further runs, trained one after
another by the same ranks (:mod:`.launchgroups`). Launch it under any launcher (``mpirun -np 4 python -m
suite.running.worker ...``, ``torchrun --nproc_per_node 4 -m suite.running.worker ...``).

A rank that raises writes its error to ``RUN_DIR/ranks/rank<N>.json`` (rank 0 also a ``failed`` record) and aborts
(:meth:`Engine.abort`), so that the launcher stops the others at once instead of leaving them blocked in a
collective. A diverged run is neither finalized nor scored: rank 0 records it and every rank exits normally.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..config.envsettings import EnvironmentSettingError, check_environment
from ..config.scenario import Run
from ..records.failures import read_statuses, write_status
from ..records.nofollow import UnsafeEntry, check_private_folder, confine
from ..records.record import utc_now
from ..records.results import RUN_FILE, SCRATCH_DIR
from ..train.checkpoint import STOPPED_EXIT_CODE, Checkpointer, StopRequested
from ..train.gan_plan import window_seconds
from ..train.launchenv import LaunchInfo, detect, node_cores, threads_per_rank
from .commands import NEXT_RUN_OPTION, RUN_DIGEST_OPTION, RUN_MARK
from .fault_hooks import diverge_at_step, fail_at_step, slow_down_steps
from .launch_part import HandedLaunch, handed_launch
from .processes import leave_now
from .rank_record import RunOnRank
from .run_file import RunFileChanged, read_run, sha256_hex
from .run_record import conclude, report_failure
from .runlogs import tensorboard_folder

if TYPE_CHECKING:
    from ..gan.data import ImageData
    from ..measure.telemetry import Telemetry
    from ..measure.tensorboard_writer import EventWriter
    from ..train.engines.base import Engine
    from ..train.strategies.base import Strategy


log = logging.getLogger("suite.running.worker")

_exit_without_finalizing = False
"""Set once the rank has written everything and shut its engine down: it then ends at once
(:func:`.processes.leave_now`), skipping the second an interpreter that imported torch spends finalizing. A
torch.distributed rank could also abort while finalizing ("terminate called without an active exception", SIGABRT, from
a Gloo thread destroyed with DDP's last references): 1 run in about 50 of the regression gate's workload on 2 cores,
turning a finished run into a failed one.
"""


class LaunchMismatch(RuntimeError):
    """The launcher, the engine and the run disagree about the processes."""


def _check_agreement(engine: Engine, launch: LaunchInfo, run: Run) -> None:
    if launch.launcher != "none" and (engine.rank, engine.size) != (launch.rank, launch.size):
        raise LaunchMismatch(
            f"the {launch.launcher} launcher says rank {launch.rank} of {launch.size}, but the {engine.name} engine "
            f"says rank {engine.rank} of {engine.size}; start the worker with a launcher that matches engine {engine.name}"
        )
    if engine.size != run.procs:
        raise LaunchMismatch(
            f"run {run.run_id} is defined for {run.procs} processes but was launched with {engine.size}; "
            f"launch it with -np {run.procs} (or re-expand the scenario)"
        )


def _event_writer(run: Run, run_dir: Path, rank: int) -> EventWriter | None:
    """This rank's TensorBoard writer where the run asks for events (docs/logs.md), made during set-up, before the
    barriers that precede training: rank 0 removes an earlier attempt's events and writes the settings. None without,
    or (one warning line) where TensorBoard's writer cannot be imported on this rank."""
    folder = tensorboard_folder(run, run_dir)
    if folder is None:
        return None
    from ..measure.tensorboard_writer import EventWriter

    try:
        events = EventWriter(folder, run.strategy, rank)
    except ImportError as error:  # suite run checked the package where it ran; a node may lack it
        log.warning("%s (rank %d): no TensorBoard events: %s", run.run_id, rank, error)
        return None
    if rank == 0:
        events.start(run.to_dict())
    return events


def _wait_for_stopped(run_dir: Path, procs: int, timeout: float = 30.0) -> None:
    """After a stop checkpoint: wait (up to ``timeout``) until every rank stopped or finished training,
    so that no rank's exit makes the launcher kill another in the middle of its checkpoint."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = read_statuses(run_dir)
        if len(statuses) >= procs and all(s["status"] in ("stopped", "trained", "failed") for s in statuses.values()):
            return
        time.sleep(0.5)


def _set_threads(run: Run, launch: LaunchInfo) -> int:
    """Give torch this rank's share of the node's cores (``train.threads``, else the cores over the ranks placed on the
    node); returns the threads."""
    import torch

    from ..train.engines.base import uses_cuda

    cores, allowed = node_cores()
    threads = threads_per_rank(
        run.train.threads, run.sweep_ranks_per_node or launch.local_size, cores, allowed, on_gpu=uses_cuda()
    )
    torch.set_num_threads(threads)
    return threads


def _strategy_for(run: Run, run_dir: Path, engine: Engine) -> tuple[ImageData, Telemetry, Strategy]:
    """The run's data, this rank's telemetry and its strategy, created (not yet set up) on the started ``engine``."""
    from ..gan.data import load_dataset
    from ..measure.telemetry import Telemetry
    from ..train.strategies.base import create

    dataset = run.dataset
    data = load_dataset(
        dataset.name, dataset.image_size, dataset.split, dataset.root, dataset.classes, dataset.download, dataset.limit
    )
    import torch._dynamo  # noqa: F401  (torch.optim imports it on first use: seconds that are not training)

    telemetry = Telemetry(engine.device, engine.comm, engine.timeline)
    fail_at_step(telemetry, engine.rank, run.run_id)
    diverge_at_step(engine.rank)
    slow_down_steps(telemetry)
    return data, telemetry, create(run, engine, data, telemetry, run_dir / SCRATCH_DIR)


def _train(
    run: Run,
    run_dir: Path,
    engine: Engine,
    strategy: Strategy,
    telemetry: Telemetry,
    checkpointer: Checkpointer | None,
    warm_up: bool,
) -> None:
    """The training clock, barrier to barrier: the warm-up (unless a resumed run is past it), then the window's timed
    steps; a time budget's window is what the slowest rank's warm-up left of it."""
    from ..measure.tracing import profiled_steps

    engine.barrier()  # the training clock starts on every rank at once, with the warm-up
    telemetry.start_warmup()
    if warm_up:
        strategy.warm_up()
    engine.timeline.synchronize()
    # every rank's warm-up seconds, agreed: a time budget's window is what the slowest warm-up left of it
    warmups = engine.allgather_object(telemetry.warmup_seconds())  # also the barrier that opens the window
    strategy.window_s = window_seconds(run.train.budget_s, max(warmups))
    strategy.window_opens_s = max(warmups)
    telemetry.open_window()
    with profiled_steps(run.trace, run_dir, engine, telemetry):
        strategy.train()
    if checkpointer is not None and not strategy.halted():  # a diverged model is not worth resuming
        checkpointer.finish()
    telemetry.training_done()
    engine.barrier()
    telemetry.close_window()


@dataclass
class _Progress:
    """How far this rank got, for the error paths: its rank, its engine once made, its event writer, and whether rank
    0's finished record is written."""

    rank: int
    engine: Engine | None = None
    events: EventWriter | None = None
    recorded: bool = False


@dataclass
class Launch:
    """What outlives one run on this rank: the launch environment, the engine once started (by the launch's first run,
    with its settings: the runs a launch carries share them, :mod:`.launchgroups`) and the generators' state then, and
    on rank 0 the launch's part ``suite run`` handed it (:mod:`.launch_part`)."""

    info: LaunchInfo
    engine: Engine | None = None
    rng: Any = None
    handed: HandedLaunch | None = None

    def engine_for(self, run: Run, run_dir: Path) -> Engine:
        """The started engine, ready for ``run``: started now for the first run; for a later one, its per-run state
        reset (:meth:`Engine.begin_run`) and torch's global generators put back as they were when the first began, so
        that a run trains as it would have in a launch of its own."""
        import torch

        if self.engine is None:
            from ..train.engines import create_engine

            engine = create_engine(run, self.info, run_dir)
            engine.start()
            self.engine, self.rng = engine, (torch.random.get_rng_state(), _cuda_rng_state())
            return engine
        self.engine.begin_run()
        torch.random.set_rng_state(self.rng[0])
        if self.rng[1] is not None:
            torch.cuda.set_rng_state_all(self.rng[1])
        return self.engine


def _cuda_rng_state() -> Any:
    """The CUDA generators' states where CUDA is initialised, else None."""
    import torch

    return torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]


def _set_up(
    run: Run, run_dir: Path, launch: LaunchInfo, progress: _Progress
) -> tuple[Engine, ImageData, Strategy, Telemetry, dict[str, Any] | None]:
    """Set-up on the started engine: the data loaded, the strategy made and set up, resumed from the run's last
    checkpoint where it keeps them (the returned checkpoint; None: a fresh start)."""
    engine = progress.engine
    assert engine is not None, "the launch started its engine"
    progress.rank = engine.rank
    _check_agreement(engine, launch, run)
    data, telemetry, strategy = _strategy_for(run, run_dir, engine)
    progress.events = strategy.events = _event_writer(run, run_dir, engine.rank)
    checkpointer = strategy.checkpointer = Checkpointer(run, run_dir, engine, telemetry) if run.train.checkpoint_every else None
    strategy.setup()
    resumed = None
    if checkpointer is not None:
        checkpointer.attach(strategy)
        resumed = checkpointer.restore()
    return engine, data, strategy, telemetry, resumed


def execute(run: Run, run_dir: Path, launch: Launch | None = None, last: bool = True) -> int:
    """Run the worker for ``run`` in ``run_dir`` on this rank; returns the exit code.

    ``launch``: what the runs before it in this launch left (the started engine); ``last``: no run follows, so the engine
    shuts down after this one. Set-up, the training clock (:func:`_train`), finalize and scoring are timed apart; only the
    training clock goes into speedup and efficiency.
    """
    launch = launch or Launch(detect())
    started_utc = utc_now()
    progress = _Progress(launch.info.rank)
    try:
        write_status(run_dir, progress.rank, "running")
        from ..measure.flops import device_peak

        engine = progress.engine = launch.engine_for(run, run_dir)
        started, started_utc, threads = time.perf_counter(), utc_now(), _set_threads(run, launch.info)
        engine, data, strategy, telemetry, resumed = _set_up(run, run_dir, launch.info, progress)
        engine.barrier()  # every rank measures its share of the machine at the same time
        peak = device_peak(engine.device)
        setup_s = time.perf_counter() - started
        _train(run, run_dir, engine, strategy, telemetry, strategy.checkpointer, warm_up=resumed is None)
        on = RunOnRank(run, run_dir, launch.info, engine, data, threads, started, started_utc, launch.handed)
        concluded = conclude(on, strategy, telemetry, setup_s, peak)
        progress.recorded = concluded and engine.rank == 0  # rank 0 wrote its record: a failure from here on keeps it
        if last:
            engine.shutdown()
            global _exit_without_finalizing
            _exit_without_finalizing = True
        return 0
    except StopRequested as stop:
        log.info("%s (rank %d): %s", run.run_id, progress.rank, stop)
        write_status(run_dir, progress.rank, "stopped", error=str(stop))
        if progress.engine is not None and progress.engine.size > 1:  # a stop comes from a checkpoint: the engine runs
            _wait_for_stopped(run_dir, run.procs)
            progress.engine.abort(STOPPED_EXIT_CODE)
        return STOPPED_EXIT_CODE
    except Exception as error:
        report_failure(run, run_dir, progress.rank, started_utc, error, progress.recorded)
        if progress.engine is not None and progress.engine.size > 1:  # the others may wait for this rank in a collective
            logging.shutdown()
            progress.engine.abort(1)
        return 1
    finally:
        if progress.events is not None:  # every point was flushed as it was written: closing loses nothing if it never happens
            progress.events.close()


def _log_format() -> str:
    """Every line of a rank: its time, the rank (the launcher interleaves them in ``log.txt``), the logger and the message."""
    try:
        rank = f"rank {detect().rank} "
    except ValueError:  # an incomplete launch environment: execute() says so in its record
        rank = ""
    return f"%(asctime)s {rank}%(name)s: %(message)s"


def _refused(run_dir: Path, message: str, launch: Launch | None = None) -> int:
    """A rank that will not run: its one line on stderr and, where its rank is known, its ``failed`` status (so that
    ``suite run``'s failed record names that line); exit code 2. Where the launch's engine runs over several ranks
    (a later run of the launch), the launch ends here: the others may wait for this rank."""
    print(f"error: {message}", file=sys.stderr)
    with contextlib.suppress(OSError, ValueError):  # a full disk or an incomplete launch environment: the line stands
        write_status(run_dir, detect().rank, "failed", error=message)
    if launch is not None and launch.engine is not None and launch.engine.size > 1:
        logging.shutdown()
        launch.engine.abort(2)
    return 2


def _run_one(run_dir: Path, run_sha256: str | None, launch: Launch, position: tuple[int, int]) -> int:
    """The run of ``run_dir`` on this rank, as the ``position``-th (k of n) run of the launch; its exit code."""
    index, count = position
    try:  # the results folder: nobody else may put a link in the run folder's place while it trains (records.nofollow)
        check_private_folder(run_dir.absolute().parent)
    except UnsafeEntry as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    path = run_dir / RUN_FILE
    if not path.is_file():
        print(
            f"error: {path} not found; create run folders with `suite run SCENARIO --out DIR` (or `suite run ... --dry-run`)",
            file=sys.stderr,
        )
        return 2
    with contextlib.ExitStack() as held:
        try:  # the run folder, opened once here: every file of it is reached from that descriptor (records.nofollow)
            held.enter_context(confine(run_dir))
        except (UnsafeEntry, OSError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        try:  # run.json read once, from the run folder's descriptor, and checked against what suite run wrote
            run = read_run(run_dir, run_sha256)
        except (RunFileChanged, UnsafeEntry, OSError) as error:  # changed since suite run wrote it; a link or FIFO there
            return _refused(run_dir, str(error), launch)
        except (ValueError, KeyError) as error:  # ScenarioError and JsonError are ValueErrors
            return _refused(
                run_dir, f"{path} is not a valid run ({error}); recreate it with `suite run SCENARIO --dry-run`", launch
            )
        if index == 0 and run_sha256 is not None and launch.info.rank == 0:  # launched by suite run: its launch's part
            launch.handed = handed_launch(run_dir)
        if count > 1:  # where suite run cuts the launch's output into each run's log.txt
            log.info("%s%s (run %d of %d)", RUN_MARK, run.run_id, index + 1, count)
        return execute(run, run_dir, launch, last=index == count - 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.running.worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="folder holding run.json (results/SCENARIO/RUN_ID)")
    parser.add_argument(
        RUN_DIGEST_OPTION,
        dest="run_sha256",
        type=sha256_hex,
        help="sha256 of the run.json suite run wrote (suite run gives it); another run.json is refused. Leave it out "
        "for a hand launch: the run.json there is run as it is",
    )
    parser.add_argument(
        NEXT_RUN_OPTION,
        dest="next_runs",
        nargs=2,
        action="append",
        default=[],
        metavar=("RUN_DIR", "SHA256"),
        help="a further run the same ranks train once the one before it is recorded (suite run gives it; repeatable)",
    )
    # deepspeed's launcher (and torch.distributed.launch) append this; the rank is read from the environment
    parser.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=_log_format())
    try:
        check_environment()  # every SUITE_* variable: a wrong one is one line, not a traceback on every rank
    except EnvironmentSettingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    logging.getLogger().setLevel(os.environ.get("SUITE_LOG") or "INFO")
    logging.captureWarnings(True)  # a library's warning is a timestamped line of its rank too
    os.umask(os.umask(0o022) | 0o022)  # what the libraries make in the run folder too: nobody else may change it
    _no_huge_page_advice()
    try:
        entries = [(args.run_dir, args.run_sha256), *((Path(d), sha256_hex(sha)) for d, sha in args.next_runs)]
    except argparse.ArgumentTypeError as error:
        parser.error(f"{NEXT_RUN_OPTION}: {error}")
    launch = Launch(detect())
    for index, (run_dir, run_sha256) in enumerate(entries):  # the ranks outlive a run: one launch, run after run
        code = _run_one(run_dir, run_sha256, launch, (index, len(entries)))
        if code != 0:  # this run's record says why; suite run launches the runs after it anew
            return code
    return 0


def _no_huge_page_advice() -> None:
    """Ask NumPy not to advise transparent huge pages for its large arrays, unless ``NUMPY_MADVISE_HUGEPAGE`` says
    otherwise (NumPy's own switch, read at its import, which the worker's imports have passed).

    A rank allocates the scores' kernel matrices (5,000 x 5,000 doubles for the EMA generator's estimand) after training
    has churned its memory; where the kernel defragments synchronously for huge pages (``defrag`` ``madvise``, a common
    default), those pages cost a stall each run: the estimand's math took 2.5-2.9 s on rank 0 with the advice and 0.5 s
    without, every score equal, while the other ranks waited.
    """
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return
    try:
        from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]
    except ImportError:  # another NumPy than the pinned one: its default stands
        return
    _set_madvise_hugepage(False)


def run_and_exit() -> NoReturn:
    """``main``, then leave the process: without finalizing where :data:`_exit_without_finalizing` says so."""
    code = main()
    if _exit_without_finalizing:
        leave_now(code)
    sys.exit(code)


if __name__ == "__main__":
    run_and_exit()
