"""What ``suite gate-history show`` and ``bisect`` print: each quantity's series with its cumulative change and
bounds, one verdict line per quantity, and where each series moved (:mod:`.gate_series` computes them)."""

from __future__ import annotations

from ..analysis.stats.paired import FAIL, PASS
from .gate_series import Point, Series, bisect, change_text
from .gate_steps import t_quantile


def _bounds(point: Point, low: float, high: float) -> str:
    return f"[{change_text(point, low)}, {change_text(point, high)}]".replace(" %,", ",")


def _step_bounds(point: Point, alpha: float) -> str:
    v = point.step
    half = t_quantile(1 - alpha, v.n - 1) * v.se
    return _bounds(point, v.mean - half, v.mean + half)


def header(series: Series) -> list[str]:
    """What the series is: machine, environment, branch, start, threshold and what the bounds are."""
    return [
        f"Gate history: machine {series.machine}, environment {series.env}, {series.branch} since "
        f"{series.since[:10]}; threshold {series.threshold:g} %, alpha {series.alpha:g}",
        f"(in brackets: the one-sided {100 * (1 - series.alpha):g} % lower and upper bounds, by which the gate decides)",
    ]


def _threshold_text(series: Series, name: str) -> str:
    margin = series.margin(name)
    if series.points[name][0].step.kind != "abs":
        return f"the {series.threshold:g} % threshold"
    return "no recorded seed spread" if margin is None else f"the seed spread {margin:.3g} FID"


def verdict_line(series: Series, name: str) -> str:
    """The verdict on ``name``'s latest cumulative change, naming the change, its bounds and the steps' own verdicts."""
    point = series.points[name][-1]
    verdict, low, high = series.verdict(name, point)
    change = f"{name} {change_text(point, point.mean)} since {series.since[:10]} {_bounds(point, low, high)}"
    steps = (
        f"though each of its {point.steps} steps passed the gate"
        if point.passed == point.steps
        else f"{point.passed} of its {point.steps} steps passed the gate"
    )
    if series.margin(name) is None:  # FID with no seed spread recorded: every step had identical models, or one seed
        return f"{verdict}: {change}: " + ("identical models at every step" if verdict == PASS else "no seed spread to judge by")
    if verdict == FAIL:
        return f"FAIL: {change}, beyond {_threshold_text(series, name)}, {steps}"
    if verdict == PASS:
        return f"PASS: {change}, below {_threshold_text(series, name)}"
    return f"INCONCLUSIVE: {change}: too uncertain to tell against {_threshold_text(series, name)}"


def show_lines(series: Series) -> list[str]:
    """Each quantity's table of commits (step and cumulative change, each with its bounds), then the verdicts."""
    lines = header(series)
    for name, points in sorted(series.points.items()):
        lines += ["", name, f"  {'commit':<10}  {'against':<10}  {'step':<28}  {'gate':<12}  since {series.since[:10]}"]
        for p in points:
            low, high = series.verdict(name, p)[1:]
            step = f"{change_text(p, p.step.mean)} {_step_bounds(p, series.alpha)}"
            lines.append(
                f"  {p.commit[:10]}  {p.baseline[:10]}  {step:<28}  {p.step.verdict:<12}  "
                f"{change_text(p, p.mean)} {_bounds(p, low, high)}"
            )
    return lines + [""] + [verdict_line(series, name) for name in sorted(series.points)]


def bisect_lines(series: Series) -> list[str]:
    """Per quantity: the commit of its largest step, and the first commit whose cumulative change fails."""
    lines = header(series)
    for moved in bisect(series):
        big = moved.largest
        if big.step.mean > 0:
            text = f"{moved.name}: largest step at {big.commit[:10]} ({change_text(big, big.step.mean)} against {big.baseline[:10]}); "
        else:
            text = f"{moved.name}: no step made it worse; "
        if moved.first_over is None:
            last = series.points[moved.name][-1]
            text += (
                f"the cumulative change never passes {_threshold_text(series, moved.name)} (now {change_text(last, last.mean)})"
            )
        else:
            first = moved.first_over
            text += (
                f"the cumulative change since {series.since[:10]} first passes {_threshold_text(series, moved.name)} "
                f"at {first.commit[:10]} ({change_text(first, first.mean)})"
            )
        lines.append(text)
    return lines
