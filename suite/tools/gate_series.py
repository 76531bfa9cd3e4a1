"""The gate's history as a series per commit of a branch: the cumulative change since a chosen commit, its interval,
a verdict on it, and the commit where the series moved (``suite gate-history show`` and ``bisect``).

Along a branch's first-parent history, a commit's cumulative change is its baseline's plus its own step (on the
additive scale, :mod:`.gate_steps`), its variance the sum of the steps' squared standard errors (the gate runs are
independent); the interval uses Student's t with Welch-Satterthwaite's degrees of freedom, and the verdict the gate's
rule on the sum (docs/benchmarks-and-ci.md). A step whose baseline is not in the series is named and left out, never
chained across the gap; only one machine's steps of one suite version are chained.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.stats.paired import FAIL, INCONCLUSIVE, PASS, overall
from .gate_history_read import GateHistory, GateStep, Value
from .gate_settings import GateError
from .gate_sides import git
from .gate_steps import display, margin_of, t_quantile


class SeriesError(ValueError):
    """Bad input for a series (a revision that does not exist, no steps): one line."""


@dataclass(frozen=True)
class Point:
    """A commit of one quantity's series: its own step and the cumulative change since the series' start."""

    commit: str
    baseline: str
    step: Value
    mean: float
    var: float
    df_terms: float
    """Welch-Satterthwaite's denominator: the sum of each step's ``se^4 / (n - 1)``."""
    steps: int
    passed: int
    """How many of the chained steps the gate passed on their own."""

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The one-sided ``1 - alpha`` lower and upper bounds of the cumulative change (a ``1 - 2 alpha`` interval)."""
        if self.var == 0:
            return self.mean, self.mean
        df = self.var**2 / self.df_terms if self.df_terms > 0 else math.inf
        half = t_quantile(1 - alpha, df) * math.sqrt(self.var)
        return self.mean - half, self.mean + half


@dataclass
class Series:
    """Every quantity's series on one branch since one commit, for one machine and suite version."""

    machine: str
    env: str
    branch: str
    since: str
    threshold: float
    alpha: float
    points: dict[str, list[Point]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def margin(self, name: str) -> float | None:
        """The threshold of ``name`` on its additive scale; for FID the median seed spread its steps recorded."""
        points = self.points[name]
        if points[0].step.kind != "abs":
            return margin_of(name.rsplit(".", 1)[-1], self.threshold)
        spreads = [p.step.margin for p in points if p.step.margin is not None]
        return statistics.median(spreads) if spreads else None

    def verdict(self, name: str, point: Point) -> tuple[str, float, float]:
        """The verdict on ``point``'s cumulative change of ``name`` and its one-sided bounds."""
        lower, upper = point.bounds(self.alpha)
        margin = self.margin(name)
        if margin is None:
            return (PASS if point.mean == 0 and point.var == 0 else INCONCLUSIVE), lower, upper
        if point.mean > margin and lower > 0:
            return FAIL, lower, upper
        return (PASS if upper < margin else INCONCLUSIVE), lower, upper

    def overall(self) -> str:
        """The worst verdict over the quantities' latest cumulative changes."""
        return overall([self.verdict(name, points[-1])[0] for name, points in self.points.items()])


def resolve_commit(repo: Path, ref: str, option: str) -> str:
    """The full hash of ``ref``; :class:`SeriesError` naming ``option`` where ``repo`` has no such revision."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GateError:
        raise SeriesError(f"{option}: no revision named {ref!r} in {repo}") from None


def branch_commits(repo: Path, branch: str) -> list[str]:
    """The branch's first-parent history, oldest first."""
    resolve_commit(repo, branch, "--branch")
    return git(repo, "rev-list", "--first-parent", "--reverse", branch).split()


def _others(history: GateHistory, machine: str, env: str) -> list[str]:
    """One line per other machine or suite version in the history: named, not mixed."""
    counts = Counter((s.machine, s.env) for s in history.steps if (s.machine, s.env) != (machine, env))
    return [
        f"{n} step(s) of machine {m!r}, environment {e!r}: not mixed into {machine!r}, {env!r} "
        f"(--machine {m} --env {e} shows them)"
        for (m, e), n in sorted(counts.items())
    ]


def _add(prev: Point | None, commit: str, step: GateStep, value: Value) -> Point:
    """``prev``'s cumulative change (None: the start) with ``step``'s value of one quantity added."""
    mean, var, terms, steps, passed = (0.0, 0.0, 0.0, 0, 0) if prev is None else (
        prev.mean, prev.var, prev.df_terms, prev.steps, prev.passed)  # fmt: skip
    return Point(
        commit,
        step.baseline,
        value,
        mean + value.mean,
        var + value.se**2,
        terms + value.se**4 / (value.n - 1),
        steps + 1,
        passed + (value.verdict == PASS),
    )


def chain(series: Series, steps: dict[str, GateStep], commits: list[str]) -> None:
    """Fill ``series.points``: each step after ``series.since`` on ``commits`` added to its baseline's cumulative
    changes; a step whose baseline is not in the series, or lacks a quantity, is named in ``series.notes``."""
    cumulative: dict[str, dict[str, Point] | None] = {series.since: None}
    for commit in commits[commits.index(series.since) + 1 :]:
        step = steps.get(commit)
        if step is None:
            continue
        if step.baseline not in cumulative:
            series.notes.append(
                f"{commit[:10]}: measured against {step.baseline[:10]}, which is not in the series since "
                f"{series.since[:10]} on {series.branch}; left out ({step.path})"
            )
            continue
        base, here = cumulative[step.baseline], {}
        for name, value in sorted(step.values.items()):
            if base is not None and name not in base:
                series.notes.append(f"{commit[:10]}: {name} has no step between {series.since[:10]} and its baseline")
                continue
            here[name] = _add(None if base is None else base[name], commit, step, value)
            series.points.setdefault(name, []).append(here[name])
        cumulative[commit] = here


def build_series(
    history: GateHistory, repo: Path, branch: str, since: str | None, where: tuple[str, str], rule: tuple[float, float]
) -> Series:
    """The series of the steps of ``where`` (machine, environment) along ``branch`` since ``since`` (default: the
    baseline of the branch's earliest step), judged by ``rule`` (threshold in percent, alpha)."""
    machine, env = where
    commits = branch_commits(repo, branch)
    steps = {s.commit: s for s in history.steps if (s.machine, s.env) == (machine, env)}
    if since is None:
        on_branch = set(commits)
        first = next((steps[c] for c in commits if c in steps and steps[c].baseline in on_branch), None)
        if first is None:
            raise SeriesError(
                f"no step of machine {machine!r}, environment {env!r} on {branch} in {history.folder}"
                + (f" ({len(history.steps)} step(s) of other machines or commits)" if history.steps else "")
            )
        start = first.baseline
    else:
        start = resolve_commit(repo, since, "--since")
        if start not in commits:
            raise SeriesError(f"--since: {since} is not on {branch}'s first-parent history")
    series = Series(machine, env, branch, start, rule[0], rule[1], notes=_others(history, machine, env))
    chain(series, steps, commits)
    if not series.points:
        raise SeriesError(f"no step of machine {machine!r}, environment {env!r} on {branch} after {start[:10]}")
    return series


def change_text(value: Value | Point, amount: float) -> str:
    """A change as shown: ``+5.0 %`` or ``+1.2 FID``."""
    kind = value.kind if isinstance(value, Value) else value.step.kind
    return f"{display(kind, amount):+.1f} %" if kind != "abs" else f"{amount:+.3g} FID"


@dataclass(frozen=True)
class Moved:
    """Where one quantity's series moved: its largest step, and the first commit whose cumulative change FAILs."""

    name: str
    largest: Point
    first_over: Point | None


def bisect(series: Series) -> list[Moved]:
    """Per quantity, the commit of the largest step (worse) and the first commit whose cumulative change since the
    start passes the threshold by the verdict's rule (None where none does)."""
    moved = []
    for name, points in sorted(series.points.items()):
        largest = max(points, key=lambda p: p.step.mean)
        first = next((p for p in points if series.verdict(name, p)[0] == FAIL), None)
        moved.append(Moved(name, largest, first))
    return moved
