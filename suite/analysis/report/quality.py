"""The report's image quality: scores per ruler, summaries over seeds, quality over training time and
the papers' numbers beside ours.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from ...config.escape import code_span, file_part
from ...config.registry import STRATEGIES
from ...records.record import Record
from ...records.results import PER_CLASS_BASES, per_class_summary
from ...records.scored import PerClassScore, Quality
from ..baselines import PAPER000, PAPER001, read_baseline
from ..columns import COL, column_names, names_of
from ..markdown import NA, cell, details, given, markdown_table, significant, std_over
from ..plots import plot_losses, plot_quality_curves
from ..run_plots import plot_samples_over_time
from ..stats.summary import summarise
from ..systems import config_name
from .papers import paper_model
from .section import Section
from .tables import KID_UNITS


def scored_models(records: list[Record]) -> Iterator[tuple[str, Record, Quality]]:
    """(run id shown, record, quality) for every scored model: the run's, and cellular's best cell."""
    for r in records:
        if r.status != "ok":
            continue
        if r.quality is not None:
            yield f"{r.run_id}" + (" (best mixture)" if r.quality_best_cell is not None else ""), r, r.quality
        if r.quality_best_cell is not None:
            yield f"{r.run_id} (best cell)", r, r.quality_best_cell


def class_set(q: Quality) -> str | None:
    """The real classes a model was scored against, e.g. ``0-9 of 10`` or ``0,3 of 10``."""
    return _class_text(q.classes, q.num_classes)


def _class_text(classes: list[int] | None, num_classes: object) -> str | None:
    """``0-9 of 10``, ``0,3 of 10``: the page's words for a list of classes out of ``num_classes``."""
    if not classes:
        return None
    contiguous = classes == list(range(classes[0], classes[-1] + 1))
    shown = f"{classes[0]}-{classes[-1]}" if contiguous and len(classes) > 2 else ",".join(map(str, classes))
    # read back from the table, a count is a float (NaN where not recorded)
    total = None if not isinstance(num_classes, numbers.Real) or math.isnan(num_classes) else int(float(num_classes))
    return f"{shown} of {total}"


def _classes_json(classes: list[int] | None) -> str | None:
    """The scored classes as the CSV holds them: a JSON list (``[0,1,2]``), None where not recorded."""
    return json.dumps([int(c) for c in classes], separators=(",", ":")) if classes else None


def _quality_display(scores: pd.DataFrame) -> pd.DataFrame:
    """The markdown columns of a scores table: IS and KID with their spread and counts, per-class KID by basis."""
    shown = pd.DataFrame(
        {
            "run_id": scores[COL.run_id],
            "procs": scores[COL.procs],
            "seed": scores[COL.seed],
            "classes": [
                _class_text(json.loads(c) if isinstance(c, str) else None, k)
                for c, k in zip(scores[COL.classes], scores["num_classes"])
            ],
            "n": scores["n"],
            "n_real": scores["n_real"],
        }
    )
    shown["IS"] = [_score(v) for v in scores[COL.is_mean]]
    shown["IS std (splits×n)"] = [std_over(*v) for v in zip(scores[COL.is_std], scores["is_splits"], scores["is_split_n"])]
    shown[COL.fid] = scores[COL.fid]
    shown["KID"] = [_score(v) for v in scores[COL.kid_mean]]
    shown["KID std (subsets×n)"] = [
        std_over(*v) for v in zip(scores[COL.kid_std], scores["kid_subsets"], scores["kid_subset_size"])
    ]
    for field, basis in PER_CLASS_BASES.items():
        shown[f"per-class KID by {basis}"] = [
            f"{significant(m)} ({k:.0f}/{c:.0f} classes, n {lo:.0f}-{hi:.0f})" if given(m) else NA
            for m, k, c, lo, hi in zip(
                scores[f"{field}_kid_mean"],
                scores[f"{field}_scored"],
                scores[f"{field}_classes"],
                scores[f"{field}_n_min"],
                scores[f"{field}_n_max"],
            )
        ]
    shown[COL.tvd], shown[COL.label_acc] = scores[COL.tvd], scores[COL.label_acc]
    return shown


def _ruler(q: Quality) -> str:
    """The ruler that made a quality block's scores (every quality block names one: ``REQUIRED_IN``)."""
    return str(q.features)


def _score(value: Any) -> str:
    """A score to three significant digits (n/a when missing)."""
    return significant(value) if given(value) else NA


@dataclass(frozen=True)
class PerClassColumns:
    """The columns of a per-class table (``per_class_label_*.csv``, ``per_class_predicted_*.csv``): one class of one
    run's scores a row, as :class:`suite.records.scored.PerClassScore` holds them."""

    run_id: str
    class_: str
    n: str
    n_real: str
    metric: str
    fid: str
    kid_mean: str
    kid_std: str
    kid_subset_size: str
    kid_subsets: str
    note: str


PC = column_names(PerClassColumns)
"""The per-class table's column names: ``PC.kid_mean == "kid_mean"``."""


def _per_class_rows(name: str, scores: dict[str, PerClassScore]) -> list[dict[str, Any]]:
    own = names_of(PerClassColumns)[2:]  # after the run and the class: the score's own fields, named alike
    return [{PC.run_id: name, PC.class_: c, **{column: getattr(e, column) for column in own}} for c, e in scores.items()]


def _per_class(q: Quality, field: str) -> dict[str, PerClassScore] | None:
    """The per-class scores of ``q`` on one basis of :data:`~suite.records.results.PER_CLASS_BASES`."""
    return q.per_class_label if field == "per_class_label" else q.per_class_predicted


PRE_PROTOCOL = "suite"
"""The protocol of records written before ``metrics.protocol`` existed (they scored as ``suite`` does)."""


def protocol_of(q: Quality) -> str:
    """The scoring protocol a quality block was made with."""
    return q.protocol or PRE_PROTOCOL


def comparability_of(q: Quality) -> str:
    """The record's line on whether its scores are comparable with the papers' numbers."""
    return q.comparability or "not comparable with the papers' numbers: scored before protocols (the suite protocol)"


QUALITY_COLUMNS = (
    *("num_classes", "n", "n_real", "feature_dim", "is_mean", "is_std", "is_splits", "is_split_n", "fid", "fid_note"),
    *("kid_mean", "kid_std", "kid_subset_size", "kid_subsets"),
)
"""The fields of a quality block the scores table holds as they are, under their own names."""


def quality_tables(records: list[Record]) -> dict[str, tuple[pd.DataFrame, dict[str, pd.DataFrame]]]:
    """Per ruler and protocol: (scores table, {per-class field: per-class table}). Rulers and protocols are never mixed.

    A ruler is a network name, and its hash where one name comes with several hashes; the protocol is
    named where one ruler was used with several.

    Every FID has KID and the sample counts beside it. The per-class tables are one per grouping
    basis (:data:`suite.records.results.PER_CLASS_BASES`), never merged into one column.
    """
    by_net: dict[str, list[tuple[str, Record, Quality]]] = {}
    hashes: dict[str, set[str]] = {}
    protocols: dict[str, set[str]] = {}
    for _, _, q in scored_models(records):
        hashes.setdefault(_ruler(q), set()).add(q.ruler_sha256 or "")
        protocols.setdefault(_ruler(q), set()).add(protocol_of(q))
    for name, r, q in scored_models(records):
        ruler = _ruler(q)
        key = ruler + (f" {q.ruler_sha256[:12]}" if len(hashes[ruler]) > 1 and q.ruler_sha256 else "")
        key += f" protocol-{protocol_of(q)}" if len(protocols[ruler]) > 1 else ""
        by_net.setdefault(key, []).append((name, r, q))
    tables = {}
    for net, models in sorted(by_net.items()):
        scores: list[dict[str, Any]] = []
        per_class: dict[str, list[dict[str, Any]]] = {field: [] for field in PER_CLASS_BASES}
        for name, r, q in models:
            row = {
                "run_id": name,
                "config": config_name(r) + (" (best cell)" if name.endswith("(best cell)") else ""),
                "strategy": r.strategy,
                "procs": r.procs,
                "seed": r.seed,
                "scaling": r.scaling,
                "ruler": q.features,
                "ruler_sha256": q.ruler_sha256,
                "protocol": protocol_of(q),
                "papers_comparable": bool(q.papers_comparable),
                "comparability": comparability_of(q),
                "classes": _classes_json(q.classes),  # a JSON list; the page says "0-9 of 10"
                **{name: getattr(q, name) for name in QUALITY_COLUMNS},
            }
            for field in PER_CLASS_BASES:
                summary = per_class_summary(_per_class(q, field))
                # numbers, each in its column (the CSV reads as numbers): scored of classes, samples per class min to max
                for part in ("kid_mean", "scored", "classes", "n_min", "n_max"):
                    row[f"{field}_{part}"] = getattr(summary, part) if summary else None
                per_class[field] += _per_class_rows(name, _per_class(q, field) or {})
            scores.append({**row, "tvd": q.tvd, "label_acc": q.label_acc, "is_note": q.is_note})
        tables[net] = (pd.DataFrame(scores), {field: pd.DataFrame(rows) for field, rows in per_class.items()})
    return tables


SEED_METRICS = {"fid": "FID", "kid_mean": "KID", "is_mean": "IS", "label_acc": "label_acc"}
"""Scores summarised over seeds (record field -> column title)."""


def seeds_csv(summary: pd.DataFrame) -> pd.DataFrame:
    """The over-seeds table for its CSV: ``seeds`` the number of seeds, ``seed_list`` which, as a JSON list (``[0,1,2]``)."""
    lists = [[int(v) for v in str(text).split(",") if v.strip()] for text in summary["seeds"]]
    out = summary.assign(seeds=[len(seeds) for seeds in lists])
    out.insert(list(out.columns).index("seeds") + 1, "seed_list", [json.dumps(seeds, separators=(",", ":")) for seeds in lists])
    return out


def quality_over_seeds(scores: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, scaling and process count: n seeds, and each score's estimate over them with its 95 % interval.

    The estimate is :class:`suite.analysis.stats.summary.Summary`'s, as in the headline: the geometric
    mean of positive scores, the arithmetic mean of ``label_acc``. A seed's repeats are averaged
    first: they retrain the same model, so they are not independent draws.
    """
    rows = []
    keyed = scores.assign(seed_key=scores[COL.seed].fillna(-1))
    for (config, scaling, procs), part in keyed.groupby(["config", COL.scaling, COL.procs], sort=True):
        seeds = part.groupby("seed_key")  # repeats of one seed train the same model: one value per seed
        row: dict[str, Any] = {
            "config": config,
            "scaling": scaling,
            "procs": procs,
            "seeds": ",".join(str(int(s)) for s in sorted(part[COL.seed].dropna().unique())),
        }
        for field in SEED_METRICS:
            summary = summarise(seeds[field].mean(), fraction=field == "label_acc")
            interval = summary.interval if summary else None
            row.update(
                {
                    f"{field}_n": summary.n if summary else 0,
                    f"{field}_estimate": summary.center if summary else None,
                    f"{field}_ci95_lo": interval[0] if interval else None,
                    f"{field}_ci95_hi": interval[1] if interval else None,
                    f"_{field}_text": summary.text(2 if field == "label_acc" else 3) if summary else NA,
                }
            )
        rows.append(row)
    return pd.DataFrame(rows)


PAPER_EPOCHS = 1000  # paper 000 trains every model for 1,000 epochs


PAPER_MIN_IS_SAMPLES = 5000  # paper 000's IS is over thousands of samples (the count is not stated)


def _protocol_differences(r: Record, q: Quality) -> str:
    """Where a run's IS differs from paper 000's protocol (Inception, all classes, thousands of samples, 1,000 epochs)."""
    notes = []
    if not q.papers_comparable:
        notes.append(f"ruler {q.features} with protocol {protocol_of(q)}, not Inception with standard: not comparable")
    if q.is_mean is None:
        notes.append(f"no IS ({q.is_note})")
    classes = q.classes
    if classes and q.num_classes is not None and len(classes) < q.num_classes:
        notes.append(f"{len(classes)} of {q.num_classes} classes (paper: all): IS grows with the classes sampled, not comparable")
    if q.n is not None and q.n < PAPER_MIN_IS_SAMPLES:
        split = f" in {q.is_splits} splits of {q.is_split_n}" if q.is_splits else ""
        notes.append(f"n={q.n}{split} (paper: thousands): small splits bias IS low")
    if r.epochs != PAPER_EPOCHS:
        notes.append(f"epochs {r.epochs} (paper: {PAPER_EPOCHS})")
    if r.critic_norm is not None and r.critic_norm != "batch":
        notes.append(f"discriminator norm {r.critic_norm} (tables: batch)")
    return "; ".join(notes) or "same protocol"


def baseline_section(baselines: Path, records: list[Record]) -> list[str]:
    """The papers' numbers beside the runs' (the report's papers page)."""
    lines: list[str] = []
    lines.append("## Papers' numbers (not measured here)\n")
    lines.append(
        "Printed beside the suite's results for orientation. They come from the papers, on their hardware, "
        "networks and training budgets; they are never mixed into the measured columns above.\n"
    )
    inception = baselines / "paper000_inception_scores.csv"
    if inception.is_file():
        paper = read_baseline(inception)
        datasets = {r.dataset.name if r.dataset is not None else None for r in records if r.status == "ok"}
        shown = paper[paper[PAPER000.dataset].isin(datasets)]
        note = (
            ""
            if not shown.empty
            else f" (no paper numbers for {cell(', '.join(sorted(d for d in datasets if d)))}; all datasets shown)"
        )
        shown = paper if shown.empty else shown
        lines.append(f"**Paper 000, Inception Score (Inception network, paper's Tables 5/9/13/17){note}**\n")
        lines.append(markdown_table(shown[[PAPER000.dataset, PAPER000.model, PAPER000.is_mean, PAPER000.is_std, PAPER000.table]]))
        lines.append(
            "Paper 000 computes IS with the Inception network on samples of all classes of the dataset (thousands "
            f"of them), after {PAPER_EPOCHS:,} epochs. DC-GAN corresponds to `data_parallel`, DC-CGAN to `conditional`, "
            "distributed DC-CGAN to `label_partitioned` with loss `bce`. Each of our rows below says where its "
            "protocol differs from the paper's; only a row without such a difference is comparable.\n"
        )
        ours = []
        for name, r, q in scored_models(records):
            model = paper_model(r)
            dataset = r.dataset.name if r.dataset is not None else None
            row = paper[(paper[PAPER000.dataset] == dataset) & (paper[PAPER000.model] == model)]
            if model is None or row.empty:
                continue
            ours.append(
                {
                    "run_id": name,
                    "model": model,
                    "IS (ours)": _score(q.is_mean),
                    "IS std (ours, splits×n)": std_over(q.is_std, q.is_splits, q.is_split_n),
                    "IS (paper)": float(row[PAPER000.is_mean].iloc[0]),
                    "IS std (paper)": float(row[PAPER000.is_std].iloc[0]),
                    "network": q.features,
                    "n": q.n,
                    "classes": class_set(q),
                    "differences from the paper's protocol": _protocol_differences(r, q),
                }
            )
        if ours:
            lines.append("**Our runs beside them**\n")
            lines.append(markdown_table(pd.DataFrame(ours)))
    for entry in STRATEGIES:
        speedups = baselines / entry.speedups_baseline if entry.speedups_baseline else None
        if speedups is not None and speedups.is_file() and any(r.strategy == entry.name for r in records):
            lines.append(f"**Paper 001, {entry.name} training speedups on MNIST (paper's summary table)**\n")
            shown_speedups = [PAPER001.grid, PAPER001.single_core_min, PAPER001.distributed_min, PAPER001.speedup]
            lines.append(markdown_table(read_baseline(speedups)[shown_speedups]))
    return lines


def quality_over_time_section(records: list[Record], out_dir: Path, results_dir: Path | None = None) -> Section:
    """Quality, losses and samples over training time (the samples where ``results_dir`` has the run folders), drawn
    into ``out_dir``, and each run's time to the target."""
    timed = [(r, r.time_to_target) for r in records if r.status == "ok" and r.time_to_target is not None]
    plots = plot_quality_curves(records, out_dir) + plot_losses(records, out_dir)
    if results_dir is not None:
        plots += plot_samples_over_time(records, results_dir, out_dir)
    if not plots and not timed:
        return Section()
    lines = ["## Quality over training time\n"]
    tables = {}
    lines += [f"![{name.removesuffix('.png')}]({name})\n" for name in plots]
    if timed:
        t = timed[0][1]
        rows = [
            {
                "run_id": r.run_id,
                "procs": r.procs,
                "reached": target.reached,
                "time_to_target_s": target.clock_s,
                "clock_lo": target.clock_lo,
                "clock_hi": target.clock_hi,
                "step": target.step,
                "best": target.best,
                "points": target.points,
            }
            for r, target in timed
        ]
        table = pd.DataFrame(rows)
        tables["time_to_target.csv"] = table
        lines.append(
            f"Time to {cell(str(t.metric).upper())} <= {t.target:g} ({cell(t.features)}, n={t.n}): training-window "
            "seconds, interpolated (linear in the log score) between the curve points that bracket the first "
            "crossing, whose clocks are `clock_lo` and `clock_hi` (the curve's spacing is its resolution, and the "
            "headline's interval carries it; evaluation pauses are not counted).\n"
        )
        lines.append(details("Time to target, every run", markdown_table(table)))
    return Section(lines, tables)


def quality_section(records: list[Record]) -> Section:
    """Every score per ruler: over seeds, and per run."""
    lines = ["## Image quality\n"]
    quality = quality_tables(records)
    if not quality:
        return Section(lines + ["_No run recorded image quality (metrics disabled or all runs failed)._\n"])
    tables = {}
    for net, (scores, _) in quality.items():
        slug = file_part(net)
        tables[f"quality_{slug}.csv"] = scores
        detail = next(
            (r.quality.features_detail for r in records if r.quality is not None and r.quality.features == net.split(" ")[0]),
            None,
        )
        dims = scores["feature_dim"].dropna()
        digests = sorted({d for d in scores[COL.ruler_sha256] if isinstance(d, str)})
        lines.append(
            f"### Ruler `{cell(net)}`\n\n{cell(detail)}"
            + (f"; {int(dims.iloc[0])} feature dimensions" if len(dims) else "")
            + (f"; weights sha256 `{cell(digests[0])}`" if len(digests) == 1 else "")
            + ".\n"
        )
        lines.append(
            f"**Every score below: ruler `{cell(scores['ruler'].iloc[0])}`, protocol `{cell(scores[COL.protocol].iloc[0])}`, "
            f"{cell(scores['comparability'].iloc[0])}.**\n"
        )
        summary = quality_over_seeds(scores)
        tables[f"quality_over_seeds_{slug}.csv"] = seeds_csv(
            summary.drop(columns=[c for c in summary.columns if c.startswith("_")])
        )
        lines.append(
            "Over seeds (each seed a separate training draw): geometric mean [95 % interval] (n seeds); label_acc: "
            "arithmetic mean. The `*_estimate` columns of the CSV hold the same. "
            f"Per-seed values follow, and are in the CSVs. {KID_UNITS}\n"
        )
        shown = summary[["config", COL.scaling, COL.procs, "seeds"]].copy()
        for field, title in SEED_METRICS.items():
            shown[title] = summary[f"_{field}_text"]
        lines.append(markdown_table(shown))
        lines.append(details("Per run (each seed)", markdown_table(_quality_display(scores))))
        for note in sorted({n for n in scores["is_note"] if isinstance(n, str)}):
            lines.append(f"IS n/a: {cell(note)}.\n")
        for run_id, note in zip(scores[COL.run_id], scores["fid_note"]):
            if isinstance(note, str):
                lines.append(f"FID n/a for {cell(run_id)}: {cell(note)}.\n")
    return Section(lines, tables)


def per_class_section(records: list[Record]) -> Section:
    """Each class's score per ruler and grouping basis; where FID is withheld (too few samples per class for the
    feature dimensions, KID instead), one sentence says so for all those rows rather than a note on each."""
    lines: list[str] = []
    tables = {}
    for net, (_, per_class) in quality_tables(records).items():
        slug = file_part(net)
        for field, basis in PER_CLASS_BASES.items():
            table = per_class[field]
            if table.empty:
                continue
            tables[f"{field}_{slug}.csv"] = table
            lines.append(f"## Ruler {code_span(net)}, by {basis}\n")
            withheld = table[PC.metric].eq("kid") & table[PC.fid].isna()
            if withheld.any():
                lines.append(
                    f"FID is withheld on {int(withheld.sum())} of {len(table)} rows (metric `kid`): their generated or real "
                    "samples are not both above the ruler's feature dimensions, so FID would be biased; KID stands in. "
                    "The CSV keeps each row's note.\n"
                )
            table = table.assign(
                KID=[_score(m) for m in table[PC.kid_mean]],
                KID_std=[std_over(s) for s in table[PC.kid_std]],
                note=["" if gone or not isinstance(note, str) else note for gone, note in zip(withheld, table[PC.note])],
            )
            columns = [PC.run_id, PC.class_, PC.n, PC.n_real, PC.metric, PC.fid, "KID", "KID_std", PC.note]
            kept = {PC.fid: table[PC.fid].notna().any(), PC.note: table[PC.note].astype(bool).any()}
            columns = [c for c in columns if kept.get(c, True)]
            lines.append(markdown_table(table[columns].rename(columns={"KID_std": "KID std (subsets)"})))
    return Section(lines, tables)
