"""Rank 0's record of a run that trained: the record-level telemetry from every rank's own, the fields of a finished
(or diverged) run, its placement and its provenance; and what each rank hands rank 0 for it."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config.scenario import Run
from ..measure.flops import rank_peak_use
from ..measure.hostload import host_load
from ..measure.telemetry import spread as telemetry_spread
from ..records.record import Communication, DatasetInfo, Placement, TelemetrySummary, provenance
from ..train.launchenv import LaunchInfo, node_cores

if TYPE_CHECKING:
    from ..gan.data import ImageData
    from ..measure.telemetry import Telemetry
    from ..train.engines.base import Engine
    from ..train.strategies.base import Outcome, Strategy


def _per_step(windows: list[dict[str, Any]], name: str) -> float | None:
    """Mean over ranks of this rank's seconds of ``name`` per window step."""
    values = [w[name] / w["steps"] for w in windows if w["steps"]]
    return float(np.mean(values)) if values else None


def _mean_of(per_rank: list[dict[str, Any]], key: str, field: str = "mean") -> float | None:
    values = [r[key][field] for r in per_rank if r.get(key)]
    return float(np.mean(values)) if values else None


def summaries(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
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


def ok_record_fields(
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

    telemetry = summaries(per_rank)
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


def worker_provenance(run: Run, started_utc: str) -> dict[str, Any]:
    """Rank 0, as it writes the record: the run's settings, the code's revision, when the worker started and now."""
    from ..measure.env import source_revision

    return provenance(run, source_revision(), started_utc)


def placement_fields(run: Run, launch: LaunchInfo, threads: int) -> dict[str, Any]:
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


def rank_summary(
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
