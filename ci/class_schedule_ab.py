"""Compare the label-partitioned class schedules from a run of ``scenarios/class-schedule.yaml``.

For each process count: each schedule's images/s (geometric mean over repeats with the 95 %
Student-t interval of the log values, exponentiated), and the paired ratio sequential / interleaved
(repeat k of one against repeat k of the other, which ran next to each other), geometric mean with
its 95 % interval and the two-sided Wilcoxon signed-rank p-value of the log ratios. Prints a
markdown table.

    .venv/bin/suite run scenarios/class-schedule.yaml --out /tmp/ab
    .venv/bin/python ci/class_schedule_ab.py /tmp/ab/class-schedule
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suite.records.results import iter_records  # noqa: E402

SCHEDULES = ("interleaved", "sequential")


def geometric(values: list[float], digits: int = 0) -> str:
    """``geomean [lo, hi]`` from the 95 % t-interval of the logs, to ``digits`` decimals."""
    logs = np.log(values)
    half = stats.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
    mean, lo, hi = (math.exp(v) for v in (logs.mean(), logs.mean() - half, logs.mean() + half))
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="the scenario's results folder (RESULTS/class-schedule)")
    args = parser.parse_args(argv)
    rate: dict[tuple[str, int, int], float] = {}
    for r in iter_records(args.results):
        if r.status == "ok" and r.label in SCHEDULES:
            if r.procs is not None and r.images_per_s is not None:
                rate[(r.label, r.procs, r.repeat or 0)] = r.images_per_s
    print("| P | pairs | interleaved images/s | sequential images/s | sequential / interleaved (paired) | Wilcoxon p |")
    print("|---|---|---|---|---|---|")
    for procs in sorted({p for _, p, _ in rate}):
        repeats = sorted(k for s, p, k in rate if s == SCHEDULES[0] and p == procs and (SCHEDULES[1], p, k) in rate)
        if len(repeats) < 2:
            continue
        a = [rate[(SCHEDULES[0], procs, k)] for k in repeats]
        b = [rate[(SCHEDULES[1], procs, k)] for k in repeats]
        ratios = [y / x for x, y in zip(a, b)]
        p = stats.wilcoxon(np.log(ratios)).pvalue
        print(f"| {procs} | {len(repeats)} | {geometric(a)} | {geometric(b)} | {geometric(ratios, 3)} | {p:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
