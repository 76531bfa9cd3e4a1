"""The headline rows: one typed row per configuration (strategy / loss / engine [label], swept settings) at the
largest process count it ran, the one table the report's headline, its findings (:mod:`.findings`) and its pages read.

Everything here reads the run records (and the scaling tables built from them); nothing is measured again. Speedup
and efficiency come from the configuration's scaling sweeps. A frame of the rows exists only at the output
(:func:`shown_table`, ``headline.csv``).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from ..records.record import Record
from ..records.scored import CurvePoint
from .columns import COL
from .equivalences import checks
from .estimand import curve_area, end_fid, in_seed_order, speed_fractions
from .stats.summary import Summary, summarise
from .systems import config_name, main_runs, mean_of, per_seed, procs_of, quality_reader, ruler_text, strong_speedup
from .targets import missed_text, target_text, targets_per_seed


def _text(summary: Summary | None, digits: int = 3) -> str | None:
    return summary.text(digits) if summary is not None else None


SHOWN_FIELD = {"column": ""}
"""The metadata of a field of :class:`HeadlineRow` shown in the headline's table under its own name."""


@dataclass(frozen=True)
class HeadlineRow:
    """One configuration at its largest process count (:func:`headline_rows`): the estimates shown as text (the
    table's columns, :data:`SHOWN_COLUMNS`), then the summaries and runs the findings test with."""

    config: str = field(metadata={"column": "strategy"})
    """The configuration's name (:func:`~.systems.config_name`), in the table's ``strategy`` column."""
    procs_text: str = field(metadata={"column": "P"})
    """Every process count it ran, comma-separated."""
    seeds: int = field(metadata=SHOWN_FIELD)
    train_s: str | None = field(metadata=SHOWN_FIELD)
    speedup: str | None = field(metadata=SHOWN_FIELD)
    efficiency: str | None = field(metadata=SHOWN_FIELD)
    weak_efficiency: str | None = field(metadata=SHOWN_FIELD)
    comm_share: float | None = field(metadata=SHOWN_FIELD)
    images_per_s: str | None = field(metadata=SHOWN_FIELD)
    time_to_target: str | None = field(metadata=SHOWN_FIELD)
    fid_end: str | None = field(metadata=SHOWN_FIELD)
    curve_area: str | None = field(metadata=SHOWN_FIELD)
    fid: str | None = field(metadata=SHOWN_FIELD)
    fid_at_equal_time: str | None = field(metadata=SHOWN_FIELD)
    kid: str | None = field(metadata=SHOWN_FIELD)
    label_acc: str | None = field(metadata=SHOWN_FIELD)
    quality: str | None = field(metadata=SHOWN_FIELD)
    """The rulers of its scores (:func:`~.systems.ruler_text`), None where none was scored."""
    checks: str = field(metadata=SHOWN_FIELD)
    weak_efficiency_summary: Summary | None
    fid_end_draws: list[float | None]
    """Its end-of-budget FIDs (:func:`suite.analysis.estimand.end_fid`) in seed order (:func:`~.estimand.in_seed_order`)."""
    top: int
    """Its largest process count: the P of ``main``."""
    procs: list[int]
    train_s_summary: Summary | None
    efficiency_summary: Summary | None
    targets: int
    """The seeds with a time to target."""
    targets_reached: int
    main: list[Record]
    """The runs it reports (:func:`~.systems.main_runs`)."""
    base: list[Record]
    """Its strong sweep's P = 1 runs (none where ``top`` is 1)."""
    speedup_summary: Summary | None
    time_to_target_summary: Summary | None
    """Its time to target where every seed reached it."""
    target_missed: str | None
    images_per_s_summary: Summary | None
    fid_summary: Summary | None
    kid_summary: Summary | None
    label_acc_summary: Summary | None
    fid_end_summary: Summary | None
    curve_area_summary: Summary | None
    """Its learning speed over seeds (:func:`suite.analysis.estimand.curve_area`)."""
    fid_at_equal_time_summary: Summary | None
    equal_time: float | None
    """The equal budget every row's FID at equal time is read at (:func:`equal_time`), on ``equal_axis``."""
    equal_axis: str
    """``images`` or ``clock_s`` (:func:`budget_axis`)."""


SHOWN_COLUMNS = {
    item.name: item.metadata["column"] or item.name for item in dataclasses.fields(HeadlineRow) if "column" in item.metadata
}
"""The headline table's column of each shown field of :class:`HeadlineRow`: its name, ``strategy`` or ``P``."""


def shown_table(rows: list[HeadlineRow]) -> pd.DataFrame:
    """The rows' shown fields as a table (:data:`SHOWN_COLUMNS`), for the headline page: an output, never read back."""
    return pd.DataFrame([{column: getattr(row, name) for name, column in SHOWN_COLUMNS.items()} for row in rows])


def _weak_efficiency(name: str, scaling: dict[str, pd.DataFrame]) -> Summary | None:
    """The weak sweep's efficiency of configuration ``name`` at its largest P (per unit of work where it has one)."""
    table = scaling.get("weak")
    if table is None or table.empty:
        return None
    part = table[table["config"].str.startswith(name)]
    part = part[part[COL.procs] == part[COL.procs].max()] if not part.empty else part
    if part.empty or part[COL.procs].iloc[0] <= 1:
        return None
    work, plain = part["_efficiency_work"].iloc[0], part["_efficiency"].iloc[0]
    return work if isinstance(work, Summary) else plain if isinstance(plain, Summary) else None


def headline_rows(records: list[Record], scaling: dict[str, pd.DataFrame]) -> list[HeadlineRow]:
    """One row per configuration: the numbers a reader decides with, each over its seeds or repeats.

    ``scaling`` holds the report's strong and weak scaling tables (:func:`suite.analysis.report.scaling_tables.scaling_table`).
    Every number is ``estimate [95 % interval] (n=draws)`` (:meth:`suite.analysis.stats.summary.Summary.text`:
    geometric means of positive quantities); the row keeps the summaries the findings test with.
    """
    by_config: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.status == "ok":
            by_config[config_name(r)].append(r)
    rows = []
    grid = speed_fractions(r for runs in by_config.values() for r in main_runs(runs)[0])
    for name, runs in sorted(by_config.items()):
        main, top = main_runs(runs)
        speedup = strong_speedup(runs, top)
        train_s = summarise(r.train_s for r in main)
        efficiency = speedup.scaled(1 / top) if speedup is not None else None
        weak = _weak_efficiency(name, scaling)
        qualities = [r.quality for r in main if r.quality is not None]
        fid, kid = (summarise(per_seed(main, quality_reader(metric))) for metric in ("fid", "kid"))
        label_acc = summarise(per_seed(main, quality_reader("label_acc")), fraction=True)
        end_draws = in_seed_order(main, end_fid)
        fid_end, area = summarise(end_draws), summarise(in_seed_order(main, lambda r: curve_area(r, grid)))
        targets = targets_per_seed(main)
        reached = summarise(t.clock_s for t in targets if t.reached)
        rows.append(
            HeadlineRow(
                config=name,
                procs_text=",".join(str(p) for p in sorted({procs_of(r) for r in runs})),
                seeds=len({r.seed for r in main}),
                train_s=_text(train_s),
                speedup=_text(speedup),
                efficiency=_text(efficiency),
                weak_efficiency=_text(weak),
                comm_share=mean_of(r.telemetry.comm_share if r.telemetry is not None else None for r in main),
                images_per_s=_text(summarise(r.images_per_s for r in main)),
                time_to_target=target_text(targets, reached) if targets else None,
                fid_end=_text(fid_end) if qualities else None,
                curve_area=_text(area) if qualities else None,
                fid=_text(fid) if qualities else None,
                fid_at_equal_time=None,
                kid=_text(kid) if qualities else None,
                label_acc=_text(label_acc, 2) if qualities else None,
                quality="; ".join(sorted({ruler_text(q) for q in qualities})) if qualities else None,
                checks="; ".join(checks(runs, records)),
                weak_efficiency_summary=weak,
                fid_end_draws=end_draws,
                top=top,
                procs=sorted({procs_of(r) for r in runs}),
                train_s_summary=train_s,
                efficiency_summary=efficiency,
                targets=len(targets),
                targets_reached=reached.n if reached is not None else 0,
                main=main,
                base=[r for r in runs if r.scaling == "strong" and r.procs == 1 and top > 1],
                speedup_summary=speedup,
                time_to_target_summary=reached if targets and reached and reached.n == len(targets) else None,
                target_missed=missed_text(targets, reached),
                images_per_s_summary=summarise(r.images_per_s for r in main),
                fid_summary=fid,
                kid_summary=kid,
                label_acc_summary=label_acc,
                fid_end_summary=fid_end,
                curve_area_summary=area,
                fid_at_equal_time_summary=None,
                equal_time=None,
                equal_axis="clock_s",
            )
        )
    return _with_equal_time_quality(rows)


EQUAL_TIME_SLACK = 1.05
"""A curve point counts as "at" the common time when its clock is at most this factor past it."""


def budget_axis(rows: list[HeadlineRow]) -> str:
    """What the equal-budget view holds equal: the real training ``images`` where every run compared trained to
    ``train.budget_images`` (its curve points sit at equal fractions of it), else the window's seconds (``clock_s``)."""
    runs: list[Record] = [r for row in rows for r in row.main]
    images = all(r.budget_images and all(p.images is not None for p in r.curve or []) for r in runs)
    return "images" if runs and images else "clock_s"


def _at(point: CurvePoint, field: str) -> Any:
    """A curve point's ``field`` (``clock_s``, ``images``, ``fid``, ...), None where it has none."""
    return getattr(point, field, None)


def equal_time(rows: list[HeadlineRow], axis: str = "clock_s") -> float | None:
    """The longest training time (or ``axis``) every configuration's quality curves reach: the shortest final curve point."""
    ends: list[float] = [max(_at(p, axis) for p in r.curve) for row in rows for r in row.main if r.curve]
    return min(ends) if ends and all(any(r.curve for r in row.main) for row in rows) else None


def quality_at(record: Record, clock: float, metric: str = "fid", axis: str = "clock_s") -> tuple[float | None, float | None]:
    """(score, its clock) of the last curve point of ``record`` at or before ``clock`` (within :data:`EQUAL_TIME_SLACK`),
    or at or before that many images with ``axis="images"``."""
    points = [p for p in record.curve or [] if _at(p, axis) <= clock * EQUAL_TIME_SLACK and _at(p, metric) is not None]
    if not points:
        return None, None
    last = max(points, key=lambda p: _at(p, axis))
    return _at(last, metric), _at(last, axis)


def _with_equal_time_quality(rows: list[HeadlineRow]) -> list[HeadlineRow]:
    """Paper 002's framing, quality under a fixed budget: each configuration's FID at the same training time, or at
    the same real training images where every run had an images budget."""
    axis = budget_axis(rows)
    clock = equal_time(rows, axis) if len(rows) > 1 else None
    unit = "images" if axis == "images" else "s"
    out = []
    for row in rows:
        text, kept = None, None
        if clock is not None:
            points = [quality_at(r, clock, axis=axis) for r in row.main]
            values = per_seed(row.main, lambda r: quality_at(r, clock, axis=axis)[0])
            summary = summarise(values)
            if summary is not None and summary.n == len(values):
                at = max(c for _, c in points if c is not None)
                text, kept = f"{summary.text()} at {at:.0f} {unit}", summary
        out.append(replace(row, fid_at_equal_time=text, fid_at_equal_time_summary=kept, equal_time=clock, equal_axis=axis))
    return out


def end_ruler_text(rows: list[HeadlineRow]) -> str:
    """The rulers of ``rows``' end-of-budget FIDs (:func:`suite.analysis.estimand.end_fid`): :func:`~.systems.ruler_text`
    at the EMA generator's sample count (``quality.ema_n``), which is not the final model's."""
    qualities = [r.quality for row in rows for r in row.main if r.quality is not None and r.quality.ema_fid is not None]
    return "; ".join(sorted({ruler_text(q, q.ema_n) for q in qualities}))
