"""At what scale a verdict holds: the ranking at every point of the budget, and who was still improving at its end.

A verdict about a budget at which nothing has settled is a verdict about that budget. :func:`anytime` runs the final
verdict's family of tests at every curve point; :func:`last_stretch` tests, per system, whether its log score still
falls against log images over the last half of the curve (one-sided, at :data:`~suite.analysis.stats.summary.ALPHA`
per system, not corrected over systems, so that a verdict is rather labelled as holding at this budget only than
not), with its power for a 20 % fall: not finding an improvement is not "settled" unless that power is high. What
users read: docs/reports.md (At what scale a verdict holds).

Pure functions on curves: ``{system: {draw: [(position, value), ...]}}``; :func:`quality_scale` and
:func:`speedup_scale` build them from the headline's rows (their runs' records) for the findings.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np
from scipy import stats

from ...records.record import Record
from ...records.scored import CurvePoint
from .summary import ALPHA, Summary, ratio, summarise
from .verdicts import Family, compare_all

Curve = Sequence[tuple[float, float]]
"""(position, value) points of one draw: images trained (or seconds), and the score there."""
Curves = Mapping[str, Mapping[object, Curve]]
"""Per system, per draw (a seed), its curve."""
LAST_HALF = 0.5
"""The share of the budget whose curve points must agree with the final ranking for it to count as held."""


class Ranked(Protocol):
    """What the scale reads of a headline row (:class:`suite.analysis.headline.HeadlineRow`): its configuration's name,
    the runs it reports and its strong sweep's P = 1 runs."""

    @property
    def config(self) -> str: ...
    @property
    def main(self) -> list[Record]: ...
    @property
    def base(self) -> list[Record]: ...


FALL = 0.8
"""The fall over the last half whose detection power a trend states: a 20 % lower score at the end."""


@dataclass(frozen=True)
class Trend:
    """How one system's score moved over the last half of its curves: the slope of log score against log images."""

    system: str
    start: float
    """The first position of the last half (images or seconds)."""
    end: float
    change: Summary | None
    """The fitted ratio end / start over draws (geometric mean, interval); below 1 is a lower score."""
    p_value: float | None
    """One-sided t-test over draws that the slope is below zero (the score fell); None: not testable."""
    power: float | None = None
    """The test's power for a :data:`FALL` over the last half at the draws' own spread of slopes (None: no spread)."""
    points: int = 0
    """Curve points in the last half the slopes were fitted to."""

    @property
    def improving(self) -> bool:
        """Whether the score was found still falling at the end of the budget."""
        return self.p_value is not None and self.p_value < ALPHA

    def text(self) -> str:
        """``name 0.53x [0.4, 0.7] (p = 0.01; power 0.8 for a 20 % fall)``: the fitted change over the last half and its test."""
        if self.change is None:
            return f"{self.system} (no last half)"
        change = self.change.text()
        p = f"p = {self.p_value:.2g}" if self.p_value is not None else "not testable"
        power = f"; power {self.power:.2f} for a {100 - FALL * 100:.0f} % fall" if self.power is not None else ""
        return f"{self.system} {change}, {p}{power}"


def common_positions(curves: Curves) -> list[float]:
    """The positions every draw of every system has a point at, ascending."""
    sets = [{float(x) for x, _ in curve} for draws in curves.values() for curve in draws.values()]
    return sorted(set.intersection(*sets)) if sets else []


def _at(curve: Curve, position: float) -> float | None:
    values = [v for x, v in curve if float(x) == position and v is not None and math.isfinite(v)]
    return values[-1] if values else None


def _slope_power(spread: float, n: int, span: float) -> float | None:
    """Power of the one-sided t-test over ``n`` slopes with sample spread ``spread`` for a :data:`FALL` over ``span``
    (log end - log start): the noncentral t's tail past the test's critical value."""
    if n < 2 or spread <= 0 or span <= 0:
        return None
    shift = abs(math.log(FALL)) / span / (spread / math.sqrt(n))
    critical = float(stats.t.ppf(1 - ALPHA, n - 1))
    return float(stats.nct.sf(critical, n - 1, shift))


def last_stretch(system: str, draws: Mapping[object, Curve]) -> Trend | None:
    """The slope of ``system``'s log score against log position over the last half of its common curve points (at
    least two points), per draw, and the one-sided t-test over draws that it is below zero, with its power."""
    positions = common_positions({system: draws})
    if len(positions) < 2 or positions[0] <= 0:
        return None
    half = [x for x in positions if x >= LAST_HALF * positions[-1]]
    half = half if len(half) >= 2 else positions[-2:]
    span = math.log(half[-1]) - math.log(half[0])
    slopes = []
    for curve in draws.values():
        values = [_at(curve, x) for x in half]
        if all(v is not None and v > 0 for v in values):
            slopes.append(float(np.polyfit(np.log(half), np.log(np.asarray(values, dtype=float)), 1)[0]))
    if not slopes:
        return None
    change = summarise(math.exp(v * span) for v in slopes)
    p = power = None
    if len(slopes) > 1 and float(np.std(slopes)) > 0:
        p = float(stats.ttest_1samp(slopes, 0.0, alternative="less").pvalue)
        power = _slope_power(float(np.std(slopes, ddof=1)), len(slopes), span)
    return Trend(system, half[0], half[-1], change, p, power, len(half))


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
class BudgetAmount:
    """The equal budget a family's verdicts are about, as numbers: the smallest and largest over its runs (equal where
    every run had the same) and the unit, ``images`` (real training images per system) or ``seconds`` (of training per
    run)."""

    low: float
    high: float
    unit: str


@dataclass(frozen=True)
class Scale:
    """At what scale a family's verdict holds: the budget, the ranking over the budget, who was still improving."""

    budget: str
    """The budget in words: images per system and steps per GAN (or the training time)."""
    anytime: Anytime | None = None
    """The same family at every curve point (None: the runs have no common curve points to rank at)."""
    trends: tuple[Trend, ...] = ()
    """Each system's last stretch (empty for timing families, where "still improving" does not apply)."""
    amount: BudgetAmount | None = None
    """The budget as numbers (:func:`budget_amount`; None: no equal budget, each run's own steps or epochs)."""

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


def budget_amount(rows: Sequence[Ranked]) -> BudgetAmount | None:
    """The equal budget of the rows' runs as numbers: every run's ``train.budget_images`` (unit ``images``), else every
    run's ``train.budget_s`` (``seconds``); None where the runs had no equal budget (their own steps or epochs)."""
    runs: list[Record] = [r for row in rows for r in row.main]
    images = [float(r.budget_images) for r in runs if r.budget_images]
    seconds = [float(r.budget_s) for r in runs if r.budget_s]
    for values, unit in ((images, "images"), (seconds, "seconds")):
        if values and len(values) == len(runs):
            return BudgetAmount(min(values), max(values), unit)
    return None


def budget_scale(rows: Sequence[Ranked], anytime: Anytime | None = None, trends: tuple[Trend, ...] = ()) -> Scale:
    """A family's :class:`Scale` over ``rows``: its budget in words (:func:`budget_text`) and as numbers."""
    return Scale(budget_text(rows), anytime, trends, budget_amount(rows))


def budget_text(rows: Sequence[Ranked]) -> str:
    """The budget the rows' verdicts are about: training images per system (or seconds, or steps), and steps per GAN."""
    amount = budget_amount(rows)
    span = _span((amount.low, amount.high)) if amount is not None else ""
    if amount is not None and amount.unit == "images":
        budget = f"{span} training images per system"
    elif amount is not None:
        budget = f"{span} s of training per run"
    else:
        budget = "each run's own steps or epochs (no equal budget)"
    steps = ", ".join(f"{row.config} {_span(s for r in row.main for s in _gan_steps(r))}" for row in rows)
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


def quality_scale(rows: Sequence[Ranked], metric: str = "fid") -> Scale:
    """The scale of a quality family: the budget, the family at every curve point, each system's last stretch."""
    curves: Curves = {row.config: seed_curves(row.main, metric) for row in rows}
    ranked = curve_anytime(curves) if all(curves.values()) else None
    trends = tuple(t for name, draws in curves.items() if (t := last_stretch(name, draws)) is not None)
    return budget_scale(rows, ranked if ranked is not None and ranked.positions else None, trends)


def _clock_at(record: Record, images: float) -> float | None:
    clocks = [p.clock_s for p in record.curve or [] if p.images == images]
    return float(clocks[-1]) if clocks and clocks[-1] else None


def speedup_scale(rows: Sequence[Ranked], top: int) -> Scale:
    """The scale of a speedup family: the budget, and the speedup of the training clock at every common curve point."""
    ends: dict[str, tuple[list[Record], list[Record]]] = {}
    for row in rows:
        runs: list[Record] = row.main + row.base
        strong = [r for r in runs if r.scaling == "strong"]
        ends[row.config] = ([r for r in strong if r.procs == 1], [r for r in strong if r.procs == top])
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
    return budget_scale(rows, ranked)
