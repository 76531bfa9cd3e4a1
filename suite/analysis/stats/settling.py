"""At what scale a verdict holds: the ranking at every point of the budget, and who was still improving at its end.

A verdict about a budget at which nothing has settled is a verdict about that budget. Two checks say
which it is, both from the curves the runs already record (quality, or the training clock, at equal
fractions of an images budget):

* **Anytime ranking** (:func:`anytime`): the same family of tests as the final verdict, run at every curve
  point; the ranking *held over the last half* when every point from half the budget on makes the same
  claims as the last one.
* **Still improving** (:func:`last_stretch`): per system, the change of its log score over the last
  stretch of the curve (the last two points), seed by seed; a one-sided paired t-test at
  :data:`~suite.analysis.stats.verdicts.ALPHA` per system says "still improving" (a flat curve is called improving
  in at most 5 % of systems; not corrected over systems, so that a verdict is rather labelled as holding at
  this budget only than not). Not finding an improvement is not "settled": with three seeds only a
  consistent fall is found.

Pure functions on curves: ``{system: {draw: [(position, value), ...]}}``; :func:`quality_scale` and
:func:`speedup_scale` build them from the headline's rows (their runs' records) for the findings.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from scipy import stats

from ...records.record import CurvePoint, Record
from .verdicts import ALPHA, Family, Summary, compare_all, ratio, summarise

Curve = Sequence[tuple[float, float]]
"""(position, value) points of one draw: images trained (or seconds), and the score there."""
Curves = Mapping[str, Mapping[object, Curve]]
"""Per system, per draw (a seed), its curve."""
LAST_HALF = 0.5
"""The share of the budget whose curve points must agree with the final ranking for it to count as held."""


@dataclass(frozen=True)
class Trend:
    """How one system's score moved over the last stretch of its curves."""

    system: str
    start: float
    """The position of the point before the last (images or seconds)."""
    end: float
    change: Summary | None
    """The ratio last / previous over draws (geometric mean, interval); below 1 is a lower score."""
    p_value: float | None
    """One-sided paired t-test that the score fell (lower is better), on log values; None: not testable."""

    @property
    def improving(self) -> bool:
        """Whether the score was found still falling at the end of the budget."""
        return self.p_value is not None and self.p_value < ALPHA

    def text(self) -> str:
        """``name 0.53x [0.4, 0.7] (p = 0.01)``: the change over the last stretch and its test."""
        if self.change is None:
            return f"{self.system} (no last stretch)"
        change = self.change.text()
        p = f"p = {self.p_value:.2g}" if self.p_value is not None else "not testable"
        return f"{self.system} {change}, {p}"


def common_positions(curves: Curves) -> list[float]:
    """The positions every draw of every system has a point at, ascending."""
    sets = [{float(x) for x, _ in curve} for draws in curves.values() for curve in draws.values()]
    return sorted(set.intersection(*sets)) if sets else []


def _at(curve: Curve, position: float) -> float | None:
    values = [v for x, v in curve if float(x) == position and v is not None and math.isfinite(v)]
    return values[-1] if values else None


def last_stretch(system: str, draws: Mapping[object, Curve]) -> Trend | None:
    """The change of ``system``'s score between its last two common curve points, over its draws, and its test."""
    positions = common_positions({system: draws})
    if len(positions) < 2:
        return None
    start, end = positions[-2], positions[-1]
    logs = []
    for curve in draws.values():
        before, after = _at(curve, start), _at(curve, end)
        if before and after and before > 0 and after > 0:
            logs.append(math.log(after / before))
    if not logs:
        return None
    change = summarise(math.exp(v) for v in logs)
    p = None
    if len(logs) > 1 and float(np.std(logs)) > 0:
        p = float(stats.ttest_1samp(logs, 0.0, alternative="less").pvalue)
    return Trend(system, start, end, change, p)


def claims_of(family: Family | None) -> frozenset[tuple[str, str]]:
    """The pairs a family found different, as (better, worse)."""
    return frozenset((p.first, p.second) for p in family.claims) if family is not None else frozenset()


@dataclass(frozen=True)
class Anytime:
    """One family of tests run at every curve point of the budget."""

    positions: list[float]
    families: list[Family | None]

    @property
    def last_half(self) -> list[tuple[float, Family | None]]:
        """The points from :data:`LAST_HALF` of the budget on, with their families."""
        if not self.positions:
            return []
        end = self.positions[-1]
        return [(x, f) for x, f in zip(self.positions, self.families) if x >= LAST_HALF * end]

    @property
    def held(self) -> bool | None:
        """Whether every point of the last half made the final point's claims (None with fewer than two such points)."""
        half = self.last_half
        if len(half) < 2:
            return None
        final = claims_of(half[-1][1])
        return all(claims_of(f) == final for _, f in half)

    def changes(self) -> list[str]:
        """Where a point of the last half claimed otherwise than the end: ``at 2560: A beat B, not C beat D``."""
        half = self.last_half
        if not half:
            return []
        final = claims_of(half[-1][1])
        out = []
        for x, family in half[:-1]:
            there = claims_of(family)
            if there == final:
                continue
            gained = [f"{a} beat {b}" for a, b in sorted(there - final)]
            lost = [f"not {a} beat {b}" for a, b in sorted(final - there)]
            out.append(f"at {x:,.0f}: " + ", ".join(gained + lost))
        return out


def anytime(
    positions: Sequence[float], summaries_at: Callable[[float], Mapping[str, Summary | None]], lower_is_better: bool = True
) -> Anytime:
    """The family of every pair of systems, Holm-corrected, at every position (``summaries_at`` gives each system's
    estimate there; a point where a system has none is left untested)."""
    families = []
    for x in positions:
        summaries = summaries_at(x)
        kept = {name: s for name, s in summaries.items() if s is not None}
        families.append(compare_all(kept, lower_is_better) if kept and len(kept) == len(summaries) else None)
    return Anytime(list(positions), families)


def curve_anytime(curves: Curves, lower_is_better: bool = True) -> Anytime:
    """:func:`anytime` over per-draw curves of one score: each system's summary over its draws at every common point."""

    def summaries_at(x: float) -> dict[str, Summary | None]:
        out = {}
        for system, draws in curves.items():
            summary = summarise(_at(curve, x) for curve in draws.values())
            out[system] = summary if summary is not None and summary.n == len(draws) else None
        return out

    return anytime(common_positions(curves), summaries_at, lower_is_better)


def below_p(values: Sequence[float | None], reference: float) -> float | None:
    """One-sided p that the draws' geometric mean is below ``reference`` (a t-test on log values; None: not testable).

    Used to ask whether a model learned: its FIDs over seeds against its untrained generator's.
    """
    logs = [math.log(v / reference) for v in values if v is not None and math.isfinite(v) and v > 0]
    if reference <= 0 or len(logs) < 2:
        return None
    if float(np.std(logs)) == 0:  # no spread: the t statistic's limit, every draw on one side
        return 0.0 if logs[0] < 0 else 1.0
    return float(stats.ttest_1samp(logs, 0.0, alternative="less").pvalue)


# --- the scale of a family of the report, from its headline rows ---------------------------------------------


@dataclass(frozen=True)
class Scale:
    """At what scale a family's verdict holds: the budget, the ranking over the budget, who was still improving."""

    budget: str
    """The budget in words: images per system and steps per GAN (or the training time)."""
    anytime: Anytime | None = None
    """The same family at every curve point (None: the runs have no common curve points to rank at)."""
    trends: tuple[Trend, ...] = ()
    """Each system's last stretch (empty for timing families, where "still improving" does not apply)."""

    @property
    def improving(self) -> list[str]:
        """The systems found still improving at the end of the budget."""
        return [t.system for t in self.trends if t.improving]


def _gan_steps(record: Record) -> list[int]:
    """The generator steps each GAN of a run took (one per class GAN, per cell, or the one GAN's)."""
    steps = record.steps_per_gan if record.steps_per_gan is not None else record.generator_steps
    if isinstance(steps, dict):
        return [int(v) for v in steps.values() if isinstance(v, (int, float))]
    return [int(steps)] if isinstance(steps, (int, float)) else []


def _span(values: Iterable[float]) -> str:
    kept = sorted(set(values))
    if not kept:
        return "not recorded"
    return f"{kept[0]:,.0f}" if len(kept) == 1 else f"{kept[0]:,.0f}-{kept[-1]:,.0f}"


def budget_text(rows: list[dict[str, Any]]) -> str:
    """The budget the rows' verdicts are about: training images per system (or seconds, or steps), and steps per GAN."""
    runs: list[Record] = [r for row in rows for r in row["_main"]]
    images = [r.budget_images for r in runs if r.budget_images]
    seconds = [r.budget_s for r in runs if r.budget_s]
    if images and len(images) == len(runs):
        budget = f"{_span(images)} training images per system"
    elif seconds and len(seconds) == len(runs):
        budget = f"{_span(seconds)} s of training per run"
    else:
        budget = "each run's own steps or epochs (no equal budget)"
    steps = ", ".join(f"{row['strategy']} {_span(s for r in row['_main'] for s in _gan_steps(r))}" for row in rows)
    return f"{budget}; generator steps per GAN: {steps}"


def _score(point: CurvePoint, metric: str) -> float | None:
    """A curve point's ``metric`` (``fid``, ``kid_mean``, ``is_mean``), None where it has none."""
    value = getattr(point, metric)
    return None if value is None else float(value)


def seed_curves(records: Iterable[Record], metric: str = "fid") -> dict[object, list[tuple[float, float]]]:
    """Per seed, the (real training images, score) points of its records' curves (seeds without one left out)."""
    draws: dict[object, list[tuple[float, float]]] = defaultdict(list)
    for r in records:
        for point in r.curve or []:
            if point.images is not None and (score := _score(point, metric)) is not None:
                draws[r.seed].append((float(point.images), score))
    return dict(draws)


def quality_curves(rows: list[dict[str, Any]], metric: str = "fid") -> Curves:
    """Per configuration, per seed, its (real training images, score) curve points: the curves the scale is read on."""
    return {row["strategy"]: seed_curves(row["_main"], metric) for row in rows}


def quality_scale(rows: list[dict[str, Any]], metric: str = "fid") -> Scale:
    """The scale of a quality family: the budget, the family at every curve point, each system's last stretch."""
    curves = quality_curves(rows, metric)
    ranked = curve_anytime(curves) if all(curves.values()) else None
    trends = tuple(t for name, draws in curves.items() if (t := last_stretch(name, draws)) is not None)
    return Scale(budget_text(rows), ranked if ranked is not None and ranked.positions else None, trends)


def _clock_at(record: Record, images: float) -> float | None:
    clocks = [p.clock_s for p in record.curve or [] if p.images == images]
    return float(clocks[-1]) if clocks and clocks[-1] else None


def speedup_scale(rows: list[dict[str, Any]], top: int) -> Scale:
    """The scale of a speedup family: the budget, and the speedup of the training clock at every common curve point."""
    ends: dict[str, tuple[list[Record], list[Record]]] = {}
    for row in rows:
        runs: list[Record] = row["_main"] + row.get("_base", [])
        strong = [r for r in runs if r.scaling == "strong"]
        ends[row["strategy"]] = ([r for r in strong if r.procs == 1], [r for r in strong if r.procs == top])
    curves: dict[str, dict[object, list[tuple[float, float]]]] = {
        name: {i: [(float(p.images), 1.0) for p in r.curve or [] if p.images is not None] for i, r in enumerate(base + at_top)}
        for name, (base, at_top) in ends.items()
    }
    positions = common_positions(curves) if all(curves.values()) else []

    def summaries_at(x: float) -> dict[str, Summary | None]:
        return {
            name: ratio([_clock_at(r, x) for r in base], [_clock_at(r, x) for r in at_top], ("P=1", f"P={top}"))
            for name, (base, at_top) in ends.items()
        }

    ranked = anytime(positions, summaries_at, lower_is_better=False) if positions else None
    return Scale(budget_text(rows), ranked)
