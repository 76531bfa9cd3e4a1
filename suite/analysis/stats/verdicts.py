"""Verdicts that survive a rerun: estimates with intervals over draws, and a claim only where a test was run.

A quality number from one training draw says little: the same settings give FIDs that differ
between seeds by 5 to 15 %, and times that differ between runs by as much. So every number the
report compares is a :class:`~.summary.Summary` over draws (:mod:`.summary`), and every sentence that says one
configuration is better than another is a test that was run (:func:`compare_all`).

**Claims.** For one quantity, all pairs of candidates form one family of tests, Holm-corrected
together at :data:`ALPHA`; a pair whose adjusted p is below it is a claim, every other pair is
"not distinguishable", and nothing is inferred transitively. The test is :data:`~.pair_tests.TEST`
(:mod:`.pair_tests`: why that one). :func:`sentence` says what a family supports.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Sequence

from .pair_tests import TEST, TESTS
from .summary import ALPHA, Summary, ratio_interval


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment over the tested p-values (None: not tested, stays None and is not in the family):
    :func:`holm_shaffer` with every hypothesis its own pair."""
    return holm_shaffer(list(enumerate(p_values)))


def holm_shaffer(hypotheses: Sequence[tuple[int, float | None]]) -> list[float | None]:
    """Holm's step-down over hypotheses grouped by pair, of which at most one per pair can be true (Shaffer's count).

    ``hypotheses``: ``(pair index, p)`` each. A pair's "equal" and "not within the margin" are disjoint nulls, so at
    step ``i`` at most as many nulls can be true as there are pairs with a hypothesis not yet rejected: the p of
    step ``i`` is multiplied by that count instead of Holm's count of the hypotheses left. Returns the adjusted p
    (step-down monotone; None where the p is None), each compared with the family's level ``alpha`` by the caller. The
    family-wise error stays at most ``alpha``: the first true null rejected meets a level of at most ``alpha`` over
    the number of true nulls (Shaffer 1986, S1).
    """
    tested = [i for i, (_, p) in enumerate(hypotheses) if p is not None]
    order = sorted(tested, key=lambda i: hypotheses[i][1] or 0.0)
    remaining = Counter(hypotheses[i][0] for i in tested)
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
