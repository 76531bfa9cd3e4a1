"""The report's strong and weak scaling tables, one row per configuration and process count, with the speedup and
efficiency against the configuration's P = 1 runs and where efficiency went; and the warnings about sweeps whose points
are not comparable (threads per rank that differ, oversubscribed cores). Built from the flat frame of records
(:func:`suite.records.results.records_frame`); the headline reads its weak efficiencies."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

from ...records.record import Record
from ..columns import COL
from ..markdown import NA
from ..stats.speedup import budgeted, efficiency, speedup, work_efficiency
from ..stats.summary import summarise


def config_label(frame: pd.DataFrame, scaling: str) -> pd.Series:
    """A label naming what a scaling curve holds fixed: strategy / loss / engine [label] (sweep) [grid or block]."""
    parts = frame[COL.strategy] + " / " + frame[COL.loss] + " / " + frame[COL.engine]
    if "label" in frame:
        parts = parts + frame[COL.label].map(lambda v: f" [{v}]" if isinstance(v, str) and v else "")
    if "sweep" in frame:  # the flat table's text of the swept values
        parts = parts + frame[COL.sweep].map(lambda v: f" ({v})" if isinstance(v, str) and v else "")
    if scaling == "strong":
        parts = parts + frame[COL.grid].map(lambda g: f" / grid {g}" if isinstance(g, str) and g else "")
    else:
        parts = parts + frame[COL.cells_per_rank].map(
            lambda k: f" / {int(k)} cell{'s' if k > 1 else ''} per rank" if pd.notna(k) else ""
        )
    return parts


def mean_of_lists(values: Iterable[Any]) -> float | None:
    """The mean of the numbers among ``values`` (None when there are none)."""
    numbers = [v for v in values if isinstance(v, (int, float))]
    return float(np.mean(numbers)) if numbers else None


def threads_text(values: Iterable[Any]) -> str:
    distinct = sorted({int(v) for v in values if pd.notna(v)})
    return ",".join(map(str, distinct)) if distinct else NA


RATIOS = ("speedup", "efficiency", "efficiency_work")
"""The scaling table's ratios to the P = 1 point, each with its interval."""
RATIO_COLUMNS = [f"{name}{part}" for name in RATIOS for part in ("", "_lo", "_hi")]


SCALING_COLUMNS = [
    "config",
    "procs",
    "runs",
    "threads_per_rank",
    "oversubscribed",
    "train_s_mean",
    "train_s_std",
    "images_per_s_mean",
    "images_per_s_std",
    "images_per_s_per_rank",
    "work_images_per_rank",
    *RATIO_COLUMNS,
    "comm_share",
    "compute_slowdown",
    "note",
    *(f"_{name}" for name in RATIOS),
    "_train_s",
]
"""The columns of :func:`scaling_table`, its hidden summaries (``_*``) last."""


def scaling_table(frame: pd.DataFrame, scaling: str) -> pd.DataFrame:
    """Time, throughput, work, speedup and efficiency per configuration and process count.

    Strong scaling: S(P) = T(1)/T(P), E = S/P. Weak scaling: E = T(1)/T(P) (S is not defined)
    and, because the work per rank may differ between process counts (unequal classes, growing
    neighbourhoods), the work-normalised ``efficiency_work``: images/s per rank at P over P=1's.
    T is ``train_s`` (the training window of the slowest rank). Speedup and efficiency come from
    :mod:`suite.analysis.stats.speedup`, as the headline's do: ratios of geometric means over the runs at
    both ends, their 95 % intervals in ``*_lo``/``*_hi`` (n/a where an end has one run) and the
    :class:`suite.analysis.stats.summary.Summary` in the hidden ``_speedup``, ``_efficiency`` and
    ``_efficiency_work`` (and the point's ``train_s`` over its runs in ``_train_s``, for the plots). Without an ok P=1 run, S and E are n/a and the ``note`` column says so.

    Where efficiency went: ``comm_share`` (the window's share blocked on communication) and
    ``compute_slowdown``, a rank's computation time per image at P over P=1's (above 1: smaller
    per-rank batches, or ranks slowing each other through shared cores, caches or memory).
    """
    ok = frame[(frame[COL.status] == "ok") & (frame[COL.scaling] == scaling)].copy()
    if ok.empty:
        return pd.DataFrame(columns=SCALING_COLUMNS)
    ok["config"] = config_label(ok, scaling)
    rows = []
    for config, points in _points(ok).groupby("config", sort=True):
        rows += _against_one_process(points, ok[ok["config"] == config], scaling)
    return pd.DataFrame(rows, columns=SCALING_COLUMNS)


def _points(ok: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of a scaling kind (``config`` labelled) as one point per configuration and process count: its
    runs, threads, mean times and throughput, work per rank, communication share and computation per image."""
    ok = ok.assign(
        work_images=ok[COL.work_images_per_rank].map(lambda v: mean_of_lists(v) if isinstance(v, list) else None),
        compute_per_image=[
            _compute_per_image(*args)
            for args in zip(ok[COL.compute_s], ok[COL.work_images_per_rank], ok[COL.work_steps_per_rank])
        ],
    )
    return (
        ok.groupby(["config", COL.procs], sort=True)
        .agg(
            runs=(COL.run_id, "count"),
            threads_per_rank=(COL.threads_per_rank, threads_text),
            oversubscribed=(COL.oversubscribed, lambda v: bool(v.fillna(False).astype(bool).any())),
            train_s_mean=(COL.train_s, "mean"),
            train_s_std=(COL.train_s, "std"),
            images_per_s_mean=(COL.images_per_s, "mean"),
            images_per_s_std=(COL.images_per_s, "std"),
            images_per_s_per_rank=(COL.images_per_s_per_rank, "mean"),
            work_images_per_rank=("work_images", "mean"),
            comm_share=(COL.comm_share, "mean"),
            compute_per_image=("compute_per_image", "mean"),
        )
        .reset_index()
    )


def _against_one_process(points: pd.DataFrame, runs: pd.DataFrame, scaling: str) -> list[dict[str, Any]]:
    """One configuration's points (:func:`_points`) as rows of the scaling table, each with its ratios to the P = 1
    point over ``runs`` (the configuration's runs), its computation slowdown and the note of why a ratio is missing."""
    base = _timed(runs[runs[COL.procs] == 1])
    base_per_image = points[points[COL.procs] == 1]["compute_per_image"]
    rows = []
    for _, point in points.iterrows():
        out = point.to_dict()
        per_image = out.pop("compute_per_image")
        slowdown = per_image / base_per_image.iloc[0] if per_image and len(base_per_image) and base_per_image.iloc[0] else None
        at = runs[runs[COL.procs] == point[COL.procs]]
        out.update(compute_slowdown=slowdown, note="", _train_s=summarise(at[COL.train_s]))
        out.update(_ratios(base, _timed(at), int(point[COL.procs]), scaling))
        if not base:
            out["note"] = "no P=1 run: speedup and efficiency not computed"
        elif budgeted(_timed(runs)):
            out["note"] = "time-budgeted runs: ratio of images/s"
        rows.append(out)
    return rows


TIMED_COLUMNS = ("run_id", "procs", "train_s", "images_per_s", "images_per_s_per_rank", "budget_s")
"""The flat table's columns that speedup and efficiency read (:mod:`suite.analysis.stats.speedup`): its rows as records."""


def _timed(runs: pd.DataFrame) -> list[Record]:
    """The rows of the flat table as records of their :data:`TIMED_COLUMNS`, the fields :mod:`suite.analysis.stats.speedup`
    reads (a value the frame holds as NaN is missing, None)."""
    return [
        Record(**{column: None if pd.isna(row[column]) else row[column] for column in TIMED_COLUMNS})
        for row in runs.to_dict("records")
    ]


def _ratios(base: list[Record], at: list[Record], procs: int, scaling: str) -> dict[str, Any]:
    """The point's speedup and efficiencies: numbers, interval bounds and the summaries (1 at P = 1 itself)."""
    out: dict[str, Any] = {column: None for column in RATIO_COLUMNS} | {f"_{name}": None for name in RATIOS}
    if not base:
        return out
    strong = scaling == "strong"
    summaries = {
        "speedup": speedup(base, at, procs) if strong else None,
        "efficiency": efficiency(base, at, procs, scaling),
        "efficiency_work": None if strong else work_efficiency(base, at, procs),
    }
    for name, summary in summaries.items():
        if procs == 1 and (strong or name != "speedup"):
            out[name] = 1.0  # the reference point itself
        elif summary is not None:
            interval = summary.interval or (None, None)
            out.update({name: summary.center, f"{name}_lo": interval[0], f"{name}_hi": interval[1], f"_{name}": summary})
    return out


def _compute_per_image(compute_s: Any, images: Any, steps: Any) -> float | None:
    """Seconds of computation per image a rank put through in a window step (None when unknown)."""
    if not isinstance(images, list) or not isinstance(steps, list) or not sum(steps) or pd.isna(compute_s):
        return None
    return float(compute_s) / (sum(images) / sum(steps)) if sum(images) else None


def _distinct(column: pd.Series) -> list[int]:
    """The distinct integer values of a column, sorted, missing ones left out."""
    return sorted({int(v) for v in column if pd.notna(v)})


def sweep_warnings(frame: pd.DataFrame) -> list[str]:
    """What makes a sweep's points not comparable: mixed threads, oversubscription, unequal work."""
    ok = frame[frame[COL.status] == "ok"]
    warnings = []
    for scaling in ("strong", "weak"):
        part = ok[ok[COL.scaling] == scaling]
        if part.empty:
            continue
        part = part.assign(config=config_label(part, scaling))
        for config, runs in part.groupby("config", sort=True):
            threads = _distinct(runs[COL.threads_per_rank])
            if len(threads) > 1:
                warnings.append(
                    f"{config} ({scaling}): threads per rank differ across the sweep ({', '.join(map(str, threads))}); "
                    "its speedups mix more processes with fewer threads. Set `train.threads` or let the suite hold "
                    "threads fixed (the default)."
                )
            over = runs[runs[COL.oversubscribed].fillna(False).astype(bool)]
            for _, r in over.sort_values(COL.procs).drop_duplicates(COL.procs).iterrows():
                warnings.append(
                    f"{config} ({scaling}) at P={r[COL.procs]}: {int(r[COL.ranks_per_node])} ranks x "
                    f"{int(r[COL.threads_per_rank])} threads on {int(r[COL.cores_per_node])} cores is oversubscribed: "
                    "its time measures contention, not scaling."
                )
            if scaling == "weak":
                work = runs.groupby(COL.procs)[COL.work_images_per_rank].agg(
                    lambda v: mean_of_lists([x for lst in v if isinstance(lst, list) for x in lst])
                )
                if work.notna().all() and len(work) > 1 and work.max() > 1.01 * work.min():
                    warnings.append(
                        f"{config} (weak): the work per rank is not fixed ({', '.join(f'P={p}: {w:.0f}' for p, w in work.items())} "
                        "images per rank): compare `efficiency_work` (per-rank throughput) rather than `efficiency`."
                    )
                hoods = _distinct(runs[COL.neighbourhood_size])
                if len(hoods) > 1:
                    warnings.append(
                        f"{config} (weak): the neighbourhood grows with the grid ({' -> '.join(map(str, hoods))} cells), "
                        "so fitness and mixture work per cell grow too; for fixed work per rank use a block of cells "
                        "per rank on grids of at least 3x3 (docs/scenarios.md, weak scaling)."
                    )
    return warnings
