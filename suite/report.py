"""``suite report RESULTS``: markdown, CSV and PNG from the run records of a results folder.

Every number in the report comes from the records it reads; where a number cannot be
computed (no P=1 run for a speedup, no GPU for utilisation, no logits for IS) the report says
``n/a`` and why, never a guess. Sections, each backed by a CSV of the same name:

environment, runs, strong scaling, weak scaling, speedup and efficiency, communication share,
GPU utilization, image quality (one table per feature network), and the papers' numbers
(``baselines/``), which are printed beside ours but never in our columns.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pandas as pd

from . import __version__
from .findings import config_name
from .outcomes import outcomes_section
from .projection import PROBE_FILE, report_section
from .registry import STRATEGIES
from .results import (
    KID_FIELDS,
    PER_CLASS_BASES,
    RECORDS_FILE,
    SAMPLES_FILE,
    atomic_write_text,
    iter_records,
    load_records,
    per_class_summary,
)
from .verdicts import summarise

log = logging.getLogger(__name__)
DEFAULT_BASELINES = Path(__file__).resolve().parent.parent / "baselines"
NA = "n/a"


# --- small formatting helpers -----------------------------------------------------------------------


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return NA
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        magnitude = abs(float(value))
        if magnitude != 0 and magnitude < 10**-(digits):
            return f"{float(value):.{digits - 1}e}"
        if magnitude >= 1000:
            return f"{float(value):.0f}"
        return f"{float(value):.{digits}f}".rstrip("0").rstrip(".") or "0"
    return str(value)


def _pm(mean: Any, std: Any) -> str:
    if mean is None or (isinstance(mean, float) and not math.isfinite(mean)):
        return NA
    return _fmt(mean) if std is None or not math.isfinite(std) or std == 0 else f"{_fmt(mean)} ± {_fmt(std)}"


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no extra dependency)."""
    if frame.empty:
        return "_(none)_\n"
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = [
        "| " + " | ".join(_fmt(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows]) + "\n"


def _config(frame: pd.DataFrame, scaling: str) -> pd.Series:
    """A label naming what a scaling curve holds fixed: strategy / loss / engine [label] [grid or block]."""
    parts = frame["strategy"] + " / " + frame["loss"] + " / " + frame["engine"]
    if "label" in frame:
        parts = parts + frame["label"].map(lambda v: f" [{v}]" if isinstance(v, str) and v else "")
    if scaling == "strong":
        parts = parts + frame["grid"].map(lambda g: f" / grid {g}" if isinstance(g, str) and g else "")
    else:
        parts = parts + frame["cells_per_rank"].map(
            lambda k: f" / {int(k)} cell{'s' if k > 1 else ''} per rank" if pd.notna(k) else ""
        )
    return parts


def _mean_of_lists(values: Iterable[Any]) -> float | None:
    """The mean of the numbers among ``values`` (None when there are none)."""
    numbers = [v for v in values if isinstance(v, (int, float))]
    return float(np.mean(numbers)) if numbers else None


def _threads(values: Iterable[Any]) -> str:
    distinct = sorted({int(v) for v in values if pd.notna(v)})
    return ",".join(map(str, distinct)) if distinct else NA


# --- tables ---------------------------------------------------------------------------------------------


def scaling_table(frame: pd.DataFrame, scaling: str) -> pd.DataFrame:
    """Time, throughput, work, speedup and efficiency per configuration and process count.

    Strong scaling: S(P) = T(1)/T(P), E = S/P. Weak scaling: E = T(1)/T(P) (S is not defined)
    and, because the work per rank may differ between process counts (unequal classes, growing
    neighbourhoods), the work-normalised ``efficiency_work``: images/s per rank at P over P=1's.
    T is ``train_s`` (the training window of the slowest rank), averaged over repeats. Without
    an ok P=1 run, S and E are n/a and the ``note`` column says so.

    Where efficiency went: ``comm_share`` (the window's share blocked on communication) and
    ``compute_slowdown``, a rank's computation time per image at P over P=1's (above 1: smaller
    per-rank batches, or ranks slowing each other through shared cores, caches or memory).
    """
    ok = frame[(frame["status"] == "ok") & (frame["scaling"] == scaling)].copy()
    columns = [
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
        "speedup",
        "speedup_std",
        "efficiency",
        "efficiency_work",
        "comm_share",
        "compute_slowdown",
        "note",
    ]
    if ok.empty:
        return pd.DataFrame(columns=columns)
    ok["config"] = _config(ok, scaling)
    ok["work_images"] = ok["work_images_per_rank"].map(lambda v: _mean_of_lists(v) if isinstance(v, list) else None)
    ok["compute_per_image"] = [
        _compute_per_image(*args) for args in zip(ok["compute_s"], ok["work_images_per_rank"], ok["work_steps_per_rank"])
    ]
    grouped = (
        ok.groupby(["config", "procs"], sort=True)
        .agg(
            runs=("run_id", "count"),
            threads_per_rank=("threads_per_rank", _threads),
            oversubscribed=("oversubscribed", lambda v: bool(v.fillna(False).astype(bool).any())),
            train_s_mean=("train_s", "mean"),
            train_s_std=("train_s", "std"),
            images_per_s_mean=("images_per_s", "mean"),
            images_per_s_std=("images_per_s", "std"),
            images_per_s_per_rank=("images_per_s_per_rank", "mean"),
            work_images_per_rank=("work_images", "mean"),
            comm_share=("comm_share", "mean"),
            compute_per_image=("compute_per_image", "mean"),
        )
        .reset_index()
    )
    rows = []
    for config, part in grouped.groupby("config", sort=True):
        base = part[part["procs"] == 1]
        repeats = ok[(ok["config"] == config)]
        budgeted = repeats["budget_s"].notna().any()
        for _, row in part.iterrows():
            out = row.to_dict()
            out.update(speedup=None, speedup_std=None, efficiency=None, efficiency_work=None, note="")
            per_image = out.pop("compute_per_image")
            base_per_image = None if base.empty else base["compute_per_image"].iloc[0]
            out["compute_slowdown"] = per_image / base_per_image if per_image and base_per_image else None
            if base.empty:
                out["note"] = "no P=1 run: speedup and efficiency not computed"
            elif budgeted:  # every run trained for the same time: compare the work done in it
                ratio = row["images_per_s_mean"] / base["images_per_s_mean"].iloc[0]
                rates = repeats[repeats["procs"] == row["procs"]]["images_per_s"].to_numpy(dtype=float)
                spread = float(np.std(rates / base["images_per_s_mean"].iloc[0], ddof=1)) if len(rates) > 1 else None
                out["note"] = "time-budgeted runs: ratio of images/s"
            else:
                t1 = float(base["train_s_mean"].iloc[0])
                ratio = t1 / row["train_s_mean"]
                # spread of T(1)/T(P) over the P-run repeats (T(1) taken as its mean)
                times = repeats[repeats["procs"] == row["procs"]]["train_s"].to_numpy(dtype=float)
                spread = float(np.std(t1 / times, ddof=1)) if len(times) > 1 else None
            if not base.empty:
                if scaling == "strong":
                    out.update(speedup=ratio, speedup_std=spread, efficiency=ratio / row["procs"])
                else:
                    rate1 = base["images_per_s_per_rank"].iloc[0]
                    work = rate1 and row["images_per_s_per_rank"] and row["images_per_s_per_rank"] / rate1
                    out.update(efficiency=ratio / row["procs"] if budgeted else ratio, efficiency_work=work or None)
            rows.append(out)
    return pd.DataFrame(rows, columns=columns)


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
    ok = frame[frame["status"] == "ok"]
    warnings = []
    for scaling in ("strong", "weak"):
        part = ok[ok["scaling"] == scaling]
        if part.empty:
            continue
        part = part.assign(config=_config(part, scaling))
        for config, runs in part.groupby("config", sort=True):
            threads = _distinct(runs["threads_per_rank"])
            if len(threads) > 1:
                warnings.append(
                    f"{config} ({scaling}): threads per rank differ across the sweep ({', '.join(map(str, threads))}); "
                    "its speedups mix more processes with fewer threads. Set `train.threads` or let the suite hold "
                    "threads fixed (the default)."
                )
            over = runs[runs["oversubscribed"].fillna(False).astype(bool)]
            for _, r in over.sort_values("procs").drop_duplicates("procs").iterrows():
                warnings.append(
                    f"{config} ({scaling}) at P={r['procs']}: {int(r['ranks_per_node'])} ranks x "
                    f"{int(r['threads_per_rank'])} threads on {int(r['cores_per_node'])} cores is oversubscribed: "
                    "its time measures contention, not scaling."
                )
            if scaling == "weak":
                work = runs.groupby("procs")["work_images_per_rank"].agg(
                    lambda v: _mean_of_lists([x for lst in v if isinstance(lst, list) for x in lst])
                )
                if work.notna().all() and len(work) > 1 and work.max() > 1.01 * work.min():
                    warnings.append(
                        f"{config} (weak): the work per rank is not fixed ({', '.join(f'P={p}: {w:.0f}' for p, w in work.items())} "
                        "images per rank): compare `efficiency_work` (per-rank throughput) rather than `efficiency`."
                    )
                hoods = _distinct(runs["neighbourhood_size"])
                if len(hoods) > 1:
                    warnings.append(
                        f"{config} (weak): the neighbourhood grows with the grid ({' -> '.join(map(str, hoods))} cells), "
                        "so fitness and mixture work per cell grow too; for fixed work per rank use a block of cells "
                        "per rank on grids of at least 3x3 (README, weak scaling)."
                    )
    return warnings


def communication_table(frame: pd.DataFrame) -> pd.DataFrame:
    ok = frame[frame["status"] == "ok"]
    table = ok[
        ["run_id", "procs", "comm_bytes", "comm_s", "step_s", "data_s", "compute_s", "comm_wait_s", "comm_share", "timed_steps"]
    ].copy()
    table["comm_mb"] = table.pop("comm_bytes") / 2**20
    return table[
        ["run_id", "procs", "comm_mb", "comm_s", "step_s", "data_s", "compute_s", "comm_wait_s", "comm_share", "timed_steps"]
    ]


def step_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run: step-time spread, throughput with its interval, FLOPs and the fraction of peak."""
    ok = frame[frame["status"] == "ok"]
    rows = []
    for _, r in ok.iterrows():
        ci = r["images_per_s_ci95"] if isinstance(r["images_per_s_ci95"], list) else [None, None]
        rows.append(
            {
                "run_id": r["run_id"],
                "procs": r["procs"],
                "threads_per_rank": r["threads_per_rank"],
                "timed_steps": r["timed_steps"],
                "step_p50": r["step_p50"],
                "step_p95": r["step_p95"],
                "step_mean": r["step_s"],
                "step_ci95": r["step_ci95"],
                "images_per_s": r["images_per_s"],
                "images_per_s_lo": ci[0],
                "images_per_s_hi": ci[1],
                "gflop_per_step": r["flops_per_step"] / 1e9 if pd.notna(r["flops_per_step"]) else None,
                "achieved_gflops": r["achieved_flops"] / 1e9 if pd.notna(r["achieved_flops"]) else None,
                "fraction_of_peak": r["fraction_of_peak"],
                "peak_gflops": r["peak_flops"] / 1e9 if pd.notna(r["peak_flops"]) else None,
                "peak_source": r["peak_source"],
            }
        )
    return pd.DataFrame(rows)


def utilization_table(frame: pd.DataFrame) -> pd.DataFrame:
    ok = frame[frame["status"] == "ok"]
    return ok[
        [
            "run_id",
            "procs",
            "device",
            "gpu_util_mean",
            "gpu_util_p95",
            "gpu_mem_used_mb",
            "gpu_mem_peak_mb",
            "cpu_util_mean",
            "host_mem_peak_mb",
        ]
    ].copy()


def cellular_phase_table(records: list[dict]) -> pd.DataFrame:
    rows = [
        {
            "run_id": r["run_id"],
            "procs": r["procs"],
            "grid": "x".join(map(str, r["grid"])),
            "cells_per_rank": r["cells_per_rank"],
            **{phase: float(np.mean(values)) for phase, values in r["phases_s"].items()},
        }
        for r in records
        if r.get("status") == "ok" and r.get("phases_s")
    ]
    return pd.DataFrame(rows)


def _scored_models(records: list[dict]) -> Iterator[tuple[str, dict, dict]]:
    """(run id shown, record, quality) for every scored model: the run's, and cellular's best cell."""
    for r in records:
        if r.get("status") != "ok":
            continue
        if r.get("quality"):
            yield r["run_id"] + (" (best mixture)" if r.get("quality_best_cell") else ""), r, r["quality"]
        if r.get("quality_best_cell"):
            yield r["run_id"] + " (best cell)", r, r["quality_best_cell"]


def _class_set(q: dict) -> str | None:
    """The real classes a model was scored against, e.g. ``0-9 of 10`` or ``0,3 of 10``."""
    classes = q.get("classes")
    if not classes:
        return None
    contiguous = classes == list(range(classes[0], classes[-1] + 1))
    shown = f"{classes[0]}-{classes[-1]}" if contiguous and len(classes) > 2 else ",".join(map(str, classes))
    return f"{shown} of {q['num_classes']}"


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _significant(value: float) -> str:
    """Three significant digits without an exponent (KID ranges from 1e-4 to 1e3 across networks)."""
    return np.format_float_positional(float(value), precision=3, fractional=False, trim="-")


def _spread(mean: Any, std: Any, count: Any = None, size: Any = None) -> str:
    """``mean ± std (count×size)``: a score with the splits or subsets it is over."""
    if not _given(mean):
        return NA
    text = _significant(mean) + (f" ± {_significant(std)}" if _given(std) else "")
    return text + (f" ({_fmt(count)}×{_fmt(size)})" if _given(count) else "")


def _quality_display(scores: pd.DataFrame) -> pd.DataFrame:
    """The markdown columns of a scores table: IS and KID with their spread and counts, per-class KID by basis."""
    shown = pd.DataFrame(
        {
            "run_id": scores["run_id"],
            "procs": scores["procs"],
            "seed": scores["seed"],
            "classes": scores["classes"],
            "n": scores["n"],
            "n_real": scores["n_real"],
        }
    )
    shown["IS (splits×n)"] = [
        _spread(*v) for v in zip(scores["is_mean"], scores["is_std"], scores["is_splits"], scores["is_split_n"])
    ]
    shown["fid"] = scores["fid"]
    shown["KID (subsets×n)"] = [
        _spread(*v) for v in zip(scores["kid_mean"], scores["kid_std"], scores["kid_subsets"], scores["kid_subset_size"])
    ]
    for field, basis in PER_CLASS_BASES.items():
        shown[f"per-class KID by {basis}"] = [
            f"{_significant(m)} ({k} classes, n {n})" if _given(m) else NA
            for m, k, n in zip(scores[f"{field}_kid_mean"], scores[f"{field}_scored"], scores[f"{field}_n"])
        ]
    shown["tvd"], shown["label_acc"] = scores["tvd"], scores["label_acc"]
    return shown


def _per_class_rows(name: str, scores: dict) -> list[dict]:
    return [
        {
            "run_id": name,
            "class": c,
            "n": e["n"],
            "n_real": e["n_real"],
            "metric": e["metric"],
            "fid": e["fid"],
            **{k: e[k] for k in KID_FIELDS},
            "note": e["note"],
        }
        for c, e in scores.items()
    ]


def quality_tables(records: list[dict]) -> dict[str, tuple[pd.DataFrame, dict[str, pd.DataFrame]]]:
    """Per ruler: (scores table, {per-class field: per-class table}). Rulers are never mixed.

    A ruler is a network name, and its hash where one name comes with several hashes.

    Every FID has KID and the sample counts beside it. The per-class tables are one per grouping
    basis (:data:`suite.results.PER_CLASS_BASES`), never merged into one column.
    """
    by_net: dict[str, list[tuple[str, dict, dict]]] = {}
    hashes: dict[str, set[str]] = {}
    for _, _, q in _scored_models(records):
        hashes.setdefault(q["features"], set()).add(q.get("ruler_sha256") or "")
    for name, r, q in _scored_models(records):
        key = q["features"] + (f" {q['ruler_sha256'][:12]}" if len(hashes[q["features"]]) > 1 and q.get("ruler_sha256") else "")
        by_net.setdefault(key, []).append((name, r, q))
    tables = {}
    for net, models in sorted(by_net.items()):
        scores: list[dict] = []
        per_class: dict[str, list[dict]] = {field: [] for field in PER_CLASS_BASES}
        for name, r, q in models:
            row = {
                "run_id": name,
                "config": config_name(r) + (" (best cell)" if name.endswith("(best cell)") else ""),
                "strategy": r["strategy"],
                "procs": r["procs"],
                "seed": r.get("seed"),
                "scaling": r.get("scaling"),
                "ruler_sha256": q.get("ruler_sha256"),
                "classes": _class_set(q),
                "n": q["n"],
                "n_real": q["n_real"],
                "feature_dim": q.get("feature_dim"),
                "is_mean": q["is_mean"],
                "is_std": q["is_std"],
                "is_splits": q.get("is_splits"),
                "is_split_n": q.get("is_split_n"),
                "fid": q["fid"],
                "fid_note": q.get("fid_note"),
                **{k: q.get(k) for k in KID_FIELDS},
            }
            for field in PER_CLASS_BASES:
                summary = per_class_summary(q.get(field)) or {}
                row[f"{field}_kid_mean"] = summary.get("kid_mean")
                row[f"{field}_scored"] = f"{summary['scored']}/{summary['classes']}" if summary else None
                row[f"{field}_n"] = f"{summary['n_min']}-{summary['n_max']}" if summary else None
                per_class[field] += _per_class_rows(name, q.get(field) or {})
            scores.append({**row, "tvd": q["tvd"], "label_acc": q["label_acc"], "is_note": q.get("is_note")})
        tables[net] = (pd.DataFrame(scores), {field: pd.DataFrame(rows) for field, rows in per_class.items()})
    return tables


SEED_METRICS = {"fid": "FID", "kid_mean": "KID", "is_mean": "IS", "label_acc": "label_acc"}
"""Scores summarised over seeds (record field -> column title)."""


def quality_over_seeds(scores: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, scaling and process count: n seeds, and mean, std and 95 % interval of each score over them.

    A seed's repeats are averaged first: they retrain the same model, so they are not independent draws.
    """
    rows = []
    keyed = scores.assign(seed_key=scores["seed"].fillna(-1))
    for (config, scaling, procs), part in keyed.groupby(["config", "scaling", "procs"], sort=True):
        seeds = part.groupby("seed_key")  # repeats of one seed train the same model: one value per seed
        row: dict[str, Any] = {
            "config": config,
            "scaling": scaling,
            "procs": procs,
            "seeds": ",".join(str(int(s)) for s in sorted(part["seed"].dropna().unique())),
        }
        for field in SEED_METRICS:
            summary = summarise(seeds[field].mean())
            interval = summary.interval if summary else None
            row.update(
                {
                    f"{field}_n": summary.n if summary else 0,
                    f"{field}_mean": summary.mean if summary else None,
                    f"{field}_std": summary.std if summary else None,
                    f"{field}_ci95_lo": interval[0] if interval else None,
                    f"{field}_ci95_hi": interval[1] if interval else None,
                    f"_{field}_text": summary.text(2 if field == "label_acc" else 3) if summary else NA,
                }
            )
        rows.append(row)
    return pd.DataFrame(rows)


def environment_tables(records: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The environment once: (fields every run shares as item/value, the fields that differ per run)."""
    rows = []
    for r in records:
        if r.get("status") != "ok":
            continue
        env = r.get("env") or {}
        rows.append(
            {
                "run_id": r["run_id"],
                "device": r.get("device"),
                "launcher": r.get("launcher"),
                "cores_per_node": r.get("cores_per_node"),
                "ranks_per_node": r.get("ranks_per_node"),
                "threads_per_rank": r.get("threads_per_rank"),
                **{f"machine.{k}": v for k, v in (r.get("machine") or {}).items() if v is not None},
                **{k: v for k, v in env.items() if v},
            }
        )
    if not rows:
        return pd.DataFrame(columns=["item", "value"]), pd.DataFrame()
    frame = pd.DataFrame(rows).set_index("run_id")
    varying = [c for c in frame.columns if frame[c].astype(str).nunique() > 1]
    common = frame.drop(columns=varying).iloc[0]
    return (
        pd.DataFrame({"item": common.index, "value": common.astype(str).values}),
        frame[varying].reset_index() if varying else pd.DataFrame(),
    )


def machine_note(records: list[dict]) -> str:
    """Which machines the runs come from, and whether runs of the same seed are expected to agree bit for bit."""
    machines = {
        (m.get("fingerprint"), m.get("numerics")): m for r in records if r.get("status") == "ok" and (m := r.get("machine"))
    }
    if not machines:
        return "The records do not say which machine ran them (recorded from schema 3 on): bitwise agreement cannot be judged."
    kinds = sorted({str(f) for f, _ in machines})
    numerics = sorted({str(n) for _, n in machines if n})
    unknown = sum(1 for r in records if r.get("status") == "ok" and not r.get("machine"))
    first = next(iter(machines.values()))
    described = (
        f"{first.get('gpu') or first.get('cpu_model')} ({first.get('cpu_capability')} kernels, torch {first.get('torch')})"
    )
    if unknown:
        kinds.append(f"unknown for {unknown} runs recorded before schema 3")
    if len(kinds) == 1 and len(numerics) <= 1:
        return (
            f"Every run on one kind of machine: {described}, fingerprint `{kinds[0]}`, numerics digest `{numerics[0] if numerics else 'n/a'}`. "
            "Runs of the same settings and seed are expected to agree bit for bit; elsewhere, compare over seeds."
        )
    same = (
        "the same numerics digest, so the same seed is still expected to agree bit for bit"
        if len(numerics) == 1
        else (
            f"{len(numerics)} numerics digests: the same seed is NOT expected to give the same model across them (other kernels round "
            "differently); compare their quality over seeds only"
        )
    )
    return f"The runs come from {len(kinds)} kinds of machine (fingerprints {', '.join(f'`{k}`' for k in kinds)}) with {same}."


def time_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Where each run's wall time went: set-up, warm-up, the window, evaluation pauses, finalize, scoring."""
    ok = frame[frame["status"] == "ok"]
    table = ok[["run_id", "wall_s", "setup_s", "warmup_s", "train_s", "eval_s", "finalize_s", "score_s"]].copy()
    parts = table[["setup_s", "warmup_s", "train_s", "eval_s", "finalize_s", "score_s"]].fillna(0).sum(axis=1)
    table["other_s"] = (table["wall_s"] - parts).clip(lower=0)  # process start-up, imports, launcher
    table["train_share"] = table["train_s"] / table["wall_s"]
    return table


# --- plots --------------------------------------------------------------------------------------------------


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    # 20 distinct colours (the default cycle repeats after 10 lines), with changing markers
    colours = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]  # tab20 is a ListedColormap
    markers = ["o", "s", "^", "D", "v"] * 4
    plt.rcParams["axes.prop_cycle"] = cycler(color=colours) + cycler(marker=markers)
    return plt


def plot_scaling(table: pd.DataFrame, scaling: str, out: Path) -> list[str]:
    """Time and efficiency against processes, one line per configuration."""
    if table.empty:
        return []
    plt = _plt()
    written = []
    for column, ylabel, name in (
        ("train_s_mean", "training time (s)", f"{scaling}_time.png"),
        ("efficiency", "efficiency", f"{scaling}_efficiency.png"),
    ):
        data = table.dropna(subset=[column])
        if data.empty:
            continue
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for config, part in data.groupby("config"):
            part = part.sort_values("procs")
            ax.plot(part["procs"], part[column].astype(float), label=config)
        if column == "efficiency":
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("processes")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{scaling} scaling: {ylabel}")
        ax.set_xticks(sorted(data["procs"].unique()))
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(name)
    return written


def plot_quality_curves(records: list[dict], out: Path) -> list[str]:
    """Quality against training-window time: one line per configuration at its largest P.

    Only curves scored with the same feature network and sample count share the figure (the
    target's, else the most common); the target, if any, is a horizontal line.
    """
    from .findings import config_name, main_runs

    curves = [r for r in records if r.get("status") == "ok" and r.get("curve")]
    if not curves:
        return []
    target = next((r["time_to_target"] for r in curves if r.get("time_to_target")), None)
    kinds = [(p["features"], p["n"]) for r in curves for p in r["curve"]]
    kind = (target["features"], target["n"]) if target and target["n"] else max(set(kinds), key=kinds.count)
    field = "kid_mean" if target and target["metric"] == "kid" else "fid"
    by_config: dict[str, list[dict]] = {}
    for r in curves:
        by_config.setdefault(config_name(r), []).append(r)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, runs in sorted(by_config.items()):
        main, top = main_runs(runs)
        first_repeats = sorted(
            (r for r in main if r.get("repeat", 0) == min(x.get("repeat", 0) for x in main)), key=lambda r: str(r.get("seed"))
        )
        seeds = ",".join(str(r.get("seed")) for r in first_repeats)
        color = None
        for r in first_repeats:  # one line per seed, one colour per strategy
            points = [p for p in r["curve"] if (p["features"], p["n"]) == kind and p.get(field) is not None]
            if points:
                label = f"{name}, P={top}, seed{'s' if len(first_repeats) > 1 else ''} {seeds}" if color is None else None
                (line,) = ax.plot([p["clock_s"] for p in points], [p[field] for p in points], label=label, color=color, lw=1.2)
                color = line.get_color()
    if target:
        ax.axhline(target["target"], color="grey", lw=1, ls="--", label=f"target {target['metric'].upper()} {target['target']:g}")
    label = "KID" if field == "kid_mean" else "FID"
    ax.set_xlabel("training-window time (s)")
    ax.set_ylabel(f"{label} ({kind[0]}, n={kind[1]})")
    ax.set_yscale("log")
    ax.set_title(f"{label} against training time, each strategy at its largest P")
    ax.legend(fontsize=7)
    fig.tight_layout()
    name = f"quality_vs_time_{_slug(kind[0])}.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return [name]


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


# --- the report ---------------------------------------------------------------------------------------------


PAPER_EPOCHS = 1000  # seed 000 trains every model for 1,000 epochs
PAPER_MIN_IS_SAMPLES = 5000  # seed 000's IS is over thousands of samples (the count is not stated)


def _protocol_differences(r: dict, q: dict) -> str:
    """Where a run's IS differs from seed 000's protocol (Inception, all classes, thousands of samples, 1,000 epochs)."""
    notes = []
    if q["features"] != "inception":
        notes.append(f"network {q['features']}, not Inception: not comparable")
    if q["is_mean"] is None:
        notes.append(f"no IS ({q.get('is_note')})")
    classes = q.get("classes")
    if classes and len(classes) < q["num_classes"]:
        notes.append(
            f"{len(classes)} of {q['num_classes']} classes (paper: all): IS grows with the classes sampled, not comparable"
        )
    if q["n"] < PAPER_MIN_IS_SAMPLES:
        split = f" in {q['is_splits']} splits of {q['is_split_n']}" if q.get("is_splits") else ""
        notes.append(f"n={q['n']}{split} (paper: thousands): small splits bias IS low")
    if r.get("epochs") != PAPER_EPOCHS:
        notes.append(f"epochs {r.get('epochs')} (paper: {PAPER_EPOCHS})")
    if r.get("critic_norm", "batch") != "batch":
        notes.append(f"discriminator norm {r['critic_norm']} (tables: batch)")
    return "; ".join(notes) or "same protocol"


def settings_text(settings: dict | None) -> str:
    """An engine's settings as ``name=value`` pairs (mappings and lists as compact JSON; paths by file name)."""
    if settings is None:
        return NA
    parts = []
    for name, value in settings.items():
        if isinstance(value, (dict, list)):
            value = json.dumps(value, separators=(",", ":"))
        elif name == "timeline" and value:
            value = Path(value).name
        parts.append(f"{name}={value}")
    return ", ".join(parts) or "none"


def engine_comparison_table(records: list[dict]) -> pd.DataFrame:
    """Configurations of one strategy (same loss, processes, scaling, dataset) on several engines, side by side.

    One row per engine and label, averaged over repeats: step time, communication share and
    images/s, images/s over the baseline's (``vs_baseline``: Horovod's first configuration where
    one ran, else the first engine by name), whether every run's replicas were identical, and
    whether the model is bitwise the baseline's (``same_model``: the first replica digests of
    the first repeats agree; n/a for strategies that record none).
    """
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        if r.get("status") == "ok":
            key = (r["strategy"], r["loss"], r["procs"], r["scaling"], (r.get("dataset") or {}).get("name"))
            groups.setdefault(key, []).append(r)
    rows = []
    for (strategy, loss, procs, scaling, dataset), runs in sorted(groups.items(), key=lambda item: str(item[0])):
        if len({r["engine"] for r in runs}) < 2:
            continue
        configs: dict[tuple, list[dict]] = {}
        for r in sorted(runs, key=lambda r: (r["engine"] != "horovod", r["engine"], r.get("label") or "", r["repeat"])):
            configs.setdefault((r["engine"], r.get("label")), []).append(r)
        baseline = next(iter(configs.values()))
        base_rate = _mean_of_lists(r.get("images_per_s") for r in baseline)
        base_digest = (baseline[0].get("replica_digests") or [None])[0]
        for (engine, label), rs in configs.items():
            rates = [r["images_per_s"] for r in rs if r.get("images_per_s") is not None]
            digest = (rs[0].get("replica_digests") or [None])[0]
            identical = [r.get("replicas_identical") for r in rs if r.get("replicas_identical") is not None]
            rows.append(
                {
                    "strategy": strategy,
                    "loss": loss,
                    "procs": procs,
                    "scaling": scaling,
                    "dataset": dataset,
                    "engine": engine,
                    "label": label,
                    "runs": len(rs),
                    "threads_per_rank": _threads(r.get("threads_per_rank") for r in rs),
                    "traced": any(r.get("traced") for r in rs),
                    "step_s": _mean_of_lists((r.get("telemetry") or {}).get("step_s") for r in rs),
                    "comm_share": _mean_of_lists((r.get("telemetry") or {}).get("comm_share") for r in rs),
                    "images_per_s": float(np.mean(rates)) if rates else None,
                    "images_per_s_std": float(np.std(rates, ddof=1)) if len(rates) > 1 else None,
                    "vs_baseline": float(np.mean(rates)) / base_rate if rates and base_rate else None,
                    "replicas_identical": all(identical) if identical else None,
                    "same_model": digest == base_digest if digest and base_digest else None,
                    "settings": settings_text(rs[0].get("engine_settings")),
                }
            )
    return pd.DataFrame(rows)


def trace_table(records: list[dict], results_dir: Path, out_dir: Path) -> pd.DataFrame:
    """Per run with traces or engine logs in its folder: the files, as links relative to ``out_dir``."""
    from .tracing import trace_files

    rows = []
    for r in records:
        files = trace_files(results_dir / r["run_id"])
        if files:
            links = ", ".join(f"[{f.name}]({os.path.relpath(f, out_dir)})" for f in files)
            rows.append({"run_id": r["run_id"], "engine": r.get("engine"), "traced": bool(r.get("traced")), "files": links})
    return pd.DataFrame(rows, columns=["run_id", "engine", "traced", "files"])


def _engine_section(records: list[dict], results_dir: Path, out_dir: Path, lines: list[str]) -> None:
    """Engine settings of every run, the engine comparison, and links to traces."""
    lines.append("## Engines\n")
    settings = pd.DataFrame(
        [
            {
                "run_id": r["run_id"],
                "engine": r["engine"],
                "traced": bool(r.get("traced")),
                "settings": settings_text(r.get("engine_settings")),
            }
            for r in records
            if r.get("status") == "ok"
        ],
        columns=["run_id", "engine", "traced", "settings"],
    )
    settings.to_csv(out_dir / "engine_settings.csv", index=False)
    lines.append('Settings each run\'s engine ran with (README, "Engine settings").\n')
    lines.append(markdown_table(settings))
    comparison = engine_comparison_table(records)
    comparison.to_csv(out_dir / "engine_comparison.csv", index=False)
    if not comparison.empty:
        lines.append("### Engine comparison\n")
        lines.append(
            "One strategy on several engines (same loss, processes, scaling and dataset), averaged over repeats. "
            "`vs_baseline` is images/s over the first row of its group (Horovod where it ran); `same_model`: "
            "the trained weights are bitwise the baseline's (expected at 2 ranks, where every engine sums the "
            "same two numbers; with more ranks the summation order differs between engines).\n"
        )
        lines.append(markdown_table(comparison))
    traces = trace_table(records, results_dir, out_dir)
    traces.to_csv(out_dir / "traces.csv", index=False)
    if not traces.empty:
        lines.append("### Traces\n")
        lines.append(
            "`trace-rank<N>.json`: torch.profiler, a few steady window steps of rank N; `horovod-timeline.json`: "
            "Horovod's timeline (rank 0); both Chrome-trace JSON for https://ui.perfetto.dev, chrome://tracing or "
            "Holistic Trace Analysis. `deepspeed-comms.*`: DeepSpeed's communication log; `horovod-autotune.csv`: "
            "the autotuner's samples. **Timings of traced runs include the tracing overhead**: compare engines "
            "on untraced runs.\n"
        )
        lines.append(markdown_table(traces))


def _baseline_section(baselines: Path, records: list[dict], lines: list[str]) -> None:
    lines.append("## Papers' numbers (not measured here)\n")
    lines.append(
        "Printed beside the suite's results for orientation. They come from the papers, on their hardware, "
        "networks and training budgets; they are never mixed into the measured columns above.\n"
    )
    inception = baselines / "seed000_inception_scores.csv"
    if inception.is_file():
        paper = pd.read_csv(inception)
        datasets = {(r.get("dataset") or {}).get("name") for r in records if r.get("status") == "ok"}
        shown = paper[paper["dataset"].isin(datasets)]
        note = (
            ""
            if not shown.empty
            else f" (no paper numbers for {', '.join(sorted(d for d in datasets if d))}; all datasets shown)"
        )
        shown = paper if shown.empty else shown
        lines.append(f"**Seed 000, Inception Score (Inception network, paper's Tables 5/9/13/17){note}**\n")
        lines.append(markdown_table(shown[["dataset", "model", "is_mean", "is_std", "table"]]))
        lines.append(
            "Seed 000 computes IS with the Inception network on samples of all classes of the dataset (thousands "
            f"of them), after {PAPER_EPOCHS:,} epochs. DC-GAN corresponds to `data_parallel`, DC-CGAN to `conditional`, "
            "distributed DC-CGAN to `label_partitioned` with loss `bce`. Each of our rows below says where its "
            "protocol differs from the paper's; only a row without such a difference is comparable.\n"
        )
        ours = []
        for name, r, q in _scored_models(records):
            model = STRATEGIES[r["strategy"]].paper_models.get(r["loss"]) if r["strategy"] in STRATEGIES else None
            dataset = (r.get("dataset") or {}).get("name")
            row = paper[(paper["dataset"] == dataset) & (paper["model"] == model)]
            if model is None or row.empty:
                continue
            ours.append(
                {
                    "run_id": name,
                    "model": model,
                    "IS (ours)": _spread(q["is_mean"], q["is_std"], q.get("is_splits"), q.get("is_split_n")),
                    "IS (paper)": _pm(float(row["is_mean"].iloc[0]), float(row["is_std"].iloc[0])),
                    "network": q["features"],
                    "n": q["n"],
                    "classes": _class_set(q),
                    "differences from the paper's protocol": _protocol_differences(r, q),
                }
            )
        if ours:
            lines.append("**Our runs beside them**\n")
            lines.append(markdown_table(pd.DataFrame(ours)))
    speedups = baselines / "seed001_cellular_speedups.csv"
    if speedups.is_file() and any(r.get("strategy") == "cellular" for r in records):
        lines.append("**Seed 001, cellular training speedups on MNIST (paper's summary table)**\n")
        lines.append(markdown_table(pd.read_csv(speedups)[["grid", "single_core_min", "distributed_min", "speedup"]]))


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n</details>\n"


def _headline_section(records: list[dict], frame: pd.DataFrame, scaling: dict[str, pd.DataFrame]) -> list[str]:
    """The first screen: one row per strategy, what the numbers support, and what to distrust."""
    from .findings import findings, headline, not_learned_warnings

    table = headline(records, scaling)
    lines = ["## Headline\n"]
    if table.empty:
        return lines + ["_No run finished: nothing to compare (see Runs below)._\n"]
    shown = table.drop(columns=[c for c in table.columns if c.startswith("_")])
    lines.append(
        "One row per strategy (and engine), at the largest process count it ran (`P` lists them), over its `seeds` "
        "(each a separate training draw): every number is the mean, its 95 % Student-t interval in brackets and "
        "the number of draws (speedup: one per P-run, against the mean P=1 time). `fid` is the final model's; "
        "`fid_at_equal_time` the FID every strategy had at the same training time (the last point of its quality "
        "curve by then), the fixed-budget view (n/a for label-partitioned runs whose class GANs train one after another "
        "on a rank: their first curve point with every class trained comes late in the window); `time_to_target` the training time to the quality target. The "
        "ruler (network, the first 12 digits of its sha256, samples) is in `quality`; `checks`: the equivalences "
        "verified on these runs. A strategy is called better than another below only where Welch's t-test over "
        "the draws says so at 5 % (Holm-corrected); otherwise the finding says there is no significant difference.\n"
    )
    lines.append(markdown_table(shown))
    for sentence in findings(table, records, scaling):
        lines.append(f"- {sentence}")
    lines.append("")
    warnings = not_learned_warnings(records) + sweep_warnings(frame)
    if warnings:
        lines.append("**Warnings:**\n")
        lines.extend(f"- {w}" for w in warnings)
        lines.append("")
    return lines


def _quality_over_time_section(records: list[dict], out_dir: Path) -> list[str]:
    timed = [r for r in records if r.get("status") == "ok" and r.get("time_to_target")]
    plots = plot_quality_curves(records, out_dir)
    if not plots and not timed:
        return []
    lines = ["## Quality over training time\n"]
    lines += [f"![quality against time]({name})\n" for name in plots]
    if timed:
        t = timed[0]["time_to_target"]
        rows = [
            {
                "run_id": r["run_id"],
                "procs": r["procs"],
                "reached": r["time_to_target"]["reached"],
                "time_to_target_s": r["time_to_target"]["clock_s"],
                "step": r["time_to_target"]["step"],
                "best": r["time_to_target"]["best"],
                "points": r["time_to_target"]["points"],
            }
            for r in timed
        ]
        table = pd.DataFrame(rows)
        table.to_csv(out_dir / "time_to_target.csv", index=False)
        lines.append(
            f"Time to {t['metric'].upper()} <= {t['target']:g} ({t['features']}, n={t['n']}): training-window "
            "seconds at the first curve point that met it (the curve's spacing is its resolution; evaluation "
            "pauses are not counted).\n"
        )
        lines.append(_details("Time to target, every run", markdown_table(table)))
    return lines


def _scaling_section(frame: pd.DataFrame, scaling: dict[str, pd.DataFrame], out_dir: Path) -> list[str]:
    lines = ["## Scaling\n"]
    for kind, title in (("strong", "Strong scaling"), ("weak", "Weak scaling")):
        table = scaling[kind]
        table.to_csv(out_dir / f"{kind}_scaling.csv", index=False)
        lines.append(f"### {title}\n")
        if table.empty:
            lines.append(f"_No {kind}-scaling runs in these results._\n")
            continue
        shown = table.assign(
            train_s=[_pm(m, s) for m, s in zip(table["train_s_mean"], table["train_s_std"])],
            images_per_s=[_pm(m, s) for m, s in zip(table["images_per_s_mean"], table["images_per_s_std"])],
            speedup=[_pm(m, s) if m is not None else NA for m, s in zip(table["speedup"], table["speedup_std"])],
        )
        columns = (
            [
                "config",
                "procs",
                "runs",
                "threads_per_rank",
                "train_s",
                "images_per_s",
                "images_per_s_per_rank",
                "work_images_per_rank",
                "speedup",
                "efficiency",
            ]
            + (["efficiency_work"] if kind == "weak" else [])
            + ["comm_share", "compute_slowdown", "note"]
        )
        lines.append(markdown_table(shown[columns]))
        lines += [f"![{name}]({name})\n" for name in plot_scaling(table, kind, out_dir)]
    both = pd.concat([table.assign(scaling=kind) for kind, table in scaling.items()], ignore_index=True)
    both.to_csv(out_dir / "speedup_efficiency.csv", index=False)
    return lines


def _time_section(frame: pd.DataFrame, records: list[dict], out_dir: Path) -> list[str]:
    """Where the time goes: outside the window, inside a step, on communication, on the GPU."""
    lines = ["## Where the time goes\n"]
    times = time_table(frame)
    times.to_csv(out_dir / "time.csv", index=False)
    if not times.empty and times["wall_s"].sum() > 0:  # records without launch times (hand-made) have no wall time
        total = times["wall_s"].sum()
        sums = {
            c: times[c].fillna(0).sum() for c in ("train_s", "setup_s", "warmup_s", "eval_s", "finalize_s", "score_s", "other_s")
        }
        lines.append(
            f"Of {total:.0f} s of wall time over {len(times)} runs, {sums['train_s']:.0f} s "
            f"({sums['train_s'] / total:.0%}) were inside training windows; set-up {sums['setup_s']:.0f} s, "
            f"warm-up {sums['warmup_s']:.0f} s, evaluation during training {sums['eval_s']:.0f} s, finalize "
            f"{sums['finalize_s']:.0f} s, scoring {sums['score_s']:.0f} s, process start-up and launchers "
            f"{sums['other_s']:.0f} s.\n"
        )
        lines.append(_details("Time per run, by phase", markdown_table(times)))
    steps = step_table(frame)
    steps.to_csv(out_dir / "step_time.csv", index=False)
    peaks = "".join(f"Peak: {source}.\n" for source in sorted({s for s in steps.get("peak_source", []) if isinstance(s, str)}))
    if not steps.empty:
        lines.append(
            _details("Step time, throughput and FLOP/s", markdown_table(steps.drop(columns=["peak_source"])) + "\n" + peaks)
        )
    comm = communication_table(frame)
    comm.to_csv(out_dir / "communication.csv", index=False)
    body = markdown_table(comm)
    phases = cellular_phase_table(records)
    if not phases.empty:
        phases.to_csv(out_dir / "cellular_phases.csv", index=False)
        body += (
            "\nCellular runs, seconds per rank in each phase of the window's iterations (mean over ranks; `exchange` is "
            "the neighbour exchange, the rest is computation; mixture scoring is part of the algorithm):\n\n"
            + markdown_table(phases)
        )
    lines.append(_details("Communication share", body))
    util = utilization_table(frame)
    util.to_csv(out_dir / "gpu_utilization.csv", index=False)
    if not util.empty and util["gpu_util_mean"].isna().all():
        devices = ", ".join(sorted({str(d) for d in util["device"]}))
        lines.append(f"**GPU utilization:** all runs ran on CPUs ({devices}): n/a, not measured and not estimated.\n")
    else:
        lines.append("### GPU utilization\n")
        lines.append(markdown_table(util))
    return lines


def _quality_section(records: list[dict], out_dir: Path) -> list[str]:
    lines = ["## Image quality\n"]
    quality = quality_tables(records)
    if not quality:
        return lines + ["_No run recorded image quality (metrics disabled or all runs failed)._\n"]
    for net, (scores, per_class) in quality.items():
        slug = _slug(net)
        scores.to_csv(out_dir / f"quality_{slug}.csv", index=False)
        detail = next(
            r["quality"]["features_detail"]
            for r in records
            if r.get("quality", {}) and r["quality"]["features"] == net.split(" ")[0]
        )
        dims = scores["feature_dim"].dropna()
        digests = sorted({d for d in scores["ruler_sha256"] if isinstance(d, str)})
        lines.append(
            f"### Ruler `{net}`\n\n{detail}"
            + (f"; {int(dims.iloc[0])} feature dimensions" if len(dims) else "")
            + (f"; weights sha256 `{digests[0]}`" if len(digests) == 1 else "")
            + ".\n"
        )
        summary = quality_over_seeds(scores)
        summary.drop(columns=[c for c in summary.columns if c.startswith("_")]).to_csv(
            out_dir / f"quality_over_seeds_{slug}.csv", index=False
        )
        lines.append(
            "Over seeds (each seed a separate training draw): mean [95 % Student-t interval] (n seeds). "
            "Per-seed values follow, and are in the CSVs.\n"
        )
        shown = summary[["config", "scaling", "procs", "seeds"]].copy()
        for field, title in SEED_METRICS.items():
            shown[title] = summary[f"_{field}_text"]
        lines.append(markdown_table(shown))
        lines.append(_details("Per run (each seed)", markdown_table(_quality_display(scores))))
        for note in sorted({n for n in scores["is_note"] if isinstance(n, str)}):
            lines.append(f"IS n/a: {note}.\n")
        for run_id, note in zip(scores["run_id"], scores["fid_note"]):
            if isinstance(note, str):
                lines.append(f"FID n/a for {run_id}: {note}.\n")
        for field, basis in PER_CLASS_BASES.items():
            table = per_class[field]
            if table.empty:
                continue
            table.to_csv(out_dir / f"{field}_{slug}.csv", index=False)
            table = table.assign(KID=[_spread(m, s) for m, s in zip(table["kid_mean"], table["kid_std"])])
            lines.append(
                _details(
                    f"Per-class scores by {basis}",
                    markdown_table(table[["run_id", "class", "n", "n_real", "metric", "fid", "KID", "note"]]),
                )
            )
    return lines


def _samples_section(records: list[dict], results_dir: Path, out_dir: Path) -> list[str]:
    """Each strategy's samples at its largest P (class-ordered rows for labelled models); the rest folded."""
    from .findings import config_name, main_runs

    samples_dir = out_dir / "samples"
    shown, folded = [], []
    by_config: dict[str, list[dict]] = {}
    for r in records:
        if r.get("status") == "ok" and (results_dir / r["run_id"] / SAMPLES_FILE).is_file():
            by_config.setdefault(config_name(r), []).append(r)
            samples_dir.mkdir(exist_ok=True)
            shutil.copyfile(results_dir / r["run_id"] / SAMPLES_FILE, samples_dir / f"{r['run_id']}.png")
    for name, runs in sorted(by_config.items()):
        main, _ = main_runs(runs)
        first = min(main, key=lambda r: r.get("repeat", 0))
        shown.append(f'| {name} | <img src="samples/{first["run_id"]}.png" width="200" title="{first["run_id"]}"> |')
        folded += [f'<img src="samples/{r["run_id"]}.png" width="120" title="{r["run_id"]}">' for r in runs if r is not first]
    if not shown:
        return []
    lines = [
        "## Samples\n",
        "Each strategy at its largest P; conditional and label-partitioned models show one row per class.\n",
        "| strategy | samples |",
        "|---|---|",
        *shown,
        "",
    ]
    if folded:
        lines.append(_details("Samples of every other run", " ".join(folded)))
    return lines


def _environment_section(records: list[dict], out_dir: Path) -> list[str]:
    common, varying = environment_tables(records)
    common.to_csv(out_dir / "environment.csv", index=False)
    lines = ["## Environment\n", machine_note(records) + "\n", "Shared by every run:\n", markdown_table(common)]
    if not varying.empty:
        varying.to_csv(out_dir / "environment_per_run.csv", index=False)
        lines.append(_details("What differs between runs", markdown_table(varying)))
    return lines


def _runs_section(frame: pd.DataFrame, out_dir: Path) -> list[str]:
    runs = frame[
        [
            "run_id",
            "status",
            "strategy",
            "engine",
            "loss",
            "procs",
            "scaling",
            "grid",
            "dataset",
            "steps",
            "global_batch",
            "threads_per_rank",
            "wall_s",
            "train_s",
            "images_per_s",
            "error",
        ]
    ]
    runs.to_csv(out_dir / "runs.csv", index=False)
    failed = runs[~runs["status"].isin(("ok", "diverged"))]  # diverged runs have their own section
    shown = runs.assign(error=runs["error"].map(lambda e: e.splitlines()[0][:120] if isinstance(e, str) else None))
    lines = ["## Runs\n"]
    if not failed.empty:
        lines.append(
            f"**{len(failed)} run(s) failed:** "
            + "; ".join(f"{rid}: {str(err).splitlines()[0][:160]}" for rid, err in zip(failed["run_id"], failed["error"]))
            + "\n"
        )
    lines.append(_details(f"All {len(runs)} runs", markdown_table(shown)))
    return lines


def write_report(results_dir: Path, out_dir: Path, baselines: Path | None = None) -> Path:
    """Write ``report.md``, one CSV per table and the plots into ``out_dir``; return report.md's path."""
    records = list(iter_records(results_dir))
    if not records:
        raise FileNotFoundError(f"{results_dir}: no result.json found; run `suite run SCENARIO --out {results_dir}` first")
    frame = load_records(results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    baselines = baselines or DEFAULT_BASELINES
    scenario_file = results_dir / "scenario.yaml"
    ok_count = int((frame["status"] == "ok").sum())
    scaling = {kind: scaling_table(frame, kind) for kind in ("strong", "weak")}

    lines = [f"# Benchmark report: {records[0].get('scenario', results_dir.name)}\n"]
    lines.append(
        f"Generated {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} by gan-scaling-suite {__version__} "
        f"from `{results_dir}` ({len(records)} runs, {ok_count} ok). Definitions are at the end.\n"
    )
    if scenario_file.is_file():
        lines.append(_details("Scenario", "```yaml\n" + scenario_file.read_text().strip() + "\n```"))
    lines += _headline_section(records, frame, scaling)
    lines += outcomes_section(records)  # diverged and not-learned runs, with their reasons
    lines += _quality_over_time_section(records, out_dir)
    lines += _scaling_section(frame, scaling, out_dir)
    lines += report_section(records, results_dir, out_dir, baselines)  # the projection past this machine
    lines += _time_section(frame, records, out_dir)
    _engine_section(records, results_dir, out_dir, lines)
    lines += _quality_section(records, out_dir)
    _baseline_section(baselines, records, lines)
    lines += _samples_section(records, results_dir, out_dir)
    lines += _environment_section(records, out_dir)
    lines += _runs_section(frame, out_dir)
    lines.append(DEFINITIONS)
    path = out_dir / "report.md"
    atomic_write_text(path, "\n".join(lines))
    # the records and the measured network: `suite project REPORT` fits and validates what the report shows
    atomic_write_text(out_dir / RECORDS_FILE, json.dumps(records, indent=1))
    probe = results_dir / PROBE_FILE
    if probe.is_file() and probe.resolve() != (out_dir / PROBE_FILE).resolve():
        atomic_write_text(out_dir / PROBE_FILE, probe.read_text())
    return path


DEFINITIONS = """## Definitions

- **headline**: one row per configuration (strategy / loss / engine) at the largest process count it ran (`P` lists
  them all), over its seeds and repeats: mean [95 % Student-t interval] (n draws). `checks` states the equivalences verified on these very runs: *replicas
  identical* (the ranks of every data-parallel group ended with bitwise-equal weights), *same model on P=...* (the
  saved generator is bitwise the same on every process count: expected of label-partitioned training at P <= C and of
  cellular training, whose results do not depend on placement), *same model as ENGINE* (another engine produced the
  bitwise-same generator). A check that fails is in capitals.
- **time to target**: training-window seconds at which the generator first met `metrics.target` under the named
  network and n, read at the scored snapshots (`metrics.curve_points` evenly spaced over the window, plus the end), so
  the curve's spacing is its resolution; with `train.stop_at_target` training ends there and scoring pauses the clock
  (`eval_s`). "not reached" gives the best value the curve got to.
- **has not learned**: IS within 5 % of 1, or a pixel standard deviation across samples below 0.05 (all samples
  alike), or FID above 0.9 times the untrained generator's (the suite's generator at its seeded initialisation, scored
  once per dataset, network and n and cached as `untrained_fid`).
- **training window**: from a barrier after all set-up and warm-up steps to a barrier after every rank's last training
  step. **train_s** is its length (the slowest rank's). Set-up (engine, data, networks, broadcasts, engine wrappers,
  feature networks), warm-up (the first `train.warmup_steps` steps of every GAN), finalize (gathers, hand-offs, the
  cellular ranking, saving) and scoring are timed apart (`setup_s`, `warmup_s`, `finalize_s`, `score_s`) and never
  enter speedup or efficiency; `wall_s` in runs.csv is the whole launch. Cellular iterations score mixtures inside
  the window (it is part of the algorithm). With `train.budget_s` every run's window is that long and speedups
  compare images/s.
- **strong scaling**: the total problem is fixed (same data, epochs, global batch / class set / grid) while the
  number of processes P grows. Speedup S(P) = T(1)/T(P); efficiency E = S(P)/P.
- **weak scaling**: the work per process is fixed (per-rank batch and steps / one class per rank / a block of cells
  per rank). Efficiency E = T(1)/T(P); 1.0 is ideal. Where the work per rank differs (classes of unequal size, a
  cellular neighbourhood that grows with the grid) a warning says so and **efficiency_work** = per-rank images/s at P
  over P=1's compares the rate of work instead.
- **where efficiency went** (both scaling tables): **comm_share**, the window's share blocked on communication, and
  **compute_slowdown**, a rank's computation seconds per image at P over P=1's. Above 1 the ranks compute slower than
  one rank alone: smaller per-rank batches (strong scaling), or ranks slowing each other through shared cores,
  caches, memory bandwidth or clock boost. Runs that move no bytes (label-partitioned at P <= C) lose efficiency
  only this way.
- **threads_per_rank**: CPU threads of each rank, held fixed across a sweep; a warning marks sweeps whose points differ
  and runs whose ranks x threads exceed the node's cores (oversubscribed: their times measure contention).
- **seed and repeat**: a seed is another training draw (quality varies with it; compared over seeds), a repeat re-runs
  the same seed (timing varies with it). **mean ± std** and **[lo, hi]**: over the draws, the bracket the 95 %
  Student-t interval of the mean. Without a P=1 run a speedup is not computed (n/a).
- **significant**: a finding names a winner only where Welch's t-test (unequal variances; not Mann-Whitney's U, whose
  smallest two-sided p with 3 draws a side is 0.1) finds the winner better than every other configuration at 5 %,
  Holm-corrected for the several comparisons; otherwise it says "no significant difference" and gives the intervals.
  One draw a side is never a verdict.
- **fid_at_equal_time**: each configuration's FID at the last point of its quality curve by the same training time (the
  shortest of their windows): quality under a fixed budget, beside the final FID and the time to the target.
- **machine**: CPU model, the kernel set torch dispatches to (`cpu_capability`), versions, GPU and driver, and a
  `fingerprint` digest of them; `numerics`, a digest of one fixed forward and backward pass on the run's device and
  threads. Equal numerics digests: the same seed gives the same model bit for bit; different ones: it need not.
- **images_per_s**: images that went through a discriminator (real plus generated) per second of the training window,
  summed over ranks; `images_per_s_per_rank` is the mean per rank; `images_per_s_lo/hi` its 95 % interval, from the
  interval of the mean step time.
- **step_p50 / step_p95 / step_mean ± step_ci95**: seconds per window step, all ranks' steps pooled: median, 95th
  percentile (from a uniform sample of at most 4,096 steps per rank), mean and the half-width of its 95 % confidence
  interval (Student t, steps treated as independent).
- **step_s / data_s / compute_s / comm_wait_s**: mean seconds per generator step in the window: fetching data,
  computing, and blocked waiting on communication that computation did not hide. `comm_share` =
  comm_wait_s / step_s. On GPUs these are read from CUDA events on the device's stream, lazily, so an asynchronous
  NCCL collective is counted where the stream waits for it. `comm_mb` and `comm_s` count all collective payload
  bytes (summed over ranks) and blocked seconds (mean over ranks) in the window; gathering results afterwards is not
  counted.
- **FLOP/s**: `gflop_per_step` is one step of one rank counted once (first warm-up step) by
  `torch.utils.flop_counter` (matrix products and convolutions, forward and backward); `achieved_gflops` is that times
  the rank's window steps over their step time; `fraction_of_peak` divides by the peak named under the table (a
  datasheet FP32 peak for known GPUs, else a measured FP32 matmul ceiling with the rank's threads).
- **GPU utilization**: NVML busy percentage of each rank's own GPU, sampled every 0.2 s (mean and p95 over the
  window, averaged over ranks); `gpu_mem_used_mb` is NVML's memory in use on the device (mean), `gpu_mem_peak_mb`
  the largest peak of a rank's own tensors (PyTorch allocator); n/a on CPUs.
- **IS / FID / KID**: always with the ruler that produced them, its name and the pinned sha256 of its weights file
  (`inception`: pytorch-fid's InceptionV3; `inception(fid-trunk)`: the same network's FID trunk, no IS;
  `classifier:<dataset>`: the suite's CNN, trained once and pinned) and the sample counts: `n` generated images against `n_real` real ones (a fixed seed-0 draw of the
  training split). Numbers from different networks are never compared. IS is the mean ± std over `splits×n` (10
  splits of n/10 samples; small splits bias IS low). FID is given only where `n` and `n_real` both exceed the
  network's feature dimensions (below that the covariances are singular and FID is biased); otherwise it is n/a
  with the reason, and KID stands in. KID (Binkowski et al.) is the unbiased MMD² under the kernel
  k(x, y) = (x·y/d + 1)³, mean ± std over `subsets×n` random subsets (100 subsets of half the smaller sample, at
  most 1000); unbiased at any n, so it may be slightly negative; 0 means the same distribution.
- **per-class scores**: the samples of one class against every real image of that class in the split (`n` and
  `n_real` per class), FID where both exceed the feature dimensions (`metric: fid`), KID otherwise (`metric: kid`),
  nothing below 10 samples. Two bases, in separate tables and columns: *by generated label* (conditional,
  label-partitioned and per-class models: the label each sample was generated for) and *by predicted class*
  (unconditional models: the class the suite classifier predicts). The second is biased low: the classifier
  picks the samples that look like a class, so it is never compared with the first.
- **TVD**: total variation distance between the classifier's predicted-class histogram of the samples and the
  real class distribution (0: every class covered in proportion; mode coverage as in Lipizzaner).
- **label_acc**: fraction of label-conditioned samples that the classifier assigns to their label.
"""
