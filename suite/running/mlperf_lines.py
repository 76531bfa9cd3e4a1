"""``:::MLLOG`` lines from a run's record, written with the ``mlperf-logging`` package's logger, that pass its
compliance checker under this suite's benchmark rules (:data:`RULES`; docs/logs.md lists the events). Every value is
the record's; a block runs from one quality curve point to the next, each ending with its scores as ``eval_accuracy``
(FID, KID or IS, as MLPerf's stable diffusion logs its FID).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ..config.registry import STRATEGIES
from ..records.measured import Machine
from ..records.nofollow import open_regular
from ..records.record import DatasetInfo, Record, part_of
from ..records.results import RUN_FILE
from ..strategies.label_partitioned.record import LabelPartitionedRecord

RULES = Path(__file__).with_name("mlperf_rules.yaml")
"""The compliance checker's config for these logs: ``python -m mlperf_logging.compliance_checker --usage training
--ruleset 6.1.0 --config RULES mllog.txt`` (an absolute path: the checker joins a relative one to its own folder)."""

SUITE = "gan-scaling-suite"
"""What ``submission_org`` names: the suite that wrote the log."""
NOT_A_SUBMISSION = f"written by {SUITE}; not an MLPerf submission"

MLLOG_SCORES = (("fid", "FID", True), ("kid_mean", "KID", True), ("is_mean", "IS", False))
"""A curve point's scores as ``eval_accuracy`` lines: (record field, metric, lower is better)."""

PRECISIONS = {"fp32": "fp32", "fp16": "fp16", "bf16": "bfloat16"}
"""DeepSpeed's ``communication_data_type`` as the checker spells precisions."""


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def benchmark(record: Record) -> str:
    """``submission_benchmark``: the networks and the data, ``<architecture>_<dataset>`` (``dcgan_digits``)."""
    return f"{record.architecture}_{record.dataset.name if record.dataset else None}"


def platform(record: Record) -> str:
    """``submission_platform``: the ranks and what each ran on (``2x NVIDIA H100 80GB HBM3``, ``2x <CPU> (1 thread
    per rank)``)."""
    machine = record.machine or Machine()
    procs = record.procs
    if str(record.device or "cpu") != "cpu":  # a GPU's record names the card (e.g. "NVIDIA H100 80GB HBM3")
        return f"{procs}x {machine.gpu or 'CUDA GPU'}"
    threads = record.threads_per_rank
    return f"{procs}x {machine.cpu_model or 'CPU'} ({threads} thread{'s' if threads != 1 else ''} per rank)"


def micro_batch(record: Record) -> int | None:
    """Real images one rank trains on per discriminator step (rank 0's): the global batch over the ranks that share
    it (all ranks of a data-parallel strategy, rank 0's class group of a label-partitioned one), else the whole batch
    (a rank that trains networks of its own, as a cellular cell)."""
    batch, strategy = record.global_batch, str(record.strategy)
    if not batch or strategy not in STRATEGIES:
        return None
    if STRATEGIES[strategy].data_parallel:
        sharing = int(record.procs or 1)
    else:
        sharing = next((len(g.ranks) for g in part_of(record, LabelPartitionedRecord).groups or [] if 0 in g.ranks), 1)
    return int(batch) // sharing


def _settings(record: Record, section: str) -> dict[str, Any]:
    part = (record.settings or {}).get(section)  # the run's settings: a free-form mapping in the record
    return part if isinstance(part, dict) else {}


def linear_precision(record: Record) -> tuple[str, str]:
    """``lowest_numerical_precision_in_linear`` and why: bfloat16 under ``performance.bf16``; on a GPU TF32, which
    cuDNN's default (kept by the suite) allows in convolutions; else float32."""
    bf16 = (record.engine_settings or {}).get("bf16", _settings(record, "performance").get("bf16"))
    if bf16:
        return "bfloat16", "performance.bf16: forward passes and losses under bfloat16 autocast"
    if str(record.device or "cpu") != "cpu":  # a GPU's record names the card (e.g. "NVIDIA H100 80GB HBM3")
        return "tf32", "cuDNN's default allow_tf32 (kept) lets convolutions run in TF32 on GPUs of compute capability 8.0+"
    return "fp32", "float32 throughout (CPU)"


def comm_precision(record: Record) -> str:
    """``lowest_numerical_precision_in_comm``: float32 gradients and parameters, unless DeepSpeed's
    ``communication_data_type`` says otherwise."""
    # an engine that hands its reduction a config (DeepSpeed) records it in its engine settings
    config = (record.engine_settings or {}).get("config")
    chosen = config.get("communication_data_type") if isinstance(config, dict) else None
    return PRECISIONS.get(str(chosen), "fp32") if chosen is not None else "fp32"


def write_mllog(path: Path, record: Record, started: float | None) -> None:
    """Write ``record``'s events as ``:::MLLOG`` lines into ``path`` (replacing an earlier attempt's); ``started`` is
    the worker's start in seconds since 1970 (None: 0)."""
    from mlperf_logging.mllog import constants as c
    from mlperf_logging.mllog.mllog import MLLogger

    from .tensorboard_events import final_step

    logger = logging.Logger(f"suite.mllog.{record.run_id}")  # not registered: one per file, no other handler
    stream = open(open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w", encoding="utf-8")  # never a link
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    ml = MLLogger(logger=logger, default_namespace="")
    start = started or 0.0
    clock0 = start + (record.setup_s or 0.0)  # the training clock starts with the warm-up, which trains
    identity = {key: getattr(record, key) for key in ("run_id", "strategy", "engine", "loss", "procs")}
    curve = record.curve or []
    dataset = record.dataset or DatasetInfo()
    linear, linear_why = linear_precision(record)
    whole = "every rank holds whole networks: no tensor, pipeline, context or expert parallelism"
    at_init: list[tuple[str, Any, dict[str, Any] | None]] = [
        (c.SUBMISSION_ORG, SUITE, {"note": NOT_A_SUBMISSION}),
        (c.SUBMISSION_DIVISION, "open", {"note": f"{NOT_A_SUBMISSION}; open: a model and quality metric of its own"}),
        (c.SUBMISSION_BENCHMARK, benchmark(record), {"architecture": record.architecture, "dataset": dataset.name}),
        (c.SUBMISSION_PLATFORM, platform(record), {"device": record.device, "host": record.machine.host if record.machine else None}),
        (c.CONFIG_FILENAME, RUN_FILE, {"scenario": record.scenario, "note": "the run's settings, in its run folder"}),
        (c.SEED, record.seed, None),
        (c.GLOBAL_BATCH_SIZE, record.global_batch, None),
        (c.MICRO_BATCH_SIZE, micro_batch(record), {"note": "real images per rank per discriminator step, rank 0's"}),
        (c.GRADIENT_ACCUMULATION_STEPS, 1, None),
        (c.TRAIN_SAMPLES, dataset.images, None),
        (c.EVAL_SAMPLES, int(curve[-1].n or 0) if curve else 0, {"note": "generated images scored at each curve point"}),
        (c.LOWEST_NUMERICAL_PRECISION_IN_LINEAR, linear, {"note": linear_why}),
        (c.LOWEST_NUMERICAL_PRECISION_IN_COMM, comm_precision(record), None),
        *((key, 1, {"note": whole}) for key in (c.TENSOR_PARALLELISM, c.PIPELINE_PARALLELISM, c.CONTEXT_PARALLELISM, c.EXPERT_PARALLELISM)),
    ]  # fmt: skip
    try:
        ml.event(c.CACHE_CLEAR, False, metadata={"note": "the suite clears no caches before a run"}, time_ms=_ms(start))
        ml.start(c.INIT_START, metadata=identity, time_ms=_ms(start))
        for key, value, metadata in at_init:
            ml.event(key, value, metadata=metadata, time_ms=_ms(start))
        ml.end(c.INIT_STOP, time_ms=_ms(clock0))
        ml.start(c.RUN_START, metadata=identity, time_ms=_ms(clock0))
        step, clock, images = 0, 0.0, 0
        for point in curve:
            block = {c.SAMPLES_COUNT: images, "first_step": step, "step_count": int(point.step or 0) - step}
            ml.start(c.BLOCK_START, metadata=block, time_ms=_ms(clock0 + clock))
            step, clock, images = int(point.step or 0), float(point.clock_s), int(point.images or 0)
            at = _ms(clock0 + clock)
            ml.end(c.BLOCK_STOP, metadata={**block, c.SAMPLES_COUNT: images}, time_ms=at)
            where = {c.SAMPLES_COUNT: images, "step": step}
            ml.start(c.EVAL_START, metadata=where, time_ms=at)
            for field, metric, lower in MLLOG_SCORES:
                if (value := getattr(point, field)) is not None:
                    scored = {"metric": metric, "lower_is_better": lower, "features": point.features, "n": point.n}
                    ml.event(c.EVAL_ACCURACY, value, metadata={**where, **scored}, time_ms=at)
            ml.end(c.EVAL_STOP, metadata=where, time_ms=at)
        train_s = float(record.train_s or clock)
        last = final_step(record)
        if last > step:  # no curve, or training went on past its last point
            block = {c.SAMPLES_COUNT: images, "first_step": step, "step_count": last - step}
            ml.start(c.BLOCK_START, metadata=block, time_ms=_ms(clock0 + clock))
            images = int(record.train_images or images)
            ml.end(c.BLOCK_STOP, metadata={**block, c.SAMPLES_COUNT: images}, time_ms=_ms(clock0 + train_s))
        diverged = record.status == "diverged"
        ml.end(
            c.RUN_STOP,
            metadata={
                "status": c.ABORTED if diverged else c.SUCCESS,
                c.SAMPLES_COUNT: images,
                **({"reason": record.reason} if diverged else {}),
            },
            time_ms=_ms(clock0 + train_s),
        )
    finally:
        logger.removeHandler(handler)
        handler.close()
        stream.close()
