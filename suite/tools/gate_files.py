"""What ``suite gate`` writes beside ``gate.json``: the one-line summary, ``gate.md`` and ``pairs.csv``
(:mod:`suite.tools.gate` runs the gate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.stats import paired
from ..config.escape import csv_text
from ..records.results import atomic_write_text


@dataclass
class GateResult:
    """What a gate run found; written to ``gate.json``."""

    verdict: str
    exit_code: int
    reason: str
    sides: dict[str, dict[str, Any]]
    settings: dict[str, Any]
    host: dict[str, Any]
    pairs: list[dict[str, Any]]
    verdicts: list[dict[str, Any]]
    minutes: float
    discarded: list[dict[str, Any]] = field(default_factory=list)
    """Pairs run again because other processes used the host meanwhile (their ``foreign_cores``)."""


MANY_PAIRS = 50
"""Beyond this many more pairs the summary says the change is too close to the threshold instead of a count."""


def summary_line(verdict: str, verdicts: list[dict[str, Any]], threshold: float) -> str:
    """One line: the verdict and what decided it."""
    if verdict == paired.FAIL:
        bad = [v for v in verdicts if v["verdict"] == paired.FAIL]
        return "FAIL: " + "; ".join(f"{v['run_id']} {v['metric']} {_change_text(v)}" for v in bad)
    if verdict == paired.INCONCLUSIVE:
        open_ = [v for v in verdicts if v["verdict"] == paired.INCONCLUSIVE]
        if broken := [v["problem"] for v in open_ if v.get("problem")]:  # the baseline recorded no usable value
            return "INCONCLUSIVE: " + "; ".join(broken)
        more = max((v.get("more_pairs") or 0 for v in open_), default=0)
        if more > MANY_PAIRS:  # the mean sits on the threshold: more pairs narrow the bound only slowly
            hint = f"; the change is close to the threshold: more than {MANY_PAIRS} more pairs would be needed"
        else:
            hint = f"; about {more} more pairs would decide (raise --max-pairs)" if more else ""
        return f"INCONCLUSIVE: too noisy to tell for {', '.join(v['run_id'] + ' ' + v['metric'] for v in open_)}{hint}"
    return f"PASS: no metric is worse by {threshold:g} % or more"


def _change_text(v: dict[str, Any]) -> str:
    if v.get("problem"):  # a record without a usable value (suite.tools.gate._unusable)
        return str(v["problem"])
    if "change_pct" in v:
        return (
            f"{v['change_pct']:+.1f} % worse (p = {v['p_value']:.3g})"
            if v.get("p_value") is not None
            else f"{v['change_pct']:+.1f} %"
        )
    return f"FID {v.get('change', 0):+.3g} (p = {v.get('p_value')})"


def write_pairs_csv(path: Path, pairs: list[dict[str, Any]]) -> None:
    """One row per pair, side and run: the metrics the verdicts used."""
    import pandas as pd

    rows = [
        {"pair": p["pair"], "seed": p["seed"], "order": p["order"], "side": key, "run_id": rid, **values}
        for p in pairs
        for key in "AB"
        for rid, values in p[key].items()
    ]
    atomic_write_text(path, csv_text(pd.DataFrame(rows)))


def markdown(result: GateResult) -> str:
    """``gate.md``: the sides, the verdict per metric, and the overall verdict."""
    unknown = {"label": "not set up", "commit": "", "venv": "none", "env": {}}
    a, b = result.sides.get("A", unknown), result.sides.get("B", unknown)
    lines = [
        f"# Regression gate: {result.verdict}",
        "",
        result.reason,
        "",
        f"- A (baseline): {a['label']} `{a['commit'][:12]}`; B (candidate): {b['label']} `{b['commit'][:12]}`"
        + (f", with {b['env']}" if b["env"] else ""),
        f"- host {result.host['host']} ({result.host['cpus']} CPUs); {len(result.pairs)} pairs, interleaved A B B A, "
        f"after one warm-up run per side; {len(result.discarded)} pairs discarded (host busy); {result.minutes:.1f} min; "
        f"baseline venv {a['venv']}",
        f"- regression: worse by {result.settings['threshold']:g} % or more and significant at "
        f"{result.settings['alpha']:g} (Wilcoxon signed-rank, one-sided); PASS: the one-sided "
        f"{1 - result.settings['alpha']:.0%} upper bound of the mean change is below the threshold",
        "",
        "| run | metric | verdict | pairs | median A | median B | mean change (B vs A) | upper bound | p | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in result.verdicts:
        if "change_pct" in v:
            change = f"{v['change_pct']:+.1f} %"
            upper = f"{v['upper_pct']:+.1f} %" if v.get("upper_pct") is not None else "n/a (too few pairs)"
        else:
            change = f"{v['change']:+.3g}" if v.get("change") is not None else ""
            upper = f"{v['upper']:+.3g}" if v.get("upper") is not None else ""
        p = f"{v['p_value']:.3g}" if v.get("p_value") is not None else ""
        note = v.get("note") or (f"~{v['more_pairs']} more pairs" if v.get("more_pairs") else "")
        ma = f"{v['median_a']:.4g}" if v.get("median_a") is not None else ""
        mb = f"{v['median_b']:.4g}" if v.get("median_b") is not None else ""
        lines.append(
            f"| {v['run_id']} | {v['metric']} | {v['verdict']} | {v['pairs']} | {ma} | {mb} | {change} | {upper} | {p} | {note} |"
        )
    lines += [
        "",
        "Speed changes are B's time over A's (images/s inverted); positive is slower. Exit codes: 0 PASS, 1 FAIL, 5 INCONCLUSIVE, 2 bad input.",
        "",
    ]
    return "\n".join(lines)
