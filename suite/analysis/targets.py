"""Time to target per seed: whether every repeat of a seed reached the runs' quality target, when, and the interval
that carries the curve's spacing (the headline's ``time_to_target``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..records.record import Record
from ..records.scored import TimeToTarget
from .markdown import significant
from .stats.summary import Summary, summarise
from .systems import mean_of


@dataclass(frozen=True)
class SeedTarget:
    """A seed's time to target (:func:`targets_per_seed`)."""

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


def targets_per_seed(main: list[Record]) -> list[SeedTarget]:
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
                best=mean_of(t.best for t in targets),
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


def missed_text(targets: list[SeedTarget], reached: Summary | None) -> str | None:
    """Where some draws missed the target: how many reached it, and the best value the curves got to (None otherwise)."""
    if not targets or (reached is not None and reached.n == len(targets)):
        return None
    best = summarise(t.best for t in targets)
    return f"reached by {reached.n if reached else 0} of {len(targets)} draws" + (
        f"; best {best.text()}" if best is not None else ""
    )


def target_text(targets: list[SeedTarget], reached: Summary | None) -> str:
    """``centre [lo, hi] s (n=3; curve points ...)``: the interval with the curve's spacing in it (:func:`target_interval`)."""
    if reached is not None and reached.n == len(targets):
        interval = target_interval(targets, reached)
        if interval is None:  # no brackets recorded: the seeds' spread alone
            return f"{reached.text()} s"
        lo, hi = mean_of(t.clock_lo for t in targets) or 0.0, mean_of(t.clock_hi for t in targets) or 0.0
        return (  # rounded as Summary.text rounds
            f"{significant(reached.center)} [{significant(interval[0])}, {significant(interval[1])}] s (n={reached.n}; "
            f"curve points at {significant(lo)} and {significant(hi)} s bracket it)"
        )
    best = summarise(t.best for t in targets)
    got = f"reached by {reached.n if reached else 0} of {len(targets)} draws"
    return got + (f" (best {best.text()})" if best is not None else "")
