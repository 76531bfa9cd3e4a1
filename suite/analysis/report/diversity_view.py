"""The first page's ``## Fidelity and diversity``: per system, precision and density (fidelity), recall and coverage
(diversity) of the model each run ends with, over seeds with 95 % intervals, and its collapse rate with its Wilson
interval (:mod:`suite.analysis.diversity`, :mod:`suite.analysis.collapse`); the CSV ``fidelity_diversity.csv``."""

from __future__ import annotations

import pandas as pd

from ..collapse import COLLAPSED_BALLS, COLLAPSED_COVERAGE
from ..diversity import SCORES, fidelity_diversity_table
from ..headline import HeadlineRow
from ..markdown import markdown_table
from .section import Section

CSV = "fidelity_diversity.csv"


def fidelity_diversity_section(rows: list[HeadlineRow]) -> Section:
    """The section from the headline rows (empty where no run has these scores: records written before them)."""
    shown = fidelity_diversity_table(rows)
    if shown.empty:
        return Section([])
    lines = [
        "## Fidelity and diversity\n",
        "The model each run ends with, over its seeds: estimate [95 % interval], in the ruler's features on the common "
        "latents with k nearest neighbours (`prdc_k`, `quality_n` samples against as many real ones; "
        "[Image quality](details/quality.md)). Fidelity: **precision** (share of samples inside the real k-NN "
        "manifold) and **density** (about 1 for samples as the data). Diversity: **recall** (share of real samples "
        "inside the samples' manifold) and **coverage** (share of real samples with a sample among their k nearest "
        "neighbours); coverage is the diversity family tested above. **collapsed**: runs whose coverage is at most "
        f"{COLLAPSED_BALLS} k / n_real (at least {COLLAPSED_COVERAGE}; one image covers about k / n_real) or whose "
        "samples are all alike, of the seeds scored, with the rate's 95 % Wilson interval; a system collapsed in every "
        "seed is named, not tested.\n",
        markdown_table(page_table(shown)),
        "",
    ]
    return Section(lines, {CSV: shown})


def _number(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}"


def page_table(shown: pd.DataFrame) -> pd.DataFrame:
    """The page's view of :func:`fidelity_diversity_table`: ``mean [lo, hi]`` per score, the seeds once in their own
    column, the collapsed runs as ``1 of 6 (0.17 [0.03, 0.56])``; an empty cell where a score is missing."""
    out = []
    for row in shown.to_dict("records"):
        cells = {"system": row["system"], "seeds": "" if pd.isna(row["seeds"]) else str(int(row["seeds"]))}
        for score in SCORES:
            value, lo, hi = row[score], row[f"{score}_lo"], row[f"{score}_hi"]
            cells[score] = "" if pd.isna(value) else _number(value) + ("" if pd.isna(lo) else f" [{_number(lo)}, {_number(hi)}]")
        told = row["collapse_told"]
        cells["collapsed"] = (
            ""
            if pd.isna(told)
            else f"{int(row['collapsed'])} of {int(told)} ({row['collapse_rate']:.2f} [{row['collapse_lo']:.2f}, {row['collapse_hi']:.2f}])"
        )
        out.append(cells)
    return pd.DataFrame(out, columns=["system", "seeds", *SCORES, "collapsed"])
