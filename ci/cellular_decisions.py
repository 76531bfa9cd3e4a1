"""Count how often cellular's decisions come out differently on two CPU kernel sets (issue 59, item 5).

A cellular run logs every discrete decision in its cells' history (``history.<cell>[i].decisions``: the tournament
winners, the replacement, the (1+1)-ES acceptance, each with the z value of its closest call, the improvement in
standard errors of the paired difference; ``ranking.best_mixture_cell`` for the final choice). Two runs of the same
seed, one per kernel set, are aligned decision by decision (cell, iteration, position); a decision "flips" where the
two chose differently. Once one decision has flipped the runs hold other networks, so later decisions are taken on
other states: the first flip's iteration says how long a run stays the same run, the share of flips how far apart
the two runs' choices go.

For each margin (``cellular.decision_margin``), the runs of ``scenarios/cellular-decisions.yaml`` on the native kernel
set and under ``ATEN_CPU_CAPABILITY=default``:

    suite run scenarios/cellular-decisions.yaml --out results/cellular-decisions/native-margin0 --set cellular.decision_margin=0
    ATEN_CPU_CAPABILITY=default suite run scenarios/cellular-decisions.yaml --out results/cellular-decisions/default-margin0 --set cellular.decision_margin=0
    (the same with margin 2: native-margin2, default-margin2)
    .venv/bin/python ci/cellular_decisions.py results/cellular-decisions --out reports/cellular-decisions
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from suite.analysis.estimand import late_score
from suite.analysis.markdown import markdown_table
from suite.records.record import Record
from suite.records.results import atomic_write_text, read_records

KERNEL_SETS = ("native", "default")


def decisions(record: Record) -> dict[tuple, tuple[object, float | None]]:
    """Every decision of ``record``: (cell, iteration, position, op, side) -> (what was chosen, its z value)."""
    out: dict[tuple, tuple[object, float | None]] = {}
    history = record.history if isinstance(record.history, dict) else {}
    for cell, points in history.items():
        for point in points:
            for k, d in enumerate(getattr(point, "decisions", None) or []):
                z = d.get("z")
                closest = min((abs(v) for v in z if v is not None), default=None) if isinstance(z, list) else z
                key = (cell, getattr(point, "iteration", None), k, d.get("op"), d.get("side"))
                out[key] = (d.get("chosen"), None if closest is None else abs(float(closest)))
    return out


def compare_seed(native: Record, other: Record) -> dict:
    """One seed's decisions on both kernel sets: how many were compared, how many flipped, the first flip."""
    a, b = decisions(native), decisions(other)
    common = sorted(set(a) & set(b), key=lambda k: (k[1], k[0], k[2]))
    flips = [k for k in common if a[k][0] != b[k][0]]
    first = flips[0] if flips else None
    close = [k for k in common if (a[k][1] or 1.0) < 1.0]
    row = {
        "seed": native.seed,
        "decisions": len(common),
        "flipped": len(flips),
        "flip_share": len(flips) / len(common) if common else math.nan,
        "first_flip": f"iteration {first[1]}, {first[3]} {first[4] or ''} (|z| {_z(a[first][1])} / {_z(b[first][1])})".replace(
            "  ", " "
        )
        if first
        else "none",
        "close_calls": len(close),
        "best_cell_same": _best(native) == _best(other),
        "late_fid_native": late_score(native),
        "late_fid_other": late_score(other),
    }
    steps = [k for k in a if k[3] == "mixture"]
    row["es_accepted_native"] = f"{sum(a[k][0] == 'proposal' for k in steps)}/{len(steps)}"
    for op in ("tournament", "replace", "mixture"):
        keys = [k for k in common if k[3] == op]
        row[f"{op}_flipped"] = f"{sum(a[k][0] != b[k][0] for k in keys)}/{len(keys)}"
    late_a, late_b = late_score(native), late_score(other)
    row["log_shift"] = math.log(late_b / late_a) if late_a and late_b else math.nan
    return row


def _z(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _best(record: Record) -> object:
    part = record.strategy_part
    return getattr(part, "best_mixture_cell", None) if part is not None else None


def finished(record: Record) -> bool:
    """A run whose training and scoring finished: ok, or interrupted only after its record held its whole curve and
    history (a launcher stopped at its end; the report names such runs)."""
    if record.status == "ok":
        return True
    return (
        record.status == "interrupted"
        and bool(record.curve)
        and isinstance(record.history, dict)
        and all(record.history.values())
    )


def compare(folder: Path) -> pd.DataFrame:
    """Per margin and seed, the comparison of the two kernel sets' runs under ``folder/<set>-margin<m>``."""
    rows = []
    for native_dir in sorted(folder.glob("native-margin*")):
        margin = native_dir.name.removeprefix("native-margin")
        other_dir = folder / f"default-margin{margin}"
        if not other_dir.is_dir():
            continue
        native = {r.seed: r for r in read_records(native_dir) if finished(r) and r.seed is not None}
        other = {r.seed: r for r in read_records(other_dir) if finished(r) and r.seed is not None}
        for seed in sorted(set(native) & set(other)):
            row = compare_seed(native[seed], other[seed])
            stopped = [k for k, r in (("native", native[seed]), ("other", other[seed])) if r.status != "ok"]
            rows.append(
                {"margin": float(margin), **row, "note": f"{', '.join(stopped)} run interrupted at its end" if stopped else ""}
            )
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per margin: decisions compared and flipped over all seeds, and the kernel sets' late-FID shifts."""
    out = []
    for margin, part in table.groupby("margin"):
        out.append(
            {
                "margin": margin,
                "seeds": len(part),
                "decisions": int(part["decisions"].sum()),
                "flipped": int(part["flipped"].sum()),
                "flip_share": part["flipped"].sum() / part["decisions"].sum(),
                "seeds_without_flip": int((part["flipped"] == 0).sum()),
                "best_cell_same": f"{int(part['best_cell_same'].sum())}/{len(part)}",
                "es_accepted_native": _sum_shares(part["es_accepted_native"]),
                "log_shifts": ", ".join(f"{v:+.2f}" for v in part["log_shift"]),
            }
        )
    return pd.DataFrame(out)


def _sum_shares(shares: pd.Series) -> str:
    """``"a/b"`` strings summed: ``"sum a/sum b"``."""
    pairs = [tuple(int(x) for x in str(v).split("/")) for v in shares]
    return f"{sum(p[0] for p in pairs)}/{sum(p[1] for p in pairs)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="folder with native-margin<m> and default-margin<m> results")
    parser.add_argument("--out", type=Path, default=Path("reports/cellular-decisions"))
    args = parser.parse_args()
    table = compare(args.results)
    if table.empty:
        raise SystemExit(f"{args.results}: no native-margin<m> / default-margin<m> pair of finished runs")
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "decisions.csv", index=False)
    shown = table.copy()
    for column in ("flip_share", "late_fid_native", "late_fid_other", "log_shift"):
        shown[column] = shown[column].map(lambda v: f"{v:.3g}" if isinstance(v, float) and math.isfinite(v) else str(v))
    brief = summary(table)
    brief["flip_share"] = brief["flip_share"].map(lambda v: f"{v:.1%}")
    lines = [
        "# Cellular's decisions on two CPU kernel sets\n",
        f"Made by `ci/cellular_decisions.py` from `{args.results}` (`scenarios/cellular-decisions.yaml`: the main job's "
        "cellular entry, 1x2 grid, 2 processes, 3,840 images; each seed on the native kernel set and under "
        "`ATEN_CPU_CAPABILITY=default`, with `cellular.decision_margin` 0, the papers' strictly-lower rule, and with "
        "the margin). A decision flips where the two kernel sets' runs of a seed chose differently at the same cell, "
        "iteration and place; after the first flip the runs hold other networks. `close_calls`: decisions (native run) "
        "whose closest call was within 1 standard error. `log_shift`: log late FID, default minus native.\n",
        "## Per margin\n",
        markdown_table(brief),
        "",
        "## Per seed\n",
        markdown_table(shown),
        "",
    ]
    atomic_write_text(args.out / "decisions.md", "\n".join(lines))
    print(args.out / "decisions.md")


if __name__ == "__main__":
    main()
