"""Sequential seeds: verdicts taken after each block of seeds, more seeds only where a pair is undecided.

A scenario's ``train.seeds: {initial, step, max}`` trains every system on ``initial`` seeds and takes the quality
verdicts (:func:`~.verdicts.compare_all` with an equivalence margin); the systems of undecided pairs train ``step``
more seeds, until every pair is decided or a system reaches ``max``. A pair decided at a look keeps that verdict.

**Error.** The family-wise level :data:`~.summary.ALPHA` is spent equally over the looks (:attr:`Plan.looks`, a
Bonferroni split): each look runs Holm's step-down with Shaffer's count (:func:`~.verdicts.holm_shaffer`) at
``ALPHA / looks``. The union bound holds for a test that holds its own level, which Welch's t at
Welch-Satterthwaite's df does not at four seeds a side on the main job's skewed residuals, hence
:data:`~.pair_tests.TEST`. What the bound does not cover (a test's level on real residuals, a wrong direction, a
frozen pair re-tested at a later look) is measured instead by resampling the main job's per-seed residuals through
this function (``ci/resampled_rates.py``, ``reports/verdicts/resampled-error-rates.md``).

The same function replays the procedure from the records (the report) and decides the next block (``suite run``),
both reading the draws by seed position (a failed seed is None in its place), so the report states what the run
decided.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from .pair_tests import TEST
from .summary import ALPHA, summarise
from .verdicts import Family, Pair, compare_all


@dataclass(frozen=True)
class Plan:
    """The seed policy in numbers: ``initial`` seeds, ``step`` more per look, at most ``cap``."""

    initial: int
    step: int
    cap: int

    @property
    def looks(self) -> int:
        """Looks of the procedure: after the initial block and after each step up to the cap."""
        return 1 + -(-(self.cap - self.initial) // self.step) if self.cap > self.initial else 1

    @property
    def alpha(self) -> float:
        """The level of each look: :data:`~.summary.ALPHA` spent equally over the looks."""
        return ALPHA / self.looks

    def seeds_at(self, look: int) -> int:
        """Seeds of a system still in the procedure at ``look`` (from 1)."""
        return min(self.initial + (look - 1) * self.step, self.cap)

    @classmethod
    def fixed(cls, seeds: int) -> Plan:
        """A fixed list of seeds: one look at the full level."""
        return cls(seeds, 1, seeds)


@dataclass(frozen=True)
class Sequential:
    """Where the procedure stands: its family (decided pairs frozen at their look), its looks, who needs more seeds."""

    family: Family
    plan: Plan
    look: int
    """The last look taken (1 where there was one)."""
    continuing: tuple[str, ...]
    """The systems that train another block: in an undecided pair, below the cap (empty: the procedure is done)."""
    seeds: dict[str, int]
    """Seeds of each system the verdicts used."""

    @property
    def done(self) -> bool:
        return not self.continuing


def _key(pair: Pair) -> frozenset[str]:
    return frozenset((pair.first, pair.second))


def sequential_family(
    draws: Mapping[str, Sequence[float | None]],
    plan: Plan,
    lower_is_better: bool,
    margin: float | None,
    test: str = TEST,
) -> Sequential | None:
    """Replay the procedure on ``draws`` (per system, its values in seed order; None for a seed without a value).

    Each look takes the seeds every system still in the procedure has by then; the replay stops at the last look the
    draws hold (a system still in the procedure without the look's seeds: the run has not trained them yet, or
    stopped), at the cap, or when no pair is undecided. None without systems. ``test``: the two-sample test
    (:data:`~.pair_tests.TESTS`; the report's, :data:`~.pair_tests.TEST`, unless the error rates compare another).
    """
    if not draws:
        return None
    active = set(draws)
    used = {name: 0 for name in draws}
    frozen: dict[frozenset[str], Pair] = {}
    family: Family | None = None
    look = 0
    while True:
        n = plan.seeds_at(look + 1)
        if look and (not active or any(len(draws[name]) < n for name in active) or n == plan.seeds_at(look)):
            break
        look += 1
        for name in active:
            used[name] = min(n, len(draws[name]))
        summaries = {name: s for name in draws if (s := summarise(draws[name][: used[name]])) is not None}
        family = compare_all(summaries, lower_is_better, test, margin=margin, alpha=plan.alpha)
        if family is None:
            return None
        for pair in family.pairs:
            if pair.decided and _key(pair) not in frozen:
                estimates = (family.summaries[pair.first], family.summaries[pair.second])
                frozen[_key(pair)] = replace(pair, look=look, estimates=estimates)
        open_pairs = [p for p in family.pairs if _key(p) not in frozen]
        active = {name for p in open_pairs for name in (p.first, p.second)} & active
    assert family is not None
    pairs = [frozen.get(_key(p), replace(p, look=look)) for p in family.pairs]
    final = replace(family, pairs=pairs, looks=plan.looks)
    continuing = tuple(sorted(active)) if plan.seeds_at(look) < plan.cap else ()
    return Sequential(final, plan, look, continuing, dict(used))
