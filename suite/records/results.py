"""Run folders: where each file of a results folder lies, and run records (``RESULTS/<run_id>/result.json``),
written atomically (:mod:`.atomic`), read back, loaded into pandas.

Its schema is :mod:`suite.records.record`; records are checked against it when read. A record has one writer: rank 0
of the worker writes it once, with the launch's part ``suite run`` handed it (:mod:`suite.running.launch_part`);
``suite run`` writes a record only for a run that did not end as its worker recorded it (failed, interrupted).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..config.jsonfile import JsonError, read_json
from ..config.names import did_you_mean_path
from .atomic import (  # noqa: F401  (the writers of the run folder's files take them from here, with its names)
    STAGED,
    StagingReplaced,
    WriteFailed,
    atomic_write,
    atomic_write_text,
    staged_folder,
    write_failed,
)
from .codec import IDENTITY, MAX_NUMBER, column_texts, flat_columns, parse_record, record_data, record_field
from .record import SCHEMA_VERSION, Record
from .scored import PerClassScore

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # every rank imports this module: pandas (a third of a second) only where tables are made
    import pandas as pd

# --- the layout of a results folder and its run folders: every module asks here ---------------------------

# RESULTS/
RECORDS_FILE = "records.json"
"""All records of a results folder in one JSON list: what ``suite report`` writes beside report.md, and the
format of the committed baselines."""
PROBE_FILE = "probe.json"
"""The measured network of a results folder (``suite probe --out RESULTS/probe.json``); ``suite report`` copies it."""
LOCK_FILE = ".suite.lock"
"""The results folder's lock, held by ``suite run`` (:mod:`suite.running.lock`)."""

# RESULTS/<run_id>/
RUN_FILE = "run.json"
"""The run's settings (:class:`suite.config.scenario.Run`), written by ``suite run``, read by every rank."""
RECORD_FILE = "result.json"
GENERATOR_FILE = "generator.pt"
SAMPLES_FILE = "samples.png"
SAMPLE_GRIDS_DIR = "samples"
"""Sample grids over training (:mod:`suite.gan.grids`): ``step_<step:08d>.png`` at every curve point and
``real.png``, the real data's; PNGs whose ``rows`` text chunk names each row's class."""
REAL_GRID_FILE = "real.png"
GRID_ROWS_TEXT = "rows"
"""The PNG text chunk of a sample grid naming each row's class."""


def sample_grid_file(step: int) -> str:
    """The file name, inside :data:`SAMPLE_GRIDS_DIR`, of the generator's sample grid at generator ``step``."""
    return f"step_{step:08d}.png"


def grid_rows(path: Path) -> list[int] | None:
    """The classes of a sample grid's rows, from its :data:`GRID_ROWS_TEXT` chunk (None where its rows are not classes);
    :class:`~suite.records.images.ImageError` naming the file where it is no grid the suite reads."""
    from .images import ImageError, read_png_text

    text = read_png_text(path, GRID_ROWS_TEXT)
    if text and not re.fullmatch(r"\d{1,4}(,\d{1,4}){0,999}", text):
        raise ImageError(f"{path}: its {GRID_ROWS_TEXT!r} text is not a list of classes ({text[:40]!r})")
    return [int(v) for v in text.split(",")] if text else None


LOG_FILE = "log.txt"
"""The ranks' output, as the launcher printed it."""
RANKS_DIR = "ranks"
"""Each rank's status file (:mod:`suite.records.failures`)."""
TORCHRUN_LOGS = "torchelastic"
"""The folder of a run's folder that torchrun's ``--log-dir`` names: its per-attempt logs and error files, which it
would otherwise put in a new ``/tmp/torchelastic_*`` folder per run."""
CHECKPOINT_DIR = "checkpoints"
"""The run's checkpoints (:mod:`suite.train.checkpoint`)."""
STOP_FILE = "STOP"
"""Inside :data:`CHECKPOINT_DIR`: asks the ranks to stop at their next checkpoint."""
SCRATCH_DIR = "partial"
"""Where strategies hand large results between ranks through the file system (label-partitioned class generators)."""
PROFILER_TRACE = "trace-rank{rank}.json"
"""Profiler trace of one rank (:mod:`suite.measure.tracing`)."""
TIMELINE_FILE = "horovod-timeline.json"
"""Horovod's timeline of a traced run (Chrome-trace JSON, written by rank 0)."""
COMMS_LOG = "deepspeed-comms.json"
"""DeepSpeed's communication log of a traced run (its printed table is beside it, ``.txt``)."""
AUTOTUNE_LOG = "horovod-autotune.csv"
"""Horovod's autotuner log of a run with ``horovod.autotune`` (not a trace: written whenever it tunes)."""
TENSORBOARD_DIR = "tensorboard"
"""TensorBoard event files of a run with ``logs.tensorboard`` (:mod:`suite.measure.tensorboard_writer` while it trains,
:mod:`suite.running.tensorboard_events` as it ends)."""
MLLOG_FILE = "mllog.txt"
"""MLPerf-style ``:::MLLOG`` lines of a run with ``logs.mllog`` (:mod:`suite.running.mlperf_lines`)."""


REPLACED_MARK = ".replaced-"
"""In the name of a finished run's folder set aside by ``suite run --rerun`` (``RUN_ID.replaced-TIMESTAMP``,
:mod:`suite.running.rerun`) until its new run is ok."""


def is_set_aside(folder: Path) -> bool:
    """Whether ``folder`` is a finished run set aside by ``--rerun`` (no run of the folder: readers pass over it)."""
    return REPLACED_MARK in folder.name


def trace_files(run_dir: Path) -> list[Path]:
    """The traces and logs above that ``run_dir`` holds: profiler traces by rank, then the engines' files."""
    run_dir = Path(run_dir)
    ranks = sorted(run_dir.glob(PROFILER_TRACE.format(rank="*")), key=lambda p: (len(p.name), p.name))
    engines = [run_dir / name for name in (TIMELINE_FILE, COMMS_LOG, Path(COMMS_LOG).with_suffix(".txt").name, AUTOTUNE_LOG)]
    return ranks + [path for path in engines if path.is_file()]


class OutsideRoot(ValueError):
    """A path made from a name (a scenario, a run id) would leave the folder it belongs in."""


def path_under(root: str | os.PathLike, *parts: str) -> Path:
    """``root / parts``, refused with :class:`OutsideRoot` unless it lies strictly inside ``root``.

    Both are resolved (``..``, an absolute part, a symbolic link that points out) before the
    comparison; ``root`` itself (an empty name) is refused too. Every writer that puts a name
    into a path asks here. Returns the joined path as given, not resolved, for messages.
    """
    path = Path(root).joinpath(*parts)
    base, resolved = Path(root).resolve(), path.resolve()
    if resolved == base or not resolved.is_relative_to(base):
        raise OutsideRoot(f"{path}: not inside {root}; a name must not lead out of its folder")
    return path


# --- records: written and read ----------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not abs(value) <= MAX_NUMBER:
        # JSON has no NaN/inf, and a record holds no number past MAX_NUMBER (a loss that blew up between two
        # divergence checks): either is written as null, n/a, so that the record still reads
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _jsonable(value.item())
    return value


def new_record(fields: dict[str, Any], source: str = "record") -> Record:
    """The :class:`Record` a process builds from the ``fields`` it measured (numpy and torch scalars made plain numbers,
    non-finite ones and those past :data:`~suite.records.codec.MAX_NUMBER` null), checked as every record read is
    (:func:`suite.records.codec.parse_record`)."""
    return parse_record(_jsonable({"schema": SCHEMA_VERSION, **fields}), source)


def write_record(run_dir: str | os.PathLike, record: Record) -> Path:
    """Atomically write ``record`` as ``run_dir/result.json``."""
    path = Path(run_dir) / RECORD_FILE
    data = {"schema": SCHEMA_VERSION, **_jsonable(record_data(record))}
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False))
    return path


def read_record(run_dir: str | os.PathLike, required: tuple[str, ...] = ()) -> Record | None:
    """The record of ``run_dir``, or None when the run left none; :class:`ValueError` naming the file and the field
    where it is not a record (:func:`suite.config.jsonfile.read_json`'s bounds, then
    :func:`suite.records.codec.parse_record`; ``required``: fields it must have)."""
    path = Path(run_dir) / RECORD_FILE
    if not os.path.lexists(path):
        return None
    try:  # anything in the record's place that is not a regular file (a FIFO, a folder) is refused, named
        data = read_json(path)
    except JsonError as error:
        raise ValueError(f"{path}: not a valid result record ({error.reason}); delete it and rerun the run") from None
    return parse_record(data, str(path), required)


def iter_records(results_dir: str | os.PathLike, skip_bad: bool = False) -> Iterator[Record]:
    """Every record under ``results_dir`` (one level of run folders), each with the fields that name its run
    (:data:`IDENTITY`).

    A run folder that is a symbolic link is not followed (a warning line names it). A record that is not one raises
    :class:`ValueError` naming its file and field; with ``skip_bad`` it is passed over with a warning line saying the
    same. Decisions read :func:`suite.records.trusted.trusted_records` instead, which also checks who wrote each.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root}: no such results folder{did_you_mean_path(root)}; run `suite run SCENARIO --out {root}` first"
        )
    for run_dir in sorted(p for p in root.iterdir() if p.is_dir() and not is_set_aside(p)):
        if run_dir.is_symlink():  # never followed: it could carry a record its planter cannot read into this folder's
            log.warning("skipped %s: a symbolic link; the suite follows no link in a results folder", run_dir)
            continue
        try:
            record = read_record(run_dir, IDENTITY)
        except ValueError as error:
            if not skip_bad:
                raise
            log.warning("skipped %s", error)
            continue
        if record is not None:
            yield record


def read_records(path: str | os.PathLike) -> list[Record]:
    """The records of a results folder, of a folder holding ``records.json`` (a report), or of a records JSON list.

    A folder whose run folders hold no ``result.json`` is read from its ``records.json``, so a
    report folder (``suite report`` writes the records it was made from there) stands for its
    results. Errors are one line (:class:`ValueError`) naming the path.
    """
    path = Path(path)
    if path.is_dir() and not any(path.glob(f"*/{RECORD_FILE}")) and (path / RECORDS_FILE).is_file():
        path = path / RECORDS_FILE
    if path.is_dir():
        records = list(iter_records(path))
        if not records and (path / RECORD_FILE).is_file():
            raise ValueError(
                f"{path}: a run folder (its {RECORD_FILE} is one run); give the results folder that holds it ({path.parent})"
            )
        if not records:
            raise ValueError(f"{path}: no {RECORD_FILE} in its run folders and no {RECORDS_FILE}")
        return records
    if not path.is_file():
        raise ValueError(f"{path}: no such results folder or records file{did_you_mean_path(path)}")
    records = read_json(path)
    if not isinstance(records, list) or not records:
        raise ValueError(f"{path}: expected a non-empty JSON list of result records, as `suite report` writes them")
    return [parse_record(r, f"{path}: record {i}", IDENTITY) for i, r in enumerate(records)]


KID_FIELDS = ("kid_mean", "kid_std", "kid_subset_size", "kid_subsets")
"""KID's fields in a record's ``quality`` block and in each of its per-class entries."""
PER_CLASS_BASES = {
    "per_class_label": "generated label",
    "per_class_predicted": "predicted class (biased low)",
}
"""The two per-class fields of ``quality``: samples grouped by the label they were generated for, or
by the class the suite classifier predicts (see :mod:`suite.measure.metrics.evaluate`)."""


@dataclass(frozen=True)
class PerClassSummary:
    """What a per-class field says in one line (:func:`per_class_summary`)."""

    classes: int
    scored: int
    """The classes scored (a metric and a KID)."""
    fid_classes: int
    """Of those, the classes whose FID is sound."""
    n_min: int
    n_max: int
    """The fewest and most generated samples of a class."""
    kid_mean: float | None
    """The mean per-class KID over the scored classes (None when none was scored)."""


def per_class_summary(scores: dict[str, PerClassScore] | None) -> PerClassSummary | None:
    """Summary of a per-class field: classes, how many were scored and with FID, their n, mean KID."""
    if not scores:
        return None
    scored = [e for e in scores.values() if e.metric and e.kid_mean is not None]
    counts = [e.n for e in scores.values()]
    return PerClassSummary(
        classes=len(scores),
        scored=len(scored),
        fid_classes=sum(e.metric == "fid" for e in scored),
        n_min=min(counts),
        n_max=max(counts),
        kid_mean=sum(e.kid_mean or 0.0 for e in scored) / len(scored) if scored else None,
    )


def load_records(results_dir: str | os.PathLike) -> pd.DataFrame:
    """All records under ``results_dir`` as one row per run (columns: :func:`suite.records.codec.flat_columns`)."""
    return records_frame(iter_records(results_dir))


def records_frame(records: Iterable[Record]) -> pd.DataFrame:
    """``records`` as one row per run (columns: :func:`suite.records.codec.flat_columns`, the installed strategies'
    own after the core's)."""
    import pandas as pd

    columns = flat_columns()
    rows = [{column: record_field(record, path) for column, path in columns.items()} for record in records]
    frame = pd.DataFrame(rows, columns=list(columns))
    for name, text in column_texts().items():  # as each column's mark says: a grid as 2x3, steps per GAN as their total
        frame[name] = frame[name].map(text)
    return frame
