"""Verdicts that survive a rerun: estimates with intervals over draws, and a claim only where a test was run.

A quality number from one training draw says little: the same settings give FIDs that differ
between seeds by 5 to 15 %, and times that differ between runs by as much. So every number the
report compares is a :class:`Summary` over draws, and every sentence that says one
configuration is better than another is a test that was run (:func:`compare_all`).

**Scale.** Positive quantities (FID, KID, IS, times, images/s, speedup) are summarised on the
log scale: the geometric mean, with the Student-t interval of the mean log exponentiated, so
no bound is ever below zero, and they are tested on the same scale, so interval and verdict
agree. Fractions (label accuracy) keep the arithmetic mean, its interval clipped to [0, 1]; a
positive quantity with a draw at or below zero (an unbiased KID can be) falls back to the same
and says so.

**Ratios.** A speedup T(1)/T(P) is the difference of two mean logs; its variance is the sum of
both ends' (the delta method, exact on the log scale); its interval takes the fewest degrees of
freedom of either end (so adding the P=1 end's spread never narrows it), and so does its test (:data:`TEST`).
Efficiency is the speedup over P. One draw at either end leaves the
spread unknown: no interval and no test, never T(1) taken as exact.

**Claims.** For one quantity, all pairs of candidates form one family of tests, Holm-corrected
together at :data:`ALPHA`; a pair whose adjusted p is below it is a claim, every other pair is
"not distinguishable", and nothing is inferred transitively. The test is :data:`TEST`, Welch's t on the
log values at the fewest draws' degrees of freedom, chosen by the error rates measured on the main job's own
per-seed residuals resampled through the procedure (``ci/resampled_rates.py``,
``reports/verdicts/resampled-error-rates.md``): at most 5 % of reports with any false claim, where Welch's t at
Welch-Satterthwaite's degrees of freedom made 6-7 %. Rank and exact permutation tests cannot reach a Holm-corrected
level at three or four draws a side (the smallest two-sided p of 4 against 4 is 2/70, about 0.029).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Callable, Iterable, Sequence

import numpy as np
from scipy import special, stats

ALPHA = 0.05
"""Family-wise significance level of every family of comparisons the report makes."""
CONFIDENCE = 0.95
"""Coverage of every interval the report prints."""
RESAMPLES = 1999
"""Resamples of the permutation and bootstrap tests (the permutation test is exact below this many splits)."""


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


# --- tests of two estimates -----------------------------------------------------------------------------------


def _common_scale(a: Summary, b: Summary) -> tuple[Summary, Summary] | None:
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


def welch_p(a: Summary, b: Summary) -> float | None:
    """Two-sided p of Welch's t-test of two estimates on their scale (the log scale for positive quantities).

    Ratios carry every end's variance, with Welch-Satterthwaite's degrees of freedom. None where
    a term has one draw, or where neither side has any spread: draws that do not vary (one seed,
    repeated) are not a test, and a p of 0 would be a false verdict.
    """
    scaled = _common_scale(a, b)
    if scaled is None:
        return None
    d = location_difference(*scaled)
    return None if d is None else float(2 * special.stdtr(d.df, -abs(d.value / d.se)))


def welch_fewest_p(a: Summary, b: Summary) -> float | None:
    """Two-sided p of Welch's t at the conservative degrees of freedom, the fewest draws' (:attr:`Difference.df_conservative`).

    Welch-Satterthwaite's df, estimated from four draws a side, can reach 6 and then understate the tails of a
    skewed or heavy-tailed spread; the real per-seed residuals of the main job, resampled through the procedure, made
    its false claims 6-7 % of reports (``reports/verdicts/resampled-error-rates.md``). At the fewest draws' df the
    test agrees with the intervals the report prints (:func:`critical_t`) and holds the level there.
    """
    scaled = _common_scale(a, b)
    if scaled is None:
        return None
    d = location_difference(*scaled)
    return None if d is None else float(2 * special.stdtr(d.df_conservative, -abs(d.value / d.se)))


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
    scaled = _common_scale(a, b)
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


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment over the tested p-values (None: not tested, stays None and is not in the family)."""
    tested = [i for i, p in enumerate(p_values) if p is not None]
    order = sorted(tested, key=lambda i: p_values[i] or 0.0)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(tested) - rank) * (p_values[i] or 0.0)))
        adjusted[i] = running
    return adjusted


def holm_shaffer(hypotheses: Sequence[tuple[int, float | None]], alpha: float = ALPHA) -> list[float | None]:
    """Holm's step-down over hypotheses grouped by pair, of which at most one per pair can be true (Shaffer's count).

    ``hypotheses``: ``(pair index, p)`` each. A pair's "equal" and "not within the margin" are disjoint nulls, so at
    step ``i`` at most as many nulls can be true as there are pairs with a hypothesis not yet rejected: the p of
    step ``i`` is multiplied by that count instead of Holm's count of the hypotheses left. Returns the adjusted p
    (step-down monotone; None where the p is None), each compared with ``alpha`` by the caller. The family-wise
    error stays at most ``alpha``: the first true null rejected meets a level of at most ``alpha`` over the number
    of true nulls (Shaffer 1986, S1).
    """
    tested = [i for i, (_, p) in enumerate(hypotheses) if p is not None]
    order = sorted(tested, key=lambda i: hypotheses[i][1] or 0.0)
    remaining: dict[int, int] = {}
    for i in tested:
        remaining[hypotheses[i][0]] = remaining.get(hypotheses[i][0], 0) + 1
    adjusted: list[float | None] = [None] * len(hypotheses)
    running = 0.0
    for i in order:
        pair, p = hypotheses[i][0], hypotheses[i][1] or 0.0
        running = max(running, min(1.0, len(remaining) * p))
        adjusted[i] = running
        remaining[pair] -= 1
        if not remaining[pair]:
            del remaining[pair]
    return adjusted


# --- families of comparisons -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """Two candidates, ``first`` the one with the better estimate, and their test."""

    first: str
    second: str
    p_value: float | None
    """The test's two-sided p (None: not testable, one draw or no spread)."""
    p_adjusted: float | None = None
    """Holm-adjusted over the family's tested pairs."""
    p_equivalence: float | None = None
    """The two one-sided tests' p that the pair is within the family's margin (None: no margin, or not testable)."""
    p_equivalence_adjusted: float | None = None
    """Adjusted with the pair's difference test (:func:`holm_shaffer`)."""
    alpha: float = ALPHA
    """The level the pair was decided at (a sequential family's share of :data:`ALPHA` for its look)."""
    look: int = 1
    """The look of a sequential family (:mod:`.sequential`) that decided the pair, else its last."""
    seeds: tuple[int, int] = (0, 0)
    """Draws of ``first`` and ``second`` when it was decided."""
    estimates: tuple[Summary, Summary] | None = None
    """The estimates of ``first`` and ``second`` it was decided on (a sequential family's decided pair keeps them)."""

    @property
    def significant(self) -> bool:
        return self.p_adjusted is not None and self.p_adjusted < self.alpha

    @property
    def equivalent(self) -> bool:
        """Found within the family's margin (and not found different)."""
        return not self.significant and self.p_equivalence_adjusted is not None and self.p_equivalence_adjusted < self.alpha

    @property
    def decided(self) -> bool:
        return self.significant or self.equivalent

    @property
    def verdict(self) -> str:
        """``better`` (``first`` is), ``equivalent`` or ``undecided``."""
        return "better" if self.significant else "equivalent" if self.equivalent else "undecided"


@dataclass(frozen=True)
class Family:
    """Every pair of candidates on one quantity, tested together: the claims the data support, and the rest."""

    summaries: dict[str, Summary]
    order: list[str]
    """The candidates, best estimate first."""
    pairs: list[Pair] = field(default_factory=list)
    test: str = TEST
    margin: float | None = None
    """The equivalence margin (``m``: within ``m``-fold either way), None where the family tests differences only."""
    looks: int = 1
    """Looks of a sequential family (its :data:`ALPHA` is spent equally over them), else 1."""

    @property
    def claims(self) -> list[Pair]:
        """The pairs found different: ``first`` is better than ``second``."""
        return [p for p in self.pairs if p.significant]

    @property
    def tested(self) -> list[Pair]:
        return [p for p in self.pairs if p.p_value is not None]

    @property
    def untestable(self) -> list[Pair]:
        return [p for p in self.pairs if p.p_value is None]

    @property
    def equivalences(self) -> list[Pair]:
        """The pairs found within the margin."""
        return [p for p in self.pairs if p.equivalent]

    @property
    def undecided(self) -> list[Pair]:
        """The tested pairs found neither different nor (with a margin) equivalent."""
        return [p for p in self.tested if not p.decided]

    def better(self, a: str, b: str) -> bool:
        """Whether the family claims ``a`` better than ``b``."""
        return any(p.first == a and p.second == b for p in self.claims)


def compare_all(
    summaries: dict[str, Summary],
    lower_is_better: bool,
    test: str = TEST,
    margin: float | None = None,
    alpha: float = ALPHA,
) -> Family | None:
    """All pairs of candidates tested with ``test``, Holm-corrected together at ``alpha`` (None without candidates).

    With a ``margin`` every pair also has the two one-sided tests of equivalence within ``margin``-fold
    (:func:`equivalence_p`), and both hypotheses of every pair are corrected together (:func:`holm_shaffer`): a pair
    ends better, equivalent or undecided.
    """
    if not summaries:
        return None
    sign = 1 if lower_is_better else -1
    order = sorted(summaries, key=lambda name: (sign * summaries[name].center, name))
    p_value = TESTS[test].p_value
    pairs = [
        Pair(a, b, p_value(summaries[a], summaries[b]), alpha=alpha, seeds=(summaries[a].n, summaries[b].n))
        for a, b in combinations(order, 2)
    ]
    if margin is None:
        adjusted = holm([p.p_value for p in pairs])
        return Family(summaries, order, [replace(p, p_adjusted=q) for p, q in zip(pairs, adjusted)], test)
    equivalence = TESTS[test].equivalence
    pairs = [replace(p, p_equivalence=equivalence(summaries[p.first], summaries[p.second], margin)) for p in pairs]
    both = holm_shaffer([(i, p.p_value) for i, p in enumerate(pairs)] + [(i, p.p_equivalence) for i, p in enumerate(pairs)])
    k = len(pairs)
    pairs = [replace(p, p_adjusted=both[i], p_equivalence_adjusted=both[k + i]) for i, p in enumerate(pairs)]
    return Family(summaries, order, pairs, test, margin)


def sentence(family: Family, what: str, digits: int = 3, shown: dict[str, str] | None = None) -> str:
    """What the family supports: every candidate's estimate, the significant pairs, the rest as not distinguishable, the family.

    ``shown``: a candidate's estimate as the table beside it prints it, where that is more than its summary (a time
    to target whose interval carries the curve's spacing); the test is the summary's either way."""
    summaries = family.summaries

    def estimate(name: str) -> str:
        return (shown or {}).get(name) or summaries[name].text(digits)

    if len(family.order) == 1:
        only = family.order[0]
        return f"{what}: only {only} was measured, {estimate(only)}."
    listing = ", ".join(f"{name} {estimate(name)}" for name in family.order)
    out = [f"{what}: {listing} (best estimate first)."]
    if not family.tested:
        return " ".join(out + ["No pair can be tested (one draw at an end, or no spread)."])
    claims = family.claims
    by_first: dict[str, list[Pair]] = {}
    for pair in claims:
        by_first.setdefault(pair.first, []).append(pair)
    if claims:
        out.append(
            "; ".join(
                f"{first} is significantly better than "
                + _and([f"{p.second} (p = {p.p_adjusted:.2g}{_early(family, p)})" for p in pairs])
                for first, pairs in by_first.items()
            )
            + "."
        )
    if family.margin is not None:
        out += _equivalence_sentences(family)
    else:
        rest = len(family.tested) - len(claims)
        if not claims:
            out.append("No pair differs significantly.")
        elif rest:
            out.append(
                f"The other {rest} tested pairs are not distinguishable."
                if rest > 1
                else "The other tested pair is not distinguishable."
            )
    test = TESTS[family.test]
    scale = " on log values" if test.on_scale and all(s.log for s in summaries.values()) else ""
    size = len(family.pairs)
    if family.untestable:
        tested = f"{len(family.tested)} of the {size} pairs"
    else:
        tested = "the one pair" if size == 1 else f"all {size} pairs"
    level = min((p.alpha for p in family.pairs), default=ALPHA)
    correction = (
        f"Holm-corrected at {ALPHA * 100:g} %"
        if family.margin is None
        else f"with the two one-sided tests of equivalence, both hypotheses of every pair Holm-corrected together "
        f"(Shaffer's count, at most one true per pair) at {level * 100:.3g} %"
        + (f" at each of {family.looks} looks of sequential seeds ({ALPHA * 100:g} % over all)" if family.looks > 1 else "")
    )
    out.append(
        f"Tested: {tested} of the {len(family.order)} candidates as one family, {test.words}{scale}, "
        + correction
        + (" (p adjusted)" if claims else "")
        + (
            f"; not testable (one draw at an end, or no spread): {', '.join(f'{p.first} vs {p.second}' for p in family.untestable)}"
            if family.untestable
            else ""
        )
        + "."
    )
    return " ".join(out)


def _equivalence_sentences(family: Family) -> list[str]:
    """The equivalences and the undecided pairs of a family with a margin, each pair once."""
    out = []
    margin = f"{family.margin:g}"
    same = family.equivalences
    if same:
        out.append(
            f"Equivalent within {margin}-fold: "
            + _and(
                [
                    f"{p.first} and {p.second} ({_ratio_text(family, p)}p = {p.p_equivalence_adjusted:.2g}{_early(family, p)})"
                    for p in same
                ]
            )
            + " (within the margin, not equal: the ratio's interval says how far apart they may be)."
        )
    undecided = family.undecided
    if undecided:
        out.append(
            "Undecided (neither different nor within "
            + f"{margin}-fold): "
            + _and([f"{p.first} vs {p.second}" for p in undecided])
            + "."
        )
    elif family.tested:
        out.append("Every tested pair is decided.")
    return out


def ratio_interval(a: Summary, b: Summary) -> tuple[float | None, float | None, float | None]:
    """``a / b`` of two log-scale estimates with its 95 % Welch interval (None where it cannot be told)."""
    if not (a.log and b.log):
        return None, None, None
    d = location_difference(a, b)
    if d is None:
        return math.exp(a.location - b.location), None, None
    half = float(special.stdtrit(d.df_conservative, 0.5 + CONFIDENCE / 2)) * d.se  # the test's df
    return math.exp(d.value), math.exp(d.value - half), math.exp(d.value + half)


def _ratio_text(family: Family, pair: Pair) -> str:
    """``ratio 0.94 [0.85, 1.04], `` of an equivalent pair (the estimates it was decided on), or nothing where the
    family's quantity is not on the log scale."""
    a, b = pair.estimates or (family.summaries[pair.first], family.summaries[pair.second])
    value, lo, hi = ratio_interval(a, b)
    if value is None:
        return ""
    return f"ratio {value:.3g} [{lo:.3g}, {hi:.3g}], " if lo is not None and hi is not None else f"ratio {value:.3g}, "


def _early(family: Family, pair: Pair) -> str:
    """Where a sequential family decided ``pair`` at an earlier look than its last: the look and the seeds its p (and
    ``findings.csv``'s ratio) come from, which are fewer than the estimates listed."""
    last = max((p.look for p in family.pairs), default=1)
    return f", look {pair.look} on {pair.seeds[0]} and {pair.seeds[1]} seeds" if pair.look < last else ""


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
