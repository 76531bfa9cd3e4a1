"""Paired A/B verdicts for the regression gate (:mod:`suite.tools.gate`): a test on per-pair differences.

The gate runs the baseline (A) and the candidate (B) alternately on one host, so the host's speed that day cancels
in each pair; each metric gives one difference per pair, positive when B is worse. FAIL: Wilcoxon's signed-rank
test significant *and* the mean beyond the margin; PASS: the one-sided Student-t upper bound below the margin;
INCONCLUSIVE otherwise (:attr:`PairedVerdict.more_pairs`); a metric that does not vary is decided on its value.
The rules as users read them: docs/benchmarks-and-ci.md (The test). The distribution-free bound from the order
statistics was tried for PASS first: below 8 pairs it is the largest difference, so one noisy pair kept an
unchanged revision undecided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..metric_table import Metric

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
VERDICTS = (PASS, FAIL, INCONCLUSIVE)


@dataclass(frozen=True)
class PairedVerdict:
    """One metric's verdict over the pairs (differences oriented: positive is worse for B)."""

    verdict: str
    n: int
    mean: float
    """Mean of the per-pair differences."""
    upper: float
    """One-sided upper confidence bound of the mean difference."""
    p_value: float | None
    """Wilcoxon signed-rank, one-sided (B worse); None where the differences are all equal."""
    margin: float
    more_pairs: int | None = None
    """INCONCLUSIVE: about how many more pairs would decide (None where that cannot be told)."""


def mean_upper_bound(differences: Sequence[float] | np.ndarray, alpha: float) -> float:
    """The one-sided ``1 - alpha`` Student-t upper bound of the differences' mean (at least two values)."""
    from scipy import stats

    d = np.asarray(differences, dtype=float)
    return float(d.mean() + stats.t.ppf(1 - alpha, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))


def paired_verdict(differences: Sequence[float], margin: float, alpha: float = 0.05) -> PairedVerdict:
    """PASS, FAIL or INCONCLUSIVE for per-pair ``differences`` (positive: B worse) against ``margin`` > 0."""
    if margin <= 0:
        raise ValueError(f"margin must be positive, got {margin}")
    d = np.asarray(differences, dtype=float)
    n = len(d)
    if n == 0 or not np.all(np.isfinite(d)):
        raise ValueError("differences must be finite and not empty")
    mean = float(d.mean())
    if np.all(d == d[0]):
        verdict = FAIL if d[0] > margin else PASS
        return PairedVerdict(verdict, n, mean, float(d[0]), None, margin)
    from scipy import stats

    p_value = float(stats.wilcoxon(d, alternative="greater", zero_method="wilcox").pvalue) if np.any(d != 0) else 1.0
    upper = mean_upper_bound(d, alpha)
    if p_value < alpha and mean > margin:
        return PairedVerdict(FAIL, n, mean, upper, p_value, margin)
    if upper < margin:
        return PairedVerdict(PASS, n, mean, upper, p_value, margin)
    return PairedVerdict(INCONCLUSIVE, n, mean, upper, p_value, margin, _more_pairs(d, margin, mean, alpha))


def _more_pairs(d: np.ndarray, margin: float, mean: float, alpha: float) -> int | None:
    """Pairs to add until the bound separates the mean from the margin, if the mean and spread stay as they are."""
    from scipy import stats

    spread, gap = float(np.std(d, ddof=1)), abs(margin - mean)
    if spread == 0 or gap == 0:
        return None
    needed = math.ceil((float(stats.norm.ppf(1 - alpha)) * spread / gap) ** 2)
    return max(needed - len(d), 1)


def difference(metric: Metric, a: float, b: float) -> float:
    """The pair's difference, positive when B is worse: a log ratio of times, or a count's relative change."""
    if metric.count:
        return (b - a) / a if a else (0.0 if b == a else math.inf)
    return math.log(a / b) if metric.higher_is_better else math.log(b / a)


def threshold_margin(metric: Metric, threshold_pct: float) -> float:
    """The practical threshold (percent worse for B) on :func:`difference`'s scale."""
    return threshold_pct / 100 if metric.count else math.log(1 + threshold_pct / 100)


def change_pct(metric: Metric, value: float) -> float:
    """A difference as percent worse for B (slower, or more bytes)."""
    return 100 * value if metric.count else 100 * (math.exp(value) - 1)


def overall(verdicts: Sequence[str]) -> str:
    """The gate's verdict: FAIL if any metric fails, else INCONCLUSIVE if any is, else PASS."""
    if FAIL in verdicts:
        return FAIL
    return INCONCLUSIVE if INCONCLUSIVE in verdicts else PASS
