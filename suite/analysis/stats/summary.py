"""Estimates over draws: every number the report compares is a :class:`Summary` over draws (seeds or runs), with its
interval.

Positive quantities are summarised and tested on the log scale (geometric mean, Student-t interval of the mean log),
so no bound is below zero and interval and verdict agree; fractions, and a positive quantity with a draw at or
below zero, keep the arithmetic mean. A ratio (speedup) is a difference of mean logs whose variance sums both ends'
(the delta method, exact on the log scale) at the fewest degrees of freedom of either end, so adding the P=1 end's
spread never narrows it; one draw at either end leaves the spread unknown: no interval and no test. What users
read: docs/reports.md (Statistics).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np
from scipy import special

ALPHA = 0.05
"""Family-wise significance level of every family of comparisons the report makes."""
CONFIDENCE = 0.95
"""Coverage of every interval the report prints."""


@dataclass(frozen=True)
class Draws:
    """Draws of one quantity (seeds for quality, runs for speed); ``label`` says what they are of (``P=1``)."""

    values: tuple[float, ...]
    label: str = ""

    @property
    def n(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Summary:
    """An estimate over draws: one quantity's centre, or a ratio of two (``terms``: draws and the sign of their mean log).

    ``fraction``: the quantity is a share in [0, 1], summarised by its arithmetic mean.
    ``factor``: a known constant the estimate is multiplied by (efficiency = speedup / P).
    """

    terms: tuple[tuple[Draws, int], ...]
    fraction: bool = False
    factor: float = 1.0

    @property
    def values(self) -> tuple[float, ...]:
        """The draws of the first term (the quantity itself, or a ratio's numerator)."""
        return self.terms[0][0].values

    @property
    def n(self) -> int:
        """Draws of the first term; :attr:`ns` has every term's."""
        return self.terms[0][0].n

    @property
    def ns(self) -> tuple[int, ...]:
        return tuple(draws.n for draws, _ in self.terms)

    @property
    def log(self) -> bool:
        """Whether the estimate is on the log scale: a positive quantity whose every draw is above zero."""
        return not self.fraction and all(v > 0 for draws, _ in self.terms for v in draws.values)

    @property
    def arithmetic_fallback(self) -> bool:
        """A positive quantity summarised by its arithmetic mean because a draw is at or below zero."""
        return not self.fraction and not self.log

    def _scaled(self, draws: Draws) -> np.ndarray:
        values = np.asarray(draws.values, dtype=float)
        return np.log(values) if self.log else values

    @property
    def location(self) -> float:
        """The estimate on its own scale: the signed sum of the terms' mean logs (or means), plus the factor's log."""
        total = sum(sign * float(np.mean(self._scaled(draws))) for draws, sign in self.terms)
        return total + math.log(self.factor) if self.log else total * self.factor

    @property
    def center(self) -> float:
        """The estimate: a geometric mean (or a ratio of two) on the log scale, else the arithmetic mean."""
        return math.exp(self.location) if self.log else self.location

    def variances(self) -> list[tuple[float, int]] | None:
        """Each term's variance of its mean on the estimate's scale, with its draws (None where a term has one draw)."""
        if any(draws.n < 2 for draws, _ in self.terms):
            return None
        scale = 1.0 if self.log else self.factor**2
        return [(scale * float(np.var(self._scaled(draws), ddof=1)) / draws.n, draws.n) for draws, _ in self.terms]

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95 % interval of the estimate (None where a term has one draw): on the log scale, exponentiated."""
        parts = self.variances()
        if parts is None:
            return None
        half = critical_t(parts) * math.sqrt(sum(v for v, _ in parts))
        lo, hi = self.location - half, self.location + half
        if self.log:
            return math.exp(lo), math.exp(hi)
        if self.fraction:  # a share lives in [0, 1]
            return max(lo, 0.0), min(hi, 1.0)
        return lo, hi  # the arithmetic fallback (a KID draw at or below zero): an unbiased estimate may be negative

    def scaled(self, factor: float) -> Summary:
        """The same estimate times a known constant (its interval scales with it)."""
        return replace(self, factor=self.factor * factor)

    def text(self, digits: int = 3) -> str:
        """``centre [lo, hi] (n=3)``; a ratio names each end's draws; no interval is said, never left out silently."""
        center = _round(self.center, digits)
        if len(self.terms) == 1:
            draws = f"n={self.n}" + (", arithmetic mean" if self.arithmetic_fallback and self.n > 1 else "")
        else:
            draws = "n=" + ", ".join(f"{d.n} at {d.label}" if d.label else str(d.n) for d, _ in self.terms)
        interval = self.interval
        if interval is None:
            return f"{center} ({draws})" if len(self.terms) == 1 else f"{center} ({draws}: no interval)"
        return f"{center} [{_round(interval[0], digits)}, {_round(interval[1], digits)}] ({draws})"


def critical_t(parts: Sequence[tuple[float, int]]) -> float:
    """Student's t quantile of :data:`CONFIDENCE` for an interval of a sum of ``parts`` (0 without spread).

    At the fewest degrees of freedom of any part (Satterthwaite's conservative bound), not Welch-Satterthwaite's:
    with 3 draws a side the latter can reach 4 and shrink the quantile from 4.3 to 2.8, so that a ratio's
    interval, which adds the P=1 end's spread, came out narrower than the P=2 end's alone. With the bound an
    interval that takes in one more source of spread is never narrower than without it.
    """
    total = sum(v for v, _ in parts)
    if total == 0:
        return 0.0
    return float(special.stdtrit(min(n for _, n in parts) - 1, 0.5 + CONFIDENCE / 2))


def welch_df(parts: Sequence[tuple[float, int]]) -> float:
    """Welch-Satterthwaite's degrees of freedom of a sum of independent means' variances (``(variance, draws)`` each)."""
    return sum(v for v, _ in parts) ** 2 / sum(v**2 / (n - 1) for v, n in parts)


def _round(value: float, digits: int) -> str:
    return np.format_float_positional(float(value), precision=digits, fractional=False, trim="-")


def _finite(values: Iterable[float | None]) -> tuple[float, ...]:
    return tuple(float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))


def summarise(values: Iterable[float | None], fraction: bool = False) -> Summary | None:
    """A :class:`Summary` of the finite values of one quantity (None when there are none).

    Positive quantities by default; ``fraction`` for shares in [0, 1] such as label accuracy.
    """
    kept = _finite(values)
    return Summary(((Draws(kept), 1),), fraction=fraction) if kept else None


def ratio(
    numerator: Iterable[float | None], denominator: Iterable[float | None], labels: tuple[str, str] = ("", "")
) -> Summary | None:
    """The ratio of the geometric means of two positive quantities' draws, with both ends' spread (None when a side is empty)."""
    top, bottom = _finite(numerator), _finite(denominator)
    if not top or not bottom or min(top + bottom) <= 0:
        return None
    return Summary(((Draws(top, labels[0]), 1), (Draws(bottom, labels[1]), -1)))


def common_scale(a: Summary, b: Summary) -> tuple[Summary, Summary] | None:
    """Both on the log scale where both are, else both on the arithmetic one (only for plain quantities)."""
    if a.log and b.log:
        return a, b
    if len(a.terms) > 1 or len(b.terms) > 1:
        return None
    return replace(a, fraction=True), replace(b, fraction=True)  # the arithmetic scale


@dataclass(frozen=True)
class Difference:
    """The difference of two estimates' locations on their scale, its standard error and Welch-Satterthwaite's df."""

    value: float
    se: float
    df: float
    fewest: int = 2
    """The fewest draws of any term: ``fewest - 1`` is the conservative degrees of freedom (:func:`critical_t`'s)."""

    @property
    def df_conservative(self) -> float:
        """Satterthwaite's conservative bound, the fewest draws' df: what the intervals take, and the calibrated tests."""
        return float(self.fewest - 1)


def location_difference(a: Summary, b: Summary) -> Difference | None:
    """``a``'s location minus ``b``'s with the variance of every term of both (None where a term has one draw, or
    where neither side has any spread)."""
    parts_a, parts_b = a.variances(), b.variances()
    if parts_a is None or parts_b is None:
        return None
    parts = parts_a + parts_b
    total = sum(v for v, _ in parts)
    if total == 0:
        return None
    return Difference(a.location - b.location, math.sqrt(total), welch_df(parts), min(n for _, n in parts))


def ratio_interval(a: Summary, b: Summary) -> tuple[float | None, float | None, float | None]:
    """``a / b`` of two log-scale estimates with its 95 % Welch interval (None where it cannot be told)."""
    if not (a.log and b.log):
        return None, None, None
    d = location_difference(a, b)
    if d is None:
        return math.exp(a.location - b.location), None, None
    half = float(special.stdtrit(d.df_conservative, 0.5 + CONFIDENCE / 2)) * d.se  # the test's df
    return math.exp(d.value), math.exp(d.value - half), math.exp(d.value + half)
