"""Speedup and efficiency of a sweep point against the sweep's P = 1 point: the one function the headline and
the scaling tables both read, so that a quantity is printed with one number everywhere.

Both ends are draws (runs; over seeds where the sweep ran several), so the estimate is a ratio of
geometric means with both ends' spread (:func:`suite.analysis.stats.summary.ratio`); a P = 1 point of
one run leaves the interval unknown, and the text says so.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ...records.record import Record
from .summary import Summary, ratio


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and bool(value)


def budgeted(runs: Sequence[Record]) -> bool:
    """Whether the runs trained for a fixed time (``train.budget_s``): their windows are equally long, their work is not."""
    return any(_given(r.budget_s) for r in runs)


def speedup(base: Sequence[Record], runs: Sequence[Record], procs: int) -> Summary | None:
    """S(P) = T(1)/T(P) of the training windows (``train_s``) of ``base`` (the P = 1 runs) and ``runs`` (at ``procs``).

    For time-budgeted runs, whose windows are all as long, the ratio of images per second
    instead. None without runs at either end, or at P = 1 (where S is 1 by definition).
    """
    if procs == 1 or not base or not runs:
        return None
    labels = (f"P={procs}", "P=1")
    if budgeted([*base, *runs]):
        return ratio([r.images_per_s for r in runs], [r.images_per_s for r in base], labels)
    return ratio([r.train_s for r in base], [r.train_s for r in runs], labels[::-1])


def efficiency(base: Sequence[Record], runs: Sequence[Record], procs: int, scaling: str) -> Summary | None:
    """E(P): strong scaling S(P)/P; weak scaling T(1)/T(P) (time-budgeted: per-rank images/s at P over P = 1's)."""
    s = speedup(base, runs, procs)
    if s is None:
        return None
    return s if scaling == "weak" and not budgeted([*base, *runs]) else s.scaled(1 / procs)


def work_efficiency(base: Sequence[Record], runs: Sequence[Record], procs: int) -> Summary | None:
    """Weak scaling's work-normalised efficiency: per-rank images/s at P over P = 1's (fair when the work per rank differs)."""
    if procs == 1 or not base or not runs:
        return None
    return ratio([r.images_per_s_per_rank for r in runs], [r.images_per_s_per_rank for r in base], (f"P={procs}", "P=1"))
