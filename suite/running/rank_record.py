"""Rank 0's parts of the record of a run that trained, from what every rank hands it (:func:`rank_part`, each rank's
:class:`~suite.records.measured.RankTelemetry`): the telemetry summarised, the measurements, times and throughput of the
run, its placement and its provenance (:mod:`suite.records.parts` assembles the record from them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import numpy as np

from ..config.scenario import Run
from ..measure.flops import achieved_flops, peak_use
from ..measure.hostload import host_load
from ..measure.telemetry import spread as telemetry_spread
from ..records.codec import build_part
from ..records.measured import Communication, RankTelemetry, SampledPart, TelemetrySummary, Throughput, Timing, WindowPart
from ..records.parts import Trained, made_now
from ..records.record import DatasetInfo, Placement, Provenance
from ..train.launchenv import LaunchInfo, node_cores

if TYPE_CHECKING:
    from ..gan.data import ImageData
    from ..measure.telemetry import Telemetry
    from ..train.engines.base import Engine
    from ..train.strategies.base import Strategy
    from .launch_part import HandedLaunch

T = TypeVar("T")


@dataclass(frozen=True)
class RunOnRank:
    """A run started on this rank: its settings and folder, the launch and engine it runs under, its data, its threads
    and when the worker started; what the record's parts are made from."""

    run: Run
    run_dir: Path
    launch: LaunchInfo
    engine: Engine
    data: ImageData
    threads: int
    started_s: float
    """The worker's start on the ``time.perf_counter`` clock."""
    started_utc: str
    handed: HandedLaunch | None = None
    """Rank 0, launched by ``suite run``: the launch's part it completes the record with (:mod:`.launch_part`)."""


def rank_part(engine: Engine, telemetry: Telemetry, strategy: Strategy, setup_s: float, peak: dict[str, Any]) -> RankTelemetry:
    """What this rank hands rank 0 for the record: its telemetry, set-up seconds, device peak and traffic."""
    measured = {
        **telemetry.as_dict(),
        "rank": engine.rank,
        "setup_s": setup_s,
        "peak": peak,
        "comm_bytes": engine.comm.bytes,
        "comm_largest_group": engine.comm.largest_group,
        "budget_window_s": strategy.window_s,
    }
    return build_part(RankTelemetry, measured)


def _got(value: T | None) -> T:
    """A measurement every rank's telemetry makes (:meth:`suite.measure.telemetry.Telemetry.as_dict`)."""
    assert value is not None, "every rank's telemetry has it"
    return value


def _per_step(windows: list[WindowPart], seconds: Callable[[WindowPart], float | None]) -> float | None:
    """Mean over ranks of this rank's ``seconds`` per window step."""
    values = [_got(seconds(w)) / w.steps for w in windows if w.steps]
    return float(np.mean(values)) if values else None


def _mean_of(sampled: list[SampledPart | None], p95: bool = False) -> float | None:
    """Mean over the ranks that sampled it of a sampled quantity's mean (or 95th percentile)."""
    values = [_got(s.p95 if p95 else s.mean) for s in sampled if s is not None]
    return float(np.mean(values)) if values else None


def summaries(per_rank: list[RankTelemetry]) -> TelemetrySummary:
    """Record-level telemetry from every rank's own (see :mod:`suite.measure.telemetry`), which it keeps."""
    windows = [_got(r.window) for r in per_rank]
    steps = [w.steps for w in windows]
    step_s, comm_s = _per_step(windows, lambda w: w.step_seconds), _per_step(windows, lambda w: w.comm)
    spread = telemetry_spread([dataclasses.asdict(_got(r.step_times)) for r in per_rank])
    flops = [r.flops_per_step for r in per_rank]
    achieved = [achieved_flops(r.flops_per_step, w.steps, w.step_seconds) for r, w in zip(per_rank, windows)]
    peak = peak_use(achieved, [_got(_got(r.peak).flops) for r in per_rank])
    gpu_peaks = [r.gpu_mem_peak_bytes for r in per_rank if r.gpu_mem_peak_bytes is not None]
    gpu_used = _mean_of([r.gpu_mem_used_bytes for r in per_rank])
    return TelemetrySummary(
        warmup_steps_per_rank=[_got(_got(r.warmup).steps) for r in per_rank],
        timed_steps=int(min(steps)) if steps else 0,
        step_s=step_s,
        step_p50=spread["p50"],
        step_p95=spread["p95"],
        step_mean=spread["mean"],
        step_ci95=spread["ci95"],
        data_s=_per_step(windows, lambda w: w.data),
        compute_s=_per_step(windows, lambda w: w.compute),
        comm_wait_s=comm_s,
        comm_share=(comm_s / step_s) if step_s and comm_s is not None else None,
        steps=int(sum(_got(r.steps) for r in per_rank)),
        work_images_per_rank=[_got(w.images) for w in windows],
        work_steps_per_rank=steps,
        busy_s_per_rank=[_got(w.busy_seconds) for w in windows],
        flops_per_step=flops[0] if len(set(flops)) == 1 else None,
        flops_per_step_per_rank=flops,
        achieved_flops_per_rank=peak.achieved,
        peak_flops_per_rank=peak.peak,
        peak_source=_got(per_rank[0].peak).source,
        peak_raised_ranks=peak.raised_ranks,
        fraction_of_peak=peak.fraction,
        cpu_util_mean=_mean_of([r.cpu_util for r in per_rank]),
        host_mem_peak_mb=max(_got(r.host_mem_peak_bytes) for r in per_rank) / 2**20,
        gpu_util_mean=_mean_of([r.gpu_util for r in per_rank]),
        gpu_util_p95=_mean_of([r.gpu_util for r in per_rank], p95=True),
        gpu_mem_used_mb=gpu_used / 2**20 if gpu_used is not None else None,
        gpu_mem_peak_mb=max(gpu_peaks) / 2**20 if gpu_peaks else None,
        gpu_note=per_rank[0].gpu_note,
        per_rank=per_rank,  # the ranks' own telemetry, as each measured it
    )


def _communication(windows: list[WindowPart], per_rank: list[RankTelemetry]) -> Communication:
    """What the engine moved: inside the window, outside it, and each rank's part."""
    inside = [_got(w.comm_bytes) for w in windows]
    return Communication(
        bytes=int(sum(inside)),
        bytes_outside_window=int(sum(_got(r.comm_bytes) - b for r, b in zip(per_rank, inside))),
        seconds=float(np.mean([_got(w.comm) for w in windows])),
        largest_group=max(_got(r.comm_largest_group) for r in per_rank),
        per_rank_bytes=inside,
        per_rank_seconds=[_got(w.comm) for w in windows],
    )


def _throughput(per_rank: list[RankTelemetry], telemetry: TelemetrySummary) -> Throughput:
    """Training images per second of the training clock (all ranks, and per rank), with its interval, and the images."""
    rates = [r.images_per_s for r in per_rank]
    complete = [rate for rate in rates if rate is not None]
    images_per_s = float(sum(complete)) if len(complete) == len(rates) else None  # every rank has a timed window
    ci = None
    if images_per_s and telemetry.step_ci95 is not None and telemetry.step_mean:
        relative = telemetry.step_ci95 / telemetry.step_mean
        ci = [images_per_s / (1 + relative), images_per_s / (1 - relative) if relative < 1 else None]
    return Throughput(
        images_per_s=images_per_s,
        images_per_s_ci95=ci,
        images_per_s_per_rank=float(np.mean(complete)) if images_per_s is not None else None,
        train_images=int(sum(_got(r.train_images) for r in per_rank)),
        eval_images=int(sum(_got(r.eval_images) for r in per_rank)),
    )


def trained_parts(on: RunOnRank, per_rank: list[RankTelemetry]) -> tuple[Trained, Timing, Throughput, Placement]:
    """Rank 0's parts of a finished (or diverged) training: what it measured, its phases' times, its throughput and
    its placement."""
    import torch

    from ..measure.env import machine, numerics_digest, versions
    from ..train.performance import record as performance_record

    run, engine, data = on.run, on.engine, on.data
    telemetry = summaries(per_rank)
    windows = [_got(r.window) for r in per_rank]
    first_warmup = _got(per_rank[0].warmup)
    placed = placement_part(on)
    trained = Trained(
        dataset=DatasetInfo(
            name=data.name, split=data.split, image_size=run.dataset.image_size, images=len(data), classes=data.classes
        ),
        launcher=on.launch.launcher,
        engine_settings={**engine.settings(), **performance_record(run.performance)},
        device=str(engine.device) if engine.device.type == "cpu" else torch.cuda.get_device_name(engine.device),
        host_load=host_load((_got(r.host), r.host_load, on.threads) for r in per_rank),
        comm=_communication(windows, per_rank),
        telemetry=telemetry,
        env=versions(),
        machine={**machine(engine.device), "numerics": numerics_digest(engine.device)},
        warnings=None if telemetry.timed_steps else [no_timed_step_warning(_got(first_warmup.steps))],
    )
    timing = Timing(
        # rank 0's: the run's part of its launch begins as rank 0 begins it, once it wrote the record of the run before;
        # a rank that began earlier waited for that record inside the run before's part (the slowest rank's set-up
        # counted that wait twice: the main job's set-up went from 50 to 26 s)
        setup_s=_got(per_rank[0].setup_s),
        warmup_s=max(_got(_got(r.warmup).seconds) for r in per_rank),
        budget_window_s=per_rank[0].budget_window_s,
        train_s=max(_got(w.seconds) for w in windows),
        eval_s=max(_got(r.paused_s) for r in per_rank),
    )
    return trained, timing, _throughput(per_rank, telemetry), placed


def no_timed_step_warning(warmup_steps: int) -> str:
    """The record's warning for a run whose every step was warm-up: its throughput holds, its step times do not."""
    return (
        f"no timed step after the warm-up ({warmup_steps} warm-up step{'s' if warmup_steps != 1 else ''}, "
        "train.warmup_steps, and no other): its step times, their spread and FLOP/s are not measured; train longer "
        "or warm up less"
    )


def worker_provenance(run: Run, started_utc: str) -> Provenance:
    """Rank 0, as it writes the record: the run's settings, the code's revision, when the worker started and now."""
    from ..measure.env import source_revision

    return made_now(run, source_revision(), started_utc)


def placement_part(on: RunOnRank) -> Placement:
    """How this run sat on its node: threads, cores, ranks, and whether they oversubscribe it."""
    cores, allowed = node_cores()
    ranks = on.launch.local_size
    return Placement(
        threads_per_rank=on.threads,
        cores_per_node=cores,
        cores_allowed=allowed,
        ranks_per_node=ranks,
        oversubscribed=ranks * on.threads > cores,
    )
