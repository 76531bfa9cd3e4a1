"""At what scale a verdict holds: the ranking at every point of the budget, and who was still improving at its end.

A verdict about a budget at which nothing has settled is a verdict about that budget. Two checks say
which it is, both from the curves the runs already record (quality, or the training clock, at equal
fractions of an images budget):

* **Anytime ranking** (:func:`anytime`): the same family of tests as the final verdict, run at every curve
  point; the ranking *held over the last half* when every point from half the budget on makes the same
  claims as the last one.
* **Still improving** (:func:`last_stretch`): per system, the change of its log score over the last
  stretch of the curve (the last two points), seed by seed; a one-sided paired t-test at
  :data:`~suite.analysis.verdicts.ALPHA` per system says "still improving" (a flat curve is called improving
  in at most 5 % of systems; not corrected over systems, so that a verdict is rather labelled as holding at
  this budget only than not). Not finding an improvement is not "settled": with three seeds only a
  consistent fall is found.

Pure functions on curves: ``{system: {draw: [(position, value), ...]}}``; the findings build them from records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy import stats

from .verdicts import ALPHA, Family, Summary, compare_all, summarise

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
