"""The report's rows for runs whose numbers say nothing about the method's quality: those that
diverged (:mod:`suite.gan.divergence`) and those whose model has not learned
(:func:`suite.measure.metrics.signals.not_learned`, which includes samples that could not be scored)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measure.metrics.signals import not_learned
from ..records.record import Record
from .markdown import cell


@dataclass(frozen=True)
class OutcomeRow:
    """A row of the table: the run (and which of its models), its status, the step it diverged at, and why."""

    run_id: str
    status: str
    step: Any
    """The step of the first value out of bounds (the record's free-form ``diverged.step``), None where none."""
    reason: str | None


def outcome_rows(records: list[Record]) -> list[OutcomeRow]:
    """One row per diverged run, then per scored model that has not learned: run, status, step, reason."""
    rows = []
    for r in sorted(records, key=lambda r: r.run_id or ""):
        if r.status == "diverged":
            step = (r.diverged or {}).get("step")
            rows.append(OutcomeRow(f"{r.run_id}", "diverged", step, r.reason))
        elif r.status == "ok":
            for name, quality in (("", r.quality), (" (best cell)", r.quality_best_cell)):
                reasons = not_learned(quality) if quality is not None else []
                if reasons:
                    rows.append(OutcomeRow(f"{r.run_id}{name}", "not learned", None, "; ".join(reasons)))
    return sorted(rows, key=lambda row: row.status != "diverged")  # stable: by run id within each


def outcomes_section(records: list[Record]) -> list[str]:
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
        cells = [row.run_id, row.status, "" if row.step is None else str(row.step), str(row.reason)]
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return [*lines, ""]
