"""A run's logs in other tools' formats, written by rank 0 from the run's record as the run ends (docs/logs.md).

TensorBoard events (``logs.tensorboard``, ``suite run --tensorboard DIR``: the end of those training wrote,
:mod:`.tensorboard_events`) and MLPerf-style ``:::MLLOG`` lines (``logs.mllog``, ``suite run --mllog``:
:mod:`.mlperf_lines`), their numbers and times the record's. Neither can fail a run: the record is written first, and
a log that cannot be written is one warning line.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import logging
from pathlib import Path

from ..config.scenario import Run, RunPlacement
from ..records.record import Record
from ..records.results import MLLOG_FILE, TENSORBOARD_DIR, path_under
from .commands import LaunchError

log = logging.getLogger(__name__)

LOG_PACKAGES = {"tensorboard": "tensorboard", "mllog": "mlperf_logging"}
"""The module each log needs, by the setting that asks for it (both in the suite's ``logs`` extra)."""

INSTALL = {"tensorboard": "tensorboard", "mllog": "mlperf-logging"}
"""The package that provides it, as pip names it."""


def tensorboard_folder(run: Run, run_dir: Path) -> Path | None:
    """Where ``run`` writes its events: ``DIR/RUN_ID`` under ``--tensorboard DIR``, ``RUN_DIR/tensorboard`` under
    ``logs.tensorboard``, None when neither asks for them."""
    if run.tensorboard_dir:
        return path_under(run.tensorboard_dir, run.run_id)
    if run.logs.tensorboard:
        return run_dir / TENSORBOARD_DIR
    return None


def wanted(run: Run) -> list[str]:
    """The logs ``run`` asks for, by setting name (``tensorboard``, ``mllog``)."""
    return [name for name, on in (("tensorboard", run.logs.tensorboard or run.tensorboard_dir), ("mllog", run.logs.mllog)) if on]


def check_available(runs: list[Run], placement: RunPlacement | None = None) -> None:
    """Raise :class:`LaunchError` naming the package when a run asks for a log whose package is not installed;
    ``placement``: what ``suite run`` adds to each run (``--tensorboard``, ``--mllog``)."""
    placed = runs if placement is None else [run.placed(placement) for run in runs]
    for name in sorted({name for run in placed for name in wanted(run)}):
        if importlib.util.find_spec(LOG_PACKAGES[name]) is None:
            setting = "--tensorboard / logs.tensorboard" if name == "tensorboard" else "--mllog / logs.mllog"
            raise LaunchError(
                f"{setting} needs the {INSTALL[name]} package: pip install {INSTALL[name]} (or the suite's `logs` extra)"
            )


def epoch_seconds(utc: str | None) -> float | None:
    """Seconds since 1970 of a record's ISO 8601 UTC time (``2025-01-31T14:05:09Z``), None without one."""
    if not utc:
        return None
    return dt.datetime.strptime(utc, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()


def window_opened(record: Record) -> float | None:
    """When the training window opened, in seconds since 1970: the worker's start plus set-up and warm-up."""
    started = epoch_seconds(record.started_utc)
    if started is None:
        return None
    return started + (record.setup_s or 0.0) + (record.warmup_s or 0.0)


def write_run_logs(run: Run, run_dir: Path, record: Record) -> None:
    """Rank 0, once ``record`` is written as ``result.json``: the logs ``run`` asks for; a log that fails is a warning,
    never an error."""
    names = wanted(run)
    if not names:
        return
    for name in names:
        try:
            if name == "tensorboard":
                from .tensorboard_events import write_events

                folder = tensorboard_folder(run, run_dir)
                assert folder is not None, "wanted() lists tensorboard only when a folder is set"
                write_events(folder, record, run_dir, window_opened(record))
            else:
                from .mlperf_lines import write_mllog

                write_mllog(run_dir / MLLOG_FILE, record, epoch_seconds(record.started_utc))
        except Exception as error:  # a log is an extra: the run and its record stand
            log.warning("%s: %s log not written: %s: %s", run.run_id, name, type(error).__name__, error)
