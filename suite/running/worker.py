"""The per-rank entry point: ``python -m suite.running.worker RUN_DIR`` (or its short name, ``python -m suite.worker``).

Every rank reads ``RUN_DIR/run.json`` (written by ``suite run``, also with ``--dry-run`` for
hand launches), starts the engine, sets up the run's strategy, warms it up and trains on the
training clock (between two barriers, the warm-up inside), and hands its measurements to rank 0, which
packages the trained model; every rank then scores a share of its models and snapshots
(:mod:`suite.running.scoring`), and rank 0 writes ``RUN_DIR/result.json``.

Launch it under any launcher, e.g. ``horovodrun -np 8 python -m suite.running.worker results/x/RUN``,
``mpirun -np 4 python -m suite.running.worker ...``, ``torchrun --nproc_per_node 4 -m suite.running.worker ...``,
``jsrun -n 6 -a 1 -g 1 python -m suite.running.worker ...``.

Every rank keeps its status in ``RUN_DIR/ranks/rank<N>.json`` (host, pid; see
:mod:`suite.records.failures`). A rank that raises writes its error and traceback there (rank 0 also
into a ``failed`` record) and then aborts (:meth:`Engine.abort`: MPI_Abort on the MPI engine,
an immediate exit elsewhere), so that the launcher stops the other ranks at once instead of
leaving them blocked in a collective. A run that diverges (:mod:`suite.gan.divergence`) is neither
finalized nor scored: rank 0 records it as ``diverged`` and every rank exits normally. With
``train.checkpoint_every`` the worker resumes from the run's latest checkpoint after set-up and
saves checkpoints while training (see :mod:`suite.train.checkpoint`).

Test hooks: ``SUITE_TEST_FAIL_AT_STEP=N`` makes rank ``SUITE_TEST_FAIL_RANK`` (default 1) fail
after its N-th step (warm-up included): it raises, or with ``SUITE_TEST_FAIL_HOW=kill`` sends
itself SIGKILL. ``SUITE_TEST_DIVERGE_AT_STEP=N`` makes that rank's divergence check see an
infinite discriminator loss at its N-th generator step (the model itself stays as it is). The
tests use them to fail or diverge a rank at a known step; nothing else sets them.
``SUITE_TEST_SLOWDOWN=F`` makes every rank sleep F times each step's own (host) duration inside
the step, a slowdown of F of the step time; ``suite gate --inject-slowdown`` sets it to measure
the gate's detection rate.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..config.scenario import Run
from ..gan.divergence import Divergence, first_divergence
from ..measure.flops import rank_peak_use
from ..measure.hostload import host_load
from ..measure.telemetry import spread as telemetry_spread
from ..records.failures import Failure, read_statuses, write_status
from ..records.nofollow import confine
from ..records.record import Communication, DatasetInfo, Placement, TelemetrySummary, provenance, run_identity, utc_now
from ..records.results import GENERATOR_FILE, RUN_FILE, SAMPLES_FILE, SCRATCH_DIR, new_record, write_record
from ..train.checkpoint import STOPPED_EXIT_CODE, Checkpointer, StopRequested
from ..train.launchenv import LaunchInfo, detect, node_cores, threads_per_rank
from ..train.training import window_seconds
from .runlogs import tensorboard_folder, write_run_logs
from .scoring import quality_fields, score_models

if TYPE_CHECKING:
    from ..gan.data import ImageData
    from ..gan.sampling import GeneratorBundle
    from ..measure.telemetry import Telemetry
    from ..measure.tensorboard_writer import EventWriter
    from ..train.engines.base import Engine
    from ..train.strategies.base import Outcome, Strategy


log = logging.getLogger("suite.running.worker")

_exit_without_finalizing = False
"""Set once a torch.distributed rank has written everything and destroyed its process group.

Such a rank could still abort while the interpreter finalized ("terminate called without an
active exception", SIGABRT, from a Gloo thread destroyed with DDP's last references): 1 run in
about 50 of the regression gate's workload on 2 cores, turning a finished run into a failed
one. Leaving with ``os._exit`` skips that finalization; nothing is left to write by then.
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


def _per_step(windows: list[dict[str, Any]], name: str) -> float | None:
    """Mean over ranks of this rank's seconds of ``name`` per window step."""
    values = [w[name] / w["steps"] for w in windows if w["steps"]]
    return float(np.mean(values)) if values else None


def _mean_of(per_rank: list[dict[str, Any]], key: str, field: str = "mean") -> float | None:
    values = [r[key][field] for r in per_rank if r.get(key)]
    return float(np.mean(values)) if values else None


def _summaries(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """Record-level telemetry from the per-rank dictionaries (see :mod:`suite.measure.telemetry`)."""
    windows = [r["window"] for r in per_rank]
    steps = [w["steps"] for w in windows]
    step_s, comm_s = _per_step(windows, "step_seconds"), _per_step(windows, "comm")
    spread = telemetry_spread([r["step_times"] for r in per_rank])
    flops = [r["flops_per_step"] for r in per_rank]
    peak = rank_peak_use(per_rank)
    gpu_peaks = [r["gpu_mem_peak_bytes"] for r in per_rank if r.get("gpu_mem_peak_bytes") is not None]
    gpu_used = _mean_of(per_rank, "gpu_mem_used_bytes")
    summary = TelemetrySummary(
        warmup_steps_per_rank=[r["warmup"]["steps"] for r in per_rank],
        timed_steps=int(min(steps)) if steps else 0,
        step_s=step_s,
        step_p50=spread["p50"],
        step_p95=spread["p95"],
        step_mean=spread["mean"],
        step_ci95=spread["ci95"],
        data_s=_per_step(windows, "data"),
        compute_s=_per_step(windows, "compute"),
        comm_wait_s=comm_s,
        comm_share=(comm_s / step_s) if step_s and comm_s is not None else None,
        steps=int(sum(r["steps"] for r in per_rank)),
        work_images_per_rank=[w["images"] for w in windows],
        work_steps_per_rank=steps,
        busy_s_per_rank=[w["busy_seconds"] for w in windows],
        flops_per_step=flops[0] if len(set(flops)) == 1 else None,
        flops_per_step_per_rank=flops,
        achieved_flops_per_rank=peak.achieved,
        peak_flops_per_rank=peak.peak,
        peak_source=per_rank[0]["peak"]["source"],
        peak_raised_ranks=peak.raised_ranks,
        fraction_of_peak=peak.fraction,
        cpu_util_mean=_mean_of(per_rank, "cpu_util"),
        host_mem_peak_mb=max(r["host_mem_peak_bytes"] for r in per_rank) / 2**20,
        gpu_util_mean=_mean_of(per_rank, "gpu_util"),
        gpu_util_p95=_mean_of(per_rank, "gpu_util", "p95"),
        gpu_mem_used_mb=gpu_used / 2**20 if gpu_used is not None else None,
        gpu_mem_peak_mb=max(gpu_peaks) / 2**20 if gpu_peaks else None,
        gpu_note=per_rank[0].get("gpu_note"),
    )
    return {**asdict(summary), "per_rank": per_rank}  # the ranks' own telemetry, as each measured it


def _save_sample_grid(bundle: GeneratorBundle, path: Path, seed: int) -> None:
    """64 samples, or 8 per class in rows of one class each for models that generate by class."""
    from ..gan.sampling import Sampler, save_image_grid

    sampler = Sampler(bundle)
    if bundle.labelled:
        save_image_grid(sampler.sample_by_class(8, seed=seed), path, columns=8)
    else:
        save_image_grid(sampler.sample(64, seed=seed)[0], path)


def _ok_record(
    run: Run,
    launch: LaunchInfo,
    engine: Engine,
    data: ImageData,
    per_rank: list[dict[str, Any]],
    outcome: Outcome,
    placement: dict[str, Any],
) -> dict[str, Any]:
    """Rank 0's record of a finished training: settings, times, throughput, traffic, telemetry."""
    import torch

    from ..measure.env import machine, numerics_digest, versions
    from ..train.performance import record as performance_record

    telemetry = _summaries(per_rank)
    rates = [r["images_per_s"] for r in per_rank]
    complete = all(rate is not None for rate in rates)  # every rank has a timed window
    images_per_s = float(sum(rates)) if complete else None
    ci = None
    if images_per_s and telemetry["step_ci95"] is not None and telemetry["step_mean"]:
        relative = telemetry["step_ci95"] / telemetry["step_mean"]
        ci = [images_per_s / (1 + relative), images_per_s / (1 - relative) if relative < 1 else None]
    windows = [r["window"] for r in per_rank]
    warnings = []
    if not telemetry["timed_steps"]:
        warnings.append(no_timed_step_warning(per_rank[0]["warmup"]["steps"]))
    return {
        "status": "ok",
        "error": None,
        "warnings": warnings or None,
        "dataset": asdict(
            DatasetInfo(
                name=data.name, split=data.split, image_size=run.dataset.image_size, images=len(data), classes=data.classes
            )
        ),
        "launcher": launch.launcher,
        "engine_settings": {**engine.settings(), **performance_record(run.performance)},
        "device": str(engine.device) if engine.device.type == "cpu" else torch.cuda.get_device_name(engine.device),
        **placement,
        "setup_s": max(r["setup_s"] for r in per_rank),
        "warmup_s": max(r["warmup"]["seconds"] for r in per_rank),
        "budget_window_s": per_rank[0]["budget_window_s"],
        "train_s": max(w["seconds"] for w in windows),
        "eval_s": max(r["paused_s"] for r in per_rank),
        "images_per_s": images_per_s,
        "images_per_s_ci95": ci,
        "images_per_s_per_rank": float(np.mean(rates)) if complete else None,
        "train_images": int(sum(r["train_images"] for r in per_rank)),
        "eval_images": int(sum(r["eval_images"] for r in per_rank)),
        "host_load": host_load((r["host"], r["host_load"], placement["threads_per_rank"]) for r in per_rank),
        "comm": asdict(
            Communication(
                bytes=int(sum(w["comm_bytes"] for w in windows)),
                bytes_outside_window=int(sum(r["comm_bytes"] - w["comm_bytes"] for r, w in zip(per_rank, windows))),
                seconds=float(np.mean([w["comm"] for w in windows])),
                largest_group=max(r["comm_largest_group"] for r in per_rank),
                per_rank_bytes=[w["comm_bytes"] for w in windows],
                per_rank_seconds=[w["comm"] for w in windows],
            )
        ),
        "telemetry": telemetry,
        "env": versions(),
        "machine": {**machine(engine.device), "numerics": numerics_digest(engine.device)},
        **outcome.fields,
    }


def no_timed_step_warning(warmup_steps: int) -> str:
    """The record's warning for a run whose every step was warm-up: its throughput holds, its step times do not."""
    return (
        f"no timed step after the warm-up ({warmup_steps} warm-up step{'s' if warmup_steps != 1 else ''}, "
        "train.warmup_steps, and no other): its step times, their spread and FLOP/s are not measured; train longer "
        "or warm up less"
    )


def _provenance(run: Run, started_utc: str) -> dict[str, Any]:
    """Rank 0, as it writes the record: the run's settings, the code's revision, when the worker started and now."""
    from ..measure.env import source_revision

    return provenance(run, source_revision(), started_utc)


def _end_diverged(
    run: Run,
    run_dir: Path,
    started_utc: str,
    launch: LaunchInfo,
    engine: Engine,
    data: ImageData,
    strategy: Strategy,
    mine: dict[str, Any],
    diverged: Divergence,
    placement: dict[str, Any],
) -> None:
    """Every rank, once a rank diverged: rank 0 records the run as ``diverged`` (times, losses up to
    the divergence, which value at which step on which rank) without finalizing or scoring it."""
    from ..train.strategies.base import Outcome

    gathered = engine.gather_object((mine, strategy.history_so_far()))
    if gathered is not None:  # rank 0
        parts = [history for _, history in gathered if history is not None]
        if parts and isinstance(parts[0], dict):  # per class or per cell, from the ranks that keep them
            history: object = {k: v for part in parts for k, v in part.items()}
        else:
            history = parts[0] if parts else None
        outcome = Outcome(None, fields={"history": history})
        fields = {**run_identity(run), **_ok_record(run, launch, engine, data, [m for m, _ in gathered], outcome, placement)}
        reason = diverged.line()
        fields.update(status="diverged", reason=reason, diverged=diverged.as_dict(), **_provenance(run, started_utc))
        record = new_record(fields, f"{run.run_id}: the record")
        write_record(run_dir, record)
        write_run_logs(run, run_dir, record)
        log.warning("%s: %s", run.run_id, reason)
    write_status(run_dir, engine.rank, "diverged", error=diverged.line())
    engine.shutdown()


def _finish(
    run: Run, run_dir: Path, fields: dict[str, Any], outcome: Outcome, data: ImageData, scored: tuple[Any, ...] | None
) -> None:
    """Rank 0: the quality fields from the scores (:func:`suite.running.scoring.score_models`) added to the record's
    ``fields``, a sample grid and the grids over training."""
    from ..gan.grids import save_training_grids

    assert outcome.bundle is not None, "a strategy's bundle is complete on rank 0"
    steps = fields["generator_steps"]
    total = sum(steps.values()) if isinstance(steps, dict) else steps
    if scored is not None:
        fields.update(quality_fields(run, outcome, scored, fields["train_s"], total, fields.get("images_consumed")))
    _save_sample_grid(outcome.bundle, run_dir / SAMPLES_FILE, run.train.seed)
    save_training_grids(run_dir, outcome.curve, (total, outcome.bundle), data, run.train.seed)


def _placement(run: Run, launch: LaunchInfo, threads: int) -> dict[str, Any]:
    """How this run sat on its node: threads, cores, ranks, and whether they oversubscribe it."""
    cores, allowed = node_cores()
    placement = Placement(
        threads_per_rank=threads,
        cores_per_node=cores,
        cores_allowed=allowed,
        ranks_per_node=launch.local_size,
        oversubscribed=launch.local_size * threads > cores,
    )
    return asdict(placement)


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


def _fail_at_step(telemetry: Telemetry, rank: int) -> None:
    """The test hook of the module docstring: make this rank fail after a given step."""
    at = os.environ.get("SUITE_TEST_FAIL_AT_STEP")
    if not at or rank != int(os.environ.get("SUITE_TEST_FAIL_RANK", "1")):
        return
    end_step = telemetry.end_step

    def failing_end_step(images: int, train_images: int = 0, eval_images: int = 0) -> None:
        end_step(images, train_images, eval_images)
        if telemetry.steps == int(at):
            if os.environ.get("SUITE_TEST_FAIL_HOW") == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure after step {at} (SUITE_TEST_FAIL_AT_STEP)")

    telemetry.end_step = failing_end_step  # type: ignore[method-assign]  # this object only


def _slow_down_steps(telemetry: Telemetry) -> None:
    """The slowdown hook of the module docstring: every step takes ``1 + SUITE_TEST_SLOWDOWN`` times as long."""
    factor = float(os.environ.get("SUITE_TEST_SLOWDOWN") or 0)
    if factor <= 0:
        return
    begin_step, end_step = telemetry.begin_step, telemetry.end_step
    began = [0.0]

    def timed_begin_step() -> None:
        if telemetry._step is None:  # begin_step is a no-op while a step runs: keep the first start
            began[0] = time.perf_counter()
        begin_step()

    def slowed_end_step(images: int, train_images: int = 0, eval_images: int = 0) -> None:
        time.sleep(factor * (time.perf_counter() - began[0]))
        end_step(images, train_images, eval_images)

    telemetry.begin_step = timed_begin_step  # type: ignore[method-assign]  # this object only
    telemetry.end_step = slowed_end_step  # type: ignore[method-assign]


def _diverge_at_step(rank: int) -> None:
    """The divergence test hook of the module docstring (this process's :class:`LossWatch` only)."""
    at = os.environ.get("SUITE_TEST_DIVERGE_AT_STEP")
    if not at or rank != int(os.environ.get("SUITE_TEST_FAIL_RANK", "1")):
        return
    from ..gan.divergence import LossWatch

    done = LossWatch.done

    def diverging_done(self: LossWatch, step: int) -> None:
        if step == int(at):
            self.row()[0] = float("inf")  # the step's first discriminator loss, as the check will read it
        done(self, step)

    LossWatch.done = diverging_done  # type: ignore[method-assign]  # this process only


def _report_failure(run: Run, run_dir: Path, rank: int, started_utc: str, error: Exception, recorded: bool = False) -> None:
    """Write a failed rank's status (and rank 0's failed record, unless its finished record is already ``recorded``:
    a failure while the engine shuts down keeps the run's measurements); never raises (the disk may be full)."""
    base = run_identity(run)
    message = f"{type(error).__name__}: {error}"
    log.error("%s (rank %d) failed: %s", base["run_id"], rank, message)
    failure = Failure(rank, socket.gethostname(), 1, message=message)
    try:
        write_status(run_dir, rank, "failed", error=message, traceback=traceback.format_exc())
        if rank == 0 and not recorded:
            fields = {
                **base,
                **_provenance(run, started_utc),
                "status": "failed",
                "error": failure.line(),
                "failure": failure.as_dict(),
                "traceback": traceback.format_exc(),
            }
            write_record(run_dir, new_record(fields, f"{run.run_id}: the failed record"))
    except (OSError, ValueError) as write_error:  # a full disk; a record that is not one is a bug, named here
        log.error("%s (rank %d): could not record the failure: %s", base["run_id"], rank, write_error)


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
    from ..train import strategies

    dataset = run.dataset
    data = load_dataset(
        dataset.name, dataset.image_size, dataset.split, dataset.root, dataset.classes, dataset.download, dataset.limit
    )
    import torch._dynamo  # noqa: F401  (torch.optim imports it on first use: seconds that are not training)

    telemetry = Telemetry(engine.device, engine.comm, engine.timeline)
    _fail_at_step(telemetry, engine.rank)
    _diverge_at_step(engine.rank)
    _slow_down_steps(telemetry)
    return data, telemetry, strategies.create(run, engine, data, telemetry, run_dir / SCRATCH_DIR)


def _rank_summary(
    engine: Engine, telemetry: Telemetry, strategy: Strategy, setup_s: float, peak: dict[str, Any]
) -> dict[str, Any]:
    """What this rank hands rank 0 for the record: its telemetry, set-up seconds, device peak and traffic."""
    return {
        **telemetry.as_dict(),
        "rank": engine.rank,
        "setup_s": setup_s,
        "peak": peak,
        "comm_bytes": engine.comm.bytes,
        "comm_largest_group": engine.comm.largest_group,
        "budget_window_s": strategy.window_s,
    }


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


def _record_fields(
    run: Run,
    run_dir: Path,
    launch: LaunchInfo,
    engine: Engine,
    data: ImageData,
    per_rank: list[dict[str, Any]],
    outcome: Outcome,
    placement: dict[str, Any],
    checkpointer: Checkpointer | None,
) -> dict[str, Any]:
    """Rank 0's fields of an ok run's record, with its checkpoints', once its generators are saved in ``run_dir``."""
    assert outcome.bundle is not None, "a strategy's bundle is complete on rank 0"
    fields = {**run_identity(run), **_ok_record(run, launch, engine, data, per_rank, outcome, placement)}
    if checkpointer is not None:
        fields.update(checkpointer.fields(per_rank))
    fields["model_digest"] = outcome.bundle.digest()
    bundles = {GENERATOR_FILE: outcome.bundle, **{f"generator_{n}.pt": b for n, b in outcome.extra_bundles.items()}}
    fields["model_files"] = {file: asdict(b.save(run_dir / file)) for file, b in bundles.items()}
    return fields


def _write_ok(run: Run, run_dir: Path, fields: dict[str, Any], checkpointer: Checkpointer | None) -> None:
    """Rank 0's last word on an ok run: its record built from ``fields`` and written once, its logs written, its
    checkpoints no longer needed."""
    record = new_record(fields, f"{run.run_id}: the record")
    write_record(run_dir, record)
    write_run_logs(run, run_dir, record)
    if checkpointer is not None:
        checkpointer.clear()
    log.info("%s: ok, training window %.1fs", run.run_id, record.train_s)


def execute(run: Run, run_dir: Path) -> int:
    """Run the worker for ``run`` in ``run_dir`` on this rank; returns the exit code.

    The phases are timed apart: set-up (engine, data, strategy set-up, the device's peak), the training clock
    (:func:`_train`), finalize (gathers, hand-offs, saving) and scoring. Only the training clock goes into speedup and
    efficiency.
    """
    started, started_utc = time.perf_counter(), utc_now()
    recorded = False  # rank 0's finished record is written
    launch = detect()
    threads = _set_threads(run, launch)
    rank, engine = launch.rank, None
    events: EventWriter | None = None
    try:
        write_status(run_dir, rank, "running")
        from ..measure.flops import device_peak
        from ..train.engines import create_engine

        engine = create_engine(run, launch, run_dir)
        engine.start()
        rank = engine.rank
        _check_agreement(engine, launch, run)
        data, telemetry, strategy = _strategy_for(run, run_dir, engine)
        events = strategy.events = _event_writer(run, run_dir, rank)
        checkpointer = strategy.checkpointer = (
            Checkpointer(run, run_dir, engine, telemetry) if run.train.checkpoint_every else None
        )
        strategy.setup()
        resumed = None
        if checkpointer is not None:
            checkpointer.attach(strategy)
            resumed = checkpointer.restore()
        engine.barrier()  # every rank measures its share of the machine at the same time
        peak = device_peak(engine.device)
        setup_s = time.perf_counter() - started
        _train(run, run_dir, engine, strategy, telemetry, checkpointer, warm_up=resumed is None)
        # every group's verdict, after the window (groups that train apart learn of each other here)
        diverged = first_divergence(engine.allgather_object(strategy.divergence()))
        finalize_start = time.perf_counter()
        outcome = strategy.finalize() if diverged is None else None
        mine = _rank_summary(engine, telemetry, strategy, setup_s, peak)
        if diverged is not None:
            _end_diverged(
                run, run_dir, started_utc, launch, engine, data, strategy, mine, diverged, _placement(run, launch, threads)
            )
            return 0
        assert outcome is not None
        per_rank = engine.gather_object(mine)  # after training: not counted as communication
        fields = None
        if per_rank is not None:  # rank 0
            placement = _placement(run, launch, threads)
            fields = _record_fields(run, run_dir, launch, engine, data, per_rank, outcome, placement, checkpointer)
            fields["finalize_s"] = time.perf_counter() - finalize_start
        score_start = time.perf_counter()
        scored = score_models(run, engine, outcome) if run.metrics.enabled else None  # every rank scores a share
        if fields is not None:  # rank 0
            _finish(run, run_dir, fields, outcome, data, scored)
            fields["score_s"] = time.perf_counter() - score_start
            fields["worker_s"] = time.perf_counter() - started
            fields.update(_provenance(run, started_utc))
            _write_ok(run, run_dir, fields, checkpointer)
            recorded = True
        engine.shutdown()
        global _exit_without_finalizing
        _exit_without_finalizing = engine.exit_without_finalizing
        return 0
    except StopRequested as stop:
        log.info("%s (rank %d): %s", run.run_id, rank, stop)
        write_status(run_dir, rank, "stopped", error=str(stop))
        if engine is not None and engine.size > 1:  # a stop comes from a checkpoint: the engine runs
            _wait_for_stopped(run_dir, run.procs)
            engine.abort(STOPPED_EXIT_CODE)
        return STOPPED_EXIT_CODE
    except Exception as error:
        _report_failure(run, run_dir, rank, started_utc, error, recorded)
        if engine is not None and engine.size > 1:  # the others may wait for this rank in a collective
            logging.shutdown()
            engine.abort(1)
        return 1
    finally:
        if events is not None:  # every point was flushed as it was written: closing loses nothing if it never happens
            events.close()


def _log_format() -> str:
    """Every line of a rank: its time, the rank (the launcher interleaves them in ``log.txt``), the logger and the message."""
    try:
        rank = f"rank {detect().rank} "
    except ValueError:  # an incomplete launch environment: execute() says so in its record
        rank = ""
    return f"%(asctime)s {rank}%(name)s: %(message)s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.running.worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="folder holding run.json (results/SCENARIO/RUN_ID)")
    # deepspeed's launcher (and torch.distributed.launch) append this; the rank is read from the environment
    parser.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("SUITE_LOG", "INFO"), format=_log_format())
    logging.captureWarnings(True)  # a library's warning is a timestamped line of its rank too
    path = args.run_dir / RUN_FILE
    if not path.is_file():
        print(
            f"error: {path} not found; create run folders with `suite run SCENARIO --out DIR` (or `suite run ... --dry-run`)",
            file=sys.stderr,
        )
        return 2
    try:
        run = Run.load(path)
    except (ValueError, KeyError) as error:  # ScenarioError and JSONDecodeError are ValueErrors
        print(f"error: {path} is not a valid run ({error}); recreate it with `suite run SCENARIO --dry-run`", file=sys.stderr)
        return 2
    with confine(args.run_dir):  # every file of the run folder is reached without following a link (records.nofollow)
        return execute(run, args.run_dir)


def run_and_exit() -> NoReturn:
    """``main``, then leave the process: without finalizing where :data:`_exit_without_finalizing` says so."""
    code = main()
    if _exit_without_finalizing:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run_and_exit()
