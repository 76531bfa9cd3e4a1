"""The report's first screen: one row per strategy (the headline rows), the checks the suite verifies and the caveats
that apply to a system; :mod:`suite.analysis.claims` tests the findings these rows support.

Everything here reads the run records (and the scaling tables built from them); nothing is
measured again. A row describes a *configuration* (strategy / loss / engine [label]) at the
largest process count it ran; speedup and efficiency come from its scaling sweeps.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Protocol

import numpy as np
import pandas as pd

from ..config.registry import STRATEGIES
from ..config.sections import MetricsConfig
from ..config.sweep import sweep_text
from ..measure.metrics.signals import not_learned
from ..records.record import CurvePoint, Quality, Record, TimeToTarget
from .columns import COL
from .estimand import curve_area, end_fid, in_seed_order, speed_fractions
from .markdown import cell
from .stats.speedup import speedup
from .stats.verdicts import Summary, summarise
from .strategy_fields import class_group_fields


class Named(Protocol):
    """What names a system: a record, or the run (:class:`suite.config.scenario.Run`) that will write it."""

    @property
    def strategy(self) -> str | None: ...
    @property
    def loss(self) -> str | None: ...
    @property
    def engine(self) -> str | None: ...
    @property
    def label(self) -> str | None: ...
    @property
    def sweep(self) -> dict[str, Any] | None: ...


def system_name(record: Named) -> str:
    """strategy / loss / engine [label]: the system a run trains, whatever its swept settings."""
    name = f"{record.strategy} / {record.loss} / {record.engine}"
    return name + (f" [{record.label}]" if record.label else "")


def config_name(record: Named) -> str:
    """strategy / loss / engine [label] (swept settings): what a headline row describes."""
    swept = sweep_text(record.sweep)
    return system_name(record) + (f" ({swept})" if swept else "")


def _mean(values: Iterable[Any]) -> float | None:
    numbers = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(numbers)) if numbers else None


def procs_of(record: Record) -> int:
    """The record's ``procs``, which every record read for a report has (:data:`suite.records.codec.IDENTITY`)."""
    assert record.procs is not None, f"record {record.run_id}: procs is missing"
    return record.procs


def main_runs(runs: list[Record]) -> tuple[list[Record], int]:
    """The runs a headline row reports: the strong sweep's largest P (else the weak sweep's)."""
    strong = [r for r in runs if r.scaling == "strong"] or runs
    top = max(procs_of(r) for r in strong)
    return [r for r in strong if r.procs == top], top


def contended(record: Record) -> bool:
    """Whether the record marks its run's timings as taken on a busy host (``host_load.contended``)."""
    return record.host_load is not None and bool(record.host_load.contended)


def placement_invariant(record: Record) -> bool:
    """Whether this run's model should be bitwise the same on any number of ranks."""
    if record.strategy is None or record.strategy not in STRATEGIES:  # a plugin's records, the plugin not installed
        return False
    invariant = STRATEGIES[record.strategy].placement_invariant
    return (
        invariant is not None
        and record.procs is not None
        and invariant(record.procs, len(class_group_fields(record).classes or []))
    )


def _repeat(record: Record) -> int:
    """The record's ``repeat``, 0 where it has none."""
    return record.repeat if record.repeat is not None else 0


def checks(runs: list[Record], everything: list[Record]) -> list[str]:
    """The equivalences the suite verifies for one configuration, as short statements.

    Models are compared seed by seed: a different seed is a different model by design.
    """
    out = []
    identical = [r.replicas_identical for r in runs if r.replicas_identical is not None]
    if identical:
        out.append("replicas identical" if all(identical) else "REPLICAS DIFFER")
    strong = [r for r in runs if r.scaling == "strong" and r.model_digest and _repeat(r) == 0]
    by_seed: dict[Any, list[Record]] = defaultdict(list)
    for r in strong:
        by_seed[r.seed].append(r)
    swept = [group for group in by_seed.values() if len({r.procs for r in group}) > 1]
    if swept and all(placement_invariant(r) for group in swept for r in group):
        procs = ",".join(str(p) for p in sorted({procs_of(r) for group in swept for r in group}))
        same = all(len({r.model_digest for r in group}) == 1 for group in swept)
        out.append(f"same model on P={procs}" if same else f"MODEL DIFFERS across P={procs}")
    # the same strategy on other engines: the same model?
    for r in strong:
        twins = [
            o
            for o in everything
            if o.model_digest
            and o.engine != r.engine
            and (o.strategy, o.loss, o.procs, o.scaling, _repeat(o), o.seed)
            == (r.strategy, r.loss, r.procs, r.scaling, _repeat(r), r.seed)
        ]
        equal = sorted({str(o.engine) for o in twins if o.model_digest == r.model_digest})
        text = f"same model as {'/'.join(equal)} at P={r.procs}"
        if equal and text not in out:
            out.append(text)
    return out


def _quality_value(q: Quality, metric: str) -> float | None:
    value: float | None = q.kid_mean if metric == "kid" else getattr(q, metric, None)
    return value


def _quality_reader(metric: str) -> Callable[[Record], float | None]:
    """A record's ``metric`` (fid, kid or label_acc) of its quality block."""
    return lambda record: _quality_value(record.quality, metric) if record.quality is not None else None


def not_learned_reasons(quality: Quality) -> list[str]:
    """Why ``quality`` says its model has not learned (:func:`suite.measure.metrics.signals.not_learned`)."""
    return not_learned(quality)


def ruler_text(q: Quality, n: int | None = None) -> str:
    """What a score is comparable under: network, the first 12 hex digits of its hash, sample count (``n``, else the
    final model's), the classes scored against where they are not all of the dataset's, and the protocol where it is
    not the default."""
    digest = (q.ruler_sha256 or "")[:12]
    classes = q.classes or []
    subset = f", classes {','.join(map(str, classes))}" if classes and len(classes) < (q.num_classes or 0) else ""
    protocol = q.protocol or MetricsConfig.protocol  # records from before protocols scored as the default does
    named = f", protocol {protocol}" if protocol != MetricsConfig.protocol else ""
    return cell(f"{q.features}" + (f" {digest}" if digest else "") + f", n={n or q.n}{subset}{named}")  # a record's words


def end_ruler_text(rows: list[HeadlineRow]) -> str:
    """The rulers of ``rows``' end-of-budget FIDs (:func:`suite.analysis.estimand.end_fid`): :func:`ruler_text` at the
    EMA generator's sample count (``quality.ema_n``), which is not the final model's."""
    qualities = [r.quality for row in rows for r in row.main if r.quality is not None and r.quality.ema_fid is not None]
    return "; ".join(sorted({ruler_text(q, q.ema_n) for q in qualities}))


def per_seed(runs: list[Record], value: Callable[[Record], Any]) -> list[float | None]:
    """One value per seed: ``value`` of each run, averaged over the seed's repeats (repeats retrain the same model).

    Quality varies with the seed, not the repeat, so a seed counts once however often it ran.
    """
    by_seed: dict[Any, list[float]] = defaultdict(list)
    for r in runs:
        v = value(r)
        by_seed.setdefault(r.seed, [])  # a seed whose runs have no value still counts, as missing
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            by_seed[r.seed].append(float(v))
    return [float(np.mean(values)) if values else None for _, values in sorted(by_seed.items(), key=lambda kv: str(kv[0]))]


def strong_speedup(runs: list[Record], top: int) -> Summary | None:
    """The strong sweep's speedup at ``top`` against its P=1 runs (:func:`suite.analysis.stats.speedup.speedup`, as the scaling table's)."""
    strong = [r for r in runs if r.scaling == "strong"]
    return speedup([r for r in strong if r.procs == 1], [r for r in strong if r.procs == top], top)


def _text(summary: Summary | None, digits: int = 3) -> str | None:
    return summary.text(digits) if summary is not None else None


def _shown(column: str | None = None) -> Any:
    """A field of :class:`HeadlineRow` shown in the headline, in the frame's column ``column`` (else its name)."""
    return dataclasses.field(metadata={"column": column} if column else {})


def _kept(column: str) -> Any:
    """A field of :class:`HeadlineRow` the findings test with, in the frame's hidden column ``column`` (``_*``)."""
    return dataclasses.field(metadata={"column": column})


@dataclass(frozen=True)
class HeadlineRow:
    """One configuration at its largest process count (:func:`headline_rows`): the estimates shown as text, and the
    summaries and runs the findings test with (the frame's hidden ``_*`` columns, :func:`headline_frame`)."""

    strategy: str
    """The configuration's name (:func:`config_name`)."""
    procs_text: str = _shown("P")
    """Every process count it ran, comma-separated."""
    seeds: int = _shown()
    train_s: str | None = _shown()
    speedup: str | None = _shown()
    efficiency: str | None = _shown()
    weak_efficiency: str | None = _shown()
    comm_share: float | None = _shown()
    images_per_s: str | None = _shown()
    time_to_target: str | None = _shown()
    fid_end: str | None = _shown()
    curve_area: str | None = _shown()
    fid: str | None = _shown()
    fid_at_equal_time: str | None = _shown()
    kid: str | None = _shown()
    label_acc: str | None = _shown()
    quality: str | None = _shown()
    """The rulers of its scores (:func:`ruler_text`), None where none was scored."""
    checks: str = _shown()
    weak_efficiency_summary: Summary | None = _kept("_weak_efficiency")
    fid_end_draws: list[float | None] = _kept("_fid_end_draws")
    """Its end-of-budget FIDs (:func:`suite.analysis.estimand.end_fid`) in seed order (:func:`~.estimand.in_seed_order`)."""
    top: int = _kept("_top")
    """Its largest process count: the P of ``main``."""
    procs: list[int] = _kept("_procs")
    train_s_summary: Summary | None = _kept("_train_s")
    efficiency_summary: Summary | None = _kept("_efficiency")
    targets: int = _kept("_targets")
    """The seeds with a time to target."""
    targets_reached: int = _kept("_targets_reached")
    main: list[Record] = _kept("_main")
    """The runs it reports (:func:`main_runs`)."""
    base: list[Record] = _kept("_base")
    """Its strong sweep's P = 1 runs (none where ``top`` is 1)."""
    speedup_summary: Summary | None = _kept("_speedup")
    time_to_target_summary: Summary | None = _kept("_time_to_target")
    """Its time to target where every seed reached it."""
    target_missed: str | None = _kept("_target_missed")
    images_per_s_summary: Summary | None = _kept("_images_per_s")
    fid_summary: Summary | None = _kept("_fid")
    kid_summary: Summary | None = _kept("_kid")
    label_acc_summary: Summary | None = _kept("_label_acc")
    fid_end_summary: Summary | None = _kept("_fid_end")
    curve_area_summary: Summary | None = _kept("_curve_area")
    """Its learning speed over seeds (:func:`suite.analysis.estimand.curve_area`)."""
    fid_at_equal_time_summary: Summary | None = _kept("_fid_at_equal_time")
    equal_time: float | None = _kept("_equal_time")
    """The equal budget every row's FID at equal time is read at (:func:`equal_time`), on ``equal_axis``."""
    equal_axis: str = _kept("_equal_axis")
    """``images`` or ``clock_s`` (:func:`budget_axis`)."""


def _column(item: dataclasses.Field[Any]) -> str:
    column: str = item.metadata.get("column", item.name)
    return column


HEADLINE_COLUMNS = {item.name: _column(item) for item in dataclasses.fields(HeadlineRow)}
"""The headline frame's column of each field of :class:`HeadlineRow`: its name, ``P``, or a hidden ``_*`` column."""


def headline_frame(rows: list[HeadlineRow]) -> pd.DataFrame:
    """The headline rows as a frame, one column per field (:data:`HEADLINE_COLUMNS`), for tables and tools."""
    return pd.DataFrame([{column: getattr(row, name) for name, column in HEADLINE_COLUMNS.items()} for row in rows])


def rows_of(table: pd.DataFrame) -> list[HeadlineRow]:
    """The typed rows of a headline frame (:func:`headline_frame`)."""
    return [HeadlineRow(**{name: row[column] for name, column in HEADLINE_COLUMNS.items()}) for row in table.to_dict("records")]


def headline(records: list[Record], scaling: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The headline rows of ``records`` as a frame (:func:`headline_rows`, :func:`headline_frame`)."""
    return headline_frame(headline_rows(records, scaling))


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

    ``scaling`` holds the report's strong and weak scaling tables (:func:`suite.analysis.report.tables.scaling_table`).
    Every number is ``estimate [95 % interval] (n=draws)`` (:meth:`suite.analysis.stats.verdicts.Summary.text`:
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
        fid, kid = (summarise(per_seed(main, _quality_reader(metric))) for metric in ("fid", "kid"))
        label_acc = summarise(per_seed(main, _quality_reader("label_acc")), fraction=True)
        end_draws = in_seed_order(main, end_fid)
        fid_end, area = summarise(end_draws), summarise(in_seed_order(main, lambda r: curve_area(r, grid)))
        targets = _targets_per_seed(main)
        reached = summarise(t.clock_s for t in targets if t.reached)
        rows.append(
            HeadlineRow(
                strategy=name,
                procs_text=",".join(str(p) for p in sorted({procs_of(r) for r in runs})),
                seeds=len({r.seed for r in main}),
                train_s=_text(train_s),
                speedup=_text(speedup),
                efficiency=_text(efficiency),
                weak_efficiency=_text(weak),
                comm_share=_mean(r.telemetry.comm_share if r.telemetry is not None else None for r in main),
                images_per_s=_text(summarise(r.images_per_s for r in main)),
                time_to_target=_target_text(targets, reached) if targets else None,
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
                target_missed=_missed(targets, reached),
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


@dataclass(frozen=True)
class SeedTarget:
    """A seed's time to target (:func:`_targets_per_seed`)."""

    reached: bool
    """Every repeat of the seed reached the target."""
    clock_s: float | None
    """Their mean clock when they reached it (None where one did not)."""
    best: float | None
    """The mean of their best values."""
    clock_lo: float | None = None
    """The mean clock of the curve points just before their crossing (None where a record has no bracket: one
    written before brackets were recorded)."""
    clock_hi: float | None = None
    """The mean clock of the first curve points that met the target."""


def _targets_per_seed(main: list[Record]) -> list[SeedTarget]:
    """Time to target per seed: reached where every repeat of the seed reached it, at their mean (interpolated)
    clock, with the mean of the bracketing curve points' clocks where every repeat recorded them."""
    by_seed: dict[Any, list[TimeToTarget]] = defaultdict(list)
    for r in main:
        if r.time_to_target is not None:
            by_seed[r.seed].append(r.time_to_target)
    out = []
    for targets in by_seed.values():
        reached = all(t.reached and t.clock_s is not None for t in targets)
        bracket = reached and all(t.clock_lo is not None and t.clock_hi is not None for t in targets)
        out.append(
            SeedTarget(
                reached=reached,
                clock_s=float(np.mean([t.clock_s for t in targets])) if reached else None,
                best=_mean(t.best for t in targets),
                clock_lo=float(np.mean([t.clock_lo for t in targets])) if bracket else None,
                clock_hi=float(np.mean([t.clock_hi for t in targets])) if bracket else None,
            )
        )
    return out


def target_interval(targets: list[SeedTarget], reached: Summary) -> tuple[float, float] | None:
    """The time to target's interval with the curve's spacing in it: the union of the seeds' interval of the
    interpolated times and the intervals of the bracket's ends.

    Each seed's crossing lies somewhere in its bracket (the curve points around it), a systematic uncertainty that
    more seeds do not shrink, so it is not added to the spread in quadrature: the interval runs from the lower end
    of the seeds' interval as if every seed crossed at its bracket's start to the upper end as if every seed
    crossed at its end (one draw: the bracket itself), and always holds the interval of the interpolated times.
    None where a seed has no bracket (records written before brackets were recorded: the seeds' interval alone).
    """
    starts = [t.clock_lo for t in targets if t.clock_lo is not None]
    finishes = [t.clock_hi for t in targets if t.clock_hi is not None]
    if len(starts) < len(targets) or len(finishes) < len(targets):
        return None
    spread = reached.interval or (reached.center, reached.center)
    ends: list[float] = []
    for values, side in ((starts, 0), (finishes, 1)):
        if side == 0 and min(values) <= 0:  # a bracket from the window's start: the crossing may be at any time after 0
            ends.append(0.0)
            continue
        summary = summarise(values)
        interval = summary.interval if summary is not None else None
        ends.append(interval[side] if interval is not None else (min(values) if side == 0 else max(values)))
    return min(spread[0], ends[0]), max(spread[1], ends[1])


def _missed(targets: list[SeedTarget], reached: Summary | None) -> str | None:
    """Where some draws missed the target: how many reached it, and the best value the curves got to (None otherwise)."""
    if not targets or (reached is not None and reached.n == len(targets)):
        return None
    best = summarise(t.best for t in targets)
    return f"reached by {reached.n if reached else 0} of {len(targets)} draws" + (
        f"; best {best.text()}" if best is not None else ""
    )


def _target_text(targets: list[SeedTarget], reached: Summary | None) -> str:
    """``centre [lo, hi] s (n=3; curve points ...)``: the interval with the curve's spacing in it (:func:`target_interval`)."""
    if reached is not None and reached.n == len(targets):
        interval = target_interval(targets, reached)
        if interval is None:  # no brackets recorded: the seeds' spread alone
            return f"{reached.text()} s"

        def rounded(value: float | None) -> str:  # as Summary.text rounds
            return str(np.format_float_positional(float(value or 0.0), precision=3, fractional=False, trim="-"))

        lo, hi = _mean(t.clock_lo for t in targets), _mean(t.clock_hi for t in targets)
        return (
            f"{rounded(reached.center)} [{rounded(interval[0])}, {rounded(interval[1])}] s (n={reached.n}; "
            f"curve points at {rounded(lo)} and {rounded(hi)} s bracket it)"
        )
    best = summarise(t.best for t in targets)
    got = f"reached by {reached.n if reached else 0} of {len(targets)} draws"
    return got + (f" (best {best.text()})" if best is not None else "")


def caveats(row: HeadlineRow, records: list[Record], scaling: dict[str, pd.DataFrame], timing: bool = False) -> list[str]:
    """What weakens a finding about one configuration (``timing``: of a timing family, which a busy host weakens)."""
    out = []
    main = row.main
    if any(r.oversubscribed for r in main):
        out.append(f"its P={row.top} runs oversubscribe the cores")
    for kind, table in scaling.items():
        part = table[table["config"].str.startswith(row.strategy)] if not table.empty else table
        if not part.empty and len({t for value in part[COL.threads_per_rank] for t in str(value).split(",")}) > 1:
            out.append(f"threads per rank differ across its {kind} sweep")
    unlearned = [reasons for r in main if r.quality is not None and (reasons := not_learned_reasons(r.quality))]
    if unlearned:
        first = "; ".join(unlearned[0])
        draws = "" if len(main) == 1 else f" in {len(unlearned)} of {len(main)} draws"
        out.append(f"its model did not learn{draws} ({first}" + ("; see the warnings" if len(unlearned) > 1 else "") + ")")
    if any(r.budget_s for r in main):
        out.append("time-budgeted runs: speedup compares throughput")
    busy = [r for r in main + row.base if contended(r)] if timing else []
    if busy:
        out.append(f"{len(busy)} of its timed runs ran on a busy host (contended), so its timings measure the host too")
    return out


def not_learned_warnings(records: list[Record]) -> list[str]:
    """One line per scored model that has not learned, with the reasons."""
    out = []
    for r in records:
        if r.status != "ok":
            continue
        for name, quality in (("", r.quality), (" (best cell)", r.quality_best_cell)):
            reasons = not_learned_reasons(quality) if quality is not None else []
            if reasons:
                out.append(f"{r.run_id}{name} has not learned: {'; '.join(reasons)}.")
    return out
