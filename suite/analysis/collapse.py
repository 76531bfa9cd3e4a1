"""Collapse as a named outcome: a run whose end-of-budget model covers (next to) none of the real data.

One definition, read through :func:`collapsed`: the model's coverage (:mod:`suite.measure.metrics.manifold`) at or
below :func:`threshold`, ``4 k / n_real`` and at least :data:`COLLAPSED_COVERAGE`, or samples too alike to score at
all. A collapsed generator covers about ``k / n_real``, one that learned one class of ten about a tenth; the threshold
sits between the two, as ``ci/collapse_threshold.py`` measured (``reports/collapse/threshold.md``; the reasoning and
numbers: docs/image-quality.md, Collapse). An untrained generator covers nothing either: it reads as collapsed (in
both a user gets nothing real). The report gives each system's collapse rate over its seeds with a Wilson interval
(:func:`collapse_rate`) and names a system collapsed in every seed instead of testing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from scipy import stats

from ..measure.metrics.signals import CONSTANT_SAMPLES
from ..records.record import Record
from ..records.scored import Quality

COLLAPSED_COVERAGE = 0.02
"""Coverage at or below this is a collapse at any sample count (``reports/collapse/threshold.md``)."""
COLLAPSED_BALLS = 4
"""Coverage at or below this many k-NN balls' worth of real samples (``COLLAPSED_BALLS * k / n_real``) is a collapse:
one image covers about one (k / n_real), at most about three."""
RATE_CONFIDENCE = 0.95
"""The collapse rate's interval (Wilson's score interval: sound at the few seeds a report has, unlike the normal one)."""


def end_quality(record: Record) -> Quality | None:
    """The scores of the model a run ends with, the one a user gets: the record's ``quality`` (its final model)."""
    return record.quality


def threshold(quality: Quality) -> float:
    """The coverage at or below which ``quality``'s model collapsed: ``4 k / n_real``, at least :data:`COLLAPSED_COVERAGE`."""
    if quality.prdc_k is None or not quality.prdc_n_real:
        return COLLAPSED_COVERAGE
    return max(COLLAPSED_COVERAGE, COLLAPSED_BALLS * quality.prdc_k / quality.prdc_n_real)


def collapsed(record: Record) -> bool | None:
    """Whether ``record``'s end-of-budget model collapsed (module docstring); None where it was not scored or its
    record predates coverage."""
    quality = end_quality(record)
    if quality is None:
        return None
    if quality.not_scorable is not None and quality.not_scorable.startswith(CONSTANT_SAMPLES):
        return True
    if quality.coverage is None:
        return None
    return quality.coverage <= threshold(quality)


@dataclass(frozen=True)
class CollapseRate:
    """How many of a system's seeds collapsed, of those that could be told, with the rate's interval."""

    collapsed: int
    told: int
    lo: float
    hi: float

    @property
    def every(self) -> bool:
        """Every seed collapsed: the system is named as such, not tested."""
        return self.told > 0 and self.collapsed == self.told

    def text(self) -> str:
        """``1 of 6 (0.17 [0.03, 0.56])``."""
        return f"{self.collapsed} of {self.told} ({self.collapsed / self.told:.2f} [{self.lo:.2f}, {self.hi:.2f}])"


def collapse_rate(runs: Iterable[Record]) -> CollapseRate | None:
    """The share of ``runs`` that :func:`collapsed`, with its Wilson interval; None where no run can be told."""
    told = [c for c in (collapsed(r) for r in runs) if c is not None]
    if not told:
        return None
    k = sum(told)
    interval = stats.binomtest(k, len(told)).proportion_ci(confidence_level=RATE_CONFIDENCE, method="wilson")
    return CollapseRate(k, len(told), float(interval.low), float(interval.high))
