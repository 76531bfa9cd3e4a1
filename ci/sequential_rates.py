"""The sequential-seeds procedure's measured error rates (``ci/verdict_error_rates.py --sequential``).

Simulates reports of 5 systems whose per-seed late FIDs are log-normal, and runs each through the suite's own
procedure, :func:`suite.analysis.stats.sequential.sequential_family` (the function the report and ``suite run``
call): the initial block, the verdicts (better, equivalent within the margin, undecided), more seeds for the systems
of undecided pairs, up to the cap. Every system gets ``cap`` draws up front; the procedure uses only those it would
have trained. Truths:

- **equal**: all five from one distribution. A false claim is any "better".
- **A 1.5x lower**: A's median the margin times lower than the other four's (which are equal). A false claim is any
  "better" but A's, and any equivalence of A with another (a ratio at the margin is not within it).
- **spread**: five medians as apart as the systems of a main job (``--medians``), each its own spread. A false claim
  is a "better" in the wrong direction or an equivalence of a pair whose ratio is at or beyond the margin.

Rates with Clopper-Pearson 95 % intervals; the goal is at most 5 % of reports with any false claim.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from suite.analysis.stats.sequential import Plan, sequential_family
from suite.analysis.stats.verdicts import ALPHA

SYSTEMS = ("A", "B", "C", "D", "E")


@dataclass(frozen=True)
class Truth:
    """A simulated world: each system's median late FID and its per-seed spread (standard deviation of the log)."""

    name: str
    medians: tuple[float, ...]
    sigmas: tuple[float, ...]


def false_claims(truth: Truth, family, margin: float) -> int:
    """How many of the family's claims are false under ``truth``."""
    true_log = dict(zip(SYSTEMS, np.log(truth.medians)))
    wrong = 0
    for pair in family.pairs:
        gap = true_log[pair.first] - true_log[pair.second]  # below zero: first is truly better (lower)
        if pair.significant and gap >= 0:
            wrong += 1  # a difference where there is none, or in the wrong direction
        elif pair.equivalent and abs(gap) >= math.log(margin) - 1e-12:
            wrong += 1
    return wrong


def simulate(truth: Truth, plan: Plan, margin: float, reports: int, seed: int) -> dict[str, float]:
    """``reports`` reports of ``truth`` through the procedure: false-claim and decision counts, seeds spent."""
    rng = np.random.default_rng(seed)
    any_false = decided_all = decided_8 = 0
    decided_pairs = seeds = 0
    for _ in range(reports):
        draws = {
            name: list(np.exp(rng.normal(math.log(m), s, plan.cap))) for name, m, s in zip(SYSTEMS, truth.medians, truth.sigmas)
        }
        procedure = sequential_family(draws, plan, True, margin)
        assert procedure is not None
        family = procedure.family
        decided = sum(p.decided for p in family.pairs)
        any_false += false_claims(truth, family, margin) > 0
        decided_all += decided == len(family.pairs)
        decided_8 += decided >= 8
        decided_pairs += decided
        seeds += sum(procedure.seeds.values())
    return {
        "any_false": any_false,
        "all_decided": decided_all,
        "at_least_8": decided_8,
        "mean_decided": decided_pairs / reports,
        "mean_seeds": seeds / reports,
    }


def truths(sigma: float, ratio: float, medians: tuple[float, ...], sigmas: tuple[float, ...]) -> list[Truth]:
    """The worlds simulated at one spread."""
    equal = Truth("equal", (100.0,) * 5, (sigma,) * 5)
    apart = Truth(f"A {ratio:g}x lower", (100.0 / ratio,) + (100.0,) * 4, (sigma,) * 5)
    return [equal, apart] + ([Truth("spread (main job)", medians, sigmas)] if medians else [])


def measure(
    sigmas: list[float],
    plans: list[Plan],
    margin: float,
    reports: int,
    seed: int,
    medians: tuple[float, ...],
    spread: tuple[float, ...],
) -> pd.DataFrame:
    """Every cell: spread x policy x truth."""
    rows = []
    for (i, sigma), (j, plan) in itertools.product(enumerate(sigmas), enumerate(plans)):
        for k, truth in enumerate(truths(sigma, margin, medians, spread)):
            if truth.name.startswith("spread") and i:
                continue  # the main job's world has its own spreads: once per policy
            counts = simulate(truth, plan, margin, reports, seed + 1000 * i + 100 * j + k)
            rows.append(
                {
                    "truth": truth.name,
                    "sigma": sigma if not truth.name.startswith("spread") else float("nan"),
                    "initial": plan.initial,
                    "step": plan.step,
                    "max": plan.cap,
                    "looks": plan.looks,
                    "margin": margin,
                    "reports": reports,
                    **counts,
                }
            )
            print(f"{truth.name} sigma={sigma} plan={plan}: {counts}", flush=True)
    return pd.DataFrame(rows)


def rate_text(hits: float, n: int) -> str:
    """The share and its Clopper-Pearson 95 % interval, in per cent."""
    ci = stats.binomtest(int(hits), n).proportion_ci(0.95, method="exact")
    return f"{100 * hits / n:.1f} % [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"


def markdown(table: pd.DataFrame, medians: tuple[float, ...], spread: tuple[float, ...], command: str) -> str:
    """The page: what was simulated, the table, the reading."""
    lines = [
        "# The sequential-seeds procedure's measured error rates",
        "",
        f"Measured by `ci/verdict_error_rates.py --sequential` with the verdict code of this commit, "
        f"{int(table.reports.iloc[0])} simulated reports per cell. Five systems (A to E), per-seed late FIDs log-normal "
        "with the spread `sigma` (standard deviation of the log), through "
        "`suite.analysis.stats.sequential.sequential_family`, the function the report and `suite run` call: the "
        "initial block, then the verdicts (Welch's t on log values for a difference, two one-sided tests for an "
        f"equivalence within {table.margin.iloc[0]:g}-fold, both hypotheses of every pair Holm-corrected together "
        f"with Shaffer's count), {ALPHA * 100:g} % spent equally over the looks, more seeds only for the systems of "
        "undecided pairs, up to the cap.",
        "",
        '- **equal**: all five alike; any "better" is false.',
        "- **A 1.5x lower**: A's median the margin times lower; any \"better\" but A's is false, and so is an equivalence "
        "of A (a ratio at the margin is not within it).",
        "- **spread (main job)**: medians "
        + ", ".join(f"{m:.3g}" for m in medians)
        + " with spreads "
        + ", ".join(f"{s:.3g}" for s in spread)
        + ' (the main job\'s systems, from its records); a "better" in the wrong direction, or an equivalence of a '
        "pair at least the margin apart, is false.",
        "",
        "| truth | sigma | seeds (initial, step, max) | looks | reports with a false claim [95 % CI] | all 10 pairs decided | at least 8 decided | pairs decided (mean) | seeds spent (mean, all systems) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        sigma = "own" if math.isnan(row.sigma) else f"{row.sigma:.3g}"
        lines.append(
            f"| {row.truth} | {sigma} | {row.initial}, {row.step}, {row.max} | {row.looks} | "
            f"{rate_text(row.any_false, row.reports)} | {rate_text(row.all_decided, row.reports)} | "
            f"{rate_text(row.at_least_8, row.reports)} | {row.mean_decided:.1f} | {row.mean_seeds:.1f} |"
        )
    worst = table.loc[(table.any_false / table.reports).idxmax()]
    lines += [
        "",
        "## Result",
        "",
        f"- The largest share of reports with any false claim was {100 * worst.any_false / worst.reports:.1f} % "
        f"({worst.truth}, seeds {worst['initial']}, {worst['step']}, {worst['max']})"
        + (
            ": within 5 % in every cell."
            if (table.any_false / table.reports).max() <= ALPHA
            else ": ABOVE 5 %, fix the procedure."
        ),
        "",
        f"Rerun: `{command}`.",
        "",
    ]
    return "\n".join(lines)
