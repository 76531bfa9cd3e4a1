"""Compare one scenario run on two CPU kernel sets: do the claims contradict, and is the kernel set's spread within the seeds'?

PyTorch's CPU kernels depend on the instruction set it dispatches to (``ATEN_CPU_CAPABILITY``), so the
same seed gives another model on another kernel set. This treats the kernel set as one more source of
seed-like variation and measures it on the end-of-budget FID the verdicts compare: the main job's five systems at P = 2
over the seeds of its first block (``scenarios/kernel-sets.yaml``), on the machine's native kernel set (the main
job's own runs, ``reports/digits``) and on another (``ATEN_CPU_CAPABILITY=default``: no vector kernels), then,
per system, over the seeds both have,

* the spread between seeds: the standard deviation of log end FID over the seeds, on each kernel set;
* the spread between kernel sets: each seed's log end FID difference between the two sets, whose standard
  deviation over seeds divided by sqrt(2) is one draw's kernel-set part, to set beside the seeds' (a pure
  seed-like effect would give about the seeds' own spread);
* whether the two sets' claims contradict: the report's own end-FID family (every pair better, equivalent or
  undecided, one look at the common seeds) on each set, and any pair claimed one way on one set and the other way
  on the other.

    ATEN_CPU_CAPABILITY=default suite run scenarios/kernel-sets.yaml --out results/kernel-sets/default
    .venv/bin/python ci/kernel_sets.py reports/digits results/kernel-sets/default --out reports/kernel-sets
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from suite.analysis import findings as found_in
from suite.analysis.estimand import end_fid
from suite.analysis.headline import headline_rows
from suite.analysis.markdown import markdown_table
from suite.analysis.stats.pair_tests import TEST, TESTS
from suite.analysis.systems import system_name
from suite.records.record import Record
from suite.records.results import atomic_write_text, read_records


def _kernel_set(records: list[Record]) -> str:
    machines = {(r.machine.cpu_capability, r.machine.numerics) for r in records if r.machine}
    return "; ".join(f"{isa} (numerics {digest})" for isa, digest in sorted(machines, key=str))


def _fids(records: list[Record]) -> dict[str, dict[int, float]]:
    """Per system, per seed, the end-of-budget FID of its P = 2 run."""
    out: dict[str, dict[int, float]] = {}
    for r in records:
        end = end_fid(r) if r.status == "ok" and r.procs == 2 else None
        if end is not None and r.seed is not None:
            out.setdefault(system_name(r), {})[r.seed] = end
    return out


def _common(records: list[Record], seeds: set[int]) -> list[Record]:
    """The P = 2 runs of ``seeds``, as one look at fixed seeds (their seed policy left out)."""
    kept = [r for r in records if r.procs == 2 and r.seed in seeds]
    for r in kept:
        if r.settings and isinstance(r.settings.get("train"), dict):
            r.settings = {**r.settings, "train": {**r.settings["train"], "seeds": None}}
    return kept


def _claims(records: list[Record]) -> set[tuple[str, str]]:
    for finding in found_in.tested_findings(headline_rows(records, {}), records, {}):
        if finding.quantity == found_in.END_FID and finding.family is not None:
            return {(p.first.split(" (")[0], p.second.split(" (")[0]) for p in finding.family.claims}
    return set()


def compare(native: list[Record], other: list[Record]) -> tuple[pd.DataFrame, dict]:
    """Per system the seed and kernel-set spreads; and the claims of each set, with the contradictions."""
    a, b = _fids(native), _fids(other)
    rows = []
    for system in sorted(set(a) & set(b)):
        seeds = sorted(set(a[system]) & set(b[system]))
        la = np.log([a[system][s] for s in seeds])
        lb = np.log([b[system][s] for s in seeds])
        diff = lb - la
        rows.append(
            {
                "system": system,
                "seeds": len(seeds),
                "fid_native": ", ".join(f"{a[system][s]:.1f}" for s in seeds),
                "fid_other": ", ".join(f"{b[system][s]:.1f}" for s in seeds),
                "seed_sd_native": float(np.std(la, ddof=1)),
                "seed_sd_other": float(np.std(lb, ddof=1)),
                "kernel_sd": float(np.std(diff, ddof=1) / math.sqrt(2)),
                "mean_shift": float(np.mean(diff)),
            }
        )
    table = pd.DataFrame(rows)
    if not table.empty:
        table["seed_sd"] = np.sqrt((table["seed_sd_native"] ** 2 + table["seed_sd_other"] ** 2) / 2)
        table["within_seeds"] = table["kernel_sd"] <= table["seed_sd"]
    seeds = {s for system in set(a) & set(b) for s in set(a[system]) & set(b[system])}
    claims_a, claims_b = _claims(_common(native, seeds)), _claims(_common(other, seeds))
    contradictions = sorted((x, y) for x, y in claims_a if (y, x) in claims_b)
    return table, {"native": sorted(claims_a), "other": sorted(claims_b), "contradictions": contradictions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("native", type=Path, help="results (or report) folder of the native kernel set")
    parser.add_argument("other", type=Path, help="results (or report) folder of the other kernel set")
    parser.add_argument("--out", type=Path, default=Path("reports/kernel-sets"))
    args = parser.parse_args()
    native, other = read_records(args.native), read_records(args.other)
    table, claims = compare(native, other)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "kernel-sets.csv", index=False)
    within = int(table["within_seeds"].sum()) if not table.empty else 0
    shown = table.copy()
    for column in ("seed_sd_native", "seed_sd_other", "seed_sd", "kernel_sd", "mean_shift"):
        shown[column] = shown[column].map(lambda v: f"{v:.3f}")

    def listing(pairs: list[tuple[str, str]]) -> str:
        return "; ".join(f"{x} better than {y}" for x, y in pairs) or "none"

    lines = [
        "# The same scenario on two CPU kernel sets\n",
        f"Made by `ci/kernel_sets.py` from `{args.native}` and `{args.other}` (`scenarios/kernel-sets.yaml`: the main "
        "job's five systems at P = 2 over the seeds both have), on the end-of-budget FID the verdicts compare. Native kernel set: "
        f"{_kernel_set(native)}; other: {_kernel_set(other)}.\n",
        "Per system, log end-FID spreads: `seed_sd_*` the standard deviation over seeds on each set, `seed_sd` their "
        "root mean square; `kernel_sd` one draw's kernel-set part (the standard deviation over seeds of each seed's "
        "log FID difference between the sets, over sqrt(2)); `mean_shift` the mean of those differences (other minus "
        "native; a systematic shift would show here).\n",
        markdown_table(shown),
        "",
        f"- Kernel-set spread within the seeds' spread for {within} of {len(table)} systems.",
        f"- End-FID claims on the native set (every pair, {TESTS[TEST].words} on log values, with equivalence within "
        f"the job's margin, Holm with Shaffer's count at 5 %, one look at the common seeds): {listing(claims['native'])}.",
        f"- End-FID claims on the other set: {listing(claims['other'])}.",
        f"- Contradictions (a pair claimed one way on one set and the other way on the other): "
        f"{listing(claims['contradictions'])}.",
        "",
        f"Rerun: `ATEN_CPU_CAPABILITY=default suite run scenarios/kernel-sets.yaml --out {args.other}`, then "
        f"`.venv/bin/python ci/kernel_sets.py {args.native} {args.other} --out {args.out}`.",
        "",
    ]
    atomic_write_text(args.out / "kernel-sets.md", "\n".join(lines))
    print(args.out / "kernel-sets.md")


if __name__ == "__main__":
    main()
