"""Charts of single runs: sample grids over training time beside the real data's, and each rank's timeline.

Both read one run per system (its first seed at the headline's process count): the sample grids
its rank 0 saved into the run folder (:mod:`suite.gan.grids`) and the per-rank telemetry of its
record (``telemetry.per_rank``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..config.escape import plot_text
from ..records.images import ImageError, read_pixels
from ..records.measured import RankTelemetry
from ..records.record import Record
from ..records.results import REAL_GRID_FILE, SAMPLE_GRIDS_DIR, grid_rows, path_under
from ..records.scored import CurvePoint
from .palette import style_of
from .plot_parts import legend_outside, pyplot, save, skipped
from .plots import by_config, one_per_seed

log = logging.getLogger(__name__)

SAMPLE_COLUMNS = 4
"""Points of training shown per system (evenly spaced over its grids, the last always)."""


def _grids(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of a run folder's sample grids, in step order."""
    folder = run_dir / SAMPLE_GRIDS_DIR
    found = []
    for path in folder.glob("step_*.png") if folder.is_dir() else []:
        digits = path.stem.removeprefix("step_")
        if digits.isdigit():
            found.append((int(digits), path))
    return sorted(found)


def _spaced(items: list[tuple[int, Path]], count: int) -> list[tuple[int, Path]]:
    """``count`` items evenly spaced over ``items``, the first and the last included."""
    if len(items) <= count:
        return items
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


def _show(ax: Any, path: Path, title: str) -> None:
    """A grid image in ``ax``, its rows labelled with their classes where the grid names them; a file that is no grid
    the suite reads (too many pixels, damaged: :mod:`suite.records.images`) is named in a warning and its place
    labelled ``unreadable``."""
    try:
        pixels, rows = read_pixels(path, "L"), grid_rows(path)
    except ImageError as error:
        log.warning("skipped %s", error)
        ax.axis("off")
        ax.set_title(plot_text(f"{title}: unreadable"), fontsize=8)
        return
    ax.imshow(pixels, cmap="gray", vmin=0, vmax=255)
    ax.set_xticks([])
    if rows:
        height = pixels.shape[0] / len(rows)
        ax.set_yticks([(i + 0.5) * height for i in range(len(rows))], labels=[str(c) for c in rows], fontsize=6)
        ax.tick_params(axis="y", length=0, pad=1)
    else:
        ax.set_yticks([])
    ax.set_title(plot_text(title), fontsize=8)


def _when(point: CurvePoint | None, step: int) -> str:
    """A grid's place in training: the training images of the whole system at its curve point (the axis of every
    figure of training progress) and the training-window seconds; the grid's step where no curve point says more."""
    if point is None or point.images is None:
        return f"step {step}" + (f", {point.clock_s:.0f} s" if point is not None else "")
    return f"{point.images:,} images, {point.clock_s:.0f} s"


def plot_samples_over_time(records: list[Record], results_dir: Path, out: Path) -> list[str]:
    """``samples_over_time.png``: per system (one row), the real data's grid, then its generator's grids at up to
    :data:`SAMPLE_COLUMNS` points of training (the training images of the whole system, as in every figure of training
    progress, and training-window seconds); rows labelled by class."""
    shown = []
    for name, runs in by_config(records).items():
        run = one_per_seed(runs)[0]
        run_dir = path_under(results_dir, str(run.run_id))
        grids = _grids(run_dir)
        if grids:
            shown.append((name, run, run_dir, _spaced(grids, SAMPLE_COLUMNS)))
    if not shown:
        return skipped("samples_over_time.png", f"no run under {results_dir} saved sample grids over training")
    plt = pyplot()
    columns = 1 + max(len(grids) for *_, grids in shown)
    fig, axes = plt.subplots(len(shown), columns, figsize=(2.2 * columns, 2.45 * len(shown)), squeeze=False)
    for row, (name, run, run_dir, grids) in enumerate(shown):
        points = {p.step: p for p in run.curve or []}
        real = run_dir / SAMPLE_GRIDS_DIR / REAL_GRID_FILE
        if real.is_file():
            _show(axes[row][0], real, "real data")
        else:
            axes[row][0].axis("off")
        axes[row][0].set_ylabel(f"{plot_text(name)}\nP={run.procs}, seed {run.seed}", fontsize=8, color=style_of(name).color)
        for col in range(1, columns):
            ax = axes[row][col]
            if col > len(grids):
                ax.axis("off")
                continue
            step, path = grids[col - 1]
            _show(ax, path, _when(points.get(step), step))
    fig.suptitle("Samples over training (rows: classes where the model generates by class)", fontsize=10)
    fig.tight_layout()
    return save(fig, out, "samples_over_time.png")


# --- per-rank timelines -------------------------------------------------------------------------------------------

TIMELINE_PHASES = (
    ("set-up", "#bbbbbb", ""),
    ("warm-up", "#dddddd", ""),
    ("window: compute", "#555555", ""),
    ("window: communication", "white", "////"),
    ("window: data", "#999999", ".."),
    ("window: other", "#eeeeee", ""),
)
"""Each phase's fill and hatch (greys: the systems' colours keep their meaning)."""


def _phases(rank: RankTelemetry) -> list[float]:
    """Seconds of each of :data:`TIMELINE_PHASES` on one rank."""
    window = rank.window
    inside = [float(s or 0.0) for s in ((window.compute, window.comm, window.data) if window else (None, None, None))]
    other = max(float((window.seconds if window else None) or 0.0) - sum(inside), 0.0)
    warmup = rank.warmup.seconds if rank.warmup is not None else None
    return [float(rank.setup_s or 0.0), float(warmup or 0.0), *inside, other]


def _rank(rank: RankTelemetry, default: int) -> int:
    """A rank's number, or ``default`` where its telemetry does not say."""
    return rank.rank if rank.rank is not None else default


def plot_rank_timeline(records: list[Record], out: Path) -> list[str]:
    """``rank_timeline.png``: per system (one row, its first seed at its largest P), each rank's phases in
    order (set-up, warm-up, the window split into compute, communication, data) and, beside them, each
    rank's window step times in step order (from the step sample, which keeps every step of windows up
    to its size)."""
    shown = []
    for name, runs in by_config(records).items():
        run = one_per_seed(runs)[0]
        per_rank = (run.telemetry.per_rank if run.telemetry is not None else None) or []
        if per_rank and all(r.window is not None for r in per_rank):
            shown.append((name, run, sorted(per_rank, key=lambda r: _rank(r, 0))))
    if not shown:
        return skipped("rank_timeline.png", "no run recorded per-rank telemetry")
    plt = pyplot()
    fig, axes = plt.subplots(
        len(shown), 2, figsize=(12, 1.0 + 0.55 * sum(len(p) for *_, p in shown) + 0.9 * len(shown)), squeeze=False
    )
    for row, (name, run, per_rank) in enumerate(shown):
        gantt, steps = axes[row]
        look = style_of(name)
        for i, rank in enumerate(per_rank):
            start = 0.0
            for (phase, fill, hatch), seconds in zip(TIMELINE_PHASES, _phases(rank)):
                label = phase if row == 0 and i == 0 else None
                gantt.barh(i, seconds, left=start, color=fill, hatch=hatch, edgecolor="black", lw=0.4, label=label)
                start += seconds
            times = (rank.step_times.sample if rank.step_times is not None else None) or []
            in_order = (rank.step_times.count if rank.step_times is not None else None) == len(times)
            shade = 0.5 * i / max(len(per_rank) - 1, 1)
            steps.plot(
                range(1, len(times) + 1),
                times,
                color=look.color,
                alpha=1 - shade,
                marker=look.marker,
                markersize=3,
                lw=1,
                label=f"rank {_rank(rank, i)}" + ("" if in_order else " (sample, not in order)"),
            )
        gantt.set_yticks(range(len(per_rank)), labels=[f"rank {_rank(r, i)}" for i, r in enumerate(per_rank)], fontsize=8)
        gantt.invert_yaxis()
        gantt.set_xlabel("seconds from the rank's start of set-up")
        gantt.set_title(plot_text(f"{name}, P={run.procs}, seed {run.seed}"), fontsize=9, color=look.color)
        steps.set_xlabel("window step")
        steps.set_ylabel("step time (s)")
        steps.set_title("step times per rank", fontsize=9)
        legend_outside(steps)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(TIMELINE_PHASES), fontsize=8, frameon=False
    )
    fig.tight_layout()
    return save(fig, out, "rank_timeline.png")
