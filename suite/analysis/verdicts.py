"""Verdicts that survive a rerun: intervals over seeds or repeats, and tests before a winner is named.

A quality number from one training draw says little: the same settings give FIDs that differ
by a factor of three between seeds. So every number the report compares is a :class:`Summary`
over draws (mean, standard deviation, a 95 % Student-t interval), and a claim that one
configuration beats another is made only where :func:`rank` finds the difference significant:
Welch's t-test (unequal variances) of the best against each other candidate, at 5 % after
Holm's correction for the several comparisons. Welch's test rather than Mann-Whitney's U: with
three seeds a side, U's smallest two-sided p-value is 0.1, so it could never find a difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

ALPHA = 0.05
"""Significance level of every comparison the report makes."""
CONFIDENCE = 0.95
"""Coverage of every interval the report prints."""


@dataclass(frozen=True)
class Summary:
    """Values of one quantity over draws (seeds for quality, repeats for speed)."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def std(self) -> float | None:
        """Sample standard deviation (None below two values)."""
        return float(np.std(self.values, ddof=1)) if self.n > 1 else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95 % Student-t interval of the mean (None below two values)."""
        if self.n < 2 or self.std is None:
            return None
        from scipy import stats

        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, self.n - 1)) * self.std / math.sqrt(self.n)
        return self.mean - half, self.mean + half

    def text(self, digits: int = 3) -> str:
        """``mean [lo, hi] (n=3)``, or ``value (n=1)`` for one draw."""
        mean = _round(self.mean, digits)
        if self.interval is None:
            return f"{mean} (n=1)"
        lo, hi = self.interval
        return f"{mean} [{_round(lo, digits)}, {_round(hi, digits)}] (n={self.n})"


def _round(value: float, digits: int) -> str:
    return np.format_float_positional(float(value), precision=digits, fractional=False, trim="-")


def summarise(values: Iterable[float | None]) -> Summary | None:
    """A :class:`Summary` of the finite values (None when there are none)."""
    kept = tuple(float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    return Summary(kept) if kept else None


@dataclass(frozen=True)
class Comparison:
    """The best candidate against one other: Welch's t-test, Holm-adjusted."""

    other: str
    p_value: float | None
    """Two-sided p-value of Welch's t-test (None where a side has fewer than two draws)."""
    p_adjusted: float | None = None
    significant: bool = False


@dataclass(frozen=True)
class Ranking:
    """Which candidate is best on one quantity, and whether the data can tell."""

    best: str
    summaries: dict[str, Summary]
    comparisons: list[Comparison] = field(default_factory=list)

    @property
    def ties(self) -> list[str]:
        """Candidates not significantly worse than the best (including those that cannot be tested)."""
        return [c.other for c in self.comparisons if not c.significant]

    @property
    def decided(self) -> bool:
        """True when the best is significantly better than every other candidate."""
        return bool(self.comparisons) and not self.ties


def welch_p(a: Summary, b: Summary) -> float | None:
    """Two-sided p-value of Welch's t-test of two samples (None where a side has fewer than two values).

    Two samples that both have no spread at all cannot be tested (None): their draws are not
    independent (one seed, repeated) or the quantity does not vary, and a p of 0 would be a false verdict.
    """
    if a.n < 2 or b.n < 2 or (not a.std and not b.std):
        return None  # no spread on either side: nothing to test against (e.g. one seed, repeated)
    from scipy import stats

    result = stats.ttest_ind_from_stats(a.mean, a.std, a.n, b.mean, b.std, b.n, equal_var=False)
    return float(result.pvalue)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of several p-values (None stays None and counts as a test)."""
    order = sorted(range(len(p_values)), key=lambda i: (p_values[i] is None, p_values[i] or 0.0))
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        p = p_values[i]
        if p is None:
            continue
        running = max(running, min(1.0, (len(p_values) - rank) * p))
        adjusted[i] = running
    return adjusted


def rank(summaries: dict[str, Summary], lower_is_better: bool) -> Ranking | None:
    """The candidate with the best mean, tested against each other one (None without candidates)."""
    if not summaries:
        return None
    sign = 1 if lower_is_better else -1
    best = min(summaries, key=lambda name: sign * summaries[name].mean)
    others = [name for name in sorted(summaries) if name != best]
    raw = [welch_p(summaries[best], summaries[name]) for name in others]
    adjusted = holm(raw)
    comparisons = [Comparison(name, p, q, significant=q is not None and q < ALPHA) for name, p, q in zip(others, raw, adjusted)]
    return Ranking(best, summaries, comparisons)


def verdict(ranking: Ranking, what: str, digits: int = 3) -> str:
    """One sentence: the winner where the test says so, else "no significant difference" with the intervals."""
    best = ranking.summaries[ranking.best]
    if not ranking.comparisons:
        return f"{what}: only {ranking.best} was measured, {best.text(digits)}."
    if ranking.decided:
        worst_p = max(c.p_adjusted for c in ranking.comparisons if c.p_adjusted is not None)
        return (
            f"{what}: {ranking.best}, {best.text(digits)}, significantly better than every other "
            f"(Welch's t, Holm-adjusted p <= {worst_p:.2g})."
        )
    tied = ", ".join(
        f"{c.other} {ranking.summaries[c.other].text(digits)}" + ("" if c.p_adjusted is None else f" (p = {c.p_adjusted:.2g})")
        for c in ranking.comparisons
        if not c.significant
    )
    untestable = [c.other for c in ranking.comparisons if c.p_value is None]
    reason = f" (no test possible for {', '.join(untestable)}: one draw, or no spread)" if untestable else ""
    beaten = [c.other for c in ranking.comparisons if c.significant]
    beats = f"; {'both' if len(ranking.ties) == 1 else 'all'} significantly better than {', '.join(beaten)}" if beaten else ""
    return f"{what}: no significant difference between {ranking.best} {best.text(digits)} and {tied}{reason}{beats}."
