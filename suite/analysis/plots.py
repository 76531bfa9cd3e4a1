"""The report's charts (matplotlib, headless): scaling with its intervals and ideal lines, measured speedup,
quality and losses over training, each system in its own look (:mod:`.palette`) in every figure.

Every plot function writes its PNGs into ``out`` and returns their file names; where the records
hold nothing to draw it logs one line saying why and returns no name (never a blank figure).
Spread is always the suite's own: :func:`suite.analysis.stats.verdicts.summarise` (geometric means with
log-scale Student-t intervals) over seeds or runs, and the scaling table's speedup intervals.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..records.record import CellPoint, CurvePoint, LossPoint, Record, TimeToTarget
from .findings import config_name, main_runs
from .palette import style_of
from .stats.verdicts import Summary, critical_t, summarise

log = logging.getLogger(__name__)

DPI = 110
BAND_ALPHA = 0.18


def pyplot() -> Any:
    """matplotlib's pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, out: Path, name: str) -> list[str]:
    """Write ``fig`` as ``out/name`` (legends outside the axes included; atomically, never through a link:
    :func:`suite.records.results.atomic_write`) and close it; return ``[name]``."""
    from ..records.results import atomic_write

    with atomic_write(out / name) as tmp:
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight")
    pyplot().close(fig)
    return [name]


def legend_outside(ax: Any) -> None:
    """The legend right of the axes, clear of the data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False, borderaxespad=0.0)


def plain_log_ticks(ax: Any) -> None:
    """Numbers rather than powers of ten on a log-scaled y axis."""
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)


def skipped(name: str, reason: str) -> list[str]:
    """No figure: one line saying why."""
    log.info("%s not drawn: %s", name, reason)
    return []


def _is_summary(value: Any) -> bool:
    return isinstance(value, Summary)


def _errors(centers: list[float], intervals: list[tuple[float, float] | None]) -> np.ndarray:
    """Asymmetric error bars (2, N) from intervals; 0 where a point has none."""
    lo = [c - i[0] if i else 0.0 for c, i in zip(centers, intervals)]
    hi = [i[1] - c if i else 0.0 for c, i in zip(centers, intervals)]
    return np.array([lo, hi])


# --- scaling ------------------------------------------------------------------------------------------------------


def plot_scaling(table: pd.DataFrame, scaling: str, out: Path) -> list[str]:
    """``{scaling}_time.png`` and ``{scaling}_efficiency.png`` (and ``speedup.png`` for strong scaling).

    ``table`` is the report's scaling table (:func:`suite.analysis.report.tables.scaling_table`): time is the
    geometric mean of each point's runs with its 95 % interval as error bars (``_train_s``), beside the ideal
    T(1)/P (strong) or T(1) (weak) in the system's colour; efficiency and speedup carry the table's intervals,
    the ideal 1 and P.
    """
    if table.empty:
        return skipped(f"{scaling} scaling plots", f"no {scaling}-scaling runs")
    written = _time_plot(table, scaling, out) + _ratio_plot(table, scaling, "efficiency", out)
    if scaling == "strong":
        written += _ratio_plot(table, scaling, "speedup", out)
    return written


def _time_plot(table: pd.DataFrame, scaling: str, out: Path) -> list[str]:
    name = f"{scaling}_time.png"
    data = table[table["_train_s"].map(_is_summary)] if "_train_s" in table else table.iloc[0:0]
    if data.empty:
        return skipped(name, "no training times")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ideal_drawn = False
    groups = list(data.groupby("config", sort=True))
    for k, (config, part) in enumerate(groups):
        part = part.sort_values("procs")
        summaries: list[Summary] = list(part["_train_s"])
        centers = [s.center for s in summaries]
        look = style_of(str(config))
        nudge = 2 ** (0.025 * (k - (len(groups) - 1) / 2))  # side by side, so that the error bars at one P stay apart
        ax.errorbar(
            part["procs"] * nudge,
            centers,
            yerr=_errors(centers, [s.interval for s in summaries]),
            capsize=3,
            label=config,
            **look.plot_kwargs(),
        )
        base = part[part["procs"] == 1]
        if not base.empty and len(part) > 1:
            procs = np.array(sorted(part["procs"]), dtype=float)
            t1 = base["_train_s"].iloc[0].center
            ideal = t1 / procs if scaling == "strong" else np.full_like(procs, t1)
            ax.plot(procs, ideal, color=look.color, lw=1, ls=":", alpha=0.8, label=None if ideal_drawn else _ideal_time(scaling))
            ideal_drawn = True
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_xticks(sorted(data["procs"].unique()), labels=[str(p) for p in sorted(data["procs"].unique())])
    ax.set_xlabel("processes P")
    ax.set_ylabel("training window T (s)")
    ax.set_title(f"{scaling} scaling: training time, geometric mean and 95 % interval over runs", fontsize=10)
    legend_outside(ax)
    return save(fig, out, name)


def _ideal_time(scaling: str) -> str:
    return "ideal T(1)/P (dotted, each system's colour)" if scaling == "strong" else "ideal T(1) (dotted, each system's colour)"


def _ratio_plot(table: pd.DataFrame, scaling: str, column: str, out: Path) -> list[str]:
    """Efficiency or speedup against P with the table's 95 % intervals and the ideal."""
    name = f"{scaling}_efficiency.png" if column == "efficiency" else "speedup.png"
    data = table.dropna(subset=[column])
    if data.empty or data["procs"].max() < 2:
        return skipped(name, f"no {column} (no sweep with a P=1 run)")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    procs = sorted(data["procs"].unique())
    ideal = [1.0] * len(procs) if column == "efficiency" else [float(p) for p in procs]
    ax.plot(procs, ideal, color="black", lw=1, ls="--", zorder=1, label="ideal " + ("1" if column == "efficiency" else "P"))
    for config, part in data.groupby("config", sort=True):
        part = part.sort_values("procs")
        centers = [float(v) for v in part[column]]
        intervals = [
            (float(lo), float(hi)) if pd.notna(lo) and pd.notna(hi) else None
            for lo, hi in zip(part[f"{column}_lo"], part[f"{column}_hi"])
        ]
        ax.errorbar(
            part["procs"],
            centers,
            yerr=_errors(centers, intervals),
            capsize=3,
            label=config,
            zorder=3,
            **style_of(str(config)).plot_kwargs(),
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(procs, labels=[str(p) for p in procs])
    if column == "speedup":
        ax.set_yscale("log", base=2)
        ax.set_yticks(procs, labels=[str(p) for p in procs])
    ax.set_xlabel("processes P")
    ax.set_ylabel(
        "speedup S = T(1)/T(P)"
        if column == "speedup"
        else ("efficiency E = S/P" if scaling == "strong" else "efficiency E = T(1)/T(P)")
    )
    ax.set_title(f"{scaling} scaling: measured {column} and 95 % interval (P=1 and P runs)", fontsize=10)
    legend_outside(ax)
    return save(fig, out, name)


# --- quality over training ---------------------------------------------------------------------------------------


def by_config(records: list[Record]) -> dict[str, list[Record]]:
    """Ok runs by configuration, each at its headline's process count (:func:`suite.analysis.findings.main_runs`)."""
    runs: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.status == "ok":
            runs[config_name(r)].append(r)
    return {name: main_runs(group)[0] for name, group in sorted(runs.items())}


def one_per_seed(runs: list[Record]) -> list[Record]:
    """One run per seed (its first repeat), in seed order: quality varies with the seed."""
    first: dict[str, Record] = {}
    for r in sorted(runs, key=lambda r: (str(r.seed), r.repeat or 0)):
        first.setdefault(str(r.seed), r)
    return list(first.values())


CurveRuler = tuple[str | None, int | None]
"""The feature network and the sample count that scored a curve point."""


def _kid_mean(point: CurvePoint) -> float | None:
    return point.kid_mean


def _fid(point: CurvePoint) -> float | None:
    return point.fid


def _ruler(curves: list[Record]) -> tuple[CurveRuler, Callable[[CurvePoint], float | None], TimeToTarget | None]:
    """The ruler the figure uses (the target's, else the most common), the score it reads, and the target."""
    target = next((r.time_to_target for r in curves if r.time_to_target is not None), None)
    kinds = [(p.features, p.n) for r in curves for p in r.curve or []]
    kind = (target.features, target.n) if target and target.n else max(set(kinds), key=kinds.count)
    score = _kid_mean if target and target.metric == "kid" else _fid
    return kind, score, target


def plot_quality_curves(records: list[Record], out: Path) -> list[str]:
    """``quality_vs_time_<ruler>.png``: each system's FID (KID) at its curve points against training-window time.

    One line per system at its largest P: at each curve point the geometric mean over seeds with its 95 %
    interval as a band (where there are two seeds or more), at the seeds' mean time. Only points scored
    with one feature network and sample count share the figure (the target's, else the most common).
    """
    curves = [r for r in records if r.status == "ok" and r.curve]
    if not curves:
        return skipped("quality_vs_time", "no run has a quality curve")
    fig, name = quality_figure(curves)
    return save(fig, out, name)


def quality_figure(curves: list[Record]) -> tuple[Any, str]:
    """The figure of :func:`plot_quality_curves` and its file name."""
    kind, score, target = _ruler(curves)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, runs in by_config(curves).items():
        series = []
        for r in one_per_seed(runs):
            points = [(p.clock_s, value) for p in r.curve or [] if (p.features, p.n) == kind and (value := score(p)) is not None]
            if points:
                series.append(points)
        if not series:
            continue
        length = min(len(s) for s in series)  # seeds share the schedule of curve points
        clocks = [float(np.mean([s[i][0] for s in series])) for i in range(length)]
        summaries = [summarise(s[i][1] for s in series) for i in range(length)]
        look = style_of(name)
        centers = [s.center if s else math.nan for s in summaries]
        top = runs[0].procs
        ax.plot(
            clocks, centers, label=f"{name}, P={top} ({len(series)} seed{'s' if len(series) > 1 else ''})", **look.plot_kwargs()
        )
        bands = [s.interval if s else None for s in summaries]
        if len(series) > 1 and all(bands):
            ax.fill_between(
                clocks, [b[0] for b in bands if b], [b[1] for b in bands if b], color=look.color, alpha=BAND_ALPHA, lw=0
            )
    if target:
        ax.axhline(target.target, color="black", lw=1, ls="--", label=f"target {str(target.metric).upper()} {target.target:g}")
    label = "KID" if score is _kid_mean else "FID"
    ax.set_xlabel("training-window time (s)")
    ax.set_ylabel(f"{label} ({kind[0]}, n={kind[1]}), lower is better")
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_title(f"{label} over training: geometric mean over seeds, 95 % band", fontsize=10)
    legend_outside(ax)
    return fig, f"quality_vs_time_{file_slug(str(kind[0]))}.png"


# --- losses -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Losses:
    """The losses at a generator step (a mean over a run's class GANs, or over seeds' steps)."""

    step: float
    d_loss: float
    g_loss: float


def loss_series(record: Record) -> list[Losses] | None:
    """A run's losses over generator steps: its history, or the mean over its class GANs' (None without losses)."""
    history = record.history
    found: list[list[LossPoint] | list[CellPoint]] = (
        list(history.values()) if isinstance(history, dict) else [history] if history else []
    )
    parts = [
        [(p.step, p.d_loss, p.g_loss) for p in part if isinstance(p, LossPoint) and p.d_loss is not None and p.g_loss is not None]
        for part in found
        if part
    ]
    parts = [part for part in parts if part]
    if not parts:
        return None
    length = min(len(part) for part in parts)
    return [Losses(*(float(np.mean([part[i][k] for part in parts])) for k in range(3))) for i in range(length)]


def mean_band(values: list[float]) -> tuple[float, tuple[float, float] | None]:
    """Arithmetic mean and its 95 % Student-t interval (losses may be negative); no interval from one value."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, None
    half = critical_t([(float(np.var(values, ddof=1)) / len(values), len(values))]) * math.sqrt(
        np.var(values, ddof=1) / len(values)
    )
    return mean, (mean - half, mean + half)


def plot_losses(records: list[Record], out: Path) -> list[str]:
    """``losses.png``: discriminator and generator loss over generator steps, per system at its largest P:
    the mean over seeds with its 95 % band (class GANs averaged within a run; cellular runs keep no losses)."""
    fig = losses_figure(records)
    if fig is None:
        return skipped("losses.png", "no run recorded its losses")
    return save(fig, out, "losses.png")


def losses_figure(records: list[Record]) -> Any | None:
    """The figure of :func:`plot_losses` (None without losses)."""
    systems = {}
    for name, runs in by_config(records).items():
        series = [s for s in (loss_series(r) for r in one_per_seed(runs)) if s]
        if series:
            systems[name] = series
    if not systems:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    losses: tuple[tuple[Any, Callable[[Losses], float], str], ...] = (
        (axes[0], lambda p: p.d_loss, "discriminator"),
        (axes[1], lambda p: p.g_loss, "generator"),
    )
    for ax, loss, title in losses:
        for name, series in systems.items():
            length = min(len(s) for s in series)
            steps = [float(np.mean([s[i].step for s in series])) for i in range(length)]
            stats = [mean_band([loss(s[i]) for s in series]) for i in range(length)]
            look = style_of(name)
            ax.plot(
                steps,
                [m for m, _ in stats],
                label=f"{name} ({len(series)} seed{'s' if len(series) > 1 else ''})",
                markersize=4,
                **look.plot_kwargs(),
            )
            if len(series) > 1:
                ax.fill_between(
                    steps,
                    [b[0] if b else m for m, b in stats],
                    [b[1] if b else m for m, b in stats],
                    color=look.color,
                    alpha=BAND_ALPHA,
                    lw=0,
                )
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_xlabel("generator step")
        ax.set_ylabel(f"{title} loss (each system's own loss)")
        ax.set_title(f"{title} loss: mean over seeds, 95 % band", fontsize=10)
    legend_outside(axes[1])
    fig.tight_layout()
    return fig


def file_slug(text: str) -> str:
    """``text`` with everything but letters and digits replaced by ``-`` (a file-name part)."""
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")
