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

import numpy as np
import pandas as pd

from . import __version__
from .results import SAMPLES_FILE, atomic_write_text, iter_records, load_records

log = logging.getLogger(__name__)
DEFAULT_BASELINES = Path(__file__).resolve().parent.parent / "baselines"
NA = "n/a"


# --- small formatting helpers -----------------------------------------------------------------------


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return NA
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        magnitude = abs(float(value))
        if magnitude != 0 and magnitude < 10 ** -(digits):
            return f"{float(value):.{digits - 1}e}"
        if magnitude >= 1000:
            return f"{float(value):.0f}"
        return f"{float(value):.{digits}f}".rstrip("0").rstrip(".") or "0"
    return str(value)


def _pm(mean, std) -> str:
    if mean is None or (isinstance(mean, float) and not math.isfinite(mean)):
        return NA
    return _fmt(mean) if std is None or not math.isfinite(std) or std == 0 else f"{_fmt(mean)} ± {_fmt(std)}"


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no extra dependency)."""
    if frame.empty:
        return "_(none)_\n"
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_fmt(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows]) + "\n"


def _config(frame: pd.DataFrame, scaling: str) -> pd.Series:
    """A label naming what a scaling curve holds fixed: strategy / loss / engine [label] [grid or block]."""
    parts = frame["strategy"] + " / " + frame["loss"] + " / " + frame["engine"]
    if "label" in frame:
        parts = parts + frame["label"].map(lambda v: f" [{v}]" if isinstance(v, str) and v else "")
    if scaling == "strong":
        parts = parts + frame["grid"].map(lambda g: f" / grid {g}" if isinstance(g, str) and g else "")
    else:
        parts = parts + frame["cells_per_rank"].map(lambda k: f" / {int(k)} cell{'s' if k > 1 else ''} per rank" if pd.notna(k) else "")
    return parts


def _mean_of_lists(values) -> float | None:
    numbers = [v for v in values if isinstance(v, (int, float))]
    return float(np.mean(numbers)) if numbers else None


def _threads(values) -> str:
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
    """
    ok = frame[(frame["status"] == "ok") & (frame["scaling"] == scaling)].copy()
    columns = ["config", "procs", "runs", "threads_per_rank", "oversubscribed", "train_s_mean", "train_s_std",
               "images_per_s_mean", "images_per_s_std", "images_per_s_per_rank", "work_images_per_rank",
               "speedup", "speedup_std", "efficiency", "efficiency_work", "note"]
    if ok.empty:
        return pd.DataFrame(columns=columns)
    ok["config"] = _config(ok, scaling)
    ok["work_images"] = ok["work_images_per_rank"].map(lambda v: _mean_of_lists(v) if isinstance(v, list) else None)
    grouped = ok.groupby(["config", "procs"], sort=True).agg(
        runs=("run_id", "count"),
        threads_per_rank=("threads_per_rank", _threads),
        oversubscribed=("oversubscribed", lambda v: bool(v.fillna(False).astype(bool).any())),
        train_s_mean=("train_s", "mean"),
        train_s_std=("train_s", "std"),
        images_per_s_mean=("images_per_s", "mean"),
        images_per_s_std=("images_per_s", "std"),
        images_per_s_per_rank=("images_per_s_per_rank", "mean"),
        work_images_per_rank=("work_images", "mean"),
    ).reset_index()
    rows = []
    for config, part in grouped.groupby("config", sort=True):
        base = part[part["procs"] == 1]
        repeats = ok[(ok["config"] == config)]
        for _, row in part.iterrows():
            out = row.to_dict()
            out.update(speedup=None, speedup_std=None, efficiency=None, efficiency_work=None, note="")
            if base.empty:
                out["note"] = "no P=1 run: speedup and efficiency not computed"
            else:
                t1 = float(base["train_s_mean"].iloc[0])
                ratio = t1 / row["train_s_mean"]
                # spread of T(1)/T(P) over the P-run repeats (T(1) taken as its mean)
                times = repeats[repeats["procs"] == row["procs"]]["train_s"].to_numpy(dtype=float)
                spread = float(np.std(t1 / times, ddof=1)) if len(times) > 1 else None
                if scaling == "strong":
                    out.update(speedup=ratio, speedup_std=spread, efficiency=ratio / row["procs"])
                else:
                    rate1 = base["images_per_s_per_rank"].iloc[0]
                    work = rate1 and row["images_per_s_per_rank"] and row["images_per_s_per_rank"] / rate1
                    out.update(efficiency=ratio, efficiency_work=work or None)
            rows.append(out)
    return pd.DataFrame(rows, columns=columns)


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
            threads = sorted({int(t) for t in runs["threads_per_rank"] if pd.notna(t)})
            if len(threads) > 1:
                warnings.append(f"{config} ({scaling}): threads per rank differ across the sweep ({', '.join(map(str, threads))}); "
                                "its speedups mix more processes with fewer threads. Set `train.threads` or let the suite hold "
                                "threads fixed (the default).")
            over = runs[runs["oversubscribed"].fillna(False).astype(bool)]
            for _, r in over.sort_values("procs").drop_duplicates("procs").iterrows():
                warnings.append(f"{config} ({scaling}) at P={r['procs']}: {int(r['ranks_per_node'])} ranks x "
                                f"{int(r['threads_per_rank'])} threads on {int(r['cores_per_node'])} cores is oversubscribed: "
                                "its time measures contention, not scaling.")
            if scaling == "weak":
                work = runs.groupby("procs")["work_images_per_rank"].agg(lambda v: _mean_of_lists(
                    [x for lst in v if isinstance(lst, list) for x in lst]))
                if work.notna().all() and len(work) > 1 and work.max() > 1.01 * work.min():
                    warnings.append(f"{config} (weak): the work per rank is not fixed ({', '.join(f'P={p}: {w:.0f}' for p, w in work.items())} "
                                    "images per rank): compare `efficiency_work` (per-rank throughput) rather than `efficiency`.")
                hoods = sorted({int(h) for h in runs["neighbourhood_size"] if pd.notna(h)})
                if len(hoods) > 1:
                    warnings.append(f"{config} (weak): the neighbourhood grows with the grid ({' -> '.join(map(str, hoods))} cells), "
                                    "so fitness and mixture work per cell grow too; for fixed work per rank use a block of cells "
                                    "per rank on grids of at least 3x3 (README, weak scaling).")
    return warnings


def communication_table(frame: pd.DataFrame) -> pd.DataFrame:
    ok = frame[frame["status"] == "ok"]
    table = ok[["run_id", "procs", "comm_bytes", "comm_s", "step_s", "data_s", "compute_s", "comm_wait_s", "comm_share", "timed_steps"]].copy()
    table["comm_mb"] = table.pop("comm_bytes") / 2**20
    return table[["run_id", "procs", "comm_mb", "comm_s", "step_s", "data_s", "compute_s", "comm_wait_s", "comm_share", "timed_steps"]]


def step_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run: step-time spread, throughput with its interval, FLOPs and the fraction of peak."""
    ok = frame[frame["status"] == "ok"]
    rows = []
    for _, r in ok.iterrows():
        ci = r["images_per_s_ci95"] if isinstance(r["images_per_s_ci95"], list) else [None, None]
        rows.append({
            "run_id": r["run_id"], "procs": r["procs"], "threads_per_rank": r["threads_per_rank"],
            "timed_steps": r["timed_steps"], "step_p50": r["step_p50"], "step_p95": r["step_p95"],
            "step_mean": r["step_s"], "step_ci95": r["step_ci95"], "images_per_s": r["images_per_s"],
            "images_per_s_lo": ci[0], "images_per_s_hi": ci[1],
            "gflop_per_step": r["flops_per_step"] / 1e9 if pd.notna(r["flops_per_step"]) else None,
            "achieved_gflops": r["achieved_flops"] / 1e9 if pd.notna(r["achieved_flops"]) else None,
            "fraction_of_peak": r["fraction_of_peak"], "peak_gflops": r["peak_flops"] / 1e9 if pd.notna(r["peak_flops"]) else None,
            "peak_source": r["peak_source"],
        })
    return pd.DataFrame(rows)


def utilization_table(frame: pd.DataFrame) -> pd.DataFrame:
    ok = frame[frame["status"] == "ok"]
    return ok[["run_id", "procs", "device", "gpu_util_mean", "gpu_util_p95", "gpu_mem_used_mb", "gpu_mem_peak_mb",
               "cpu_util_mean", "host_mem_peak_mb"]].copy()


def cellular_phase_table(records: list[dict]) -> pd.DataFrame:
    rows = [{"run_id": r["run_id"], "procs": r["procs"], "grid": "x".join(map(str, r["grid"])), "cells_per_rank": r["cells_per_rank"],
             **{phase: float(np.mean(values)) for phase, values in r["phases_s"].items()}}
            for r in records if r.get("status") == "ok" and r.get("phases_s")]
    return pd.DataFrame(rows)


def _scored_models(records: list[dict]):
    """(run id shown, record, quality) for every scored model: the run's, and cellular's best cell."""
    for r in records:
        if r.get("status") != "ok":
            continue
        if r.get("quality"):
            yield r["run_id"] + (" (best mixture)" if r.get("quality_best_cell") else ""), r, r["quality"]
        if r.get("quality_best_cell"):
            yield r["run_id"] + " (best cell)", r, r["quality_best_cell"]


def quality_tables(records: list[dict]) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """Per feature network: (scores table, per-class FID table). Networks are never mixed."""
    by_net: dict[str, list[tuple[str, dict, dict]]] = {}
    for name, r, q in _scored_models(records):
        by_net.setdefault(q["features"], []).append((name, r, q))
    tables = {}
    for net, models in sorted(by_net.items()):
        scores, per_class = [], []
        for name, r, q in models:
            values = [v for v in q["fid_per_class"].values() if v is not None]
            scores.append({
                "run_id": name, "strategy": r["strategy"], "procs": r["procs"], "n": q["n"], "n_real": q["n_real"],
                "is_mean": q["is_mean"], "is_std": q["is_std"], "fid": q["fid"],
                "fid_per_class_mean": float(np.mean(values)) if values else None, "per_class_basis": q["per_class_basis"],
                "tvd": q["tvd"], "label_acc": q["label_acc"], "is_note": q.get("is_note"),
            })
            per_class.append({"run_id": name, "basis": q["per_class_basis"], **{f"class {k}": v for k, v in q["fid_per_class"].items()}})
        tables[net] = (pd.DataFrame(scores), pd.DataFrame(per_class))
    return tables


def environment_table(records: list[dict]) -> pd.DataFrame:
    """Versions and placement as recorded by the runs (one row per distinct environment)."""
    rows = []
    for r in records:
        if r.get("status") != "ok":
            continue
        env = r.get("env") or {}
        rows.append({"device": r.get("device"), "launcher": r.get("launcher"), "threads_per_rank": r.get("threads_per_rank"),
                     **{k: v for k, v in env.items() if v}})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows).drop_duplicates()
    return frame.T.reset_index().set_axis(["item", "value"], axis=1) if len(frame) == 1 else frame


# --- plots --------------------------------------------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    # 20 distinct colours (the default cycle repeats after 10 lines), with changing markers
    colours = plt.get_cmap("tab20").colors
    markers = ["o", "s", "^", "D", "v"] * 4
    plt.rcParams["axes.prop_cycle"] = cycler(color=colours) + cycler(marker=markers)
    return plt


def plot_scaling(table: pd.DataFrame, scaling: str, out: Path) -> list[str]:
    """Time and efficiency against processes, one line per configuration."""
    if table.empty:
        return []
    plt = _plt()
    written = []
    for column, ylabel, name in (("train_s_mean", "training time (s)", f"{scaling}_time.png"),
                                 ("efficiency", "efficiency", f"{scaling}_efficiency.png")):
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
    """FID against training wall-clock time, one figure per feature network."""
    plt = _plt()
    by_net: dict[str, list[dict]] = {}
    for r in records:
        if r.get("status") == "ok" and r.get("curve"):
            by_net.setdefault(r["curve"][0]["features"], []).append(r)
    written = []
    for net, rs in sorted(by_net.items()):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in rs:
            n = r["curve"][0].get("n")
            ax.plot([p["clock_s"] for p in r["curve"]], [p["fid"] for p in r["curve"]],
                    label=f"{r['run_id']} (n={n})" if n else r["run_id"])
        ax.set_xlabel("training time (s)")
        ax.set_ylabel(f"FID ({net})")
        ax.set_title("FID against wall-clock training time")
        ax.legend(fontsize=6)
        fig.tight_layout()
        name = f"fid_vs_time_{_slug(net)}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(name)
    return written


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


# --- the report ---------------------------------------------------------------------------------------------


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
            rows.append({
                "strategy": strategy, "loss": loss, "procs": procs, "scaling": scaling, "dataset": dataset,
                "engine": engine, "label": label, "runs": len(rs),
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
            })
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
    settings = pd.DataFrame([{"run_id": r["run_id"], "engine": r["engine"], "traced": bool(r.get("traced")),
                              "settings": settings_text(r.get("engine_settings"))} for r in records if r.get("status") == "ok"],
                            columns=["run_id", "engine", "traced", "settings"])
    settings.to_csv(out_dir / "engine_settings.csv", index=False)
    lines.append("Settings each run's engine ran with (README, \"Engine settings\").\n")
    lines.append(markdown_table(settings))
    comparison = engine_comparison_table(records)
    comparison.to_csv(out_dir / "engine_comparison.csv", index=False)
    if not comparison.empty:
        lines.append("### Engine comparison\n")
        lines.append("One strategy on several engines (same loss, processes, scaling and dataset), averaged over repeats. "
                     "`vs_baseline` is images/s over the first row of its group (Horovod where it ran); `same_model`: "
                     "the trained weights are bitwise the baseline's (expected at 2 ranks, where every engine sums the "
                     "same two numbers; with more ranks the summation order differs between engines).\n")
        lines.append(markdown_table(comparison))
    traces = trace_table(records, results_dir, out_dir)
    traces.to_csv(out_dir / "traces.csv", index=False)
    if not traces.empty:
        lines.append("### Traces\n")
        lines.append("`trace-rank<N>.json`: torch.profiler, a few steady window steps of rank N; `horovod-timeline.json`: "
                     "Horovod's timeline (rank 0); both Chrome-trace JSON for https://ui.perfetto.dev, chrome://tracing or "
                     "Holistic Trace Analysis. `deepspeed-comms.*`: DeepSpeed's communication log; `horovod-autotune.csv`: "
                     "the autotuner's samples. **Timings of traced runs include the tracing overhead**: compare engines "
                     "on untraced runs.\n")
        lines.append(markdown_table(traces))


def _baseline_section(baselines: Path, records: list[dict], lines: list[str]) -> None:
    lines.append("## Papers' numbers (not measured here)\n")
    lines.append("Printed beside the suite's results for orientation. They come from the papers, on their hardware, "
                 "networks and training budgets; they are never mixed into the measured columns above.\n")
    inception = baselines / "seed000_inception_scores.csv"
    if inception.is_file():
        paper = pd.read_csv(inception)
        datasets = {(r.get("dataset") or {}).get("name") for r in records if r.get("status") == "ok"}
        shown = paper[paper["dataset"].isin(datasets)]
        note = "" if not shown.empty else f" (no paper numbers for {', '.join(sorted(d for d in datasets if d))}; all datasets shown)"
        shown = paper if shown.empty else shown
        lines.append(f"**Seed 000, Inception Score (Inception network, paper's Tables 5/9/13/17){note}**\n")
        lines.append(markdown_table(shown[["dataset", "model", "is_mean", "is_std", "table"]]))
        lines.append("DC-GAN corresponds to `data_parallel`, DC-CGAN to `conditional`, distributed DC-CGAN to "
                     "`label_partitioned` with loss `bce`. Only IS measured with the `inception` network is comparable.\n")
    speedups = baselines / "seed001_cellular_speedups.csv"
    if speedups.is_file() and any(r.get("strategy") == "cellular" for r in records):
        lines.append("**Seed 001, cellular training speedups on MNIST (paper's summary table)**\n")
        lines.append(markdown_table(pd.read_csv(speedups)[["grid", "single_core_min", "distributed_min", "speedup"]]))


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

    lines = [f"# Benchmark report: {records[0].get('scenario', results_dir.name)}\n"]
    lines.append(f"Generated {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} by gan-scaling-suite {__version__} "
                 f"from `{results_dir}` ({len(records)} runs, {ok_count} ok). Definitions are at the end.\n")
    if scenario_file.is_file():
        lines.append("<details><summary>Scenario</summary>\n\n```yaml\n" + scenario_file.read_text().strip() + "\n```\n</details>\n")

    lines.append("## Environment\n")
    env = environment_table(records)
    env.to_csv(out_dir / "environment.csv", index=False)
    lines.append(markdown_table(env))

    lines.append("## Runs\n")
    runs = frame[["run_id", "status", "strategy", "engine", "loss", "procs", "scaling", "grid", "dataset", "steps",
                  "global_batch", "threads_per_rank", "wall_s", "setup_s", "warmup_s", "train_s", "finalize_s", "score_s",
                  "images_per_s", "error"]]
    runs.to_csv(out_dir / "runs.csv", index=False)
    lines.append(markdown_table(runs.assign(error=runs["error"].map(lambda e: e.splitlines()[0][:120] if isinstance(e, str) else None))))

    warnings = sweep_warnings(frame)
    if warnings:
        lines.append("**Warnings about the scaling sweeps:**\n")
        lines.extend(f"- {w}" for w in warnings)
        lines.append("")
    plots: list[str] = []
    scaling_tables = {scaling: scaling_table(frame, scaling) for scaling in ("strong", "weak")}
    for scaling, title in (("strong", "Strong scaling"), ("weak", "Weak scaling")):
        table = scaling_tables[scaling]
        table.to_csv(out_dir / f"{scaling}_scaling.csv", index=False)
        lines.append(f"## {title}\n")
        if table.empty:
            lines.append(f"_No {scaling}-scaling runs in these results._\n")
            continue
        shown = table.assign(train_s=[_pm(m, s) for m, s in zip(table["train_s_mean"], table["train_s_std"])],
                             images_per_s=[_pm(m, s) for m, s in zip(table["images_per_s_mean"], table["images_per_s_std"])])
        columns = ["config", "procs", "runs", "threads_per_rank", "train_s", "images_per_s", "images_per_s_per_rank",
                   "work_images_per_rank"]
        lines.append(markdown_table(shown[columns]))
        plots += plot_scaling(table, scaling, out_dir)

    lines.append("## Speedup and efficiency\n")
    both = pd.concat([table.assign(scaling=scaling) for scaling, table in scaling_tables.items()], ignore_index=True)
    both.to_csv(out_dir / "speedup_efficiency.csv", index=False)
    if both.empty:
        lines.append("_No successful runs._\n")
    else:
        shown = both.assign(speedup=[_pm(m, s) if m is not None else NA for m, s in zip(both["speedup"], both["speedup_std"])])
        lines.append(markdown_table(shown[["scaling", "config", "procs", "threads_per_rank", "speedup", "efficiency",
                                           "efficiency_work", "note"]]))

    lines.append("## Step time, throughput and FLOP/s\n")
    steps = step_table(frame)
    steps.to_csv(out_dir / "step_time.csv", index=False)
    lines.append(markdown_table(steps.drop(columns=["peak_source"])))
    for source in sorted({s for s in steps.get("peak_source", []) if isinstance(s, str)}):
        lines.append(f"Peak: {source}.\n")

    lines.append("## Communication share\n")
    comm = communication_table(frame)
    comm.to_csv(out_dir / "communication.csv", index=False)
    lines.append(markdown_table(comm))
    phases = cellular_phase_table(records)
    if not phases.empty:
        phases.to_csv(out_dir / "cellular_phases.csv", index=False)
        lines.append("Cellular runs, seconds per rank in each phase of the iterations (mean over ranks; "
                     "`exchange` is the neighbour exchange, the rest is computation):\n")
        lines.append(markdown_table(phases))

    _engine_section(records, results_dir, out_dir, lines)

    lines.append("## GPU utilization\n")
    util = utilization_table(frame)
    util.to_csv(out_dir / "gpu_utilization.csv", index=False)
    if not util.empty and util["gpu_util_mean"].isna().all():
        lines.append("All runs ran on CPUs: GPU utilization and memory are n/a (not measured, not estimated).\n")
    lines.append(markdown_table(util))

    lines.append("## Image quality\n")
    quality = quality_tables(records)
    if not quality:
        lines.append("_No run recorded image quality (metrics disabled or all runs failed)._\n")
    for net, (scores, per_class) in quality.items():
        slug = _slug(net)
        scores.to_csv(out_dir / f"quality_{slug}.csv", index=False)
        per_class.to_csv(out_dir / f"fid_per_class_{slug}.csv", index=False)
        detail = next(r["quality"]["features_detail"] for r in records if r.get("quality", {}) and r["quality"]["features"] == net)
        lines.append(f"### Network `{net}`\n\n{detail}.\n")
        shown = scores.assign(IS=[_pm(m, s) for m, s in zip(scores["is_mean"], scores["is_std"])])
        lines.append(markdown_table(shown[["run_id", "procs", "n", "n_real", "IS", "fid", "fid_per_class_mean", "per_class_basis", "tvd", "label_acc"]]))
        notes = sorted({n for n in scores["is_note"] if isinstance(n, str)})
        for note in notes:
            lines.append(f"IS n/a: {note}.\n")
        lines.append("<details><summary>Per-class FID</summary>\n\n" + markdown_table(per_class) + "\n</details>\n")
    plots += plot_quality_curves(records, out_dir)

    _baseline_section(baselines, records, lines)

    lines.append("## Plots and samples\n")
    for name in plots:
        lines.append(f"![{name}]({name})\n")
    samples_dir = out_dir / "samples"
    for r in records:
        source = results_dir / r["run_id"] / SAMPLES_FILE
        if r.get("status") == "ok" and source.is_file():
            samples_dir.mkdir(exist_ok=True)
            shutil.copyfile(source, samples_dir / f"{r['run_id']}.png")
            lines.append(f"<img src=\"samples/{r['run_id']}.png\" width=\"160\" title=\"{r['run_id']}\"> ")
    lines.append("\n")
    lines.append(DEFINITIONS)
    path = out_dir / "report.md"
    atomic_write_text(path, "\n".join(lines))
    atomic_write_text(out_dir / "records.json", json.dumps(records, indent=1))
    return path


DEFINITIONS = """## Definitions

- **training window**: from a barrier after all set-up and warm-up steps to a barrier after every rank's last training
  step. **train_s** is its length (the slowest rank's). Set-up (engine, data, networks, broadcasts, engine wrappers,
  feature networks), warm-up (the first `train.warmup_steps` steps of every GAN), finalize (gathers, hand-offs, the
  cellular ranking, saving) and scoring are timed apart (`setup_s`, `warmup_s`, `finalize_s`, `score_s`) and never
  enter speedup or efficiency; `wall_s` in runs.csv is the whole launch. Cellular iterations score mixtures inside
  the window (it is part of the algorithm).
- **strong scaling**: the total problem is fixed (same data, epochs, global batch / class set / grid) while the
  number of processes P grows. Speedup S(P) = T(1)/T(P); efficiency E = S(P)/P.
- **weak scaling**: the work per process is fixed (per-rank batch and steps / one class per rank / a block of cells
  per rank). Efficiency E = T(1)/T(P); 1.0 is ideal. Where the work per rank differs (classes of unequal size, a
  cellular neighbourhood that grows with the grid) a warning says so and **efficiency_work** = per-rank images/s at P
  over P=1's compares the rate of work instead.
- **threads_per_rank**: CPU threads of each rank, held fixed across a sweep; a warning marks sweeps whose points differ
  and runs whose ranks x threads exceed the node's cores (oversubscribed: their times measure contention).
- **mean ± std**: over `repeats` of the same run. Without a P=1 run a speedup is not computed (n/a).
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
- **IS / FID**: always with the feature network that produced them (`inception`: pytorch-fid's InceptionV3;
  `inception(fid-trunk)`: the same network's FID trunk, no IS; `classifier:<dataset>`: the suite's CNN trained on
  the real data). `n` generated and `n_real` real images. Numbers from different networks are never compared.
- **per-class FID**: FID between the samples of one class and the real images of that class; the class of a
  sample is the label it was generated for (conditional, label-partitioned) or, for unconditional generators, the
  class the suite classifier predicts (`per_class_basis`). Classes with fewer than 10 samples are n/a.
- **TVD**: total variation distance between the classifier's predicted-class histogram of the samples and the
  real class distribution (0: every class covered in proportion; mode coverage as in Lipizzaner).
- **label_acc**: fraction of label-conditioned samples that the classifier assigns to their label.
"""
