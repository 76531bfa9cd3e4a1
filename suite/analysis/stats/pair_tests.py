"""The two-sample tests a family of verdicts can use (:data:`TESTS`) and the one every report uses (:data:`TEST`):
Welch's t on the log values at the fewest draws' degrees of freedom, chosen by the error rates measured on the main
job's own per-seed residuals resampled through the procedure (``ci/resampled_rates.py``,
``reports/verdicts/resampled-error-rates.md``): at most 5 % of reports with any false claim, where Welch's t at
Welch-Satterthwaite's degrees of freedom made 6-7 %. Rank and exact permutation tests cannot reach a Holm-corrected
level at three or four draws a side (the smallest two-sided p of 4 against 4 is 2/70, about 0.029). Each test has its
two one-sided tests of equivalence within a margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
from scipy import special, stats

from .summary import Summary, common_scale, location_difference

RESAMPLES = 1999
"""Resamples of the permutation and bootstrap tests (the permutation test is exact below this many splits)."""


def welch_p(a: Summary, b: Summary, conservative: bool = False) -> float | None:
    """Two-sided p of Welch's t-test of two estimates on their scale (the log scale for positive quantities).

    Ratios carry every end's variance, with Welch-Satterthwaite's degrees of freedom (``conservative``: the fewest
    draws'). None where a term has one draw, or where neither side has any spread: draws that do not vary (one seed,
    repeated) are not a test, and a p of 0 would be a false verdict.
    """
    scaled = common_scale(a, b)
    d = location_difference(*scaled) if scaled is not None else None
    return None if d is None else float(2 * special.stdtr(d.df_conservative if conservative else d.df, -abs(d.value / d.se)))


def welch_fewest_p(a: Summary, b: Summary) -> float | None:
    """Two-sided p of Welch's t at the conservative degrees of freedom, the fewest draws' (:attr:`Difference.df_conservative`).

    Welch-Satterthwaite's df, estimated from four draws a side, can reach 6 and then understate the tails of a
    skewed or heavy-tailed spread; the real per-seed residuals of the main job, resampled through the procedure, made
    its false claims 6-7 % of reports (``reports/verdicts/resampled-error-rates.md``). At the fewest draws' df the
    test agrees with the intervals the report prints (:func:`critical_t`) and holds the level there.
    """
    return welch_p(a, b, conservative=True)


def equivalence_fewest_p(a: Summary, b: Summary, margin: float) -> float | None:
    """:func:`equivalence_p` at the conservative degrees of freedom (the fewest draws'), as :func:`welch_fewest_p`."""
    return equivalence_p(a, b, margin, conservative=True)


def equivalence_p(a: Summary, b: Summary, margin: float, conservative: bool = False) -> float | None:
    """p of the two one-sided tests (TOST, Welch's t on log values) that ``a`` and ``b`` are within ``margin``-fold.

    The null is a ratio of the two estimates at or beyond ``margin`` either way; the p is the larger of the two
    one-sided tests' (each at the margin), so a p below a level means the ratio's interval at twice that level lies
    inside [1/margin, margin]. None where either is not a log-scale quantity with spread at both ends.
    """
    d = location_difference(a, b) if a.log and b.log else None
    if d is None:
        return None
    bound, df = math.log(margin), d.df_conservative if conservative else d.df
    below = float(special.stdtr(df, -(d.value + bound) / d.se))  # H0: difference <= -log m
    above = float(special.stdtr(df, (d.value - bound) / d.se))  # H0: difference >= log m
    return max(below, above)


def _plain(a: Summary, b: Summary) -> tuple[np.ndarray, np.ndarray] | None:
    """The draws of two plain quantities on their common scale (None for ratios, or with one draw a side)."""
    scaled = common_scale(a, b)
    if scaled is None or len(a.terms) > 1 or len(b.terms) > 1 or a.n < 2 or b.n < 2:
        return None
    a, b = scaled
    return a._scaled(a.terms[0][0]), b._scaled(b.terms[0][0])


def welch_linear_p(a: Summary, b: Summary) -> float | None:
    """Welch's t on the raw values whatever the quantity (the habit the log scale replaced; measured for comparison)."""
    if len(a.terms) > 1 or len(b.terms) > 1:
        return None
    return welch_p(replace(a, fraction=True), replace(b, fraction=True))


def mann_whitney_p(a: Summary, b: Summary) -> float | None:
    """Two-sided p of Mann-Whitney's U (exact for small samples without ties)."""
    draws = _plain(a, b)
    if draws is None:
        return None
    return float(stats.mannwhitneyu(*draws, alternative="two-sided").pvalue)


def permutation_p(a: Summary, b: Summary) -> float | None:
    """Two-sided p of a permutation test of the difference of means on the common scale (exact up to :data:`RESAMPLES` splits)."""
    draws = _plain(a, b)
    if draws is None:
        return None
    result = stats.permutation_test(
        draws,
        lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="independent",
        vectorized=True,
        n_resamples=RESAMPLES,
        rng=np.random.default_rng(0),
    )
    return float(result.pvalue)


def bootstrap_p(a: Summary, b: Summary) -> float | None:
    """Two-sided p of a bootstrap-t test: Welch's t against its distribution over resamples of both sides shifted to one mean."""
    draws = _plain(a, b)
    if draws is None:
        return None
    x, y = draws
    observed = _welch_t(x[None, :], y[None, :])[0]
    if not math.isfinite(observed):
        return None
    pooled = np.concatenate([x, y]).mean()
    rng = np.random.default_rng(0)
    xs = rng.choice(x - x.mean() + pooled, size=(RESAMPLES, len(x)))
    ys = rng.choice(y - y.mean() + pooled, size=(RESAMPLES, len(y)))
    resampled = np.nan_to_num(_welch_t(xs, ys), nan=0.0)  # 0/0: both resamples without spread and equal
    return float((1 + np.sum(np.abs(resampled) >= abs(observed))) / (RESAMPLES + 1))


def _welch_t(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Welch's t of each row of ``x`` against the same row of ``y``."""
    se = np.sqrt(x.var(axis=1, ddof=1) / x.shape[1] + y.var(axis=1, ddof=1) / y.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        t: np.ndarray = (x.mean(axis=1) - y.mean(axis=1)) / se
    return t


@dataclass(frozen=True)
class Test:
    """A two-sample test the verdicts can use, and how a sentence names it."""

    name: str
    words: str
    p_value: Callable[[Summary, Summary], float | None]
    on_scale: bool = True
    """Whether it tests on the estimate's scale (then a sentence says "on log values" where that is the log scale)."""
    equivalence: Callable[[Summary, Summary, float], float | None] = equivalence_p
    """Its two one-sided tests of equivalence within a margin (the same statistic and degrees of freedom)."""


TESTS = {
    test.name: test
    for test in (
        Test("welch", "Welch's t", welch_p),
        Test("welch-fewest", "Welch's t at the fewest draws' degrees of freedom", welch_fewest_p, True, equivalence_fewest_p),
        Test("welch-linear", "Welch's t on raw values", welch_linear_p, on_scale=False),
        Test("mann-whitney", "Mann-Whitney's U", mann_whitney_p, on_scale=False),
        Test("permutation", "a permutation test of the means", permutation_p),
        Test("bootstrap", "a bootstrap-t test", bootstrap_p),
    )
}
"""The candidate tests (``ci/resampled_rates.py --tests`` measures any of them through the procedure)."""
TEST = "welch-fewest"
"""The test every report uses: Welch's t at the fewest draws' degrees of freedom, which holds 5 % on the main job's
resampled residuals where plain Welch's t does not (reports/verdicts/resampled-error-rates.md)."""
