"""The report's headline: a short table on the first page, and every column on its own detail page.

The short table has one row per strategy (and engine) at its largest process count: its final quality,
its throughput and its strong-scaling speedup, each an estimate with its 95 % interval, and a ``verdict``
that says in a few words what the tests of the findings below it found (:func:`suite.analysis.findings.verdicts`).
What is the same on every row (the ruler that scored the models, the number of seeds) is said once above
the table, and what needs a sentence (a target missed in some draws) is a footnote.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from ...records.record import Record
from ..findings import BUDGET_BOUND, BUSY_HOST, Finding, excluded_from_quality, repeats, verdicts
from ..headline import HeadlineRow, end_ruler_text, shown_table
from ..markdown import NA, cell, markdown_table
from ..stats.pair_tests import TEST, TESTS
from ..stats.power import POWER, REFERENCE_RATIO, family_level
from ..stats.settling import claims_of
from ..stats.summary import ALPHA, Summary
from ..systems import contended
from .tables import KID_UNITS

DRAWS = re.compile(r" \(n=[^)]*\)$")
"""The draws an estimate's text ends with, said once above the short table instead of in every cell."""
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def mark(number: int) -> str:
    """A footnote mark: ¹, ², ... ¹⁰."""
    return str(number).translate(SUPERSCRIPT)


def short(summary: Summary | None) -> str:
    """An estimate as ``centre [lo, hi]``, its draws said elsewhere; with no interval, the whole text (it says why)."""
    if summary is None:
        return NA
    text = summary.text()
    return DRAWS.sub("", text) if summary.interval is not None and not summary.arithmetic_fallback else text


def _draws(rows: list[HeadlineRow]) -> str:
    """How many seeds the rows' estimates are over: one number where every row has the same."""
    counts = sorted({int(row.seeds) for row in rows})
    return f"{counts[0]} seed{'s' if counts[0] != 1 else ''} each" if len(counts) == 1 else "the seeds in the `seeds` column"


def quality_metric(rows: list[HeadlineRow]) -> str:
    """The score the short headline shows: FID where every scored row has one, else KID."""
    scored = [row for row in rows if row.fid_summary is not None or row.kid_summary is not None]
    return "fid" if scored and all(row.fid_summary is not None for row in scored) else "kid"


def levels_text(found: list[Finding]) -> str:
    """The levels the families were tested at, as used: ``at 5 %`` where every family took it, else per family (a
    sequential family's share per look)."""
    levels = {}
    for finding in found:
        family = finding.family
        if family is None or not family.pairs:
            continue
        level = min(p.alpha for p in family.pairs)
        looks = f" at each of {family.looks} looks ({ALPHA * 100:g} % over all)" if family.looks > 1 else ""
        levels[finding.quantity] = f"{level * 100:.3g} %{looks}"
    if not levels or set(levels.values()) == {f"{ALPHA * 100:g} %"}:
        return f"at {ALPHA * 100:g} %"
    return "at " + ", ".join(f"{level} ({quantity})" for quantity, level in levels.items())


def first_page_headline(rows: list[HeadlineRow], found: list[Finding], records: list[Record]) -> list[str]:
    """``## Headline``: the short table, its footnotes, the findings and what to distrust."""
    lines = ["## Headline\n"]
    if not rows:
        return lines + ["_No run finished: nothing to compare (see the runs on [Runs](details/runs.md))._\n"]
    metric = quality_metric(rows)
    timed = {row.config: row.main + row.base for row in rows}
    said = verdicts(found, [row.config for row in rows], excluded_from_quality(rows), timed)
    rulers = sorted({row.quality for row in rows if isinstance(row.quality, str)})
    notes: list[str] = []
    shown = []
    end = any(row.fid_end_summary is not None for row in rows)
    for row in rows:
        quality = short(row.fid_summary if metric == "fid" else row.kid_summary)
        if len(rulers) > 1 and isinstance(row.quality, str):
            quality += mark(rulers.index(row.quality) + 1)
        shown.append(
            {
                "strategy": row.config,
                "P": row.top,
                **({"seeds": row.seeds} if "seeds in" in _draws(rows) else {}),
                **({"end FID": short(row.fid_end_summary)} if end else {}),
                metric.upper(): quality,
                "images/s": short(row.images_per_s_summary),
                "speedup": short(row.speedup_summary) if row.speedup_summary is not None else NA,
                "verdict": said[row.config],
            }
        )
    if len(rulers) > 1:
        notes += [
            f"{mark(i + 1)} {metric.upper()} under {cell(ruler)}; scores under different rulers are not compared."
            for i, ruler in enumerate(rulers)
        ]
    ruler = f" under {cell(rulers[0])}" if len(rulers) == 1 else ""
    lines.append(
        f"One row per strategy at its largest process count `P`, over {_draws(rows)}: estimate [95 % interval]. "
        + (
            f"end FID under {cell(end_ruler_text(rows))}: the FID of the model each run ends with, the end-of-budget estimand the quality verdicts "
            "compare, fixed in advance on pilot seeds (reports/verdicts/estimand.md); "
            if end
            else ""
        )
        + f"{metric.upper()}{'' if end else ruler} of the final model (lower is better); images/s through the "
        "discriminators in the training window; speedup T(1)/T(P) of the strong sweep (n/a: no P = 1 run). `verdict`: "
        f"what the tests below found ({TESTS[TEST].words} on log values, every pair of a family Holm-corrected "
        + levels_text(found)
        + (
            "; quality: better, within the margin (their ratio inside it: not equal, they may differ inside it) or undecided"
            if end
            else ""
        )
        + "). [Every column](details/headline.md)."
        + (f" {KID_UNITS}" if metric == "kid" else "")
        + "\n"
    )
    lines.append(markdown_table(pd.DataFrame(shown)))
    if any(BUDGET_BOUND in verdict for verdict in said.values()):
        lines.append(
            f"{BUDGET_BOUND} Holds at this budget only: a system in its claims was still improving at the end (below).\n"
        )
    if any(BUSY_HOST in verdict for verdict in said.values()):
        busy = sum(contended(r) for runs in timed.values() for r in runs)
        lines.append(
            f"{BUSY_HOST} Timed on a busy host: {busy} of these runs were contended (other processes kept the cores busy "
            "during their training clock), so this timing verdict measures the host too; rerun on a quiet host.\n"
        )
    kernels = kernel_line(records)
    if kernels:
        lines.append(kernels)
    if notes:
        lines += [*notes, ""]
    for finding, again in zip(found, repeats(found)):
        sentence = f"{finding.what}: the same pairs found different as by the final quality." if again else finding.text
        lines.append(f"- {sentence}")
    lines.append("")
    lines += scale_section(found)
    return lines


def _positions(xs: list[float]) -> str:
    return ", ".join(f"{x:,.0f}" for x in xs[:-1]) + f" and {xs[-1]:,.0f}" if len(xs) > 1 else f"{xs[0]:,.0f}"


def scale_line(finding: Finding) -> str | None:
    """One line on what a family's verdict is worth: its budget, whether its ranking held over the last half of the
    budget, who was still improving at the end, and what its pairs not distinguishable could have shown."""
    scale, family = finding.scale, finding.family
    if scale is None or family is None:
        return None
    budget = scale.budget.split(";")[0]
    parts = [f"**{finding.quantity}** at {budget}"]
    ranked = scale.anytime
    if ranked is not None and ranked.held is not None:
        half = [x for x, _ in ranked.last_half]
        if ranked.held:
            parts.append(f"the same claims at {_positions(half)} images (held over the last half)")
        else:
            counts = ", ".join(f"{len(claims_of(f))} at {x:,.0f}" for x, f in ranked.last_half)
            parts.append(f"the claims changed over the last half of the budget ({counts} images; details/headline.md)")
    if scale.trends:
        improving = [t for t in scale.trends if t.improving]
        flat = [t.system for t in scale.trends if not t.improving]
        stretch = f"{scale.trends[0].start:,.0f}-{scale.trends[0].end:,.0f} images"
        test = (
            f"the slope of log score against log images over {stretch}, a one-sided t over the seeds at "
            f"{ALPHA * 100:g} % per system, with its power for a 20 % fall"
        )
        if improving:
            parts.append(
                f"still improving at the end ({test}): {'; '.join(t.text() for t in improving)}; "
                "claims involving them hold at this budget only"
            )
        else:
            parts.append(f"no system found still improving at the end ({test})")
        if flat and improving:
            parts.append(f"no fall found for {', '.join(flat)} (not shown settled)")
    power = finding.power
    if power:
        level = family_level(family)
        parts.append(
            f"not distinguishable, and the smallest ratio this run could have detected at {POWER * 100:g} % power "
            f"(level {level * 100:.2g} %, from its own spread): " + "; ".join(p.text() for p in power)
        )
    return "- " + "; ".join(parts) + "."


def scale_section(found: list[Finding]) -> list[str]:
    """``**At what scale**``: the budget and steps per GAN once, then one line per family (:func:`scale_line`)."""
    lines = [line for finding, again in zip(found, repeats(found)) if not again and (line := scale_line(finding))]
    if not lines:
        return []
    budget = next(f.scale.budget for f in found if f.scale is not None)
    return [
        f"**At what scale these verdicts hold** ({budget}; a {REFERENCE_RATIO:g}x ratio's seeds are per side at "
        f"{POWER * 100:g} % power):\n",
        *lines,
        "",
    ]


def kernel_line(records: list[Record]) -> str:
    """What the models' bits depend on besides the seed: the CPU kernel set (``machine.numerics``), in one line; runs
    from more than one kernel set are named as such."""
    sets: set[tuple[str, str]] = set()  # (capability, numerics digest): two capabilities with one digest are two sets
    for r in records:
        machine = r.machine
        if machine is not None and machine.numerics:
            sets.add((str(machine.cpu_capability or "unknown ISA"), str(machine.numerics)))
    if not sets:
        return ""
    named = cell(", ".join(f"{isa} (numerics {digest})" for isa, digest in sorted(sets)))
    if len(sets) > 1:
        return (
            f"These runs come from {len(sets)} CPU kernel sets, {named}: the same seed gives another model on each, so "
            "their scores differ as other seeds' would and are compared only through the spread over seeds.\n"
        )
    return (
        f"Models and scores are bit-identical only on the same CPU kernel set (here {named}); on another the same seeds "
        "give other models, so the verdicts rest on the spread over seeds, not on any one score.\n"
    )


MOST_WARNINGS = 8
"""Warnings listed on the first page; past these, the first page counts them and the headline page lists them all."""


def warnings_section(warnings: list[str], failed: int) -> list[str]:
    """What to distrust, on the first page: failed runs counted, the warnings listed up to :data:`MOST_WARNINGS`."""
    lines = []
    if failed:
        lines.append(f"- {failed} run{'s' if failed > 1 else ''} failed: see [Runs](details/runs.md).")
    lines += [f"- {cell(w)}" for w in warnings[:MOST_WARNINGS]]  # warnings quote records: data (issue 61)
    if len(warnings) > MOST_WARNINGS:
        lines.append(f"- ... and {len(warnings) - MOST_WARNINGS} more on [Headline in full](details/headline.md#warnings).")
    return ["**Warnings:**\n", *lines, ""] if lines else []


def full_headline(rows: list[HeadlineRow], found: list[Finding], records: list[Record], warnings: list[str]) -> list[str]:
    """The headline page: every column, one ruler said once, missed targets as footnotes, every warning."""
    if not rows:
        return []
    shown = shown_table(rows)
    rulers = sorted({q for q in shown["quality"] if isinstance(q, str)})
    if len(rulers) == 1:
        shown = shown.drop(columns=["quality"])
    notes: list[str] = []
    targets: list[str | None] = []
    for row in rows:
        missed = row.target_missed
        if isinstance(missed, str):
            notes.append(f"{mark(len(notes) + 1)} {row.config}: {missed}.")
            targets.append(f"not reached{mark(len(notes))}")
        else:
            targets.append(row.time_to_target)
    shown["time_to_target"] = targets
    lines = [
        "One row per strategy (and engine), at the largest process count it ran (`P` lists them), over its `seeds` "
        "(each a separate training draw): estimate [95 % interval] (n draws). Positive quantities (times, images/s, "
        "FID, KID, speedup) give the geometric mean and the Student-t interval of the mean log, exponentiated (never "
        "below zero); `label_acc` the arithmetic mean. `speedup` is T(1)/T(P) and `efficiency` S/P: their intervals "
        "carry both ends' spread, and where an end has one run they are not computed. `fid` is the final model's; "
        "`fid_at_equal_time` the FID every strategy had at the same training time (or the same real training images "
        "where every run had `train.budget_images`); `time_to_target` the training time to the quality target; "
        "`checks` the equivalences verified on these runs ([Definitions](details/definitions.md))."
        + (
            f" Every score is under the same ruler: {cell(rulers[0])}."
            if len(rulers) == 1
            else " `quality`: the ruler of each row's scores."
        )
        + f" {KID_UNITS}\n",
        markdown_table(shown),
        *notes,
        "",
        "## Findings\n",
        *(f"- {finding.text}" for finding in found),
        "",
        *scale_section(found),
        *(
            f"- {f.quantity}: where the last half of the budget claimed otherwise than its end: {'; '.join(changes)}."
            for f, again in zip(found, repeats(found))
            if not again and f.scale is not None and f.scale.anytime is not None and (changes := f.scale.anytime.changes())
        ),
        "",
    ]
    if warnings:
        lines += ["## Warnings\n", *(f"- {cell(w)}" for w in warnings), ""]
    return lines


CSV_QUANTITIES = (
    *("train_s", "images_per_s", "speedup", "efficiency", "weak_efficiency", "time_to_target"),
    *("fid", "fid_at_equal_time", "kid", "label_acc"),
)
"""The headline's estimates, each a row's ``NAME_summary``, written to ``headline.csv`` as ``NAME_estimate``,
``NAME_lo``, ``NAME_hi``, ``NAME_n``."""
COUNTS = ("P", "P_smallest", "seeds", "time_to_target_draws", "time_to_target_reached")
"""The columns of ``headline.csv`` (besides each estimate's ``_n``) that count: written as integers."""
CSV_TEXT = ("strategy", "quality", "checks", "equal_budget_unit")
"""The columns of ``headline.csv`` that hold words (names, the ruler, the checks); every other column is a number."""


def headline_csv(rows: list[HeadlineRow]) -> pd.DataFrame:
    """The headline as numbers, one column per number: ``P`` (the largest process count, the row's) and
    ``P_smallest``, the seeds, then each estimate's centre, 95 % interval and draws (:data:`CSV_QUANTITIES`; a ratio's
    ``_n`` is the fewer draws of its two ends), ``comm_share``, the draws that reached the target, the equal budget;
    the ruler and the checks as words. The display strings (``24.7 [18.4, 33.1] (n=3)``) are the markdown's only."""
    out_rows = []
    for row in rows:
        out: dict[str, Any] = {"strategy": row.config, "P": int(row.top), "P_smallest": int(min(row.procs or [row.top]))}
        out["seeds"] = int(row.seeds)
        for name in CSV_QUANTITIES:
            summary = getattr(row, f"{name}_summary")
            out[f"{name}_estimate"] = _center(summary)
            out[f"{name}_lo"] = _bound(summary, 0)
            out[f"{name}_hi"] = _bound(summary, 1)
            out[f"{name}_n"] = min(summary.ns) if isinstance(summary, Summary) else None
        equal = row.equal_time
        out.update(
            {
                "comm_share": row.comm_share,
                "time_to_target_draws": row.targets or None,
                "time_to_target_reached": row.targets_reached if row.targets else None,
                "equal_budget": equal,
                "equal_budget_unit": ("images" if row.equal_axis == "images" else "s") if equal is not None else None,
                "quality": row.quality,
                "checks": row.checks or None,
            }
        )
        out_rows.append(out)
    frame = pd.DataFrame(out_rows)
    counts = [c for c in frame.columns if c.endswith("_n") or c in COUNTS]
    return frame.astype({c: "Int64" for c in counts})


def _center(summary: Any) -> float | None:
    return summary.center if isinstance(summary, Summary) else None


def _bound(summary: Any, end: int) -> float | None:
    return summary.interval[end] if isinstance(summary, Summary) and summary.interval else None
