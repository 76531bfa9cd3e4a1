"""The quality verdicts' error rates on the main job's own per-seed residuals, through the suite's own procedure.

Reads a job's records (``--records``), takes each system's per-seed end-of-budget FIDs
(:func:`suite.analysis.estimand.end_fid`, the estimand the quality family compares) and their residuals on the log
scale (each seed's log FID minus its system's mean), and builds simulated reports from them: every system gets the
policy's cap of seeds, resampled from the residuals and placed at a chosen centre, and each report is judged by
:func:`suite.analysis.stats.sequential.sequential_family` with the job's own seed policy and equivalence margin, the
function the report and ``suite run`` call. Two resamplings:

- **naive**: each system's own residuals, drawn with replacement (ties and all: at 4 seeds a draw repeats a value often);
- **smoothed, pooled**: every system's residuals rescaled to its system's spread with the ``n / (n - 1)`` correction,
  pooled, drawn with replacement and jittered by a normal kernel (Silverman's bandwidth), the sum shrunk back to the
  pooled variance; each system scaled by its own spread.

Worlds: **equal** (every centre the same; any "better" is false), **1.5x apart** (one system, in turn each, exactly the
margin lower than four equal others: any "better" but its own is false, and so is an equivalence of it), and
**observed** (the systems' observed mean logs: a "better" in the wrong direction or an equivalence of a pair at least
the margin apart is false). Rates with Clopper-Pearson 95 % intervals; the goal is at most 5 % of reports with any
false claim.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from suite.analysis.estimand import end_fid, equivalence_margin, in_seed_order, seed_policy
from suite.analysis.findings import scored_rows
from suite.analysis.headline import headline_rows
from suite.analysis.stats.pair_tests import TEST, TESTS
from suite.analysis.stats.sequential import Plan, sequential_family
from suite.analysis.stats.summary import ALPHA
from suite.records.results import read_records

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Residuals:
    """Each system's per-seed residuals of the log estimand, and its observed mean log."""

    names: tuple[str, ...]
    residuals: tuple[np.ndarray, ...]
    centres: tuple[float, ...]

    @property
    def spreads(self) -> tuple[float, ...]:
        return tuple(float(np.std(r, ddof=1)) for r in self.residuals)


def residuals_of(records_path: Path, value: Callable = end_fid) -> tuple[Residuals, Plan, float]:
    """The residuals of ``value`` per system of the records' quality verdicts, their seed policy and margin."""
    records = read_records(records_path)
    rows = scored_rows(headline_rows(records, {}))
    names, residuals, centres = [], [], []
    for row in rows:
        logs = np.log([v for v in in_seed_order(row.main, value) if v is not None and v > 0])
        if len(logs) > 1:
            names.append(row.config)
            residuals.append(logs - logs.mean())
            centres.append(float(logs.mean()))
    main = [r for row in rows for r in row.main]
    policy = seed_policy(main)
    plan = Plan(*policy) if policy else Plan.fixed(min(len(r) for r in residuals))
    return Residuals(tuple(names), tuple(residuals), tuple(centres)), plan, equivalence_margin(main) or 1.5


def naive(res: Residuals, cap: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Each system's own residuals drawn with replacement."""
    return [rng.choice(r, size=cap) for r in res.residuals]


def smoothed(res: Residuals, cap: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Pooled standardised residuals, jittered by a normal kernel and shrunk back to unit variance, per system at its
    own spread."""
    pooled = np.concatenate([r / np.std(r, ddof=1) * math.sqrt(len(r) / (len(r) - 1)) for r in res.residuals])
    sd = float(np.std(pooled))
    bandwidth = 1.06 * sd * len(pooled) ** -0.2
    out = []
    for spread in res.spreads:
        draw = rng.choice(pooled, size=cap) + bandwidth * rng.standard_normal(cap)
        out.append(spread * draw / math.sqrt(sd**2 + bandwidth**2))
    return out


RESAMPLING = {"naive": naive, "smoothed, pooled": smoothed}


def worlds(res: Residuals, margin: float) -> dict[str, Callable[[int], np.ndarray]]:
    """Each world's true centres (log scale) for report ``i``; the 1.5x world takes each system in turn as the low one."""
    k = len(res.names)
    apart = f"{margin:g}x apart"

    def boundary(i: int) -> np.ndarray:
        centres = np.zeros(k)
        centres[i % k] = -math.log(margin)
        return centres

    return {"equal": lambda i: np.zeros(k), apart: boundary, "observed": lambda i: np.asarray(res.centres)}


def wrong_claims(names: tuple[str, ...], centres: np.ndarray, family, margin: float) -> list[str | None]:
    """The family's false claims when the systems' true mean logs are ``centres``: for a false "better", the system it
    names better; None for a false equivalence."""
    true_log = dict(zip(names, centres))
    wrong: list[str | None] = []
    for pair in family.pairs:
        gap = true_log[pair.first] - true_log[pair.second]  # below zero: first is truly better (lower)
        if pair.significant and gap >= -1e-12:
            wrong.append(pair.first)
        elif pair.equivalent and abs(gap) >= math.log(margin) - 1e-9:
            wrong.append(None)
    return wrong


def false_claims(names: tuple[str, ...], centres: np.ndarray, family, margin: float) -> int:
    """How many of the family's claims are false when the systems' true mean logs are ``centres``."""
    return len(wrong_claims(names, centres, family, margin))


@dataclass(frozen=True)
class Cell:
    """One measured cell: the test and seed policy the procedure runs with, the resampling and the world."""

    test: str
    plan: Plan
    resampling: str
    world: str


def simulate(res: Residuals, cell: Cell, margin: float, reports: int, seed: int) -> dict:
    """``reports`` resampled reports of one cell through the procedure: false claims (all, and at look 1), decisions;
    ``favoured``: per system, the reports with a false claim that it is better than another; ``false_equivalent``: the
    reports with a false equivalence."""
    plan, world, resample = cell.plan, worlds(res, margin)[cell.world], RESAMPLING[cell.resampling]
    rng = np.random.default_rng(seed)
    any_false = look1_false = decided = seeds = false_equivalent = 0
    favoured = dict.fromkeys(res.names, 0)
    for i in range(reports):
        centres = world(i)
        noise = resample(res, plan.cap, rng)
        draws = {name: list(np.exp(c + e)) for name, c, e in zip(res.names, centres, noise)}
        procedure = sequential_family(draws, plan, True, margin, cell.test)
        assert procedure is not None
        family = procedure.family
        wrong = wrong_claims(res.names, centres, family, margin)
        any_false += bool(wrong)
        false_equivalent += None in wrong
        for name in {w for w in wrong if w is not None}:
            favoured[name] += 1
        first = type(family)(family.summaries, family.order, [p for p in family.pairs if p.look == 1], family.test, margin)
        look1_false += false_claims(res.names, centres, first, margin) > 0
        decided += sum(p.decided for p in family.pairs)
        seeds += sum(procedure.seeds.values())
    return {
        "any_false": any_false,
        "look1_false": look1_false,
        "mean_decided": decided / reports,
        "mean_seeds": seeds / reports,
        "false_equivalent": false_equivalent,
        "favoured": favoured,
    }


def grid(plans: list[Plan], res: Residuals, margin: float, seed: int):
    """Every (policy, resampling, world) with its reports' seed: the seed names the policy, resampling and world only,
    so that every test meets the same resampled reports (with a system left out, the same seed draws other ones: the
    systems are drawn in turn from one generator)."""
    for k, plan in enumerate(plans):
        for i, how in enumerate(RESAMPLING):
            for j, name in enumerate(worlds(res, margin)):
                yield plan, f"{plan.initial}, {plan.step}, {plan.cap}", how, name, seed + 1000 * k + 100 * i + j


def measure(
    res: Residuals, tests: list[str], plans: list[Plan], margin: float, reports: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every cell: test x policy x resampling x world; and per cell and system, the reports with a false claim that
    the system is better than another (``favoured``)."""
    rows, favoured = [], []
    for test in tests:
        for plan, policy, how, name, cell_seed in grid(plans, res, margin, seed):
            counts = simulate(res, Cell(test, plan, how, name), margin, reports, cell_seed)
            cell = {"test": test, "policy": policy, "resampling": how, "world": name, "reports": reports}
            favoured += [{**cell, "system": system, "false_better": n} for system, n in counts.pop("favoured").items()]
            rows.append({**cell, **counts})
            print(f"{test} / {policy} / {how} / {name}: {counts}", flush=True)
    return pd.DataFrame(rows), pd.DataFrame(favoured)


def in_cell(frame: pd.DataFrame, test: str, policy: str, resampling: str, world: str) -> pd.DataFrame:
    """The rows of ``frame`` (the rates, or what the false claims favour) of one measured cell."""
    return frame[(frame.test == test) & (frame.policy == policy) & (frame.resampling == resampling) & (frame.world == world)]


def without(res: Residuals, i: int) -> Residuals:
    """The residuals with system ``i`` left out."""
    keep = [j for j in range(len(res.names)) if j != i]
    return Residuals(*(tuple(part[j] for j in keep) for part in (res.names, res.residuals, res.centres)))


LEFT_OUT_COLUMNS = [
    "policy",
    "resampling",
    "world",
    "left_out",
    "reports",
    "any_false",
    "look1_false",
    "mean_decided",
    "mean_seeds",
]


def left_out(res: Residuals, table: pd.DataFrame, plans: list[Plan], margin: float, reports: int, seed: int) -> pd.DataFrame:
    """Where the test in use is above 5 %: the same cell (its reports' seed) with each system left out in turn, to name
    the system whose residuals carry the excess. A diagnosis, not another procedure: the verdicts keep every system."""
    rows = []
    for plan, policy, how, name, cell_seed in grid(plans, res, margin, seed):
        cell = in_cell(table, TEST, policy, how, name)
        if cell.empty or (cell.any_false / cell.reports).max() <= ALPHA:
            continue
        for out, system in enumerate(res.names):
            counts = simulate(without(res, out), Cell(TEST, plan, how, name), margin, reports, cell_seed)
            del counts["favoured"]
            rows.append({"policy": policy, "resampling": how, "world": name, "left_out": system, "reports": reports, **counts})
            print(f"{TEST} / {policy} / {how} / {name} / without {system}: {counts}", flush=True)
    return pd.DataFrame(rows, columns=LEFT_OUT_COLUMNS)


def rate_text(hits: float, n: int) -> str:
    """The share and its Clopper-Pearson 95 % interval, in per cent."""
    ci = stats.binomtest(int(hits), n).proportion_ci(0.95, method="exact")
    return f"{100 * hits / n:.1f} % [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"


def markdown(
    table: pd.DataFrame,
    favoured: pd.DataFrame,
    diagnosis: pd.DataFrame,
    res: Residuals,
    job: Plan,
    margin: float,
    records: str,
    command: str,
) -> str:
    """The committed page: what was resampled, through what, and the rates."""
    systems = ", ".join(f"{n} (spread {s:.3f}, n={len(r)})" for n, s, r in zip(res.names, res.spreads, res.residuals))
    lines = [
        "# The quality verdicts' error rates on resampled real residuals",
        "",
        f"Measured by `ci/resampled_rates.py` on `{records}` with the verdict code of this commit. Resampled: the per-seed "
        "residuals of the log end-of-budget FID (`suite.analysis.estimand.end_fid`) of each system the quality family "
        f"compares: {systems}. Each simulated report resamples them into the policy's cap of seeds per system and runs "
        "`suite.analysis.stats.sequential.sequential_family`, the function the report and `suite run` call, with the "
        f"job's equivalence margin {margin:g}: the test below for a difference, its two one-sided tests for an "
        "equivalence, both hypotheses of every pair Holm-corrected together with Shaffer's count, 5 % spent equally over "
        f"the looks. The job's seed policy is (initial {job.initial}, step {job.step}, max {job.cap}). Resamplings: "
        "**naive** (each system's own residuals with replacement), **smoothed, pooled** (every system's standardised "
        "residuals pooled, jittered by a normal kernel, each system at its own spread). Worlds: **equal** (any "
        f'"better" is false), **{margin:g}x apart** (each system in turn exactly the margin below four equal others: '
        'any other "better" and any equivalence of it is false), **observed** (the systems\' observed centres: a wrong '
        "direction, or an equivalence of a pair at least the margin apart, is false).",
        "",
        f"Tests: {'; '.join(f'`{t}`: {TESTS[t].words}' + (' (used)' if t == TEST else '') for t in table.test.unique())}.",
        "",
        "| test | seeds (initial, step, max) | resampling | world | reports | any false claim [95 % CI] | false claim at look 1 [95 % CI] | pairs decided (mean) | seeds spent (mean) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        lines.append(
            f"| {row.test}{' (used)' if row.test == TEST else ''} | {row.policy} | {row.resampling} | {row.world} | "
            f"{row.reports} | {rate_text(row.any_false, row.reports)} | {rate_text(row.look1_false, row.reports)} | "
            f"{row.mean_decided:.1f} | {row.mean_seeds:.1f} |"
        )
    lines += ["", "## Result", ""] + reading(table) + whom(table, favoured, res) + excess(diagnosis)
    lines += ["", f"Rerun: `{command}`.", ""]
    return "\n".join(lines)


def whom(table: pd.DataFrame, favoured: pd.DataFrame, res: Residuals) -> list[str]:
    """For the test in use: in each cell, the share of reports with a false claim that each system is better than
    another, and with a false equivalence (a report can hold several)."""
    used = table[table.test == TEST]
    if used.empty:
        return []
    lines = [
        "",
        "## Whom the false claims favour",
        "",
        f"`{TEST}`: per cell, the share of reports with a false claim that a system is better than another, by that "
        "system, and with a false equivalence (a report can hold several false claims).",
        "",
        "| seeds (initial, step, max) | resampling | world | " + " | ".join(res.names) + " | false equivalence |",
        "|" + "---|" * (len(res.names) + 4),
    ]
    for row in used.itertuples():
        mine = in_cell(favoured, TEST, row.policy, row.resampling, row.world).set_index("system")
        shares = [f"{100 * mine.false_better[name] / row.reports:.1f} %" for name in res.names]
        lines.append(
            f"| {row.policy} | {row.resampling} | {row.world} | {' | '.join(shares)} | "
            f"{100 * row.false_equivalent / row.reports:.1f} % |"
        )
    return lines


def excess(diagnosis: pd.DataFrame) -> list[str]:
    """The cells of the test in use above 5 %, rerun with each system left out (:func:`left_out`)."""
    if diagnosis.empty:
        return []
    lines = [
        "",
        "## Where the excess comes from",
        "",
        f"Each cell where `{TEST}` made a false claim in more than 5 % of reports, rerun on the same reports' seed with one "
        "system left out in turn (a diagnosis: the verdicts compare every system).",
        "",
        "| seeds (initial, step, max) | resampling | world | left out | reports | any false claim [95 % CI] | false claim at look 1 [95 % CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in diagnosis.itertuples():
        lines.append(
            f"| {row.policy} | {row.resampling} | {row.world} | {row.left_out} | {row.reports} | "
            f"{rate_text(row.any_false, row.reports)} | {rate_text(row.look1_false, row.reports)} |"
        )
    lines.append("")
    for (policy, how, name), cells in diagnosis.groupby(["policy", "resampling", "world"], sort=False):
        within = cells[cells.any_false / cells.reports <= ALPHA].left_out.tolist()
        said = f"within 5 % with {' or '.join(within)} left out" if within else "above 5 % whichever one system is left out"
        lines.append(f"- seeds ({policy}), {how}, {name}: {said}.")
    return lines


def reading(table: pd.DataFrame) -> list[str]:
    """Per test and policy: its worst share of reports with a false claim, and what it decides in the observed world."""
    out = []
    for (test, policy), cells in table.groupby(["test", "policy"], sort=False):
        rates = cells.any_false / cells.reports
        worst = cells.loc[rates.idxmax()]
        observed = cells[cells.world == "observed"].mean_decided.mean()
        spent = cells[cells.world == "observed"].mean_seeds.mean()
        held = "within 5 %" if rates.max() <= ALPHA else "**above 5 %**"
        out.append(
            f"- `{test}`{' (used)' if test == TEST else ''}, seeds ({policy}): the largest share of reports with any false "
            f"claim was {100 * rates.max():.1f} % ({worst.resampling}, {worst.world}): {held}; in the observed world it "
            f"decided {observed:.1f} of 10 pairs on average, spending {spent:.1f} seeds over all systems."
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", default="reports/digits/records.json", help="the main job's records")
    parser.add_argument("--reports", type=int, default=4000, help="simulated reports per cell (default 4000)")
    parser.add_argument("--seed", type=int, default=20261206, help="the simulation's seed")
    parser.add_argument("--tests", default=f"welch,{TEST}", help="comma-separated tests (suite.analysis.stats.pair_tests.TESTS)")
    parser.add_argument(
        "--policies", default="", help="extra seed policies as initial/step/max, comma-separated (the job's is always measured)"
    )
    parser.add_argument("--out", default="reports/verdicts", help="where resampled-error-rates.md and .csv go")
    args = parser.parse_args()
    tests = [t for t in args.tests.split(",") if t]
    unknown = [t for t in tests if t not in TESTS]
    if unknown:
        parser.error(f"--tests: unknown {', '.join(unknown)}; one of {', '.join(TESTS)}")
    res, job, margin = residuals_of(REPO / args.records)
    plans = [job] + [Plan(*(int(x) for x in p.split("/"))) for p in args.policies.split(",") if p]
    table, favoured = measure(res, tests, plans, margin, args.reports, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "resampled-error-rates.csv", index=False)
    favoured.to_csv(out / "resampled-error-rates-favoured.csv", index=False)
    diagnosis = left_out(res, table, plans, margin, args.reports, args.seed)
    diagnosis.to_csv(out / "resampled-error-rates-left-out.csv", index=False)
    command = ".venv/bin/python ci/resampled_rates.py " + shlex.join(sys.argv[1:])
    (out / "resampled-error-rates.md").write_text(markdown(table, favoured, diagnosis, res, job, margin, args.records, command))
    print((out / "resampled-error-rates.md").read_text())
    used = table[table.test == TEST]
    return 0 if (used.any_false / used.reports).max() <= ALPHA else 1


if __name__ == "__main__":
    raise SystemExit(main())
