"""The names of the report's flat table's columns as attributes that mypy checks: ``frame[COL.train_s]``.

The flat table (:func:`suite.records.results.records_frame`) is built in one place, its columns named after the
record's fields marked :func:`suite.records.fields.column` (:data:`suite.records.codec.FLAT_COLUMNS`). Analysis names
a column through :data:`COL`, never by a string, so that a misspelt column is a mypy error and a renamed or removed
field fails ``tests/test_record_columns.py`` (which holds :class:`Columns` to the record's marked fields) instead of a
report at run time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Columns:
    """One attribute per column of the flat table, each holding its own name (:data:`COL`)."""

    run_id: str
    strategy: str
    engine: str
    loss: str
    procs: str
    scaling: str
    repeat: str
    grid: str
    label: str
    sweep: str
    epochs: str
    seed: str
    budget_s: str
    budget_images: str
    threads_per_rank: str
    cores_per_node: str
    ranks_per_node: str
    oversubscribed: str
    setup_s: str
    warmup_s: str
    budget_window_s: str
    train_s: str
    eval_s: str
    finalize_s: str
    score_s: str
    wall_s: str
    images_per_s: str
    images_per_s_ci95: str
    images_per_s_per_rank: str
    train_images: str
    eval_images: str
    global_batch: str
    steps: str
    images_consumed: str
    warmup_images_consumed: str
    budget_steps: str
    steps_per_gan: str
    generator_only_steps: str
    classes: str
    class_schedule: str
    cells_per_rank: str
    neighbourhood_size: str
    status: str
    error: str
    reason: str
    device: str
    machine: str
    numerics: str
    dataset: str
    comm_bytes: str
    comm_s: str
    timed_steps: str
    step_s: str
    step_p50: str
    step_p95: str
    step_ci95: str
    data_s: str
    compute_s: str
    comm_wait_s: str
    comm_share: str
    work_images_per_rank: str
    work_steps_per_rank: str
    flops_per_step: str
    achieved_flops: str
    peak_flops: str
    peak_source: str
    peak_raised_ranks: str
    fraction_of_peak: str
    cpu_util_mean: str
    host_mem_peak_mb: str
    gpu_util_mean: str
    gpu_util_p95: str
    gpu_mem_used_mb: str
    gpu_mem_peak_mb: str
    features: str
    ruler_sha256: str
    protocol: str
    papers_comparable: str
    quality_n: str
    is_mean: str
    is_std: str
    fid: str
    kid_mean: str
    kid_std: str
    precision: str
    recall: str
    density: str
    coverage: str
    tvd: str
    label_acc: str
    ema_fid: str
    ema_kid_mean: str
    ema_n: str
    contended: str
    outside_cores: str
    steal_share: str
    load_avg: str
    warnings: str
    suite_version: str
    git_commit: str
    git_dirty: str
    started_utc: str
    ended_utc: str


def _column(attribute: str) -> str:
    """The column an attribute names: itself, less the trailing ``_`` of a Python keyword (``class_``: ``class``)."""
    return attribute[:-1] if attribute.endswith("_") else attribute


def column_names(table: type[T]) -> T:
    """The instance of ``table``, a dataclass of one ``str`` attribute per column of a table, whose attributes hold
    their own names: how analysis names the columns of its tables (this one, the projection's, the papers')."""
    return table(**{f.name: _column(f.name) for f in dataclasses.fields(table)})  # type: ignore[arg-type]


def names_of(table: Any) -> list[str]:
    """The column names of ``table`` (a column-name dataclass or its instance), in their order: a frame's columns."""
    return [_column(f.name) for f in dataclasses.fields(table)]


COL = column_names(Columns)
"""The flat table's column names: ``COL.fid == "fid"``."""
