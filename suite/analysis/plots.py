"""The report's charts (matplotlib, headless): scaling with its intervals and ideal lines, measured speedup,
quality and losses over training, each system in its own look (:mod:`.palette`) in every figure.

Every plot function writes its PNGs into ``out`` and returns their file names; where the records
hold nothing to draw it logs one line saying why and returns no name (never a blank figure).
Spread is always the suite's own: :func:`suite.analysis.stats.summary.summarise` (geometric means with
log-scale Student-t intervals) over seeds or runs, and the scaling table's speedup intervals.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..config.escape import file_part, plot_text
from ..records.record import Record
from ..records.scored import CellPoint, CurvePoint, LossPoint, TimeToTarget
from .columns import COL
from .palette import style_of
from .plot_parts import (
    BAND_ALPHA,
    EFFICIENCY_SPAN,
    band_words,
    clip_intervals,
    count_axis,
    error_bars,
    is_summary,
    legend_outside,
    procs_axis,
    pyplot,
    readable_ticks,
    save,
    skipped,
)
from .stats.summary import Summary, critical_t, summarise
from .systems import config_name, main_runs

# --- scaling ------------------------------------------------------------------------------------------------------


def plot_scaling(table: pd.DataFrame, scaling: str, out: Path) -> list[str]:
    """``{scaling}_time.png`` and ``{scaling}_efficiency.png`` (and ``speedup.png`` for strong scaling).

    ``table`` is the report's scaling table (:func:`suite.analysis.report.scaling_tables.scaling_table`): time is the
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
    data = table[table["_train_s"].map(is_summary)] if "_train_s" in table else table.iloc[0:0]
    if data.empty:
        return skipped(name, "no training times")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ideal_drawn = False
    drawn: list[float] = []  # the centres and ideals, which the axis keeps whole
    intervals: list[tuple[float, float] | None] = []
    groups = list(data.groupby("config", sort=True))
    for k, (config, part) in enumerate(groups):
        part = part.sort_values(COL.procs)
        summaries: list[Summary] = list(part["_train_s"])
        centers = [s.center for s in summaries]
        drawn += centers
        intervals += [s.interval for s in summaries]
        look = style_of(str(config))
        nudge = 2 ** (0.025 * (k - (len(groups) - 1) / 2))  # side by side, so that the error bars at one P stay apart
        ax.errorbar(
            part[COL.procs] * nudge,
            centers,
            yerr=error_bars(centers, [s.interval for s in summaries]),
            capsize=3,
            label=plot_text(config),
            **look.plot_kwargs(),
        )
        base = part[part[COL.procs] == 1]
        if not base.empty and len(part) > 1:
            procs = np.array(sorted(part[COL.procs]), dtype=float)
            t1 = base["_train_s"].iloc[0].center
            ideal = t1 / procs if scaling == "strong" else np.full_like(procs, t1)
            drawn += [float(t) for t in ideal]
            ax.plot(procs, ideal, color=look.color, lw=1, ls=":", alpha=0.8, label=None if ideal_drawn else _ideal_time(scaling))
            ideal_drawn = True
    procs_axis(ax, [int(p) for p in sorted(data[COL.procs].unique())])
    ax.set_yscale("log")
    clip_intervals(ax, drawn, intervals, log_scale=True)
    readable_ticks(ax, "y")
    ax.set_xlabel("processes P")
    ax.set_ylabel("training window T (s)")
    interval = "95 % interval over runs" if any(intervals) else "no interval: one run per point"
    ax.set_title(f"{scaling} scaling: training time, geometric mean, {interval}", fontsize=10)
    legend_outside(ax)
    return save(fig, out, name)


def _ideal_time(scaling: str) -> str:
    return "ideal T(1)/P (dotted, each system's colour)" if scaling == "strong" else "ideal T(1) (dotted, each system's colour)"


def _ratio_plot(table: pd.DataFrame, scaling: str, column: str, out: Path) -> list[str]:
    """Efficiency or speedup against P with the table's 95 % intervals and the ideal."""
    name = f"{scaling}_efficiency.png" if column == "efficiency" else "speedup.png"
    data = table.dropna(subset=[column])
    if data.empty or data[COL.procs].max() < 2:
        return skipped(name, f"no {column} (no sweep with a P=1 run)")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    procs = sorted(data[COL.procs].unique())
    ideal = [1.0] * len(procs) if column == "efficiency" else [float(p) for p in procs]
    ax.plot(procs, ideal, color="black", lw=1, ls="--", zorder=1, label="ideal " + ("1" if column == "efficiency" else "P"))
    drawn, every_interval = list(ideal), []
    for config, part in data.groupby("config", sort=True):
        part = part.sort_values(COL.procs)
        centers = [float(v) for v in part[column]]
        intervals = [
            (float(lo), float(hi)) if pd.notna(lo) and pd.notna(hi) else None
            for lo, hi in zip(part[f"{column}_lo"], part[f"{column}_hi"])
        ]
        drawn += centers
        every_interval += intervals
        ax.errorbar(
            part[COL.procs],
            centers,
            yerr=error_bars(centers, intervals),
            capsize=3,
            label=plot_text(config),
            zorder=3,
            **style_of(str(config)).plot_kwargs(),
        )
    procs_axis(ax, [int(p) for p in procs])
    if column == "speedup":
        ax.set_yscale("log", base=2)
    clip_intervals(ax, drawn, every_interval, log_scale=column == "speedup")
    if column == "speedup":
        readable_ticks(ax, "y")
    else:  # an axis spanning 0.9996-1.0 magnifies noise: keep the ideal and at least EFFICIENCY_SPAN in view
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 1.0 - EFFICIENCY_SPAN), max(high, 1.0 + EFFICIENCY_SPAN / 5))
    ax.set_xlabel("processes P")
    ax.set_ylabel(
        "speedup S = T(1)/T(P)"
        if column == "speedup"
        else ("efficiency E = S/P" if scaling == "strong" else "efficiency E = T(1)/T(P)")
    )
    interval = "95 % interval (P=1 and P runs)" if any(every_interval) else "no interval: one run per point"
    ax.set_title(f"{scaling} scaling: measured {column}, {interval}", fontsize=10)
    legend_outside(ax)
    return save(fig, out, name)


# --- quality over training ---------------------------------------------------------------------------------------


def by_config(records: list[Record]) -> dict[str, list[Record]]:
    """Ok runs by configuration, each at its headline's process count (:func:`suite.analysis.systems.main_runs`)."""
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
    """``quality_vs_time_<ruler>.png``: each system's FID (KID) at its curve points against the training images of the
    whole system (left: the axis every figure of training progress shares) and against training-window time (right).

    One line per system at its largest P: at each curve point the geometric mean over seeds with its 95 %
    interval as a band (where there are two seeds or more), at the seeds' mean images and time. Only points scored
    with one feature network and sample count share the figure (the target's, else the most common).
    """
    curves = [r for r in records if r.status == "ok" and r.curve]
    if not curves:
        return skipped("quality_vs_time", "no run has a quality curve")
    fig, name = quality_figure(curves)
    return save(fig, out, name)


def _say(ax: Any, text: str) -> None:
    """A line of text in the middle of an empty panel."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8, wrap=True)


IMAGES_AXIS = "training images of the whole system"
"""The x axis of every figure of training progress (losses, quality, samples), as TensorBoard's step
(:data:`suite.measure.tensorboard_writer.AXIS`)."""


def quality_figure(curves: list[Record]) -> tuple[Any, str]:
    """The figure of :func:`plot_quality_curves` and its file name."""
    kind, score, target = _ruler(curves)
    plt = pyplot()
    fig, (by_images, by_time) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for name, runs in by_config(curves).items():
        series = []
        for r in one_per_seed(runs):
            points = [
                (p.images, p.clock_s, value)
                for p in r.curve or []
                if (p.features, p.n) == kind and (value := score(p)) is not None
            ]
            if points:
                series.append(points)
        if not series:
            continue
        length = min(len(s) for s in series)  # seeds share the schedule of curve points
        summaries = [summarise(s[i][2] for s in series) for i in range(length)]
        look = style_of(name)
        centers = [s.center if s else math.nan for s in summaries]
        bands = [s.interval if s else None for s in summaries]
        label = f"{name}, P={runs[0].procs} ({len(series)} seed{'s' if len(series) > 1 else ''})"
        for ax, at in ((by_images, 0), (by_time, 1)):
            found = [[x for point in s[:length] if (x := point[at]) is not None] for s in series]
            if any(len(xs) < length for xs in found):
                continue  # an older record's points without their training images
            xs = [float(np.mean([s[i] for s in found])) for i in range(length)]
            ax.plot(xs, centers, label=plot_text(label), **look.plot_kwargs())
            if len(series) > 1 and all(bands):
                ax.fill_between(
                    xs, [b[0] for b in bands if b], [b[1] for b in bands if b], color=look.color, alpha=BAND_ALPHA, lw=0
                )
    if not by_images.get_lines():
        _say(by_images, "the curve points hold no training images (an older record)")
    label = "KID" if score is _kid_mean else "FID"
    for ax in (by_images, by_time):
        if target:
            ax.axhline(
                target.target, color="black", lw=1, ls="--", label=f"target {str(target.metric).upper()} {target.target:g}"
            )
        ax.set_yscale("log")
        readable_ticks(ax, "y")
    count_axis(by_images)
    by_images.set_xlabel(IMAGES_AXIS)
    by_time.set_xlabel("training-window time (s)")
    by_images.set_ylabel(plot_text(f"{label} ({kind[0]}, n={kind[1]}), lower is better"))  # the ruler: a record's words
    fig.suptitle(f"{label} over training: geometric mean over seeds, {band_words(fig)}", fontsize=10)
    legend_outside(by_time)
    fig.tight_layout()
    return fig, f"quality_vs_time_{file_part(kind[0])}.png"


# --- losses -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Losses:
    """The losses at a point of training (a mean over a run's class GANs, or over seeds' points), at the training
    images the whole system had seen there."""

    images: float
    d_loss: float
    g_loss: float


def gan_steps(record: Record) -> list[int]:
    """The generator steps each GAN of a run made, warm-up included (one per class GAN, or the one model's)."""
    steps = record.generator_steps
    values = list(steps.values()) if isinstance(steps, dict) else [steps]
    return [int(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]


def step_images(record: Record) -> float | None:
    """Training images of the whole system per generator step of its GANs: the run's training images over its GANs'
    mean steps (a step of the system is one step of every GAN; the strategy's registered step size wherever its GANs
    take steps of one size, as TensorBoard's axis counts them). None where the record holds neither."""
    images = record.train_images if record.train_images is not None else record.images_consumed
    steps = gan_steps(record)
    if not images or not steps:
        return None
    return float(images) / float(np.mean(steps))


def loss_series(record: Record) -> list[Losses] | None:
    """A run's losses over training, at the system's training images: its history, or the mean over its class GANs'
    (None without losses, or without the training images and steps that place them)."""
    history, per_step = record.history, step_images(record)
    found: list[list[LossPoint] | list[CellPoint]] = (
        list(history.values()) if isinstance(history, dict) else [history] if history else []
    )
    parts = [
        [(p.step, p.d_loss, p.g_loss) for p in part if isinstance(p, LossPoint) and p.d_loss is not None and p.g_loss is not None]
        for part in found
        if part
    ]
    parts = [part for part in parts if part]
    if not parts or per_step is None:
        return None
    length = min(len(part) for part in parts)
    means = [[float(np.mean([part[i][k] for part in parts])) for k in range(3)] for i in range(length)]
    return [Losses(step * per_step, d, g) for step, d, g in means]


def mean_band(values: list[float]) -> tuple[float, tuple[float, float] | None]:
    """Arithmetic mean and its 95 % Student-t interval (losses may be negative); no interval from one value."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, None
    variance = float(np.var(values, ddof=1)) / len(values)
    half = critical_t([(variance, len(values))]) * math.sqrt(variance)
    return mean, (mean - half, mean + half)


def plot_losses(records: list[Record], out: Path) -> list[str]:
    """``losses.png``: discriminator and generator loss over the training images of the whole system (the axis of
    every figure of training progress), per system at its largest P: the mean over seeds with its 95 % band (class
    GANs averaged within a run, at the images of the system when each had made that many steps; cellular runs keep
    no losses)."""
    fig = losses_figure(records)
    if fig is None:
        return skipped("losses.png", "no run recorded its losses")
    return save(fig, out, "losses.png")


def losses_figure(records: list[Record]) -> Any | None:
    """The figure of :func:`plot_losses` (None without losses): a row of axes per loss, so that a BCE loss and a WGAN
    critic's, on scales of their own, never share an axis."""
    by_loss: dict[str, dict[str, list[list[Losses]]]] = {}
    for name, runs in by_config(records).items():
        series = [s for s in (loss_series(r) for r in one_per_seed(runs)) if s]
        if series:
            loss_name = name.split(" / ")[1] if name.count(" / ") >= 1 else ""
            by_loss.setdefault(loss_name, {})[name] = series
    if not by_loss:
        return None
    plt = pyplot()
    fig, grid = plt.subplots(len(by_loss), 2, figsize=(11, 4.2 * len(by_loss)), sharex=True, squeeze=False)
    for row, (loss_name, systems) in zip(grid, sorted(by_loss.items())):
        parts: tuple[tuple[Any, Callable[[Losses], float], str], ...] = (
            (row[0], lambda p: p.d_loss, "discriminator"),
            (row[1], lambda p: p.g_loss, "generator"),
        )
        for ax, loss, title in parts:
            for name, series in systems.items():
                _loss_line(ax, name, series, loss)
            ax.set_yscale("symlog", linthresh=1.0)
            readable_ticks(ax, "y")
            count_axis(ax)
            ax.set_xlabel(IMAGES_AXIS)
            ax.set_ylabel(plot_text(f"{title} loss ({loss_name or 'its own'})"))
            ax.set_title(plot_text(f"{loss_name} {title} loss: mean over seeds"), fontsize=10)
        legend_outside(row[1])
    for ax in fig.axes:
        ax.set_title(f"{ax.get_title()}, {band_words(fig)}", fontsize=10)
    fig.tight_layout()
    return fig


def _loss_line(ax: Any, name: str, series: list[list[Losses]], loss: Callable[[Losses], float]) -> None:
    """One system's mean loss over seeds against training images, with its 95 % band where it has two seeds or more."""
    length = min(len(s) for s in series)
    images = [float(np.mean([s[i].images for s in series])) for i in range(length)]
    stats = [mean_band([loss(s[i]) for s in series]) for i in range(length)]
    look = style_of(name)
    ax.plot(
        images,
        [m for m, _ in stats],
        label=plot_text(f"{name} ({len(series)} seed{'s' if len(series) > 1 else ''})"),
        markersize=4,
        **look.plot_kwargs(),
    )
    if len(series) > 1:
        ax.fill_between(
            images,
            [b[0] if b else m for m, b in stats],
            [b[1] if b else m for m, b in stats],
            color=look.color,
            alpha=BAND_ALPHA,
            lw=0,
        )
