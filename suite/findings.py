"""The report's first screen: one row per strategy, the checks the suite verifies, and the
findings the numbers support, each with the caveat that applies.

Everything here reads the run records (and the scaling tables built from them); nothing is
measured again. A row describes a *configuration* (strategy / loss / engine [label]) at the
largest process count it ran; speedup and efficiency come from its scaling sweeps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .metrics.signals import not_learned
from .record import record_field

PLACEMENT_INVARIANT = {"cellular"}
"""Strategies whose model must not depend on how many ranks trained it (label_partitioned too, while P <= C)."""


def config_name(record: dict) -> str:
    """strategy / loss / engine [label]: what a headline row describes."""
    name = f"{record['strategy']} / {record['loss']} / {record['engine']}"
    return name + (f" [{record['label']}]" if record.get("label") else "")


def _mean(values: Iterable[Any]) -> float | None:
    numbers = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(numbers)) if numbers else None


def main_runs(runs: list[dict]) -> tuple[list[dict], int]:
    """The runs a headline row reports: the strong sweep's largest P (else the weak sweep's)."""
    strong = [r for r in runs if r["scaling"] == "strong"] or runs
    top = max(r["procs"] for r in strong)
    return [r for r in strong if r["procs"] == top], top


def placement_invariant(record: dict) -> bool:
    """Whether this run's model should be bitwise the same on any number of ranks."""
    if record["strategy"] == "label_partitioned":  # one rank per class GAN: nothing is summed across ranks
        return record["procs"] <= len(record.get("classes") or [])
    return record["strategy"] in PLACEMENT_INVARIANT


def checks(runs: list[dict], everything: list[dict]) -> list[str]:
    """The equivalences the suite verifies for one configuration, as short statements."""
    out = []
    identical = [r.get("replicas_identical") for r in runs if r.get("replicas_identical") is not None]
    if identical:
        out.append("replicas identical" if all(identical) else "REPLICAS DIFFER")
    strong = [r for r in runs if r["scaling"] == "strong" and r.get("model_digest") and r.get("repeat", 0) == 0]
    if len({r["procs"] for r in strong}) > 1 and all(placement_invariant(r) for r in strong):
        procs = ",".join(str(p) for p in sorted({r["procs"] for r in strong}))
        same = len({r["model_digest"] for r in strong}) == 1
        out.append(f"same model on P={procs}" if same else f"MODEL DIFFERS across P={procs}")
    # the same strategy on other engines: the same model?
    for r in strong:
        twins = [
            o
            for o in everything
            if o.get("model_digest")
            and o["engine"] != r["engine"]
            and (o["strategy"], o["loss"], o["procs"], o["scaling"], o.get("repeat", 0))
            == (r["strategy"], r["loss"], r["procs"], r["scaling"], r.get("repeat", 0))
        ]
        equal = sorted({o["engine"] for o in twins if o["model_digest"] == r["model_digest"]})
        if equal:
            out.append(f"same model as {'/'.join(equal)} at P={r['procs']}")
    return out


def headline(records: list[dict], scaling: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per configuration: the numbers a reader decides with.

    ``scaling`` holds the report's strong and weak scaling tables (:func:`suite.report.scaling_table`).
    """
    by_config: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r.get("status") == "ok":
            by_config[config_name(r)].append(r)
    rows = []
    for name, runs in sorted(by_config.items()):
        main, top = main_runs(runs)
        row: dict[str, Any] = {
            "strategy": name,
            "P": ",".join(str(p) for p in sorted({r["procs"] for r in runs})),
            "train_s": _mean(r["train_s"] for r in main),
            "speedup": None,
            "efficiency": None,
            "weak_efficiency": None,
            "comm_share": _mean(record_field(r, "telemetry.comm_share") for r in main),
            "images_per_s": _mean(r.get("images_per_s") for r in main),
            "time_to_target": None,
            "fid": None,
            "kid": None,
            "quality": None,
            "checks": "; ".join(checks(runs, records)),
        }
        for kind in ("strong", "weak"):
            table = scaling.get(kind)
            if table is None or table.empty:
                continue
            part = table[table["config"].str.startswith(name)]
            part = part[part["procs"] == part["procs"].max()] if not part.empty else part
            if not part.empty and part["procs"].iloc[0] > 1:
                if kind == "strong":
                    row["speedup"], row["efficiency"] = part["speedup"].iloc[0], part["efficiency"].iloc[0]
                else:
                    work = part["efficiency_work"].iloc[0]
                    row["weak_efficiency"] = part["efficiency"].iloc[0] if work is None or pd.isna(work) else work
        qualities = [r["quality"] for r in main if r.get("quality")]
        if qualities:
            q = qualities[0]
            row["fid"], row["kid"] = _mean(x.get("fid") for x in qualities), _mean(x.get("kid_mean") for x in qualities)
            row["quality"] = f"{q['features']}, n={q['n']}"
        targets = [r["time_to_target"] for r in main if r.get("time_to_target")]
        if targets:
            row["time_to_target"] = _target_text(targets)
        row["_top"], row["_main"] = top, main
        rows.append(row)
    return pd.DataFrame(rows)


def _target_text(targets: list[dict]) -> str:
    reached = [t["clock_s"] for t in targets if t["reached"]]
    if len(reached) == len(targets):
        return f"{np.mean(reached):.1f} s"
    best = _mean(t["best"] for t in targets)
    return "not reached" + (f" (best {best:.3g})" if best is not None else "")


def _caveats(row: dict, records: list[dict], scaling: dict[str, pd.DataFrame]) -> list[str]:
    """What weakens a finding about one configuration."""
    out = []
    main = row["_main"]
    if any(r.get("oversubscribed") for r in main):
        out.append(f"its P={row['_top']} runs oversubscribe the cores")
    for kind, table in scaling.items():
        part = table[table["config"].str.startswith(row["strategy"])] if not table.empty else table
        if not part.empty and len({t for value in part["threads_per_rank"] for t in str(value).split(",")}) > 1:
            out.append(f"threads per rank differ across its {kind} sweep")
    reasons = sorted({reason for r in main if r.get("quality") for reason in not_learned(r["quality"])})
    if reasons:
        out.append("its model did not learn (" + "; ".join(reasons) + ")")
    if any(r.get("budget_s") for r in main):
        out.append("time-budgeted runs: speedup compares throughput")
    return out


def _sentence(claim: str, caveats: list[str]) -> str:
    return claim + (f" Caveat: {', '.join(caveats)}." if caveats else "")


def findings(table: pd.DataFrame, records: list[dict], scaling: dict[str, pd.DataFrame]) -> list[str]:
    """A few sentences stating what the headline numbers support, each with its caveats."""
    if table.empty:
        return []
    rows = table.to_dict("records")
    out = []
    target = next((r["time_to_target"] for r in records if r.get("status") == "ok" and r.get("time_to_target")), None)
    if target is not None:
        what = f"{target['metric'].upper()} <= {target['target']:g} ({target['features']}, n={target['n']})"
        timed = []
        for row in rows:
            clocks = [r["time_to_target"]["clock_s"] for r in row["_main"] if (r.get("time_to_target") or {}).get("reached")]
            if clocks and len(clocks) == len(row["_main"]):
                timed.append((float(np.mean(clocks)), row))
        if timed:
            clock, best = min(timed, key=lambda t: t[0])
            out.append(
                _sentence(
                    f"Fastest to {what}: {best['strategy']} in {clock:.1f} s of training at P={best['_top']}.",
                    _caveats(best, records, scaling),
                )
            )
        else:
            out.append(f"No strategy reached {what} in these runs.")
    scored = [row for row in rows if row["fid"] is not None]
    networks = {row["quality"] for row in scored}
    if scored and len(networks) == 1:
        best = min(scored, key=lambda row: row["fid"])
        out.append(
            _sentence(
                f"Best final quality: {best['strategy']} at P={best['_top']}, FID {best['fid']:.3g}"
                + (f", KID {best['kid']:.3g}" if best["kid"] is not None else "")
                + f" ({best['quality']}).",
                _caveats(best, records, scaling),
            )
        )
    elif len(networks) > 1:
        out.append("Final qualities were measured with different feature networks or sample counts and are not ranked.")
    scaled = [row for row in rows if row["efficiency"] is not None and not pd.isna(row["efficiency"])]
    if scaled:
        top = max(row["_top"] for row in scaled)
        at_top = [row for row in scaled if row["_top"] == top]
        best = max(at_top, key=lambda row: row["efficiency"])
        out.append(
            _sentence(
                f"Best strong-scaling efficiency at P={top}: {best['strategy']}, E = {best['efficiency']:.2f} "
                f"(speedup {best['speedup']:.2f}).",
                _caveats(best, records, scaling),
            )
        )
    return out


def not_learned_warnings(records: list[dict]) -> list[str]:
    """One line per scored model that has not learned, with the reasons."""
    out = []
    for r in records:
        if r.get("status") != "ok":
            continue
        for name, quality in (("", r.get("quality")), (" (best cell)", r.get("quality_best_cell"))):
            reasons = not_learned(quality) if quality else []
            if reasons:
                out.append(f"{r['run_id']}{name} has not learned: {'; '.join(reasons)}.")
    return out
