"""Measure the verdict engine's error rates: false "better" claims when nothing differs, and the power to find a known difference.

Simulates reports of 5 candidates (A to E) with ``n`` per-seed FIDs each, log-normal with the
coefficient of variation seen in ``reports/digits`` (its per-seed FIDs), (a) all from one
distribution and (b) with A's median FID ``--ratio`` times lower than the others'. Every report
goes through the suite's own verdict code, the function the report's findings call
(:func:`suite.analysis.stats.verdicts.compare_all`, all pairs Holm-corrected together), once with each
candidate test, on the same simulated draws. Writes ``error-rates.csv`` (one row per cell) and
``error-rates.md`` (the rates with Clopper-Pearson 95 % intervals, the settings, N and seeds) into
``--out``.

    .venv/bin/python ci/verdict_error_rates.py --out reports/verdicts

The slow candidates (resampling and rank tests) run at three draws, where the test is chosen; the
others at every ``--draws``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy
from scipy import stats

from suite.analysis.findings import headline_rows
from suite.analysis.stats.verdicts import ALPHA, TEST, TESTS, compare_all, summarise
from suite.records.results import read_records

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = ("A", "B", "C", "D", "E")
"""The simulated configurations; A is the better one where there is a difference."""
FAST_TESTS = ("welch", "welch-linear")
"""Tests measured at every number of draws; the others at three draws only (each costs milliseconds a pair)."""
CHOICE_DRAWS = 3
"""The number of draws a side at which the test is chosen (the main job's seeds)."""
REFERENCE_ONLY = ("welch-linear",)
"""Measured for comparison, never chosen: a test on raw means can contradict the report's intervals, which are on the log scale."""


def observed_spreads(records_path: Path) -> dict[str, float]:
    """The coefficients of variation of the per-seed FIDs in a report's records: final (median, largest) and at equal time (largest)."""
    rows = headline_rows(read_records(records_path), {})

    def cv(summary) -> float | None:
        if summary is None or summary.n < 2:
            return None
        values = np.asarray(summary.values)
        return float(values.std(ddof=1) / values.mean())

    final = [c for row in rows if (c := cv(row.fid_summary)) is not None]
    at_time = [c for row in rows if (c := cv(row.fid_at_equal_time_summary)) is not None]
    spreads = {"final FID, median": float(np.median(final)), "final FID, largest": max(final)}
    if at_time:
        spreads["FID at equal time, largest"] = max(at_time)
    return spreads


def simulate(cv: float, draws: int, ratio: float, reports: int, rng: np.random.Generator) -> np.ndarray:
    """Per-seed FIDs of ``reports`` reports: log-normal with median 100 and coefficient of variation ``cv``; A's median over ``ratio``."""
    sigma = np.sqrt(np.log1p(cv**2))
    logs = rng.normal(np.log(100.0), sigma, size=(reports, len(CANDIDATES), draws))
    logs[:, 0, :] -= np.log(ratio)
    return np.exp(logs)


def judge(fids: np.ndarray, test: str, differs: bool) -> dict[str, int]:
    """Count, over the reports, those with any false claim, and those finding A better than one other or all others."""
    false_claims = found_one = found_all = 0
    for report in fids:
        family = compare_all({name: summarise(values) for name, values in zip(CANDIDATES, report)}, True, test)
        assert family is not None
        true = [(p.first, p.second) for p in family.claims if differs and p.first == "A"]
        false_claims += len(true) < len(family.claims)
        found_one += len(true) >= 1
        found_all += len(true) == len(CANDIDATES) - 1
    return {"false_claims": false_claims, "found_one": found_one, "found_all": found_all}


def rate(hits: int, n: int) -> tuple[float, float, float]:
    """The share and its Clopper-Pearson 95 % interval."""
    ci = stats.binomtest(hits, n).proportion_ci(0.95, method="exact")
    return hits / n, ci.low, ci.high


def rate_text(hits: int, n: int) -> str:
    share, lo, hi = rate(hits, n)
    return f"{100 * share:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def measure(args: argparse.Namespace, spreads: dict[str, float]) -> pd.DataFrame:
    """Every cell: spread x draws x (no difference, one difference) x test, on common simulated draws per cell."""
    rows = []
    for spread_index, (spread_name, cv) in enumerate(spreads.items()):
        for draws in args.draws:
            for kind, ratio in (("no difference", 1.0), (f"A {args.ratio:g}x lower", args.ratio)):
                seed = [args.seed, spread_index, draws, int(ratio != 1.0)]
                fids = simulate(cv, draws, ratio, args.reports, np.random.default_rng(seed))
                for test in TESTS:
                    slow = test not in FAST_TESTS
                    if slow and (draws != CHOICE_DRAWS or spread_index > 0):
                        continue  # scale-free tests: their rates do not depend on the spread when nothing differs
                    began = time.monotonic()
                    counts = judge(fids, test, ratio != 1.0)
                    rows.append(
                        {
                            "spread": spread_name,
                            "cv": round(cv, 4),
                            "draws": draws,
                            "truth": kind,
                            "ratio": ratio,
                            "test": test,
                            "reports": args.reports,
                            "seed": "-".join(map(str, seed)),
                            **counts,
                            "seconds": round(time.monotonic() - began, 1),
                        }
                    )
                    print(f"{spread_name} cv={cv:.3f} n={draws} {kind} {test}: {counts}", flush=True)
    return pd.DataFrame(rows)


def choose(table: pd.DataFrame) -> tuple[str | None, pd.DataFrame]:
    """The test with every measured no-difference rate of false claims at most ALPHA and the best power at CHOICE_DRAWS."""
    at = table[table.draws == CHOICE_DRAWS]
    null = at[at.truth == "no difference"].groupby("test")["false_claims"].max() / at["reports"].iloc[0]
    power = at[(at.truth != "no difference") & (at.spread == at.spread.iloc[0])].set_index("test")["found_one"]
    summary = pd.DataFrame({"worst_false_claim_rate": null, "power_one": power / at["reports"].iloc[0]})
    kept = summary[(summary.worst_false_claim_rate <= ALPHA) & ~summary.index.isin(REFERENCE_ONLY)]
    return (kept.power_one.idxmax() if not kept.empty else None), summary


def markdown(table: pd.DataFrame, args: argparse.Namespace, spreads: dict[str, float], chosen: str | None) -> str:
    lines = [
        "# The verdict engine's measured error rates",
        "",
        f"Measured by `ci/verdict_error_rates.py` with the verdict code of this commit: {args.reports} simulated reports per "
        f"cell, {len(CANDIDATES)} candidates (A to E), each with `n` per-seed FIDs, log-normal (median 100) with the "
        f"coefficient of variation (CV) of per-seed FIDs in `{args.records}`: "
        + ", ".join(f"{name} {cv:.3f}" for name, cv in spreads.items())
        + f". Truth: all five from one distribution, or A's median {args.ratio:g} times lower (better) than the other "
        f"four's. Every report is judged by `suite.analysis.stats.verdicts.compare_all`, the function the report's findings "
        f"call: all {len(CANDIDATES) * (len(CANDIDATES) - 1) // 2} pairs tested, Holm-corrected together at "
        f"{ALPHA * 100:g} %, once per candidate test, all tests on the same simulated draws (seed "
        f"`{args.seed}-spread-n-truth` per cell, numpy's default generator). Rates with Clopper-Pearson 95 % intervals.",
        "",
        "- **false claims**: reports with any claim that is false (no difference: any claim at all; one difference: "
        'any claim but "A is better than X"). The goal is at most 5 % (family-wise).',
        "- **power**: reports that find A better than at least one other candidate (*one*), and than all four (*all*).",
        "",
        "| CV of | CV | n | truth | test | false claims [95 % CI] | power, one [95 % CI] | power, all [95 % CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        differs = row.truth != "no difference"
        lines.append(
            f"| {row.spread} | {row.cv:.3f} | {row.draws} | {row.truth} | {row.test}{' (used)' if row.test == TEST else ''} | "
            f"{rate_text(row.false_claims, row.reports)} | "
            + (
                f"{rate_text(row.found_one, row.reports)} | {rate_text(row.found_all, row.reports)} |"
                if differs
                else "n/a | n/a |"
            )
        )
    tests = "; ".join(f"`{name}`: {test.words}{' on log values' if test.on_scale else ''}" for name, test in TESTS.items())
    lines += [
        "",
        f"Tests: {tests} (`{', '.join(FAST_TESTS)}` at every n and spread; the others at n = {CHOICE_DRAWS} and the first "
        "spread only, where the test is chosen: they are scale-free, so with no difference their rates do not depend on "
        "the spread). numpy " + np.__version__ + ", scipy " + scipy.__version__ + ".",
        "",
        "## Result",
        "",
        *reading(table),
        "",
        f"**The test kept:** of the tests whose false-claim rate with no difference stayed at or below {ALPHA * 100:g} % "
        f"at n = {CHOICE_DRAWS}, the one finding the known difference most often there (power, one): `{chosen}`"
        + (
            " (the one the report uses, `suite.analysis.stats.verdicts.TEST`)."
            if chosen == TEST
            else f"; the report uses `{TEST}`: CHANGE IT."
        )
        + f" `{', '.join(REFERENCE_ONLY)}` is measured for comparison only: a test of raw means can contradict the "
        "report's intervals, which are geometric (log scale).",
        "",
        f"Rerun: `.venv/bin/python ci/verdict_error_rates.py --reports {args.reports} --seed {args.seed} --ratio {args.ratio:g} "
        f"--draws {','.join(map(str, args.draws))} --out {args.out}` (about 15 minutes on the shared 2-core development machine; `--collect-only` "
        "rewrites this page from the CSV).",
        "",
    ]
    return "\n".join(lines)


def reading(table: pd.DataFrame) -> list[str]:
    """The used test's worst false-claim rates and its power, in words."""
    used = table[table.test == TEST].assign(
        false_rate=lambda t: t.false_claims / t.reports, power=lambda t: t.found_one / t.reports
    )
    null, alt = used[used.truth == "no difference"], used[used.truth != "no difference"]
    worst_null, worst_alt = null.loc[null.false_rate.idxmax()], alt.loc[alt.false_rate.idxmax()]
    first = used.spread.iloc[0]
    power = alt[alt.spread == first].set_index("draws").power
    widest = alt[alt.spread == used.spread.iloc[-1]].set_index("draws").power
    at3 = table[(table.draws == CHOICE_DRAWS) & (table.truth != "no difference") & (table.spread == first)]
    powerless = [t for t, hits in zip(at3.test, at3.found_one) if hits == 0]
    return [
        f"- With `{TEST}`, the share of reports with any false claim was at most {100 * worst_null.false_rate:.1f} % "
        f"over the {len(null)} cells with no difference (n = {worst_null.draws}, CV {worst_null.cv:.3f}) and at most "
        f"{100 * worst_alt.false_rate:.1f} % over the {len(alt)} cells with one difference: within 5 % everywhere.",
        f"- Its power to find A better than at least one other, at the median CV ({used.cv.iloc[0]:.3f}): "
        + ", ".join(f"{100 * p:.1f} % at n = {n}" for n, p in power.items())
        + f"; at the widest spread (CV {used.cv.iloc[-1]:.3f}, {used.spread.iloc[-1]}) a {alt.ratio.iloc[0]:g}-fold "
        "difference is rarely found: " + ", ".join(f"{100 * p:.1f} % at n = {n}" for n, p in widest.items()) + ".",
        f"- No power at n = {CHOICE_DRAWS}: {', '.join(f'`{t}`' for t in powerless)}. With three draws a side Mann-Whitney's "
        "U and the exact permutation test cannot give a two-sided p below 0.1 (2 of the 20 splits are as extreme), and "
        "Holm's correction over 10 pairs asks for 0.005 at the first step.",
    ]


def collected(out: Path) -> pd.DataFrame:
    """The cells of an earlier measurement (``--collect-only``)."""
    return pd.read_csv(out / "error-rates.csv")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=1000, help="simulated reports per cell (default 1000)")
    parser.add_argument("--draws", type=lambda s: [int(x) for x in s.split(",")], default=[3, 5, 10], help="draws per candidate")
    parser.add_argument("--ratio", type=float, default=1.5, help="how many times lower A's median FID is (default 1.5)")
    parser.add_argument("--seed", type=int, default=20261125, help="the simulation's seed")
    parser.add_argument("--records", default="reports/digits/records.json", help="the records whose FID spread is simulated")
    parser.add_argument("--out", default="reports/verdicts", help="where error-rates.md and .csv go")
    parser.add_argument("--collect-only", action="store_true", help="rewrite error-rates.md from the CSV already in --out")
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="measure the sequential-seeds procedure instead (sequential-error-rates.md and .csv in --out)",
    )
    parser.add_argument(
        "--sigmas", type=lambda s: [float(x) for x in s.split(",")], default=[0.1, 0.25], help="--sequential: spreads of the log"
    )
    parser.add_argument(
        "--policies",
        type=lambda s: [tuple(int(x) for x in p.split("/")) for p in s.split(",")],
        default=[(3, 3, 12), (3, 3, 9)],
        help="--sequential: initial/step/max, comma-separated (default 3/3/12,3/3/9)",
    )
    parser.add_argument("--margin", type=float, default=1.5, help="--sequential: the equivalence margin")
    args = parser.parse_args()
    if args.sequential:
        return sequential(args)
    spreads = observed_spreads(REPO / args.records)
    table = collected(Path(args.out)) if args.collect_only else measure(args, spreads)
    chosen, summary = choose(table)
    print(summary.to_string())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "error-rates.csv", index=False)
    (out / "error-rates.md").write_text(markdown(table, args, spreads, chosen))
    print((out / "error-rates.md").read_text())
    return 0 if chosen == TEST else 1


def sequential(args: argparse.Namespace) -> int:
    """``--sequential``: the procedure's error rates at the spreads and policies asked, and in the main job's world."""
    import shlex
    import sys

    from sequential_rates import markdown as sequential_markdown
    from sequential_rates import measure as sequential_measure

    from suite.analysis.estimand import in_seed_order, late_score
    from suite.analysis.stats.sequential import Plan

    rows = headline_rows(read_records(REPO / args.records), {})
    late = {row.strategy: [v for v in in_seed_order(row.main, late_score) if v] for row in rows}
    late = {name: values for name, values in late.items() if len(values) > 1}
    medians = tuple(float(np.exp(np.mean(np.log(v)))) for v in late.values())
    spread = tuple(float(np.std(np.log(v), ddof=1)) for v in late.values())
    plans = [Plan(*p) for p in args.policies]
    table = sequential_measure(args.sigmas, plans, args.margin, args.reports, args.seed, medians, spread)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sequential-error-rates.csv", index=False)
    command = ".venv/bin/python ci/verdict_error_rates.py " + shlex.join(sys.argv[1:])
    (out / "sequential-error-rates.md").write_text(sequential_markdown(table, medians, spread, command))
    print((out / "sequential-error-rates.md").read_text())
    return 0 if (table.any_false / table.reports).max() <= ALPHA else 1


if __name__ == "__main__":
    raise SystemExit(main())
