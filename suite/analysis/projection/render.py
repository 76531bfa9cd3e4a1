"""The output of :mod:`suite.analysis.projection`: the papers' points beside the projection, the chart, and the
markdown and CSVs of ``suite project`` and of the report's projection section.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...config.escape import csv_text, plot_text
from ...config.registry import STRATEGIES
from ...measure.network import PRESETS, Network, probe_network
from ...records.record import Record
from ...records.results import PROBE_FILE
from ..baselines import PAPER001, POINTS, read_baseline
from ..columns import COL
from ..markdown import cell, markdown_table
from ..palette import style_of
from ..plot_parts import pyplot, readable_ticks, save
from .fit import MIN_CORE_SHARE, Fitted, fit_all, model_name, model_table, project, scaled_model
from .model import CellularModel, predict
from .validation import V, validate

REPORT_RANKS = [2**i for i in range(11)]
"""The report's projection: 1 to 1,024 ranks."""


PAPER_POINTS = "scaling_points.csv"


SEED001_SPEEDUPS = "paper001_cellular_speedups.csv"


PAPER_MARKERS = ["*", "P", "X", "D", "v", "^", "<", ">", "h", "8"] * 3


def paper_points(baselines: Path) -> pd.DataFrame:
    """Published scaling points: ``scaling_points.csv`` and paper 001's cellular speedups (P = cells)."""
    frames = []
    points = baselines / PAPER_POINTS
    if points.is_file():
        frames.append(read_baseline(points))
    speedups = baselines / SEED001_SPEEDUPS
    owners = [e.name for e in STRATEGIES if e.speedups_baseline == SEED001_SPEEDUPS]  # the strategy whose trait names it
    if speedups.is_file() and owners:
        s = read_baseline(speedups)
        cells = s[PAPER001.grid].map(lambda g: math.prod(int(v) for v in g.split("x")))
        frames.append(
            pd.DataFrame(
                {
                    POINTS.source: "paper 001 (Perez et al.), MNIST, grid " + s[PAPER001.grid],
                    POINTS.strategy: owners[0],
                    POINTS.scaling: "strong",
                    POINTS.procs: cells,
                    POINTS.metric: "speedup",
                    POINTS.value: s[PAPER001.speedup],
                    POINTS.kind: "reported",
                    POINTS.grid: s[PAPER001.grid],
                    POINTS.note: "one process per cell; single core vs distributed wall time",
                }
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def compare_papers(
    fitted: list[Fitted], papers: pd.DataFrame, net: Network, algorithm: str = "best", compute_scale: float = 1.0
) -> pd.DataFrame:
    """Each published point beside the model's projection of the same strategy, scaling and P."""
    rows = []
    for _, point in papers.iterrows():
        for f in (f for f in fitted if f.key[0] == point[POINTS.strategy] and not f.refused):
            model, weak = scaled_model(f.model, compute_scale), point[POINTS.scaling] == "weak"
            problem = f.weak if weak else f.strong
            if isinstance(f.model, CellularModel) and not weak and isinstance(point.get(POINTS.grid), str):
                grid_rows, grid_cols = (int(v) for v in point[POINTS.grid].split("x"))
                problem = dataclasses.replace(problem, grid=(grid_rows, grid_cols))
            p = int(point[POINTS.procs])
            one, at = (predict(model, problem, n, net, algorithm, weak, f.block) for n in (1, p))
            value = None
            if one.time and at.time:
                value = one.time / at.time if (weak or point[POINTS.metric] == "speedup") else one.time / at.time / p
            rows.append(
                {
                    "source": point[POINTS.source],
                    "strategy": point[POINTS.strategy],
                    "scaling": point[POINTS.scaling],
                    "procs": p,
                    "metric": point[POINTS.metric],
                    "paper": point[POINTS.value],
                    "kind": point[POINTS.kind],
                    "config": model_name(f.key),
                    "projected": value,
                    "note": at.note or "",
                }
            )
    return pd.DataFrame(
        rows, columns=["source", "strategy", "scaling", "procs", "metric", "paper", "kind", "config", "projected", "note"]
    )


def plot_projection(table: pd.DataFrame, papers: pd.DataFrame, out: Path, title: str) -> str:
    """Strong-scaling speedup and weak-scaling efficiency against ranks, each system in its own look
    (:mod:`suite.analysis.palette`), the ideal beneath them and the papers' printed points in black; statements
    without a printed number (``claimed``) are in the comparison table, not the chart."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    handles: dict[str, object] = {}
    reported_all = papers[papers[POINTS.kind] == "reported"] if not papers.empty else papers
    markers = dict(zip(sorted(reported_all[POINTS.source].unique()) if not reported_all.empty else [], PAPER_MARKERS))
    for ax, scaling, column in ((axes[0], "strong", "speedup"), (axes[1], "weak", "efficiency")):
        data = table[(table[COL.scaling] == scaling)].dropna(subset=[column])
        if not data.empty:
            top = int(data[COL.procs].max())
            ideal = [1, top], ([1, top] if scaling == "strong" else [1, 1])
            (handles["ideal"],) = ax.plot(*ideal, color="black", lw=0.9, ls="--", zorder=4)  # over the lines it bounds
        for config, part in data.groupby("config", sort=True):
            look = style_of(str(config)).plot_kwargs() | {"fillstyle": "none", "markerfacecolor": "white"}  # hollow: a model
            solid = look["linestyle"] == "-"  # solid lines wider, so that a dashed one on top of it leaves it visible
            (handles[str(config)],) = ax.plot(
                part[COL.procs], part[column], markersize=5, lw=2.4 if solid else 1.3, zorder=2, **look
            )
        if reported_all.empty:  # no papers' numbers (a --baselines folder without them, or none installed)
            reported = pd.DataFrame(columns=[POINTS.source, POINTS.procs, POINTS.value])
        else:
            reported = reported_all[reported_all[POINTS.scaling] == scaling]
        for source, part in reported.groupby(POINTS.source, sort=True):
            (handles[f"{source} (reported)"],) = ax.plot(
                part[POINTS.procs],
                part[POINTS.value],
                linestyle="none",
                marker=markers[source],
                markersize=9,
                color="black",
                zorder=5,
            )
        ax.set_xscale("log", base=2)
        readable_ticks(ax, "x")
        if scaling == "strong":
            ax.set_yscale("log", base=2)
            readable_ticks(ax, "y")
        ax.set_xlabel("ranks P")
        ax.set_ylabel("speedup S = T(1)/T(P)" if scaling == "strong" else "efficiency E = T(1)/T(P)")
        ax.set_title(f"{scaling} scaling, projected", fontsize=10)
    fig.suptitle(
        plot_text(title)
        + ("; papers' statements without a printed number: see the comparison table" if not papers.empty else ""),
        fontsize=9,
    )
    fig.legend(handles.values(), handles.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    return save(fig, out, "projection.png")[0]  # atomically, never through a link (a swapped staging folder included)


def percent(value: float | None) -> str | None:
    """A relative error as a signed percentage (None for n/a)."""
    return f"{value:+.1%}" if pd.notna(value) else None


def _pivot(table: pd.DataFrame, scaling: str, column: str) -> pd.DataFrame:
    """Rows: ranks; columns: configurations; cells: ``column`` to 4 significant digits (n/a where not defined)."""
    part = table[table[COL.scaling] == scaling]
    pivot = part.pivot_table(index=COL.procs, columns="config", values=column, aggfunc="first", dropna=False)
    pivot = pivot.reindex(sorted(part[COL.procs].unique()))
    return pivot.map(lambda v: f"{v:.4g}" if pd.notna(v) else None).reset_index()


def _not_projected(validation: pd.DataFrame, fitted: list[Fitted]) -> list[str]:
    """One line per configuration the projection does not project, naming it and why: a strategy it cannot cost, or a
    model fitted on one process count."""
    left = validation[validation[V.role].str.startswith("not projected")]
    lines = [f"- {cell(config)}: {role}." for config, role in left.groupby([V.config, V.role], sort=True).groups]
    lines += [f"- {cell(model_name(f.key))}: {cell(f.refused)}." for f in fitted if f.refused]
    return lines + ([""] if lines else [])


HELD_OUT = ("heldout_runs", "heldout_median_abs_error", "heldout_worst_error")
"""The columns of ``projection.csv`` (and the papers' comparison) that carry each configuration's held-out error."""


def heldout_errors(validation: pd.DataFrame) -> dict[str, tuple[int, float, float]]:
    """Per configuration: (held-out runs, median |relative error|, the largest error, signed) of its validation."""
    held = validation[(validation[V.role] == "held out") & validation[V.error].notna()]
    out = {}
    for config, part in held.groupby(V.config, sort=True):
        errors = part[V.error].astype(float)
        out[str(config)] = (len(errors), float(errors.abs().median()), float(errors.loc[errors.abs().idxmax()]))
    return out


def heldout_text(errors: tuple[int, float, float] | None) -> str:
    """``median abs. error 57%, worst +88% (6 runs)``, or that the model was not validated."""
    if errors is None:
        return "not validated"
    runs, median, worst = errors
    return f"median abs. error {median:.0%}, worst {worst:+.0%} ({runs} run{'s' if runs != 1 else ''})"


def _with_heldout(frame: pd.DataFrame, errors: dict[str, tuple[int, float, float]]) -> pd.DataFrame:
    """``frame`` with each row's configuration's held-out error beside its figures (:data:`HELD_OUT`)."""
    found = [errors.get(str(config)) for config in frame["config"]] if "config" in frame else []
    columns = {name: [e[i] if e else None for e in found] for i, name in enumerate(HELD_OUT)}
    return frame.assign(**columns) if len(frame) else frame.reindex(columns=[*frame.columns, *HELD_OUT])


def _pivot_with_error(
    table: pd.DataFrame, scaling: str, column: str, errors: dict[str, tuple[int, float, float]]
) -> pd.DataFrame:
    """:func:`_pivot` with a first row giving each configuration's held-out error."""
    pivot = _pivot(table, scaling, column)
    first = {"procs": "held-out error", **{c: heldout_text(errors.get(str(c))) for c in pivot.columns if c != "procs"}}
    return pd.concat([pd.DataFrame([first]), pivot.astype(object)], ignore_index=True)


def _notes(table: pd.DataFrame) -> list[str]:
    """Why projected cells are n/a, once per configuration, scaling and reason."""
    missing = table[table["time_s"].isna() & (table["note"] != "")]
    lines = []
    for (config, scaling, note), part in missing.groupby(["config", COL.scaling, "note"], sort=False):
        lines.append(f"- {cell(config)}, {scaling}, P = {', '.join(map(str, part[COL.procs]))}: n/a, {note}.")
    return lines


ASSUMPTIONS = """Assumptions: each rank computes as fast as the measured ones (times x `compute_scale`), one rank per
core set or GPU, no contention; communication is the alpha-beta model of the network named above, with no
overlap with computation and no stragglers; label-partitioned groups and cellular blocks are placed on
consecutive ranks. Oversubscribed runs are listed but never fitted or validated. Equations: docs/reports.md, Projection."""


@dataclass
class Projection:
    """Everything ``suite project`` and the report's section show."""

    fitted: list[Fitted]
    validation: pd.DataFrame
    table: pd.DataFrame
    papers: pd.DataFrame
    comparison: pd.DataFrame
    net: Network
    local: Network
    compute_scale: float = 1.0


def run_projection(
    records: list[Record],
    net: Network,
    local: Network,
    ranks: list[int],
    baselines: Path,
    fit_procs: list[int] | None = None,
    algorithm: str = "best",
    compute_scale: float = 1.0,
) -> Projection | None:
    """Fit, validate and project; None when no run can be fitted."""
    fitted = fit_all(records, fit_procs)
    if not fitted:
        return None
    papers = paper_points(baselines)
    validation = validate(records, local, fit_procs, algorithm)
    errors = heldout_errors(validation)
    return Projection(
        fitted,
        validation,
        _with_heldout(project(fitted, net, ranks, algorithm, compute_scale), errors),
        papers,
        _with_heldout(compare_papers(fitted, papers, net, algorithm, compute_scale), errors)
        if not papers.empty
        else pd.DataFrame(),
        net,
        local,
        compute_scale,
    )


def projection_tables(result: Projection) -> dict[str, pd.DataFrame]:
    """The projection's tables by CSV file name: the validation, the projection, the papers' points beside it."""
    return {
        "projection_validation.csv": result.validation,
        "projection.csv": result.table,
        "projection_papers.csv": result.comparison,
    }


def write_projection(result: Projection, out: Path, heading: str = "#") -> list[str]:
    """Write the CSVs and the plot into ``out``; return the markdown (headings at ``heading`` level)."""
    out.mkdir(parents=True, exist_ok=True)
    empty = []
    for name, table in projection_tables(result).items():
        if table.empty:  # a header alone, or one newline (pandas' empty frame), says nothing: not written, named below
            empty.append(name)
            continue
        keep = (table.notna() & (table.astype(str) != "")).any()  # a column empty in every row is left out, as the report does
        (out / name).write_text(csv_text(table.loc[:, keep]))  # device names are a record's words
    lines = projection_lines(result, out, heading)
    if empty:
        lines.append(f"\nTables with no row here, not written: {', '.join(f'`{name}`' for name in empty)}.")
    return lines


def projection_lines(result: Projection, out: Path, heading: str = "#") -> list[str]:
    """The projection's markdown (headings at ``heading`` level), its plot drawn into ``out``."""
    sub = heading + "#"
    lines = [
        f"{heading} Projection\n",
        "A cost model per strategy fitted on these runs (docs/reports.md, Projection), checked against the runs it was not "
        "fitted on, then projected to more ranks. A model, not a measurement.\n",
        f"- Projected on {result.net.describe()}.",
        f"- Validated on {result.local.describe('each run on its own ranks per node')}.",
        *([f"- Computation times x {result.compute_scale:g} (`--compute-scale`)."] if result.compute_scale != 1 else []),
        "",
        f"{sub} Fitted model\n",
        markdown_table(model_table(result.fitted)),
        *_not_projected(result.validation, result.fitted),
        f"{sub} Predicted against measured\n",
    ]
    v = result.validation
    held = v[v[V.role] == "held out"].dropna(subset=[V.error])
    lines.append(markdown_table(v.assign(**{V.error: v[V.error].map(percent)})))
    if not held.empty:
        worst = held.loc[held[V.error].abs().idxmax()]
        lines.append(
            f"Held-out runs: {len(held)}, median |error| {held[V.error].abs().median():.1%}, largest "
            f"{worst[V.error]:+.1%} ({worst[V.run_id]}).\n"
        )
    starved = v[v[V.error].notna() & (pd.to_numeric(v[V.cpu_share]) < MIN_CORE_SHARE)]
    if not starved.empty:
        lines.append(
            f"{len(starved)} runs got less than {MIN_CORE_SHARE:.0%} of their cores (`cpu_share`, down to "
            f"{starved[V.cpu_share].min():.0%}) without being oversubscribed: other processes were using the "
            "machine, and their errors measure that too. Re-run them on a quiet machine.\n"
        )
    errors = heldout_errors(v)
    for scaling, column in (("strong", "speedup"), ("weak", "efficiency")):
        lines.append(f"{sub} {scaling.capitalize()} scaling, projected {column}\n")
        if result.table.empty:
            lines.append("_No configuration is projected (see above)._\n")
            continue
        lines.append(
            "The first row is each model's error on the runs it was not fitted on (above): read every figure below with it.\n"
        )
        lines.append(markdown_table(_pivot_with_error(result.table, scaling, column, errors)))
    lines += _notes(result.table)
    lines.append("")
    if not result.comparison.empty:
        lines.append(f"{sub} Papers' points beside the projection\n")
        lines.append(
            "The papers ran other hardware, networks and budgets; every point is a number they print "
            "(`baselines/scaling_points.csv` and `paper001_cellular_speedups.csv` name the source).\n"
        )
        lines.append(markdown_table(result.comparison))
    elif not result.papers.empty:
        strategies = ", ".join(sorted(set(result.papers[POINTS.strategy])))
        lines.append(f"The papers' scaling points ({strategies}) are not compared: no model of theirs is projected here.\n")
    title = f"projected on {result.net.name}" + (f", compute x {result.compute_scale:g}" if result.compute_scale != 1 else "")
    # the figure draws only the papers' points its page compares: those of the strategies in the comparison
    compared = (
        result.papers[result.papers[POINTS.strategy].isin(set(result.comparison[POINTS.strategy]))]
        if not result.comparison.empty and not result.papers.empty
        else result.papers.iloc[0:0]
    )
    lines.append(f"![projection]({plot_projection(result.table, compared, out, title)})\n")
    lines.append(ASSUMPTIONS + "\n")
    return lines


def local_network(results_dir: Path, probe: str | None = None) -> Network:
    """The network the results were measured on: ``probe`` or ``RESULTS/probe.json``, else the ``shm`` preset."""
    path = Path(probe) if probe else results_dir / PROBE_FILE
    if probe or path.is_file():
        return probe_network(path)
    return PRESETS["shm"]
