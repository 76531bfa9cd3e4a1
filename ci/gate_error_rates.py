"""Measure the regression gate's error rates: A/A false alarms and the detection of a 15 % slowdown.

Runs ``suite gate`` from this checkout against itself (``--baseline HEAD``: an A/A gate) and with
``--inject-slowdown 0.15`` (B's every step takes 15 % longer), alternately, ``--repeats`` times
each, with the gate's default settings otherwise. Alternating spreads the host's drift over both
kinds. Every gate keeps its folder under ``--work``; a rerun skips gates already done, so an
interrupted measurement continues. Writes ``error-rates.csv`` (one row per gate) and
``error-rates.md`` (the rates with Clopper-Pearson 95 % intervals, the host, the N) into ``--out``.

    .venv/bin/python ci/gate_error_rates.py --repeats 20 --out reports/gate

The tree must be clean (the gate refuses a dirty candidate). Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
KINDS = {"a-a": [], "slowdown-15": ["--inject-slowdown", "0.15"]}
"""Each kind of gate and its extra options."""


def run_gate(kind: str, index: int, work: Path, collect_only: bool = False) -> dict | None:
    """One gate of ``kind`` (or the one already in ``work``): its gate.json plus the kind and exit code."""
    out = work / f"{kind}-{index:02d}"
    done_file = out / "gate.json"
    if collect_only and not done_file.exists():
        return None
    if not collect_only and (not done_file.exists() or json.loads(done_file.read_text()).get("verdict") == "ERROR"):
        command = [sys.executable, "-m", "suite", "gate", "--baseline", "HEAD", "--out", str(out), *KINDS[kind]]
        began = time.monotonic()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        print(
            f"{kind} #{index}: exit {done.returncode} in {time.monotonic() - began:.0f} s: {done.stderr.strip().splitlines()[-1:]}",
            flush=True,
        )
    gate = json.loads(done_file.read_text())
    speed = {v["metric"]: v for v in gate["verdicts"] if v["metric"] == "images_per_s"}
    a_speeds = [v["images_per_s"] for p in gate["pairs"] for v in p["A"].values()]
    return {
        "kind": kind,
        "gate": index,
        "verdict": gate["verdict"],
        "exit_code": gate["exit_code"],
        "pairs": len(gate["pairs"]),
        "minutes": round(gate["minutes"], 2),
        "images_per_s_change_pct": round(speed["images_per_s"]["change_pct"], 2) if speed else None,
        "a_images_per_s_median": round(statistics.median(a_speeds), 1) if a_speeds else None,
        "a_images_per_s_min": round(min(a_speeds), 1) if a_speeds else None,
        "commit": gate["sides"].get("B", {}).get("commit", "")[:12],
        "discarded_pairs": len(gate.get("discarded", [])),
        "reason": gate["reason"],
        "settings": gate["settings"],
    }


def rate_text(hits: int, n: int) -> str:
    """``k/n = r % [lo, hi]`` with the Clopper-Pearson 95 % interval."""
    ci = stats.binomtest(hits, n).proportion_ci(0.95, method="exact")
    return f"{hits}/{n} = {100 * hits / n:.0f} % [{100 * ci.low:.0f}, {100 * ci.high:.0f}]"


def markdown(table: pd.DataFrame, conditions: str, settings: dict) -> str:
    """The rates, the verdict counts and the conditions."""
    aa, slow = table[table.kind == "a-a"], table[table.kind == "slowdown-15"]
    lines = [
        "# The regression gate's measured error rates",
        "",
        f"Host `{platform.node()}`, {os.cpu_count()} CPUs; {conditions}. The gate's settings (workload "
        f"`{Path(settings['scenario']).name}`, threshold {settings['threshold']:g} %, alpha {settings['alpha']:g}, "
        f"{settings['min_pairs']} to {settings['max_pairs']} pairs, {settings['max_minutes']:g} minutes at most); "
        "measured by `ci/gate_error_rates.py`, A/A and slowdown gates alternating.",
        "",
        "| experiment | gates | FAIL | PASS | INCONCLUSIVE | rate [95 % CI] | goal | pairs (median) | minutes per gate (median, max) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, part, what, goal in (
        ("A/A (baseline = candidate)", aa, "false alarms", "<= 5 %"),
        ("15 % slower steps injected in B", slow, "detections", ">= 95 %"),
    ):
        part = part[part.verdict != "ERROR"]
        if part.empty:
            continue
        counts = part.verdict.value_counts()
        fails = int(counts.get("FAIL", 0))
        lines.append(
            f"| {name} | {len(part)} | {fails} | {int(counts.get('PASS', 0))} | {int(counts.get('INCONCLUSIVE', 0))} | "
            f"{what}: {rate_text(fails, len(part))} | {goal} | {part.pairs.median():.0f} | "
            f"{part.minutes.median():.1f}, {part.minutes.max():.1f} |"
        )
    errors = table[table.verdict == "ERROR"]
    if not errors.empty:
        lines += ["", f"Ended in ERROR and left out: {', '.join(f'{k} #{g}' for k, g in zip(errors.kind, errors.gate))}."]
    lines += [
        "",
        "A false alarm is a FAIL on an A/A gate; a detection is a FAIL on a slowdown gate (INCONCLUSIVE counts as "
        "missed). A gate that ended in ERROR (exit 2: a run failed) is left out of the rates and listed in "
        "`error-rates.csv`, which has every gate with the median and lowest images/s of its A side (a host busy "
        "with other work shows there); each gate's own `gate.md` and runs were kept in the work folder.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20, help="gates of each kind (default 20)")
    parser.add_argument("--out", default="reports/gate", help="where error-rates.md and .csv go")
    parser.add_argument("--work", default="results/gate-error-rates", help="the gates' folders (kept; reruns skip done gates)")
    parser.add_argument("--collect-only", action="store_true", help="write the tables from the gates already done")
    parser.add_argument(
        "--conditions", default="nothing else running", help="what else the host did meanwhile, for the report's text"
    )
    args = parser.parse_args()
    work, out = Path(args.work).resolve(), Path(args.out)
    rows = []
    for index in range(args.repeats):
        for kind in KINDS:
            row = run_gate(kind, index, work, args.collect_only)
            if row is None:
                continue
            rows.append(row)
            table = pd.DataFrame(rows).drop(columns="settings")
            out.mkdir(parents=True, exist_ok=True)
            table.to_csv(out / "error-rates.csv", index=False)
            (out / "error-rates.md").write_text(markdown(table, args.conditions, rows[0]["settings"]))
    print((out / "error-rates.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
