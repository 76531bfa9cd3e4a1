"""The report's first screen: one row per strategy, the checks the suite verifies, and the
findings the numbers support, each with the caveat that applies.

Everything here reads the run records (and the scaling tables built from them); nothing is
measured again. A row describes a *configuration* (strategy / loss / engine [label]) at the
largest process count it ran; speedup and efficiency come from its scaling sweeps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Protocol, cast

import numpy as np
import pandas as pd
from scipy import special

from ..config.registry import STRATEGIES
from ..config.sections import MetricsConfig
from ..config.sweep import sweep_text
from ..measure.metrics.signals import not_learned
from ..records.record import CurvePoint, Quality, Record, TimeToTarget
from .estimand import DEFINITION, equivalence_margin, in_seed_order, late_score, seed_policy
from .markdown import cell
from .stats.power import PairPower, undistinguished_power
from .stats.sequential import Plan, Sequential, sequential_family
from .stats.settling import Scale, budget_text, quality_scale, speedup_scale
from .stats.speedup import speedup
from .stats.verdicts import CONFIDENCE, Family, Summary, compare_all, location_difference, sentence, summarise


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
        and invariant(record.procs, len(record.dataset.classes or []) if record.dataset else 0)
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


def ruler_text(q: Quality) -> str:
    """What a score is comparable under: network, the first 12 hex digits of its hash, sample count, the
    classes scored against where they are not all of the dataset's, and the protocol where it is not the default."""
    digest = (q.ruler_sha256 or "")[:12]
    classes = q.classes or []
    subset = f", classes {','.join(map(str, classes))}" if classes and len(classes) < (q.num_classes or 0) else ""
    protocol = q.protocol or MetricsConfig.protocol  # records from before protocols scored as the default does
    named = f", protocol {protocol}" if protocol != MetricsConfig.protocol else ""
    return cell(f"{q.features}" + (f" {digest}" if digest else "") + f", n={q.n}{subset}{named}")  # a record's words


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


def headline(records: list[Record], scaling: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per configuration: the numbers a reader decides with, each over its seeds or repeats.

    ``scaling`` holds the report's strong and weak scaling tables (:func:`suite.analysis.report.tables.scaling_table`).
    Every number is ``estimate [95 % interval] (n=draws)`` (:meth:`suite.analysis.stats.verdicts.Summary.text`:
    geometric means of positive quantities); the hidden ``_*`` columns keep the summaries the findings test with.
    """
    by_config: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.status == "ok":
            by_config[config_name(r)].append(r)
    rows = []
    for name, runs in sorted(by_config.items()):
        main, top = main_runs(runs)
        speedup = strong_speedup(runs, top)
        train_s = summarise(r.train_s for r in main)
        efficiency = speedup.scaled(1 / top) if speedup is not None else None
        row: dict[str, Any] = {
            "strategy": name,
            "P": ",".join(str(p) for p in sorted({procs_of(r) for r in runs})),
            "seeds": len({r.seed for r in main}),
            "train_s": _text(train_s),
            "speedup": _text(speedup),
            "efficiency": _text(efficiency),
            "weak_efficiency": None,
            "comm_share": _mean(r.telemetry.comm_share if r.telemetry is not None else None for r in main),
            "images_per_s": _text(summarise(r.images_per_s for r in main)),
            "time_to_target": None,
            "fid_late": None,
            "fid": None,
            "fid_at_equal_time": None,
            "kid": None,
            "label_acc": None,
            "quality": None,
            "checks": "; ".join(checks(runs, records)),
        }
        table = scaling.get("weak")
        if table is not None and not table.empty:
            part = table[table["config"].str.startswith(name)]
            part = part[part["procs"] == part["procs"].max()] if not part.empty else part
            if not part.empty and part["procs"].iloc[0] > 1:
                work, plain = part["_efficiency_work"].iloc[0], part["_efficiency"].iloc[0]
                weak = work if isinstance(work, Summary) else plain if isinstance(plain, Summary) else None
                row["weak_efficiency"], row["_weak_efficiency"] = _text(weak), weak
        qualities = [r.quality for r in main if r.quality is not None]
        summaries = {
            metric: summarise(per_seed(main, _quality_reader(metric)), fraction=metric == "label_acc")
            for metric in ("fid", "kid", "label_acc")
        }
        late_draws = in_seed_order(main, late_score)
        summaries["fid_late"] = summarise(late_draws)
        row["_fid_late_draws"] = late_draws
        if qualities:
            row["fid_late"] = _text(summaries["fid_late"])
            row["fid"], row["kid"] = _text(summaries["fid"]), _text(summaries["kid"])
            row["label_acc"] = _text(summaries["label_acc"], 2)
            row["quality"] = "; ".join(sorted({ruler_text(q) for q in qualities}))
        targets = _targets_per_seed(main)
        reached = summarise(t.clock_s for t in targets if t.reached)
        if targets:
            row["time_to_target"] = _target_text(targets, reached)
        row.update(
            _top=top,
            _procs=sorted({procs_of(r) for r in runs}),
            _train_s=train_s,
            _efficiency=efficiency,
            _weak_efficiency=row.get("_weak_efficiency"),
            _targets=len(targets),
            _targets_reached=reached.n if reached is not None else 0,
            _main=main,
            _base=[r for r in runs if r.scaling == "strong" and r.procs == 1 and top > 1],
            _speedup=speedup,
            _time_to_target=reached if targets and reached and reached.n == len(targets) else None,
            _target_missed=_missed(targets, reached),
            _images_per_s=summarise(r.images_per_s for r in main),
        )
        row.update({f"_{metric}": summary for metric, summary in summaries.items()})  # _fid, _kid, _label_acc, _fid_late
        rows.append(row)
    _add_equal_time_quality(rows)
    return pd.DataFrame(rows)


TIMING = ("time to target", "speedup")
"""The quantities of the findings that are timings (a busy host weakens them)."""
BUSY_HOST = "‡"
"""The mark of a timing verdict tag of a configuration some of whose runs were timed on a busy host."""
BUDGET_BOUND = "†"
"""The mark of a verdict tag that holds at this budget only (a system in its claims was still improving)."""
EQUAL_BUDGET = "FID at equal budget"
"""The quantity of the equal-budget finding, as the verdict column names it."""
EQUAL_TIME_SLACK = 1.05
"""A curve point counts as "at" the common time when its clock is at most this factor past it."""


def budget_axis(rows: list[dict[str, Any]]) -> str:
    """What the equal-budget view holds equal: the real training ``images`` where every run compared trained to
    ``train.budget_images`` (its curve points sit at equal fractions of it), else the window's seconds (``clock_s``)."""
    runs: list[Record] = [r for row in rows for r in row["_main"]]
    images = all(r.budget_images and all(p.images is not None for p in r.curve or []) for r in runs)
    return "images" if runs and images else "clock_s"


def _at(point: CurvePoint, field: str) -> Any:
    """A curve point's ``field`` (``clock_s``, ``images``, ``fid``, ...), None where it has none."""
    return getattr(point, field, None)


def equal_time(rows: list[dict[str, Any]], axis: str = "clock_s") -> float | None:
    """The longest training time (or ``axis``) every configuration's quality curves reach: the shortest final curve point."""
    ends: list[float] = [max(_at(p, axis) for p in r.curve) for row in rows for r in row["_main"] if r.curve]
    return min(ends) if ends and all(any(r.curve for r in row["_main"]) for row in rows) else None


def quality_at(record: Record, clock: float, metric: str = "fid", axis: str = "clock_s") -> tuple[float | None, float | None]:
    """(score, its clock) of the last curve point of ``record`` at or before ``clock`` (within :data:`EQUAL_TIME_SLACK`),
    or at or before that many images with ``axis="images"``."""
    points = [p for p in record.curve or [] if _at(p, axis) <= clock * EQUAL_TIME_SLACK and _at(p, metric) is not None]
    if not points:
        return None, None
    last = max(points, key=lambda p: _at(p, axis))
    return _at(last, metric), _at(last, axis)


def _add_equal_time_quality(rows: list[dict[str, Any]]) -> None:
    """Paper 002's framing, quality under a fixed budget: each configuration's FID at the same training time, or at
    the same real training images where every run had an images budget."""
    axis = budget_axis(rows)
    clock = equal_time(rows, axis) if len(rows) > 1 else None
    unit = "images" if axis == "images" else "s"
    for row in rows:
        row["fid_at_equal_time"], row["_fid_at_equal_time"] = None, None
        if clock is None:
            continue
        points = [quality_at(r, clock, axis=axis) for r in row["_main"]]
        values = per_seed(row["_main"], lambda r: quality_at(r, clock, axis=axis)[0])
        summary = summarise(values)
        if summary is not None and summary.n == len(values):
            at = max(c for _, c in points if c is not None)
            row["fid_at_equal_time"] = f"{summary.text()} at {at:.0f} {unit}"
            row["_fid_at_equal_time"] = summary
    for row in rows:
        row["_equal_time"], row["_equal_axis"] = clock, axis


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


def _caveats(row: dict[str, Any], records: list[Record], scaling: dict[str, pd.DataFrame], timing: bool = False) -> list[str]:
    """What weakens a finding about one configuration (``timing``: of a timing family, which a busy host weakens)."""
    out = []
    main: list[Record] = row["_main"]
    if any(r.oversubscribed for r in main):
        out.append(f"its P={row['_top']} runs oversubscribe the cores")
    for kind, table in scaling.items():
        part = table[table["config"].str.startswith(row["strategy"])] if not table.empty else table
        if not part.empty and len({t for value in part["threads_per_rank"] for t in str(value).split(",")}) > 1:
            out.append(f"threads per rank differ across its {kind} sweep")
    unlearned = [reasons for r in main if r.quality is not None and (reasons := not_learned_reasons(r.quality))]
    if unlearned:
        first = "; ".join(unlearned[0])
        draws = "" if len(main) == 1 else f" in {len(unlearned)} of {len(main)} draws"
        out.append(f"its model did not learn{draws} ({first}" + ("; see the warnings" if len(unlearned) > 1 else "") + ")")
    if any(r.budget_s for r in main):
        out.append("time-budgeted runs: speedup compares throughput")
    busy = [r for r in main + row.get("_base", []) if contended(r)] if timing else []
    if busy:
        out.append(f"{len(busy)} of its timed runs ran on a busy host (contended), so its timings measure the host too")
    return out


@dataclass(frozen=True)
class Finding:
    """One sentence under the headline; ``family`` is the family of tests it states (None: a sentence that tests nothing)."""

    text: str
    quantity: str
    """What the family ranks, in a few words (``FID``, ``speedup``): the verdict column's name for it."""
    family: Family | None = None
    what: str = ""
    """What the sentence ranks, as it opens (``Final quality (FID, ruler)``)."""
    scale: Scale | None = None
    """At what budget the family's verdict holds, and whether it settled (None: a sentence that tests nothing)."""

    @property
    def power(self) -> list[PairPower]:
        """Per pair not distinguishable, what this run could have detected (from its own spread)."""
        return undistinguished_power(self.family) if self.family is not None else []

    def budget_bound(self, name: str) -> bool:
        """Whether what the family claims of ``name`` holds at this budget only: it, or a system it was found better
        or worse than, was still improving at the end."""
        if self.family is None or self.scale is None:
            return False
        improving = set(self.scale.improving)
        partners = {p.second for p in self.family.claims if p.first == name} | {
            p.first for p in self.family.claims if p.second == name
        }
        return bool(partners) and (name in improving or bool(partners & improving))


def _ranked(
    rows: list[dict[str, Any]],
    column: str,
    lower_is_better: bool,
    what: str,
    quantity: str,
    records: list[Record],
    scaling: dict[str, pd.DataFrame],
    family: Family | None = None,
    shown: str | None = None,
) -> Finding | None:
    """The verdict of every pair of the rows' ``column`` summaries (or the ``family`` given), with the caveats of each
    candidate found better."""
    if family is None:
        candidates = {row["strategy"]: row[column] for row in rows if row.get(column) is not None}
        family = compare_all(candidates, lower_is_better)
    if family is None:
        return None
    text = sentence(family, what, shown={row["strategy"]: row[shown] for row in rows if row.get(shown)} if shown else None)
    named = [family.order[0]] if len(family.order) == 1 else list(dict.fromkeys(p.first for p in family.claims))
    for name in named:
        caveats = _caveats(next(row for row in rows if row["strategy"] == name), records, scaling, quantity in TIMING)
        if caveats:
            text += f" Caveat for {name}: {', '.join(caveats)}."
    return Finding(text, quantity, family, what)


def _scored(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if row["_fid"] is not None or row["_kid"] is not None]


def _late_unlearned(row: dict[str, Any]) -> bool:
    """Whether some draw of ``row`` has no late FID, or one no better than its untrained generator's FID."""
    for r in row["_main"]:
        late, untrained = late_score(r), r.quality.untrained_fid if r.quality is not None else None
        if late is None or (untrained is not None and late >= untrained):
            return True
    return False


def excluded_from_quality(rows: list[dict[str, Any]]) -> set[str]:
    """The headline rows the quality verdicts leave out as not learned in some draw. Where they compare the late FID
    (every scored row has one), a draw is judged on it: a late FID no better than its untrained generator's; a final
    model that collapsed after learning (one moment, said in the warnings) does not take its system out of a
    comparison of the late half of training. Else on the final model's signals (:func:`unlearned_configs`)."""
    scored = _scored(rows)
    if scored and all(row.get("_fid_late") is not None for row in scored):
        return {row["strategy"] for row in scored if _late_unlearned(row)}
    return unlearned_configs(rows)


def scored_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The headline rows the quality verdicts compare: scored, and learned in every draw (:func:`excluded_from_quality`)."""
    excluded = excluded_from_quality(rows)
    return [row for row in _scored(rows) if row["strategy"] not in excluded]


def late_rows(scored: list[dict[str, Any]]) -> bool:
    """Whether the scored rows are compared on the late FID: one ruler, and a late FID for every row."""
    return bool(scored) and len({row["quality"] for row in scored}) == 1 and all(row["_fid_late"] is not None for row in scored)


def sequential_quality(records: list[Record]) -> Sequential | None:
    """The late-FID verdicts of ``records`` as the report takes them (:func:`quality_procedure`; None where the
    systems are not compared on the late FID): ``suite run`` decides each next block of sequential seeds with it."""
    rows: list[dict[str, Any]] = headline(records, {}).to_dict("records")
    scored = scored_rows(rows)
    return quality_procedure(scored, records) if late_rows(scored) else None


LATE_FID = "late FID"
"""The quantity of the quality verdicts (:mod:`suite.analysis.estimand`), as the verdict column names it."""


def quality_procedure(rows: list[dict[str, Any]], records: list[Record]) -> Sequential | None:
    """The late-FID verdicts of ``rows`` as the run decided them: sequential seeds replayed where the runs had a
    policy (:mod:`suite.analysis.stats.sequential`), else one look at every seed; every pair better, equivalent
    within the runs' ``metrics.equivalence_margin`` or undecided. ``suite run`` decides its next block with it."""
    main = [r for row in rows for r in row["_main"]]
    policy = seed_policy(main)
    if policy is None:
        draws = {row["strategy"]: row["_fid_late_draws"] for row in rows}
        plan = Plan.fixed(max(len(d) for d in draws.values()) if draws else 1)
    else:  # by seed position: a seed that ran but failed is None in its place, so later seeds keep theirs
        plan, draws = Plan(*policy), {row["strategy"]: _positions(row, records) for row in rows}
    return sequential_family(draws, plan, True, equivalence_margin(main))


def _positions(row: dict[str, Any], records: list[Record]) -> list[float | None]:
    """A row's late FIDs by seed (0, 1, ...), None for a seed whose run at the row's P did not finish ok, up to the
    last seed that ran at all."""
    late = {r.seed: late_score(r) for r in row["_main"]}
    tried = [r.seed for r in records if config_name(r) == row["strategy"] and r.procs == row["_top"] and r.seed is not None]
    return [late.get(seed) for seed in range(max(tried, default=-1) + 1)]


def _late_quality(rows: list[dict[str, Any]], ruler: str, records: list[Record], scaling: dict[str, pd.DataFrame]) -> Finding:
    """The quality verdicts: every pair of systems on the late FID (:func:`quality_procedure`)."""
    procedure = quality_procedure(rows, records)
    assert procedure is not None, "rows with late FIDs make a family"
    what = f"Quality ({LATE_FID}, {ruler})"
    said = _ranked(rows, "_fid_late", True, what, LATE_FID, records, scaling, family=procedure.family)
    assert said is not None
    definition = f" The estimand: {DEFINITION}; the final model's FID is the `fid` column."
    unfinished = (
        f" The sequential seeds are unfinished: {', '.join(procedure.continuing)} would train another block (a run "
        "stopped early: `suite run` again continues)."
        if procedure.continuing
        else ""
    )
    return replace(said, text=said.text + unfinished + definition)


def findings(table: pd.DataFrame, records: list[Record], scaling: dict[str, pd.DataFrame]) -> list[str]:
    """A few sentences stating what the headline numbers support, each with its caveats (:func:`tested_findings`)."""
    return [finding.text for finding in tested_findings(table, records, scaling)]


def tested_findings(table: pd.DataFrame, records: list[Record], scaling: dict[str, pd.DataFrame]) -> list[Finding]:
    """The headline's findings, each a sentence and the family of tests behind it.

    Each tested finding is one family (:func:`suite.analysis.stats.verdicts.compare_all`): every pair
    of configurations on one quantity, over their draws (seeds for quality and time to quality,
    runs at both ends for speedup), Holm-corrected together. Its sentence gives every estimate, says which
    configuration is better than which where the test found it, and that the other pairs are not
    distinguishable; nothing is inferred from one pair to another.
    """
    if table.empty:
        return []
    rows: list[dict[str, Any]] = table.to_dict("records")
    out: list[Finding] = []
    target = next((r.time_to_target for r in records if r.status == "ok" and r.time_to_target is not None), None)
    if target is not None:
        goal = f"{target.target:g}" if target.target is not None else "its target"
        metric = str(target.metric or "the score").upper()
        what = f"Time to {metric} <= {goal} ({cell(target.features)}, n={target.n}), seconds of training"
        said = _ranked(rows, "_time_to_target", True, what, "time to target", records, scaling, shown="time_to_target")
        missed = [f"{row['strategy']} ({row['_target_missed']})" for row in rows if isinstance(row["_target_missed"], str)]
        if said is None:
            out.append(
                Finding(
                    f"No strategy reached {cast(str, target.metric).upper()} <= {target.target:g} in every draw.",
                    "time to target",
                )
            )
        else:
            missing = f" Not in every draw: {', '.join(missed)}." if missed else ""
            out.append(Finding(said.text + missing, said.quantity, said.family, said.what, Scale(budget_text(rows))))
    unlearned = excluded_from_quality(rows)
    scored = scored_rows(rows)
    rulers = {row["quality"] for row in scored}
    if late_rows(scored):
        said = _late_quality(scored, next(iter(rulers)), records, scaling)
        out.append(replace(said, scale=quality_scale(scored)))
    elif scored and len(rulers) == 1:
        metric = "_fid" if all(row["_fid"] is not None for row in scored) else "_kid"
        what = f"Final quality ({metric[1:].upper()}, {next(iter(rulers))})"
        said = _ranked(scored, metric, True, what, metric[1:].upper(), records, scaling)
        if said:
            out.append(replace(said, scale=quality_scale(scored, metric[1:].replace("kid", "kid_mean"))))
    elif len(rulers) > 1:
        out.append(
            Finding("Final qualities were measured with different rulers or sample counts and are not compared.", "quality")
        )
    if unlearned:
        out.append(
            Finding(
                "Left out of the quality comparisons, not learned in some draw (the final model's signals in the "
                "warnings; on the late FID: a draw whose late FID is no better than its untrained generator's, or that "
                f"has fewer than two curve points in the last half): {', '.join(sorted(unlearned))}.",
                "quality",
            )
        )
    at_time = [row for row in rows if row.get("_fid_at_equal_time") is not None and row["strategy"] not in unlearned]
    # at an equal images budget the FID at its last point is the final model's, one moment of a GAN that may still
    # oscillate: the late FID above is the verdict, the final FID a column beside it; equal time stays a family
    moment = late_rows(scored) and bool(rows) and rows[0]["_equal_axis"] == "images"
    if len(at_time) > 1 and len(rulers) == 1 and not moment:
        if rows[0]["_equal_axis"] == "images":
            budget = f"an equal images budget (FID at the last curve point by {rows[0]['_equal_time']:.0f} images"
        else:
            budget = f"equal training time (FID at the last curve point by {rows[0]['_equal_time']:.0f} s"
        what = f"Quality at {budget}, {next(iter(rulers))})"
        said = _ranked(at_time, "_fid_at_equal_time", True, what, EQUAL_BUDGET, records, scaling)
        if said:
            out.append(replace(said, scale=quality_scale(at_time)))
    scaled = [row for row in rows if row["_speedup"] is not None]
    if scaled:
        top = max(row["_top"] for row in scaled)
        at_top = [row for row in scaled if row["_top"] == top]
        said = _ranked(at_top, "_speedup", False, f"Strong-scaling speedup at P={top}", "speedup", records, scaling)
        if said:
            out.append(replace(said, scale=speedup_scale(at_top, top)))
    return out


def unlearned_configs(rows: list[dict[str, Any]]) -> set[str]:
    """The headline rows (configurations) with a model that has not learned in some draw."""
    return {
        row["strategy"] for row in rows if any(r.quality is not None and not_learned_reasons(r.quality) for r in row["_main"])
    }


def verdicts(
    found: list[Finding], names: Iterable[str], unlearned: Iterable[str] = (), timed: dict[str, list[Record]] | None = None
) -> dict[str, str]:
    """Per configuration, what the tested findings say of it in a few words: the verdict column of the headline.

    ``best Q`` where the family found it better than every other candidate on Q, ``worst Q`` where every
    other was found better, ``Q beats k`` where it was found better than k others (those found better than
    it say so on their own rows), ``Q behind k`` where it beats none; a family that repeats an earlier one
    (:func:`repeats`) is said once. A tag whose claims involve a system still improving at the end of the budget
    ends :data:`BUDGET_BOUND`: it holds at this budget only (:meth:`Finding.budget_bound`). A timing tag of a
    configuration with a run in ``timed`` (its runs, by name) timed on a busy host ends :data:`BUSY_HOST`.
    """
    timed = timed or {}
    kept = [f for f, again in zip(found, repeats(found)) if f.family is not None and not again]
    out = {}
    for name in names:
        tags = ["not learned"] if name in set(unlearned) else []
        tested = False
        for finding in kept:
            quantity, family = finding.quantity, finding.family
            assert family is not None
            if name not in family.order:
                continue
            tested = tested or bool(family.tested)
            others = len(family.order) - 1
            wins = sum(p.first == name for p in family.claims)
            losses = sum(p.second == name for p in family.claims)
            if others and wins == others:
                tag = f"best {quantity}"
            elif others and losses == others:
                tag = f"worst {quantity}"
            elif wins:
                tag = f"{quantity} beats {wins}"
            elif losses:
                tag = f"{quantity} behind {losses}"
            else:
                tag = ""
            same = sum(name in (p.first, p.second) for p in family.equivalences)
            if same and family.margin is not None:
                tag += (", " if tag else f"{quantity} ") + f"≈ {same}"
            if not tag:
                continue
            busy = quantity in TIMING and any(contended(r) for r in timed.get(name, []))
            tags.append(tag + (BUDGET_BOUND if finding.budget_bound(name) else "") + (BUSY_HOST if busy else ""))
        out[name] = "; ".join(tags) or ("no difference found" if tested else "not tested")
    return out


def repeats(found: list[Finding]) -> list[bool]:
    """Per finding, whether it is the equal-budget quality and repeats an earlier family: the same candidates and the
    same pairs found different (the budget ended where training ended)."""
    seen = []
    out = []
    for finding in found:
        family = finding.family
        key = (tuple(sorted(family.order)), sorted((p.first, p.second) for p in family.claims)) if family else None
        out.append(finding.quantity == EQUAL_BUDGET and key in seen)
        seen.append(key)
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


FINDINGS_COLUMNS = (
    "family",
    "estimand",
    "budget",
    "system_a",
    "system_b",
    "verdict",
    "ratio",
    "ratio_lo",
    "ratio_hi",
    "p_adjusted",
    "p_equivalence_adjusted",
    "margin",
    "level",
    "look",
    "seeds_a",
    "seeds_b",
    "budget_bound",
)
"""The columns of ``findings.csv``: one row per pair of every tested family."""


def _ratio_interval(a: Summary, b: Summary) -> tuple[float | None, float | None, float | None]:
    """``a / b`` of two log-scale estimates with its 95 % Welch interval (None where it cannot be told)."""
    if not (a.log and b.log):
        return None, None, None
    d = location_difference(a, b)
    if d is None:
        return math.exp(a.location - b.location), None, None
    half = float(special.stdtrit(d.df, 0.5 + CONFIDENCE / 2)) * d.se
    return math.exp(d.value), math.exp(d.value - half), math.exp(d.value + half)


def findings_table(found: list[Finding]) -> pd.DataFrame:
    """Every pair's verdict as a row (:data:`FINDINGS_COLUMNS`), so that tools read the verdicts without the prose.

    ``system_a`` has the better estimate; ``verdict`` is ``a better``, ``equivalent`` (within ``margin``-fold),
    ``undecided`` or ``not testable``; ``ratio`` is a's estimate over b's with its 95 % interval; ``level`` the
    family-wise level the pair was decided at (a sequential look's share), ``look`` the look that decided it;
    ``budget_bound``: a system of the pair was still improving at the end of the budget.
    """
    rows = []
    for finding, again in zip(found, repeats(found)):
        family = finding.family
        if family is None or again:
            continue
        improving = set(finding.scale.improving) if finding.scale is not None else set()
        budget = finding.scale.budget.split(";")[0] if finding.scale is not None else None
        for pair in family.pairs:
            a, b = pair.estimates or (family.summaries[pair.first], family.summaries[pair.second])
            ratio, lo, hi = _ratio_interval(a, b)
            verdict = "not testable" if pair.p_value is None else "a better" if pair.significant else pair.verdict
            rows.append(
                {
                    "family": finding.quantity,
                    "estimand": finding.what,
                    "budget": budget,
                    "system_a": pair.first,
                    "system_b": pair.second,
                    "verdict": verdict,
                    "ratio": ratio,
                    "ratio_lo": lo,
                    "ratio_hi": hi,
                    "p_adjusted": pair.p_adjusted,
                    "p_equivalence_adjusted": pair.p_equivalence_adjusted,
                    "margin": family.margin,
                    "level": pair.alpha,
                    "look": pair.look,
                    "seeds_a": pair.seeds[0],
                    "seeds_b": pair.seeds[1],
                    "budget_bound": bool({pair.first, pair.second} & improving),
                }
            )
    frame = pd.DataFrame(rows, columns=list(FINDINGS_COLUMNS))
    return frame.astype({"look": "Int64", "seeds_a": "Int64", "seeds_b": "Int64", "margin": "float64"})
