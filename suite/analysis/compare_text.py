"""`suite compare`'s page: the verdict, the environment differences, the table of compared metrics and what was not
compared, as markdown (:func:`suite.analysis.compare.compare` makes the comparison)."""

from __future__ import annotations

import pandas as pd

from ..config.escape import code_span
from .compare import INVALID, NOT_COMPARED, REGRESSION, Comparison, Measure
from .markdown import markdown_table
from .metric_table import METRICS


def _show(m: Measure | None) -> str:
    if m is None:
        return "n/a"
    if m.lo == m.hi:
        return f"{m.value:.4g}"
    return f"{m.value:.4g} [{m.lo:.4g}, {m.hi:.4g}]"


def to_markdown(result: Comparison) -> str:
    """The comparison as markdown: verdict, environment differences, the table, what was not compared."""
    regressions, invalid = result.regressions, result.invalid
    lines = [f"# Comparison: {code_span(result.new_path)} against {code_span(result.baseline_path)}\n"]
    if regressions:
        names = sorted({f"{r.config}: {r.metric}" for r in regressions})
        lines.append(f"**{len(regressions)} regression{'s' if len(regressions) > 1 else ''}**: {'; '.join(names)}.\n")
    if invalid:
        lines.append(
            f"**{len(invalid)} INVALID record{'s' if len(invalid) > 1 else ''}**: {'; '.join(r.note for r in invalid)}.\n"
        )
    if not regressions and not invalid:
        lines.append(f"**No regression** ({sum(r.verdict != NOT_COMPARED for r in result.rows)} metrics compared).\n")
    lines.append("## Environment\n")
    if result.environment:
        lines.append("These differ between the two sides:\n")
        lines.append(markdown_table(pd.DataFrame(result.environment)))
    else:
        lines.append("Same device, package versions, threads per rank and workload settings.\n")
    if result.ignored_baseline_failures:
        lines.append(f"Failed baseline runs, ignored: {', '.join(result.ignored_baseline_failures)}.\n")
    lines.append("## Metrics\n")
    lines.append(
        "Values are means over repeats with their noise interval in brackets: the envelope of the repeats' "
        "95 % intervals. A regression is worse than its tolerance and than the combined noise of both sides, "
        "√(h_baseline² + h_new²) with h the half-widths of the intervals; `within noise` is worse than the "
        "tolerance but not than the noise.\n"
    )
    table = pd.DataFrame(
        [
            {
                "config": r.config,
                "metric": r.metric,
                "baseline": _show(r.baseline),
                "new": _show(r.new),
                "change": "n/a" if r.change is None else f"{r.change:+.1f} {r.unit}",
                "tolerance": f"{r.tolerance:g} {r.unit}" if r.unit else "",
                "verdict": f"**{r.verdict}**" if r.verdict in (REGRESSION, INVALID) else r.verdict,
                "note": r.note,
            }
            for r in result.rows
        ]
    )
    lines.append(markdown_table(table))
    shown = [m for m in METRICS.values() if any(r.metric == m.name for r in result.rows)]
    lines.append("\n".join(f"- `{m.name}`: {m.doc}" for m in shown) + "\n")
    if result.baseline_only or result.new_only:
        lines.append("## Not compared\n")
        if result.baseline_only:
            lines.append(f"- only in the baseline: {'; '.join(result.baseline_only)}")
        if result.new_only:
            lines.append(f"- only in the new results: {'; '.join(result.new_only)}")
        lines.append("")
    return "\n".join(lines)
