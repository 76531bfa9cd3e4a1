"""The report's rows for runs whose numbers say nothing about the method's quality: those that
diverged (:mod:`suite.gan.divergence`) and those whose model has not learned
(:func:`suite.measure.metrics.signals.not_learned`, which includes samples that could not be scored)."""

from __future__ import annotations

from ..measure.metrics.signals import not_learned
from .markdown import cell


def outcome_rows(records: list[dict]) -> list[dict]:
    """One row per diverged run, then per scored model that has not learned: run, status, step, reason."""
    rows = []
    for r in sorted(records, key=lambda r: r.get("run_id") or ""):
        if r.get("status") == "diverged":
            step = (r.get("diverged") or {}).get("step")
            rows.append({"run_id": r["run_id"], "status": "diverged", "step": step, "reason": r.get("reason")})
        elif r.get("status") == "ok":
            for name, quality in (("", r.get("quality")), (" (best cell)", r.get("quality_best_cell"))):
                reasons = not_learned(quality) if quality else []
                if reasons:
                    rows.append(
                        {"run_id": r["run_id"] + name, "status": "not learned", "step": None, "reason": "; ".join(reasons)}
                    )
    return sorted(rows, key=lambda row: row["status"] != "diverged")  # stable: by run id within each


def outcomes_section(records: list[dict]) -> list[str]:
    """``## Diverged and not learned``: a table of :func:`outcome_rows`, or nothing when there are none."""
    rows = outcome_rows(records)
    if not rows:
        return []
    lines = [
        "## Diverged and not learned\n",
        "These runs are left out of the quality comparisons: a diverged run stopped at its first loss or parameter "
        "norm out of bounds and was not scored; a model that has not learned scores like an untrained one.\n",
        "| run | status | step | reason |",
        "|---|---|---|---|",
    ]
    for row in rows:
        cells = [row["run_id"], row["status"], "" if row["step"] is None else str(row["step"]), str(row["reason"])]
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return [*lines, ""]
