"""Fidelity and diversity apart, per system: precision and density (do the samples look real?), recall and coverage
(is every real mode drawn?) of the model each run ends with, over seeds with intervals, and each system's collapse
rate (:mod:`.collapse`).

The diversity family the verdicts test is **coverage** of the end-of-budget model, chosen before the data (Naeem et
al. 2020 show recall, which rests on the generated samples' own k-NN balls, is inflated by a few outlying samples;
coverage rests on the real balls only, lies in [0, 1] and is the quantity a collapse is read on). Its pairs are tested
like the quality family's, one look at every seed the runs have, and land in ``findings.csv`` as family
``coverage``. A system collapsed in every seed is named, not tested.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from ..records.record import Record
from .collapse import CollapseRate, collapse_rate, end_quality
from .estimand import in_seed_order
from .headline import HeadlineRow
from .stats.summary import Summary, summarise

DIVERSITY = "coverage"
"""The quantity of the diversity family, as the verdict column and ``findings.csv`` name it."""
DIVERSITY_WHAT = "Diversity (coverage of the end-of-budget model, k-NN in the ruler's features; higher is better)"
"""How its sentence opens."""
SCORES = {"precision": False, "density": False, "recall": True, "coverage": True}
"""The four scores in the order the first page shows them, each with whether it is a share in [0, 1] (density is not:
about 1 for samples as the data, above 1 where they crowd the real modes)."""


def draws(row: HeadlineRow, score: str) -> list[float | None]:
    """``score`` of each seed's end-of-budget model (seed order, repeats averaged), None where it was not scored."""

    def value(record: Record) -> float | None:
        quality = end_quality(record)
        return None if quality is None else getattr(quality, score)

    return in_seed_order(row.main, value)


def score_summary(row: HeadlineRow, score: str = DIVERSITY) -> Summary | None:
    """``score`` over ``row``'s seeds (a share on the arithmetic scale, density on the log one); None where a seed has
    none (records written before these scores), so that a family never compares some seeds only."""
    values = draws(row, score)
    if not values or any(v is None for v in values):
        return None
    return summarise(values, fraction=SCORES[score])


def rate(row: HeadlineRow) -> CollapseRate | None:
    """``row``'s collapse rate over its runs (:func:`suite.analysis.collapse.collapse_rate`)."""
    return collapse_rate(row.main)


def always_collapsed(rows: Sequence[HeadlineRow]) -> list[str]:
    """The systems whose runs collapsed in every seed: named as such, never tested."""
    return [row.config for row in rows if (r := rate(row)) is not None and r.every]


def tested_rows(rows: Sequence[HeadlineRow]) -> list[HeadlineRow]:
    """The rows the diversity family compares: coverage in every seed, not collapsed in every seed."""
    gone = set(always_collapsed(rows))
    return [row for row in rows if row.config not in gone and score_summary(row) is not None]


def fidelity_diversity_table(rows: Sequence[HeadlineRow]) -> pd.DataFrame:
    """Per system with these scores, numbers only: its seeds, each score's mean with its 95 % interval
    (``<score>``, ``<score>_lo``, ``<score>_hi``), and its collapsed runs of those told with the rate's interval."""
    out = []
    for row in rows:
        shown = {score: score_summary(row, score) for score in SCORES}
        if all(s is None for s in shown.values()):
            continue
        entry: dict[str, Any] = {
            "system": row.config,
            "seeds": max((s.n for s in shown.values() if s is not None), default=None),
        }
        for score, summary in shown.items():
            interval = summary.interval if summary is not None else None
            entry[score] = summary.center if summary is not None else None
            entry[f"{score}_lo"], entry[f"{score}_hi"] = interval if interval is not None else (None, None)
        collapsed = rate(row)
        entry.update(
            collapsed=collapsed.collapsed if collapsed else None,
            collapse_told=collapsed.told if collapsed else None,
            collapse_rate=collapsed.collapsed / collapsed.told if collapsed and collapsed.told else None,
            collapse_lo=collapsed.lo if collapsed else None,
            collapse_hi=collapsed.hi if collapsed else None,
        )
        out.append(entry)
    return pd.DataFrame(out, columns=TABLE_COLUMNS)


TABLE_COLUMNS = [
    "system",
    "seeds",
    *(f"{score}{end}" for score in SCORES for end in ("", "_lo", "_hi")),
    "collapsed",
    "collapse_told",
    "collapse_rate",
    "collapse_lo",
    "collapse_hi",
]
"""The columns of :func:`fidelity_diversity_table` (``fidelity_diversity.csv``)."""
