"""``findings.csv``: every pair of every tested family (:func:`suite.analysis.findings.tested_findings`) as a row, so
that tools read the verdicts without the prose; the one frame of the findings, at the output."""

from __future__ import annotations

import pandas as pd

from .findings import Finding, repeats
from .stats.summary import ratio_interval

FINDINGS_COLUMNS = (
    "family",
    "estimand",
    "budget",
    "budget_max",
    "budget_unit",
    "system_a",
    "system_b",
    "verdict",
    "ratio",
    "ratio_lo",
    "ratio_hi",
    "p_adjusted",
    "p_equivalence_adjusted",
    "margin",
    "level",
    "look",
    "seeds_a",
    "seeds_b",
    "denominator_draws_a",
    "denominator_draws_b",
    "budget_bound",
)
"""The columns of ``findings.csv``: one row per pair of every tested family."""


def findings_table(found: list[Finding]) -> pd.DataFrame:
    """Every pair's verdict as a row (:data:`FINDINGS_COLUMNS`), so that tools read the verdicts without the prose.

    ``system_a`` has the better estimate; ``verdict`` is ``a better``, ``equivalent`` (within ``margin``-fold),
    ``undecided`` or ``not testable``; ``ratio`` is a's estimate over b's with its 95 % interval; ``level`` the
    family-wise level the pair was decided at (a sequential look's share), ``look`` the look that decided it;
    ``seeds_a``/``seeds_b`` the draws of each system's estimate (a ratio's numerator: a speedup's P=1 runs),
    ``denominator_draws_a``/``_b`` a ratio's other end (a speedup's runs at P; empty for one quantity): the draws its
    ratio and p-values come from; ``budget_bound``: a system of the pair was still improving at the end of the budget;
    ``budget``/``budget_max`` the equal budget of the family's runs as numbers (the smallest and largest: equal where
    every run had the same) in ``budget_unit`` (``images``: real training images per system; ``seconds``: of training
    per run), all three empty where the runs had no equal budget (:func:`~.stats.settling.budget_amount`).
    """
    rows = []
    for finding, again in zip(found, repeats(found)):
        family = finding.family
        if family is None or again:
            continue
        improving = set(finding.scale.improving) if finding.scale is not None else set()
        amount = finding.scale.amount if finding.scale is not None else None
        for pair in family.pairs:
            a, b = pair.estimates or (family.summaries[pair.first], family.summaries[pair.second])
            ratio, lo, hi = ratio_interval(a, b)
            verdict = "not testable" if pair.p_value is None else "a better" if pair.significant else pair.verdict
            rows.append(
                {
                    "family": finding.quantity,
                    "estimand": finding.what,
                    "budget": amount.low if amount is not None else None,
                    "budget_max": amount.high if amount is not None else None,
                    "budget_unit": amount.unit if amount is not None else None,
                    "system_a": pair.first,
                    "system_b": pair.second,
                    "verdict": verdict,
                    "ratio": ratio,
                    "ratio_lo": lo,
                    "ratio_hi": hi,
                    "p_adjusted": pair.p_adjusted,
                    "p_equivalence_adjusted": pair.p_equivalence_adjusted,
                    "margin": family.margin,
                    "level": pair.alpha,
                    "look": pair.look,
                    "seeds_a": pair.seeds[0],
                    "seeds_b": pair.seeds[1],
                    "denominator_draws_a": a.ns[1] if len(a.ns) > 1 else None,
                    "denominator_draws_b": b.ns[1] if len(b.ns) > 1 else None,
                    "budget_bound": bool({pair.first, pair.second} & improving),
                }
            )
    frame = pd.DataFrame(rows, columns=list(FINDINGS_COLUMNS))
    counts = {c: "Int64" for c in ("look", "seeds_a", "seeds_b", "denominator_draws_a", "denominator_draws_b")}
    return frame.astype({**counts, "margin": "float64", "budget": "float64", "budget_max": "float64"})
