"""Measure the quality estimand's candidates on a results folder: their seed spread, and the sampling noise share.

For every system (strategy / loss / engine at its largest P) of ``RESULTS`` and every candidate estimand of a run's
quality, the spread over seeds (standard deviation of the log): the final model's FID, and the geometric mean of the
FID over the curve points in the last half, the last quarter and the last two points of the budget. Then the
sampling noise: every final generator rescored on ``--latents`` fresh draws of latent vectors and labels (seeds
1, 2, ... instead of the common ones), the variance of log FID between draws of one model over the variance between
seeds. Writes ``estimand.md`` and ``estimand.csv`` into ``--out``.

    .venv/bin/python ci/estimand.py results/digits --out reports/verdicts
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from suite.analysis.estimand import LATE_SHARE, in_seed_order
from suite.analysis.findings import main_runs, system_name
from suite.records.record import Record
from suite.records.results import iter_records

CANDIDATES = {
    "final FID": None,
    "late FID (last half, the suite's)": LATE_SHARE,
    "last quarter": 0.75,
    "last two points": "two",
}
"""Each candidate: None the final model's FID; a share, the geometric mean over the curve points at or after that
share of the budget; ``two``, over the last two points."""


def candidate(record: Record, how: float | str | None) -> float | None:
    """One run's value of a candidate estimand (None where its points are missing)."""
    if how is None:
        return record.quality.fid if record.quality is not None else None
    points = sorted((float(p.images), p.fid) for p in record.curve or [] if p.images is not None)
    if how == "two":
        late = [v for _, v in points[-2:]]
    else:
        end = points[-1][0] if points else 0.0
        late = [v for x, v in points if x >= float(how) * end]
    if len(late) < 2 or any(v is None or v <= 0 for v in late):
        return None
    return math.exp(float(np.mean(np.log(late))))


def sampling_variance(record: Record, folder: Path, latents: int) -> float | None:
    """The variance of log final FID over ``latents`` fresh draws of the latents (seeds 1 to ``latents``)."""
    from suite.gan.sampling import Sampler, load_model
    from suite.measure.metrics import Reference, evaluate_sampler

    q = record.quality
    if q is None or q.fid is None or record.dataset is None:
        return None
    bundle = load_model(folder)
    ref = Reference(
        dataset=record.dataset.name, image_size=bundle.image_size, classes=record.dataset.classes, features="classifier", n=q.n
    )
    sampler = Sampler(bundle)
    common = evaluate_sampler(sampler, ref)["fid"]
    if common is None or abs(common - q.fid) > 1e-6 * q.fid:
        raise SystemExit(f"{folder}: rescoring on the common latents gives FID {common}, the record {q.fid}: not the run's ruler")
    fids = [evaluate_sampler(sampler, ref, seed=s)["fid"] for s in range(1, latents + 1)]
    return float(np.var(np.log(fids), ddof=1))


def measure(results: Path, latents: int) -> pd.DataFrame:
    """One row per system and candidate: seeds, spread of log, and (the final FID) its sampling noise share."""
    records = [r for r in iter_records(results, skip_bad=True) if r.status == "ok"]
    by_system: dict[str, list[Record]] = {}
    for r in records:
        by_system.setdefault(system_name(r), []).append(r)
    rows = []
    for name, runs in sorted(by_system.items()):
        main, _ = main_runs(runs)
        for label, how in CANDIDATES.items():
            values = [v for v in in_seed_order(main, lambda r, how=how: candidate(r, how)) if v is not None]
            spread = float(np.std(np.log(values), ddof=1)) if len(values) > 1 else float("nan")
            row = {"system": name, "candidate": label, "seeds": len(values), "spread_log": spread}
            row["geometric_mean"] = float(np.exp(np.mean(np.log(values)))) if values else float("nan")
            if how is None and latents and len(values) > 1:
                within = [v for r in main if (v := sampling_variance(r, results / str(r.run_id), latents)) is not None]
                row["sampling_variance"] = float(np.mean(within))
                row["sampling_share"] = float(np.mean(within)) / spread**2
            rows.append(row)
            print(row, flush=True)
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, results: Path, latents: int, command: str) -> str:
    """The page: the spreads side by side, the sampling share, the choice."""
    pivot = table.pivot(index="system", columns="candidate", values="spread_log")[list(CANDIDATES)]
    seeds = table.groupby("system")["seeds"].max()
    # a pair's test has the variance of both its systems' means: the family's power follows the mean variance over
    # the systems, so the candidates are compared on the root of their mean squared spread (a median would let one
    # system decide)
    rms = (pivot**2).mean() ** 0.5
    smallest = pivot.idxmin(axis=1).value_counts()
    chosen = rms.idxmin()
    lines = [
        "# The quality estimand, measured",
        "",
        f"Measured by `ci/estimand.py` on the records of `{results}` (each system at its largest P). For each "
        "candidate estimand of a run's quality, its spread over seeds: the standard deviation of its log (the scale "
        "the verdicts test on). A smaller spread at the same seeds is a sharper test of the same systems.",
        "",
        "| system | seeds | " + " | ".join(CANDIDATES) + " |",
        "|---|---|" + "---|" * len(CANDIDATES),
    ]
    for system, row in pivot.iterrows():
        lines.append(f"| {system} | {seeds[system]} | " + " | ".join(f"{row[c]:.3f}" for c in CANDIDATES) + " |")
    lines.append("| **root mean square** | | " + " | ".join(f"**{rms[c]:.3f}**" for c in CANDIDATES) + " |")
    lines.append("| systems where smallest | | " + " | ".join(str(int(smallest.get(c, 0))) for c in CANDIDATES) + " |")
    final = table[table.candidate == "final FID"].set_index("system")
    lines += [
        "",
        f"**Sampling noise** of the final FID (n = the run's samples): each final generator rescored on {latents} fresh "
        "draws of the latent vectors and labels; the variance of log FID between draws of one model (mean over the "
        "system's seeds) over the variance between seeds:",
        "",
        "| system | between draws of one model | between seeds | share |",
        "|---|---|---|---|",
    ]
    for system, row in final.iterrows():
        if "sampling_share" in row and not math.isnan(row.get("sampling_share", float("nan"))):
            lines.append(
                f"| {system} | {row['sampling_variance']:.4f} | {row['spread_log'] ** 2:.4f} | {100 * row['sampling_share']:.0f} % |"
            )
    lines += [
        "",
        "## Choice",
        "",
        f"- The candidate with the smallest root mean square spread over the systems (each pair's test has the "
        f"variance of both its systems, so the family's power follows the mean variance): **{chosen}** "
        f"({rms[chosen]:.3f} against the final FID's {rms['final FID']:.3f}, "
        f"{rms['final FID'] / rms[chosen]:.1f} times smaller; the smallest for {int(smallest.get(chosen, 0))} of "
        f"{len(pivot)} systems).",
        "- The suite's verdicts use the late FID (the last half): "
        + (
            "the measured choice."
            if chosen.startswith("late FID")
            else f"{chosen} measured sharper here; the last half is kept as it averages more of the late budget "
            "(fewer points weigh one oscillation more), and the difference is within what another set of seeds moves."
        ),
        *(
            [
                "- Sampling noise above half the seed variance of the final FID: "
                + ", ".join(f"{name} ({100 * share:.0f} %)" for name, share in noisy.items())
                + ": there more samples would sharpen the final FID "
                "(the late FID averages its points' draws)."
            ]
            if (noisy := {n: r["sampling_share"] for n, r in final.iterrows() if r.get("sampling_share", 0) > 0.5})
            else []
        ),
        "- Every model is scored on the same latent vectors and labels (common random numbers), so the sampling "
        "noise above is shared by the systems' scores rather than added to their differences; where its share is "
        "small, more samples would not sharpen the verdicts, more seeds would.",
        "",
        f"Rerun: `{command}`.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a results folder (run folders with their generators)")
    parser.add_argument("--latents", type=int, default=5, help="fresh latent draws per final generator (default 5)")
    parser.add_argument("--out", default="reports/verdicts", help="where estimand.md and .csv go")
    parser.add_argument("--collect-only", action="store_true", help="rewrite estimand.md from the estimand.csv in --out")
    args = parser.parse_args()
    table = pd.read_csv(Path(args.out) / "estimand.csv") if args.collect_only else measure(Path(args.results), args.latents)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "estimand.csv", index=False)
    command = ".venv/bin/python ci/estimand.py " + shlex.join(a for a in sys.argv[1:] if a != "--collect-only")
    (out / "estimand.md").write_text(markdown(table, Path(args.results), args.latents, command))
    print((out / "estimand.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
