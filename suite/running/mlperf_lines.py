"""MLPerf-style ``:::MLLOG`` lines from a run's record, written with the ``mlperf-logging`` package's logger.

One JSON line per event, as MLPerf training logs have them: ``init_start`` at the worker's start, the run's
seed, global batch and training images, ``init_stop`` and ``run_start`` as the training window opens, a block
(``block_start`` .. ``block_stop``) from one quality curve point to the next, each ending with ``eval_start``,
``eval_accuracy`` (the point's FID, or KID where no FID was scored; lower is better, unlike an accuracy) and
``eval_stop``, and ``run_stop`` as the window closes (status ``success``, or ``aborted`` for a diverged run).
Times are the record's: the window's opening plus the window's clock (:mod:`.runlogs`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ..records.nofollow import open_regular

QUALITY_VALUES = ("fid", "kid_mean")
"""What ``eval_accuracy`` carries, the first a curve point has."""


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def write_mllog(path: Path, record: dict[str, Any], window_opened: float | None) -> None:
    """Write ``record``'s events as ``:::MLLOG`` lines into ``path`` (replacing an earlier attempt's)."""
    from mlperf_logging.mllog import constants as c
    from mlperf_logging.mllog.mllog import MLLogger

    from .tensorboard_events import final_step

    logger = logging.Logger(f"suite.mllog.{record.get('run_id')}")  # not registered: one per file, no other handler
    stream = open(open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w", encoding="utf-8")  # never a link
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    ml = MLLogger(logger=logger, default_namespace="")
    opened = window_opened or 0.0
    started = opened - (record.get("setup_s") or 0.0) - (record.get("warmup_s") or 0.0)
    identity = {key: record.get(key) for key in ("run_id", "strategy", "engine", "loss", "procs")}
    try:
        ml.start(c.INIT_START, metadata=identity, time_ms=_ms(started))
        ml.event(c.SEED, record.get("seed"), time_ms=_ms(started))
        ml.event(c.GLOBAL_BATCH_SIZE, record.get("global_batch"), time_ms=_ms(started))
        ml.event(c.TRAIN_SAMPLES, (record.get("dataset") or {}).get("images"), time_ms=_ms(started))
        ml.end(c.INIT_STOP, time_ms=_ms(opened))
        ml.start(c.RUN_START, metadata=identity, time_ms=_ms(opened))
        step, clock = 0, 0.0
        for point in record.get("curve") or []:
            block = {"first_step": step, "step_count": int(point["step"]) - step}
            ml.start(c.BLOCK_START, metadata=block, time_ms=_ms(opened + clock))
            step, clock = int(point["step"]), float(point["clock_s"])
            at = _ms(opened + clock)
            ml.end(c.BLOCK_STOP, metadata=block, time_ms=at)
            ml.start(c.EVAL_START, metadata={"step": step}, time_ms=at)
            metric = next((key for key in QUALITY_VALUES if point.get(key) is not None), None)
            ml.event(
                c.EVAL_ACCURACY,
                point.get(metric) if metric else None,
                metadata={
                    "step": step,
                    "metric": metric,
                    "lower_is_better": True,
                    "features": point.get("features"),
                    "samples_count": point.get("images"),
                    **{key: point.get(key) for key in ("fid", "kid_mean", "is_mean")},
                },
                time_ms=at,
            )
            ml.end(c.EVAL_STOP, metadata={"step": step}, time_ms=at)
        train_s = float(record.get("train_s") or clock)
        last = final_step(record)
        if last > step:  # no curve, or training went on past its last point
            block = {"first_step": step, "step_count": last - step}
            ml.start(c.BLOCK_START, metadata=block, time_ms=_ms(opened + clock))
            ml.end(c.BLOCK_STOP, metadata=block, time_ms=_ms(opened + train_s))
        diverged = record.get("status") == "diverged"
        ml.end(
            c.RUN_STOP,
            metadata={"status": c.ABORTED if diverged else c.SUCCESS, **({"reason": record.get("reason")} if diverged else {})},
            time_ms=_ms(opened + train_s),
        )
    finally:
        logger.removeHandler(handler)
        handler.close()
        stream.close()
