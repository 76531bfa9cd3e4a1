"""A run's end on its ranks, and its record, which rank 0 assembles once from the parts its stages return and the
launch's part ``suite run`` handed it (:mod:`.launch_part`), and writes once: a diverged run recorded as such
(:func:`record_diverged`), or the models finalized, saved, scored over the ranks and the ok record written
(:func:`conclude`); a rank that failed, its status and (rank 0) its failed record (:func:`report_failure`)."""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..config.scenario import Run
from ..gan.divergence import Divergence, first_divergence
from ..records.failures import Failure, write_status
from ..records.measured import RankTelemetry
from ..records.parts import Ending, FailurePart, ModelPart, Scored, StrategyPart, assemble, identity
from ..records.record import CheckpointInfo, Record
from ..records.results import GENERATOR_FILE, SAMPLES_FILE, write_record
from .launch_part import resume_point
from .rank_record import RunOnRank, rank_part, trained_parts, worker_provenance
from .runlogs import write_run_logs
from .scoring import quality_fields, score_models, scoring_workers

if TYPE_CHECKING:
    from ..gan.sampling import GeneratorBundle
    from ..measure.telemetry import Telemetry
    from ..records.parts import LaunchPart
    from ..train.checkpoint import Checkpointer
    from ..train.strategies.base import Outcome, Strategy

log = logging.getLogger("suite.running.worker")


def _save_sample_grid(bundle: GeneratorBundle, path: Path, seed: int) -> None:
    """64 samples, or 8 per class in rows of one class each for models that generate by class."""
    from ..gan.sampling import Sampler, save_image_grid

    sampler = Sampler(bundle)
    if bundle.labelled:
        save_image_grid(sampler.sample_by_class(8, seed=seed), path, columns=8)
    else:
        save_image_grid(sampler.sample(64, seed=seed)[0], path)


def _write(on: RunOnRank, parts: Sequence[object | None], checkpoint: dict[str, Any] | None = None) -> Record:
    """Rank 0: the run's record, assembled once from ``parts``, its provenance and the launch's part where ``suite
    run`` handed one (``checkpoint``: where ``--resume`` continues), written once and handed to the logs."""
    launched: LaunchPart | None = on.handed.part(checkpoint) if on.handed is not None else None
    record = assemble(f"{on.run.run_id}: the record", *parts, worker_provenance(on.run, on.started_utc), launched)
    write_record(on.run_dir, record)
    write_run_logs(on.run, on.run_dir, record)
    return record


def record_diverged(on: RunOnRank, strategy: Strategy, mine: RankTelemetry, diverged: Divergence) -> None:
    """Every rank, once a rank diverged: rank 0 records the run as ``diverged`` (times, losses up to
    the divergence, which value at which step on which rank) without finalizing or scoring it."""
    run, engine = on.run, on.engine
    gathered = engine.gather_object((mine, strategy.history_so_far()))
    if gathered is not None:  # rank 0
        parts = [history for _, history in gathered if history is not None]
        if parts and isinstance(parts[0], dict):  # per class or per cell, from the ranks that keep them
            history: object = {k: v for part in parts for k, v in part.items()}
        else:
            history = parts[0] if parts else None
        reason = diverged.line()
        ending = Ending("diverged", reason=reason, diverged=diverged.as_dict())
        trained = trained_parts(on, [m for m, _ in gathered])
        _write(on, [identity(run), ending, *trained, StrategyPart({"history": history})], resume_point(on.run_dir, run)[0])
        log.warning("%s: %s", run.run_id, reason)
    write_status(on.run_dir, engine.rank, "diverged", error=diverged.line())


def _scores(on: RunOnRank, outcome: Outcome, scored: tuple[Any, ...] | None, train_s: float) -> Scored | None:
    """Rank 0: the scores' part of the record (:func:`suite.running.scoring.quality_fields`; None unscored), once a
    sample grid and the grids over training are saved."""
    from ..gan.grids import save_training_grids

    assert outcome.bundle is not None, "a strategy's bundle is complete on rank 0"
    steps = outcome.fields["generator_steps"]
    total = sum(steps.values()) if isinstance(steps, dict) else steps
    part = (
        None if scored is None else quality_fields(on.run, outcome, scored, train_s, total, outcome.fields.get("images_consumed"))
    )
    _save_sample_grid(outcome.bundle, on.run_dir / SAMPLES_FILE, on.run.train.seed)
    save_training_grids(on.run_dir, outcome.curve, (total, outcome.bundle), on.data, on.run.train.seed)
    return part


def report_failure(run: Run, run_dir: Path, rank: int, started_utc: str, error: Exception, recorded: bool = False) -> None:
    """Write a failed rank's status (and rank 0's failed record, unless its finished record is already ``recorded``:
    a failure while the engine shuts down keeps the run's measurements); never raises (the disk may be full)."""
    message = f"{type(error).__name__}: {error}"
    log.error("%s (rank %d) failed: %s", run.run_id, rank, message)
    failure = Failure(rank, socket.gethostname(), 1, message=message)
    try:
        write_status(run_dir, rank, "failed", error=message, traceback=traceback.format_exc())
        if rank == 0 and not recorded:
            record = assemble(
                f"{run.run_id}: the failed record",
                identity(run),
                worker_provenance(run, started_utc),
                Ending("failed", error=failure.line()),
                FailurePart(failure.as_dict(), traceback.format_exc()),
            )
            write_record(run_dir, record)
    except (OSError, ValueError) as write_error:  # a full disk; a record that is not one is a bug, named here
        log.error("%s (rank %d): could not record the failure: %s", run.run_id, rank, write_error)


def _saved(
    on: RunOnRank, per_rank: list[RankTelemetry], outcome: Outcome, checkpointer: Checkpointer | None
) -> tuple[CheckpointInfo | None, ModelPart]:
    """Rank 0's parts of an ok run's checkpoints and model, once its generators are saved in its folder."""
    assert outcome.bundle is not None, "a strategy's bundle is complete on rank 0"
    checkpoints = checkpointer.part(max(r.checkpoint_s or 0.0 for r in per_rank)) if checkpointer is not None else None
    digest = outcome.bundle.digest()
    bundles = {GENERATOR_FILE: outcome.bundle, **{f"generator_{n}.pt": b for n, b in outcome.extra_bundles.items()}}
    if outcome.ema is not None:
        bundles["generator_ema.pt"] = outcome.ema
    return checkpoints, ModelPart(digest, {file: b.save(on.run_dir / file) for file, b in bundles.items()})


def _write_ok(on: RunOnRank, parts: Sequence[object | None], checkpointer: Checkpointer | None) -> None:
    """Rank 0's last word on an ok run: its record written once (:func:`_write`), its checkpoints no longer needed."""
    record = _write(on, parts)
    if checkpointer is not None:
        checkpointer.clear()
    log.info("%s: ok, training window %.1fs", on.run.run_id, record.train_s)


def conclude(on: RunOnRank, strategy: Strategy, telemetry: Telemetry, setup_s: float, peak: dict[str, Any]) -> bool:
    """Every rank, after the training clock: a diverged run recorded as such (False), or the models finalized,
    saved, scored over the ranks and the ok record written by rank 0 (True). Finalize (gathers, hand-offs, saving) and
    scoring are timed apart."""
    engine = on.engine
    # every group's verdict, after the window (groups that train apart learn of each other here)
    diverged = first_divergence(engine.allgather_object(strategy.divergence()))
    finalize_start = time.perf_counter()
    outcome = strategy.finalize() if diverged is None else None
    mine = rank_part(engine, telemetry, strategy, setup_s, peak)
    if diverged is not None:
        record_diverged(on, strategy, mine, diverged)
        return False
    assert outcome is not None
    per_rank = engine.gather_object(mine)  # after training: not counted as communication
    if per_rank is not None:  # rank 0
        trained, timing, throughput, placed = trained_parts(on, per_rank)
        saved = _saved(on, per_rank, outcome, strategy.checkpointer)
        timing = dataclasses.replace(timing, finalize_s=time.perf_counter() - finalize_start)
    score_start = time.perf_counter()
    workers = scoring_workers(engine.device, on.launch.local_size, on.threads)  # threads only where the run has one rank
    scored = score_models(on.run, engine, outcome, workers) if on.run.metrics.enabled else None  # every rank a share
    if per_rank is not None:  # rank 0
        scores = _scores(on, outcome, scored, timing.train_s or 0.0)
        timing = dataclasses.replace(
            timing, score_s=time.perf_counter() - score_start, worker_s=time.perf_counter() - on.started_s
        )
        parts = [
            identity(on.run),
            Ending("ok"),
            trained,
            placed,
            timing,
            throughput,
            StrategyPart(outcome.fields),
            *saved,
            scores,
        ]
        _write_ok(on, parts, strategy.checkpointer)
    return True
