"""What a run could have told: the power of its own tests, from its own spread.

"Not distinguishable" is only informative next to what the run could have found. For a pair a family
did not separate, :func:`detectable_ratio` is the smallest ratio of the two estimates that the report's test
(:data:`~.pair_tests.TEST`) would have found with :data:`POWER` probability, and :func:`seeds_needed` how many draws a side a given
ratio (:data:`REFERENCE_RATIO`) would need. Both use the pair's own per-draw variances on the log scale and
the family's strictest level, Holm's first step (``ALPHA`` over the tested pairs): a conservative reading,
as a pair tested later in Holm's order meets a looser level.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special

from .summary import ALPHA, Summary
from .verdicts import Family, Pair

POWER = 0.8
"""The power the detectable ratio is stated at."""
REFERENCE_RATIO = 1.5
"""The difference whose needed draws the report states (a 1.5-fold FID or speedup)."""
MOST_DRAWS = 1000
"""Above this many draws a side the needed draws are stated as "more than"."""


SIMULATIONS = 20000
"""Simulated reruns behind each power figure (fixed seed: the same run gives the same figures)."""


@functools.lru_cache(maxsize=256)
def _reruns(per_draw: tuple[float, ...], ns: tuple[int, ...], level: float) -> tuple[np.ndarray, np.ndarray]:
    """The simulated reruns of Welch's test, apart from the true difference: per rerun the estimate's noise and the
    distance it must exceed (the rerun's critical t at ``level`` times its standard error).

    Each rerun draws the terms' means and sample variances (normal and chi-square), then the test as the report runs
    it (:data:`~.pair_tests.TEST`, Welch's t at the fewest draws' degrees of freedom). Drawn once per spread and level
    (fixed seed), so every difference tried meets the same reruns.
    """
    rng = np.random.default_rng(20261127)
    true_se = math.sqrt(sum(v / n for v, n in zip(per_draw, ns)))
    parts = [v * rng.chisquare(n - 1, SIMULATIONS) / (n - 1) / n for v, n in zip(per_draw, ns)]
    variance = np.sum(parts, axis=0)
    df = np.full(SIMULATIONS, float(min(ns) - 1))
    noise = true_se * rng.standard_normal(SIMULATIONS)
    # two-sided p < level  <=>  |t| > t_(1 - level/2, df)
    return noise, -special.stdtrit(df, level / 2) * np.sqrt(variance)


def _welch_power(delta: float, per_draw: Sequence[float], ns: Sequence[int], level: float) -> float:
    """The share of reruns in which Welch's test at ``level`` finds a true difference ``delta`` of mean logs.

    ``per_draw``: each term's variance of one draw's log, taken as the truth; ``ns`` its draws (:func:`_reruns`).
    """
    noise, distance = _reruns(tuple(float(v) for v in per_draw), tuple(int(n) for n in ns), float(level))
    return float(np.mean(np.abs(delta + noise) > distance))


def _log_terms(a: Summary, b: Summary) -> tuple[list[float], list[int]] | None:
    """Each term's per-draw variance of the log and its draws, for both estimates (None unless both are log-scale
    quantities with spread)."""
    if not (a.log and b.log):
        return None
    parts_a, parts_b = a.variances(), b.variances()
    if parts_a is None or parts_b is None:
        return None
    parts = parts_a + parts_b
    if sum(v for v, _ in parts) <= 0:
        return None
    return [v * n for v, n in parts], [n for _, n in parts]


def family_level(family: Family) -> float:
    """The strictest level a pair of ``family`` is tested at: Holm's first step, the family's level (:data:`ALPHA`,
    or a sequential look's share of it) over the tested pairs."""
    level = min((p.alpha for p in family.pairs), default=ALPHA)
    return level / max(len(family.tested), 1)


def detectable_ratio(a: Summary, b: Summary, level: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest ratio (>= 1) between ``a`` and ``b`` that Welch's test at ``level`` finds with ``power``, at
    their own spread (simulated reruns, :func:`_welch_power`); ``inf`` where no ratio below 10^6 would do.

    None where a side has one draw or no spread (no test ran, so nothing could have been found).
    """
    terms = _log_terms(a, b)
    if terms is None:
        return None
    per_draw, ns = terms
    low, high = 0.0, math.sqrt(sum(v / n for v, n in zip(per_draw, ns)))
    while _welch_power(high, per_draw, ns, level) < power:
        low, high = high, 2 * high
        if high > math.log(1e6):
            return math.inf
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if _welch_power(middle, per_draw, ns, level) < power else (low, middle)
    return math.exp(high)


def seeds_needed(a: Summary, b: Summary, level: float = ALPHA, ratio: float = REFERENCE_RATIO) -> int | None:
    """Draws a side for Welch's test at ``level`` to find a ``ratio``-fold difference with :data:`POWER`.

    The spread is each term's own per-draw variance of the log (a ratio such as a speedup has two a side), the same
    number of draws in every term; None where it is unknown. Returns ``MOST_DRAWS + 1`` where even
    :data:`MOST_DRAWS` a side would not do.
    """
    terms = _log_terms(a, b)
    if terms is None:
        return None
    per_draw, _ = terms
    delta = math.log(ratio)

    def enough(n: int) -> bool:
        return _welch_power(delta, per_draw, [n] * len(per_draw), level) >= POWER

    if not enough(MOST_DRAWS):
        return MOST_DRAWS + 1
    low, high = 1, 2  # enough(low) is false (one draw is no test), enough(high) to be found
    while not enough(high):
        low, high = high, min(2 * high, MOST_DRAWS)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if not enough(middle) else (low, middle)
    return high


@dataclass(frozen=True)
class PairPower:
    """What one pair found not distinguishable could have shown."""

    pair: Pair
    detectable: float | None
    """The smallest ratio found with :data:`POWER` at the family's strictest level (None: not testable)."""
    seeds: int | None
    """Draws a side a :data:`REFERENCE_RATIO`-fold difference would need."""

    def text(self) -> str:
        """``A vs B: 2.1x detectable, 1.5x needs 7 seeds``."""
        if self.detectable is None or self.seeds is None:
            return f"{self.pair.first} vs {self.pair.second}: no spread to tell"
        detectable = "no ratio detectable" if math.isinf(self.detectable) else f"{self.detectable:.2g}x detectable"
        seeds = f"more than {MOST_DRAWS}" if self.seeds > MOST_DRAWS else str(self.seeds)
        return f"{self.pair.first} vs {self.pair.second}: {detectable}, {REFERENCE_RATIO:g}x needs {seeds} seeds"


def undistinguished_power(family: Family) -> list[PairPower]:
    """Per tested pair the family left undecided (neither separated nor found equivalent), the ratio it could have
    detected and the seeds 1.5-fold needs."""
    level = family_level(family)
    out = []
    for pair in family.tested:
        if pair.decided:
            continue
        a, b = family.summaries[pair.first], family.summaries[pair.second]
        out.append(PairPower(pair, detectable_ratio(a, b, level), seeds_needed(a, b, level)))
    return out
