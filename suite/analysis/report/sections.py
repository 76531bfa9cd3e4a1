"""The report's other sections, each returned as a :class:`.section.Section` (its markdown lines, its tables
by CSV file name, the files it shows): scaling, the projection, where the time goes, engines, samples, the scenario,
environment and runs. :mod:`.writer` puts them on disk.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from ...config.escape import code_fence, html_text
from ...measure.network import PRESETS
from ...records.codec import joined_columns
from ...records.fields import RUNS
from ...records.images import image_problem
from ...records.nofollow import UnsafeEntry, check_entry
from ...records.quoted import QuotedFileError, read_quoted
from ...records.record import Record
from ...records.results import SAMPLES_FILE, path_under
from ..columns import COL
from ..markdown import NA, cell, details, markdown_table
from ..plots import plot_scaling
from ..projection.render import REPORT_RANKS, local_network, projection_lines, projection_tables, run_projection
from ..projection_defaults import DEFAULT_NETWORK
from ..run_plots import plot_rank_timeline
from ..stats.summary import summarise
from ..systems import config_name, main_runs
from .scaling_tables import config_label
from .section import Section
from .tables import (
    cellular_phase_table,
    communication_table,
    engine_comparison_table,
    environment_tables,
    machine_note,
    phase_totals,
    settings_json,
    settings_text,
    step_table,
    time_table,
    trace_table,
    utilization_table,
)

log = logging.getLogger(__name__)


def engine_section(records: list[Record], results_dir: Path, out_dir: Path) -> Section:
    """Engine settings of every run, the engine comparison, and links to traces (relative to ``out_dir``)."""
    lines = ["## Engines\n"]
    settings = pd.DataFrame(
        [
            {
                "run_id": r.run_id,
                "engine": r.engine,
                "traced": bool(r.traced),
                "settings": settings_text(r.engine_settings),
            }
            for r in records
            if r.status == "ok"
        ],
        columns=["run_id", "engine", "traced", "settings"],
    )
    lines.append("Settings each run's engine ran with (docs/engine-settings.md).\n")
    lines.append(markdown_table(settings))
    by_run = {r.run_id: r.engine_settings for r in records if r.status == "ok"}
    settings = settings.assign(settings=[settings_json(by_run[run]) for run in settings[COL.run_id]])  # the CSV's: JSON
    comparison = engine_comparison_table(records)
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
    return Section(lines, {"engine_settings.csv": settings, "engine_comparison.csv": comparison, "traces.csv": traces})


def ratio_text(table: pd.DataFrame, name: str) -> list[str]:
    """A scaling table's ``name`` (speedup, efficiency, efficiency_work) as printed: estimate [interval] (draws at both ends)."""
    texts = []
    for procs, value, summary in zip(table[COL.procs], table[name], table[f"_{name}"]):
        if summary is not None and not (isinstance(summary, float) and pd.isna(summary)):
            texts.append(summary.text())
        else:
            texts.append("1 (P=1)" if procs == 1 and value == 1 else NA)
    return texts


def scaling_section(frame: pd.DataFrame, scaling: dict[str, pd.DataFrame], out_dir: Path) -> Section:
    """Strong and weak scaling: each table over its runs, and its figures (drawn into ``out_dir``)."""
    lines = ["## Scaling\n"]
    tables = {}
    for kind, title in (("strong", "Strong scaling"), ("weak", "Weak scaling")):
        table = scaling[kind]
        tables[f"{kind}_scaling.csv"] = table.drop(columns=hidden(table))
        lines.append(f"### {title}\n")
        if table.empty:
            lines.append(f"_No {kind}-scaling runs in these results._\n")
            continue
        draws = _draws(frame, kind)
        keys = list(zip(table["config"], table[COL.procs]))
        # over the runs, in the headline's notation; the CSV keeps mean and std as columns
        shown = table.assign(
            train_s=[draws[key][COL.train_s] for key in keys],
            images_per_s=[draws[key][COL.images_per_s] for key in keys],
            **{name: ratio_text(table, name) for name in ("speedup", "efficiency", "efficiency_work")},
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
            ]
            + (["speedup", "efficiency"] if kind == "strong" else ["efficiency", "efficiency_work"])
            + ["comm_share", "compute_slowdown", "note"]
        )
        lines.append(markdown_table(shown[columns]))
        lines += [f"![{name}]({name})\n" for name in plot_scaling(table, kind, out_dir)]
    kinds = [table.drop(columns=hidden(table)).assign(scaling=kind) for kind, table in scaling.items() if not table.empty]
    tables["speedup_efficiency.csv"] = pd.concat(kinds, ignore_index=True) if kinds else pd.DataFrame()
    return Section(lines, tables)


def hidden(table: pd.DataFrame) -> list[str]:
    """The columns a table keeps for the report's code, not for readers (``_*``)."""
    return [c for c in table.columns if str(c).startswith("_")]


def _draws(frame: pd.DataFrame, scaling: str) -> dict[tuple[Any, ...], dict[str, str]]:
    """Per (configuration, process count) of a scaling table: its runs' train_s and images/s as an interval."""
    ok = frame[(frame[COL.status] == "ok") & (frame[COL.scaling] == scaling)]
    ok = ok.assign(config=config_label(ok, scaling))
    return {
        key: {column: _interval(runs[column]) for column in ("train_s", "images_per_s")}
        for key, runs in ok.groupby(["config", COL.procs], sort=True)
    }


def _interval(values: pd.Series) -> str:
    summary = summarise(values)
    return summary.text() if summary is not None else NA


def projection_section(records: list[Record], results_dir: Path, out_dir: Path, baselines: Path) -> Section:
    """The cost model fitted on these runs, validated, and projected on :data:`DEFAULT_NETWORK` to 1,024 ranks (its
    chart drawn into ``out_dir``), or nothing when no run can be fitted."""
    result = run_projection(records, PRESETS[DEFAULT_NETWORK], local_network(results_dir), REPORT_RANKS, baselines)
    return Section(projection_lines(result, out_dir, "##"), projection_tables(result)) if result else Section()


def time_section(frame: pd.DataFrame, records: list[Record], out_dir: Path) -> Section:
    """Where the time goes: outside the window, inside a step, on communication, on the GPU (the ranks' timeline
    drawn into ``out_dir``)."""
    lines = ["## Where the time goes\n"]
    times = time_table(frame)
    tables = {"time.csv": times}
    if not times.empty and times[COL.wall_s].sum() > 0:  # records without launch times (hand-made) have no wall time
        total = times[COL.wall_s].sum()
        sums = {
            c: times[c].fillna(0).sum() for c in ("train_s", "setup_s", "warmup_s", "eval_s", "finalize_s", "score_s", "other_s")
        }
        lines.append(
            f"Of {total:.0f} s of wall time over {len(times)} runs, {sums[COL.train_s]:.0f} s "
            f"({sums[COL.train_s] / total:.0%}) were inside training windows (their warm-up {sums[COL.warmup_s]:.0f} s "
            f"included); set-up {sums[COL.setup_s]:.0f} s, evaluation during training {sums[COL.eval_s]:.0f} s, finalize "
            f"{sums[COL.finalize_s]:.0f} s, scoring {sums[COL.score_s]:.0f} s, process start-up, launchers and writing records "
            f"{sums['other_s']:.0f} s.\n"
        )
        totals = phase_totals(times)
        tables["phases.csv"] = totals
        lines.append(
            "Each phase's total over these runs (`phases.csv`). A run's wall time is its part of its launch: from the "
            "launch's start (the first run) or the run before it's record to its own record, so the runs' wall times add "
            "up to the launches' up to their last record (records before the one writer: each run's worker time and an "
            "equal share of the rest; docs/results.md).\n"
        )
        shown = totals.assign(seconds=totals["seconds"].round(1), share=[f"{v:.0%}" for v in totals["share"]])
        lines.append(markdown_table(shown))
        lines.append(details("Time per run, by phase", markdown_table(times)))
    lines += [f"![{name.removesuffix('.png')}]({name})\n" for name in plot_rank_timeline(records, out_dir)]
    steps = step_table(records)
    tables["step_time.csv"] = steps
    raised = "; where a rank computed faster, its achieved rate is its peak (`peak_raised_ranks`)"
    peaks = "".join(
        f"Peak: {cell(source)}{raised if steps[COL.peak_raised_ranks].astype(bool).any() else ''}.\n"
        for source in sorted({s for s in steps.get(COL.peak_source, []) if isinstance(s, str)})
    )
    if not steps.empty:
        lines.append(
            details("Step time, throughput and FLOP/s", markdown_table(steps.drop(columns=[COL.peak_source])) + "\n" + peaks)
        )
    comm = communication_table(frame)
    tables["communication.csv"] = comm
    body = markdown_table(comm)
    phases = cellular_phase_table(records)
    if not phases.empty:
        tables["cellular_phases.csv"] = phases
        body += (
            "\nCellular runs, seconds per rank in each phase of the window's iterations (mean over ranks; `exchange` is "
            "the neighbour exchange, the rest is computation; mixture scoring is part of the algorithm):\n\n"
            + markdown_table(phases)
        )
    lines.append(details("Communication share", body))
    util = utilization_table(frame)
    tables["gpu_utilization.csv"] = util
    if not util.empty and util[COL.gpu_util_mean].isna().all():
        devices = ", ".join(sorted({cell(d) for d in util[COL.device]}))
        lines.append(f"**GPU utilization:** all runs ran on CPUs ({devices}): n/a, not measured and not estimated.\n")
    else:
        lines.append("### GPU utilization\n")
        lines.append(markdown_table(util))
    return Section(lines, tables)


def _sample_image(run_id: str | None, width: int) -> str:
    """An HTML image of a run's copied sample grid: its file percent-encoded, its title as HTML text."""
    return f'<img src="{quote(f"samples/{run_id}.png")}" width="{width}" title="{html_text(run_id)}">'


def _sample_grid(results_dir: Path, record: Record) -> Path | None:
    """The run's final sample grid to show, None where it has none or it is not one the suite wrote: a link, a hard
    link, a FIFO, a pixel bomb or a damaged file is named in a warning line and not shown (the report goes on)."""
    # a record's run id is data (the folder may come from someone else): it must not lead out of either folder
    source = path_under(results_dir, str(record.run_id)) / SAMPLES_FILE  # the file itself is looked at, not followed
    try:
        info = check_entry(source)
    except UnsafeEntry as error:
        log.warning("skipped %s", error)
        return None
    if info is None or not stat.S_ISREG(info.st_mode):
        return None
    if info.st_nlink > 1:
        log.warning("skipped %s: a hard link (one of %d names of one file), not a grid the suite wrote", source, info.st_nlink)
        return None
    if (problem := image_problem(source)) is not None:  # a pixel bomb, a damaged file: named, not shown
        log.warning("skipped %s", problem)
        return None
    return source


def samples_section(records: list[Record], results_dir: Path) -> Section:
    """Each strategy's samples at its largest P (class-ordered rows for labelled models); the rest folded. The
    section copies each shown run's sample grid into the report's ``samples/``."""
    shown, folded = [], []
    copies: dict[str, Path] = {}
    by_config: dict[str, list[Record]] = {}
    for r in records:
        if r.status == "ok" and (source := _sample_grid(results_dir, r)) is not None:
            by_config.setdefault(config_name(r), []).append(r)
            copies[f"samples/{r.run_id}.png"] = source
    for name, runs in sorted(by_config.items()):
        main, _ = main_runs(runs)
        first = min(main, key=lambda r: r.repeat or 0)
        shown.append(f"| {cell(name)} | {_sample_image(first.run_id, 200)} |")
        folded += [_sample_image(r.run_id, 120) for r in runs if r is not first]
    if not shown:
        return Section()
    lines = [
        "## Samples\n",
        "Each strategy at its largest P; conditional and label-partitioned models show one row per class.\n",
        "| strategy | samples |",
        "|---|---|",
        *shown,
        "",
    ]
    if folded:
        lines.append(details("Samples of every other run", " ".join(folded)))
    return Section(lines, copies=copies)


def scenario_lines(results_dir: Path) -> list[str]:
    """The scenario file the runs were started from, as it was (nothing where the results folder has none; a link
    there is refused, not followed). It is read up to :data:`suite.records.quoted.MAX_QUOTED_BYTES` as UTF-8 and
    fenced past its longest run of backticks (:func:`suite.config.escape.code_fence`); a larger file, or one that is
    not UTF-8, is named in a warning line and on the page instead."""
    scenario_file = results_dir / "scenario.yaml"
    if not os.path.lexists(scenario_file):
        return []
    try:
        text = read_quoted(scenario_file, what="scenario file")
    except QuotedFileError as error:
        log.warning("skipped %s", error)
        return ["## Scenario\n", f"Not shown: {cell(error)}.\n"]
    return ["## Scenario\n", code_fence(text.strip(), "yaml")]


def environment_section(records: list[Record]) -> Section:
    """The machine and versions every run shared, and what differs between runs."""
    common, varying = environment_tables(records)
    tables = {"environment.csv": common}
    lines = ["## Environment\n", machine_note(records) + "\n", "Shared by every run:\n", markdown_table(common)]
    if not varying.empty:
        tables["environment_per_run.csv"] = varying
        lines.append(details("What differs between runs", markdown_table(varying)))
    return Section(lines, tables)


def runs_section(frame: pd.DataFrame) -> Section:
    """Every run with its settings and status; the failed ones named."""
    runs = frame[
        [
            COL.run_id,
            COL.status,
            COL.strategy,
            COL.engine,
            COL.loss,
            COL.procs,
            COL.scaling,
            COL.grid,
            COL.sweep,
            COL.dataset,
            COL.steps,
            COL.global_batch,
            COL.threads_per_rank,
            COL.wall_s,
            COL.train_s,
            COL.images_per_s,
            COL.train_images,
            COL.eval_images,
            COL.contended,
            *joined_columns(RUNS),  # the strategies' own columns that join this table, as their record parts say
            COL.error,
        ]
    ]
    failed = runs[~runs[COL.status].isin(("ok", "diverged"))]  # diverged runs have their own section
    shown = runs.assign(error=runs[COL.error].map(lambda e: e.splitlines()[0][:120] if isinstance(e, str) else None))
    lines = ["## Runs\n"]
    if not failed.empty:
        lines.append(
            f"**{len(failed)} run(s) failed:** "
            + "; ".join(
                f"{rid}: {cell(str(err).splitlines()[0][:160])}" for rid, err in zip(failed[COL.run_id], failed[COL.error])
            )
            + "\n"
        )
    lines.append(details(f"All {len(runs)} runs", markdown_table(shown)))
    return Section(lines, {"runs.csv": runs})
