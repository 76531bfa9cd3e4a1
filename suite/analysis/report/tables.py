"""The report's tables of time, throughput, scaling, communication, utilisation, engines and environment,
built from the flat frame of records (:func:`suite.records.results.load_records`) or the records themselves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...config.escape import code_span
from ...config.registry import ENGINES
from ...measure.env import fingerprint
from ...measure.flops import PeakUse, achieved_flops, peak_use
from ...records.codec import record_data
from ...records.measured import Machine, RankTelemetry, TelemetrySummary
from ...records.record import Record, RecordError
from ...records.results import trace_files
from ..columns import COL
from ..markdown import NA, Markdown, cell, link
from ..strategy_fields import cellular_fields
from .scaling_tables import mean_of_lists, threads_text

KID_UNITS = (
    "KID is the raw unbiased MMD² under the cubic kernel (x·y/d + 1)³, in torch-fidelity's and clean-fid's units (no "
    "×10³ scale): on Inception's pool features it reads about 0.001 to 0.1. The suite classifier's 128 features are "
    "larger (a mean square of about 9 per dimension on the real digits), so the kernel is in the hundreds and KIDs "
    "under `classifier:*` rulers read tens to hundreds: compare KIDs under one ruler only."
)
"""What a KID number is, said wherever the report prints KIDs."""


def communication_table(frame: pd.DataFrame) -> pd.DataFrame:
    ok = frame[frame[COL.status] == "ok"]
    columns = [
        COL.run_id,
        COL.procs,
        COL.comm_bytes,
        COL.comm_s,
        COL.step_s,
        COL.data_s,
        COL.compute_s,
        COL.comm_wait_s,
        COL.comm_share,
        COL.timed_steps,
    ]
    table = ok[columns].copy()
    table[COL.comm_bytes] = table[COL.comm_bytes] / 2**20
    return table.rename(columns={COL.comm_bytes: "comm_mb"})  # the bytes in MiB, in their place


def _own_peak_use(per_rank: list[RankTelemetry]) -> PeakUse | None:
    """:func:`suite.measure.flops.peak_use` of the ranks' own telemetry; None unless every rank recorded its peak,
    its window and its FLOPs per step."""
    achieved: list[float | None] = []
    peaks: list[float] = []
    for r in per_rank:
        if r.peak is None or not r.peak.flops or r.window is None or r.flops_per_step is None:
            return None
        achieved.append(achieved_flops(r.flops_per_step, r.window.steps, r.window.step_seconds))
        peaks.append(r.peak.flops)
    return peak_use(achieved, peaks) if per_rank else None


def _peak_use(record: Record) -> PeakUse:
    """A run's FLOP/s against its peak, from its ranks' own telemetry where recorded (records before
    ``peak_raised_ranks`` are read the same way), else as the record gives it."""
    telemetry = record.telemetry or TelemetrySummary()
    own = _own_peak_use(telemetry.per_rank or [])
    if own is not None:
        return own
    raised = telemetry.peak_raised_ranks or []
    return PeakUse(telemetry.achieved_flops_per_rank, telemetry.peak_flops_per_rank, telemetry.fraction_of_peak, raised)


def step_table(records: list[Record]) -> pd.DataFrame:
    """Per ok run: step-time spread, throughput with its interval, FLOPs and the fraction of peak."""
    rows = []
    for r in records:
        if r.status != "ok":
            continue
        telemetry = r.telemetry or TelemetrySummary()
        ci = r.images_per_s_ci95 or [None, None]
        peak = _peak_use(r)
        rows.append(
            {
                "run_id": r.run_id,
                "procs": r.procs,
                "threads_per_rank": r.threads_per_rank,
                "timed_steps": telemetry.timed_steps,
                "step_p50": telemetry.step_p50,
                "step_p95": telemetry.step_p95,
                "step_mean": telemetry.step_s,
                "step_ci95": telemetry.step_ci95,
                "images_per_s": r.images_per_s,
                "images_per_s_lo": ci[0],
                "images_per_s_hi": ci[1],
                "gflop_per_step": telemetry.flops_per_step / 1e9 if telemetry.flops_per_step is not None else None,
                "achieved_gflops": peak.achieved / 1e9 if peak.achieved is not None else None,
                "fraction_of_peak": peak.fraction,
                "peak_gflops": peak.peak / 1e9 if peak.peak is not None else None,
                "peak_raised_ranks": ",".join(map(str, peak.raised_ranks)),  # empty where none was raised
                "peak_source": telemetry.peak_source,
            }
        )
    return pd.DataFrame(rows)


def utilization_table(frame: pd.DataFrame) -> pd.DataFrame:
    ok = frame[frame[COL.status] == "ok"]
    return ok[
        [
            COL.run_id,
            COL.procs,
            COL.device,
            COL.gpu_util_mean,
            COL.gpu_util_p95,
            COL.gpu_mem_used_mb,
            COL.gpu_mem_peak_mb,
            COL.cpu_util_mean,
            COL.host_mem_peak_mb,
        ]
    ].copy()


def cellular_phase_table(records: list[Record]) -> pd.DataFrame:
    rows = [
        {
            "run_id": r.run_id,
            "procs": r.procs,
            "grid": "x".join(map(str, r.grid or [])),
            "cells_per_rank": cells.cells_per_rank,
            **{phase: float(np.mean(values)) for phase, values in cells.phases_s.items()},
        }
        for r, cells in ((r, cellular_fields(r)) for r in records)
        if r.status == "ok" and cells.phases_s
    ]
    return pd.DataFrame(rows)


def environment_tables(records: list[Record]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The environment once: (fields every run shares as item/value, the fields that differ per run)."""
    rows = []
    for r in records:
        if r.status != "ok":
            continue
        env = r.env or {}
        revision = {"suite_version": r.suite_version, "git_commit": r.git_commit, "git_dirty": r.git_dirty}
        rows.append(
            {
                "run_id": r.run_id,
                "device": r.device,
                "launcher": r.launcher,
                "cores_per_node": r.cores_per_node,
                "ranks_per_node": r.ranks_per_node,
                "threads_per_rank": r.threads_per_rank,
                **{k: v for k, v in revision.items() if v is not None},  # the code's revision
                **{f"machine.{k}": v for k, v in _machine(r).items() if v is not None},
                **{k: v for k, v in env.items() if v},
            }
        )
    if not rows:
        return pd.DataFrame(columns=["item", "value"]), pd.DataFrame()
    frame = pd.DataFrame(rows).set_index(COL.run_id)
    varying = [c for c in frame.columns if frame[c].astype(str).nunique(dropna=False) > 1]  # recorded by some runs only
    common = frame.drop(columns=varying).iloc[0]
    return (
        pd.DataFrame({"item": common.index, "value": common.astype(str).values}),
        frame[varying].reset_index() if varying else pd.DataFrame(),
    )


def _machine(record: Record) -> dict[str, Any]:
    """The record's ``machine`` as its JSON data, with its fingerprint of the fields that identify a machine
    (:func:`suite.measure.env.fingerprint`), also for records written when the fingerprint digested the
    launch-dependent fields too."""
    if record.machine is None:
        return {}
    return {**record_data(record.machine), "fingerprint": fingerprint(record.machine)}


def machine_note(records: list[Record]) -> str:
    """Which machines the runs come from, and whether runs of the same seed are expected to agree bit for bit."""
    machines: dict[tuple[str, str | None], Machine] = {}  # by fingerprint and numerics digest: the last run's
    for r in records:
        if r.status == "ok" and r.machine is not None and (data := _machine(r)):
            machines[(data["fingerprint"], r.machine.numerics)] = r.machine
    if not machines:
        return "The records do not say which machine ran them (recorded from schema 3 on): bitwise agreement cannot be judged."
    kinds = sorted({cell(f) for f, _ in machines})  # a record's strings are data on the page
    numerics = sorted({cell(n) for _, n in machines if n})
    unknown = sum(1 for r in records if r.status == "ok" and r.machine is None)
    first = next(iter(machines.values()))
    described = cell(f"{first.gpu or first.cpu_model} ({first.cpu_capability} kernels, torch {first.torch})")
    if unknown:
        kinds.append(f"unknown for {unknown} runs recorded before schema 3")
    if len(kinds) == 1 and len(numerics) <= 1:
        return (
            f"Every run on one kind of machine: {described}, fingerprint {code_span(kinds[0])}, numerics digest {code_span(numerics[0] if numerics else 'n/a')}. "
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
    return (
        f"The runs come from {len(kinds)} kinds of machine (fingerprints {', '.join(code_span(k) for k in kinds)}) with {same}."
    )


def time_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Where each run's wall time went: set-up, the window (its warm-up a part of it), evaluation pauses, finalize,
    scoring; and whether the host was busy while it was timed (``contended``, :mod:`suite.measure.hostload`)."""
    ok = frame[frame[COL.status] == "ok"]
    table = ok[[COL.run_id, COL.wall_s, COL.setup_s, COL.warmup_s, COL.train_s, COL.eval_s, COL.finalize_s, COL.score_s]].copy()
    parts = (
        table[[COL.setup_s, COL.train_s, COL.eval_s, COL.finalize_s, COL.score_s]].fillna(0).sum(axis=1)
    )  # warm-up: in train_s
    table["other_s"] = (table[COL.wall_s] - parts).clip(lower=0)  # process start-up, imports, launcher, records written
    table["train_share"] = table[COL.train_s] / table[COL.wall_s]
    table[COL.contended] = ok[COL.contended]
    table[COL.outside_cores] = ok[COL.outside_cores]
    return table


def settings_json(settings: dict[str, Any] | None) -> str | None:
    """An engine's settings as one JSON object for a CSV cell (paths by file name, as :func:`settings_text`), or None."""
    if settings is None:
        return None
    shown = {name: Path(value).name if name == "timeline" and value else value for name, value in settings.items()}
    return json.dumps(shown, separators=(",", ":"), sort_keys=True, default=str)


RUN_PHASES = {
    COL.train_s: "training (warm-up included)",
    COL.setup_s: "set-up",
    COL.eval_s: "evaluation during training",
    COL.finalize_s: "finalize",
    COL.score_s: "scoring",
    "other_s": "start-up, launchers and writing records (a shared launch's divided equally among its runs)",
}
"""The phases of a run's wall time, as :func:`time_table` has them, and what the report calls each."""

TRAINING_SHARE_GOAL = 0.75
"""The share of run time spent training the suite aims at (issue 60): what the first page's line compares with."""


def phase_totals(times: pd.DataFrame) -> pd.DataFrame:
    """Each phase's seconds over the runs of :func:`time_table` and its share of their wall time (empty without wall
    times)."""
    total = float(times[COL.wall_s].sum()) if not times.empty else 0.0
    if total <= 0:
        return pd.DataFrame(columns=["phase", "seconds", "share"])
    seconds = [float(times[column].fillna(0).sum()) for column in RUN_PHASES]
    return pd.DataFrame({"phase": list(RUN_PHASES.values()), "seconds": seconds, "share": [s / total for s in seconds]})


def training_share_line(frame: pd.DataFrame) -> str | None:
    """The first page's line on run time: the share of the ok runs' wall time spent in training windows, against
    :data:`TRAINING_SHARE_GOAL`, and the largest other phase; None where no run has a wall time."""
    times = time_table(frame)
    totals = phase_totals(times)
    if totals.empty:
        return None
    train = float(totals["share"].iloc[0])
    other = totals.iloc[1:].sort_values("seconds", ascending=False).iloc[0]
    return (
        f"Run time: {float(times[COL.wall_s].sum()):.0f} s over {len(times)} runs, {train:.0%} of it training "
        f"(goal {TRAINING_SHARE_GOAL:.0%}); the largest other phase: {other['phase']} {other['share']:.0%}. "
        "[Every phase](details/time.md).\n"
    )


def settings_text(settings: dict[str, Any] | None) -> str:
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


def _named(name: str | None) -> str:
    """A name that every record read has (:data:`suite.records.codec.IDENTITY`: ``run_id``, ``engine``, ...)."""
    if name is None:
        raise RecordError("a record without the fields that name its run (run_id, engine, ...)")
    return name


def _baseline_engine(engine: str | None) -> bool:
    """Whether the engine comparison measures the others against ``engine`` (its registry trait)."""
    return engine is not None and engine in ENGINES and ENGINES[engine].baseline


def _first_digest(record: Record) -> str | None:
    """The first replica's digest of a run's model (None where it records none)."""
    return record.replica_digests[0] if record.replica_digests else None


def engine_comparison_table(records: list[Record]) -> pd.DataFrame:
    """Configurations of one strategy (same loss, processes, scaling, dataset) on several engines, side by side.

    One row per engine and label, averaged over repeats: step time, communication share and
    images/s, images/s over the baseline's (``vs_baseline``: Horovod's first configuration where
    one ran, else the first engine by name), whether every run's replicas were identical, and
    whether the model is bitwise the baseline's (``same_model``: the first replica digests of
    the first repeats agree; n/a for strategies that record none).
    """
    groups: dict[tuple[Any, ...], list[Record]] = {}
    for r in records:
        if r.status == "ok":
            key = (r.strategy, r.loss, r.procs, r.scaling, r.dataset.name if r.dataset is not None else None)
            groups.setdefault(key, []).append(r)
    rows = []
    for (strategy, loss, procs, scaling, dataset), runs in sorted(groups.items(), key=lambda item: str(item[0])):
        if len({r.engine for r in runs}) < 2:
            continue
        configs: dict[tuple[str | None, str | None], list[Record]] = {}
        for r in sorted(runs, key=lambda r: (not _baseline_engine(r.engine), r.engine, r.label or "", r.repeat)):
            configs.setdefault((r.engine, r.label), []).append(r)
        baseline = next(iter(configs.values()))
        base_rate = mean_of_lists(r.images_per_s for r in baseline)
        base_digest = _first_digest(baseline[0])
        for (engine, label), rs in configs.items():
            rates = [r.images_per_s for r in rs if r.images_per_s is not None]
            digest = _first_digest(rs[0])
            identical = [r.replicas_identical for r in rs if r.replicas_identical is not None]
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
                    "threads_per_rank": threads_text(r.threads_per_rank for r in rs),
                    "traced": any(r.traced for r in rs),
                    "step_s": mean_of_lists(r.telemetry.step_s if r.telemetry is not None else None for r in rs),
                    "comm_share": mean_of_lists(r.telemetry.comm_share if r.telemetry is not None else None for r in rs),
                    "images_per_s": float(np.mean(rates)) if rates else None,
                    "images_per_s_std": float(np.std(rates, ddof=1)) if len(rates) > 1 else None,
                    "vs_baseline": float(np.mean(rates)) / base_rate if rates and base_rate else None,
                    "replicas_identical": all(identical) if identical else None,
                    "same_model": digest == base_digest if digest and base_digest else None,
                    "settings": settings_text(rs[0].engine_settings),
                }
            )
    return pd.DataFrame(rows, columns=ENGINE_COMPARISON_COLUMNS)  # with no rows, still its header


ENGINE_COMPARISON_COLUMNS = (
    ["strategy", "loss", "procs", "scaling", "dataset", "engine", "label", "runs", "threads_per_rank", "traced"]
    + ["step_s", "comm_share", "images_per_s", "images_per_s_std", "vs_baseline", "replicas_identical", "same_model"]
    + ["settings"]
)
"""The columns of :func:`engine_comparison_table`, written even when no configuration ran on two engines."""


def trace_table(records: list[Record], results_dir: Path, out_dir: Path) -> pd.DataFrame:
    """Per run with traces or engine logs in its folder: the files, as links relative to ``out_dir``."""
    rows = []
    for r in records:
        files = trace_files(results_dir / _named(r.run_id))
        if files:
            links = Markdown(", ".join(link(f.name, os.path.relpath(f, out_dir)) for f in files))
            rows.append({"run_id": r.run_id, "engine": r.engine, "traced": bool(r.traced), "files": links})
    return pd.DataFrame(rows, columns=["run_id", "engine", "traced", "files"])
