"""``suite tune RESULTS``: the one tuning protocol of every system, from the runs of a sweep (docs/tuning.md).

A *system* is a strategy / loss / engine [label] at a process count, whatever its swept settings (the records'
``sweep``). Each system's settings are ranked as docs/tuning.md says: settings with every run scored first, then by
mean end FID over the tuning seeds under one ruler, ties to the setting listed first. The first is the system's
chosen setting, written as the overrides to paste into its run entry (``chosen.yaml``), beside ``tuning.md`` and
``tuning.csv`` (every setting with its per-seed FIDs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from ..config.escape import code_span, csv_text
from ..config.sweep import overrides_of, sweep_text
from ..records.nofollow import output_folder
from ..records.record import Record
from ..records.results import atomic_write_text, read_records
from .estimand import end_fid, late_score
from .markdown import fmt, markdown_table
from .systems import procs_of, ruler_text, system_name

TUNING_MD, TUNING_CSV, CHOSEN_YAML = "tuning.md", "tuning.csv", "chosen.yaml"


@dataclass
class Setting:
    """One combination of a system's swept values and what its runs scored."""

    values: dict[str, Any]
    order: int
    """Its position in the sweep (ties go to the lowest)."""
    fids: dict[Any, list[float]] = field(default_factory=dict)
    """Seed -> the final FIDs of its runs (several with repeats)."""
    problems: list[str] = field(default_factory=list)
    """Runs that count as worst: ``seed 11: diverged at step 12 ...``."""

    def seed_fids(self, seeds: list[Any]) -> list[float | None]:
        """The FID of each seed (the mean of its repeats), None where it has none."""
        return [float(np.mean(self.fids[s])) if self.fids.get(s) else None for s in seeds]

    @property
    def mean(self) -> float | None:
        """Mean FID over the seeds that have one."""
        scored = [float(np.mean(v)) for v in self.fids.values() if v]
        return float(np.mean(scored)) if scored else None

    @property
    def std(self) -> float | None:
        """Standard deviation of the seeds' FIDs (None with fewer than two)."""
        scored = [float(np.mean(v)) for v in self.fids.values() if v]
        return float(np.std(scored, ddof=1)) if len(scored) > 1 else None

    def rank_key(self) -> tuple[int, float]:
        """What ranks settings: runs that count as worst, then mean FID (the sweep's order breaks ties)."""
        return len(self.problems), self.mean if self.mean is not None else math.inf


@dataclass
class SystemTuning:
    """One system's settings, ranked best first."""

    name: str
    strategy: str
    loss: str
    engine: str
    label: str | None
    procs: int
    ruler: str | None
    seeds: list[Any]
    settings: list[Setting]

    @property
    def chosen(self) -> Setting:
        return self.settings[0]

    def edges(self) -> list[str]:
        """Each swept numeric field whose chosen value is the smallest or largest the grid tried (of two or more):
        the optimum may lie outside the grid, which should be extended there (``train.lr: the largest swept, 0.003``)."""
        out = []
        for key, value in self.chosen.values.items():
            tried = sorted({v for s in self.settings for k, v in s.values.items() if k == key and _number(v)})
            if len(tried) < 2 or not _number(value):
                continue
            if value == tried[0]:
                out.append(f"{key}: the smallest swept, {value:g}")
            elif value == tried[-1]:
                out.append(f"{key}: the largest swept, {value:g}")
        return out

    @property
    def tied(self) -> bool:
        """Whether the runner-up ranks equal to the chosen setting (the sweep's order decided)."""
        return len(self.settings) > 1 and self.settings[1].rank_key() == self.chosen.rank_key()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def balance(systems: list[SystemTuning]) -> list[str]:
    """What makes the tuning unequal between systems: different numbers of settings, or of seeds per setting."""
    out = []
    counts = {s.name: len(s.settings) for s in systems}
    if len(set(counts.values())) > 1:
        out.append("systems got different numbers of settings: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    seeds = {s.name: len(s.seeds) for s in systems}
    if len(set(seeds.values())) > 1:
        out.append("systems got different numbers of seeds: " + ", ".join(f"{k} {v}" for k, v in seeds.items()))
    return out


def _problem(record: Record) -> str | None:
    """Why a run counts as worst (None: it has a final FID)."""
    status = record.status
    if status != "ok":
        reason = str(record.reason or record.error or "no reason recorded").splitlines()[0][:160]
        return reason if reason.startswith(str(status)) else f"{status}: {reason}"
    quality = record.quality
    if quality is None or quality.fid is None:
        why = (quality.not_scorable or quality.fid_note if quality is not None else None) or "not scored (metrics.enabled off?)"
        return f"no FID: {why}"
    return None


def _fid(record: Record) -> float | None:
    """The FID a setting is ranked by: the record's end FID (:func:`suite.analysis.estimand.end_fid`, the estimand the
    main job's verdicts compare), else its late FID (:func:`suite.analysis.estimand.late_score`; runs that kept no EMA
    generator), else its final FID where its curve has too few points for one; None where it has none."""
    end = end_fid(record)
    if end is not None:
        return end
    late = late_score(record)
    if late is not None:
        return late
    return record.quality.fid if record.quality is not None else None


def tune(records: list[Record]) -> list[SystemTuning]:
    """Each system's settings ranked by the protocol above; :class:`ValueError` in one line where it cannot be applied."""
    groups: dict[tuple[str, int, str], list[Record]] = {}
    for record in records:
        groups.setdefault((system_name(record), procs_of(record), record.scaling or "strong"), []).append(record)
    if not any(_problem(r) is None for r in records):
        raise ValueError("no run has a final FID to rank by: tune runs with metrics.enabled, and look at why they failed")
    return [_system(name, procs, scaling, groups[(name, procs, scaling)]) for name, procs, scaling in sorted(groups)]


def _system(name: str, procs: int, scaling: str, runs: list[Record]) -> SystemTuning:
    rulers = sorted({ruler_text(r.quality) for r in runs if r.quality is not None and r.quality.fid is not None})
    if len(rulers) > 1:
        raise ValueError(
            f"{name} at P={procs}: its runs were scored under different rulers ({'; '.join(rulers)}); tune under one"
        )
    seeds = sorted({r.seed for r in runs}, key=str)
    settings: dict[str, Setting] = {}
    ran: dict[str, set[Any]] = {}  # the seeds each setting has a run of
    for record in sorted(runs, key=lambda r: (r.sweep_order or 0, r.run_id or "")):
        values = record.sweep or {}
        key = json.dumps(values)
        setting = settings.setdefault(key, Setting(values, record.sweep_order or 0))
        ran.setdefault(key, set()).add(record.seed)
        problem = _problem(record)
        fid = _fid(record)
        if problem is None and fid is not None:  # no problem: it has a final FID
            setting.fids.setdefault(record.seed, []).append(float(fid))
        else:
            setting.problems.append(f"seed {record.seed} ({record.run_id}): {problem}")
    for key, setting in settings.items():
        setting.problems += [f"seed {seed}: no run" for seed in seeds if seed not in ran[key]]
    first = runs[0]
    ranked = sorted(settings.values(), key=lambda s: (*s.rank_key(), s.order))
    suffix = "" if scaling == "strong" else f" ({scaling})"
    return SystemTuning(
        name + suffix,
        str(first.strategy),
        str(first.loss),
        str(first.engine),
        first.label,
        procs,
        rulers[0] if rulers else None,
        seeds,
        ranked,
    )


# --- writing ------------------------------------------------------------------------------------------------


def _setting_text(setting: Setting) -> str:
    return sweep_text(setting.values) or "(not swept)"


def tuning_table(systems: list[SystemTuning]) -> pd.DataFrame:
    """Every setting of every system: its swept values, per-seed FIDs, mean, rank, and what counted as worst."""
    fields = list(dict.fromkeys(key for s in systems for setting in s.settings for key in setting.values))
    seeds = list(dict.fromkeys(seed for s in systems for seed in s.seeds))
    rows = []
    for system in systems:
        for rank, setting in enumerate(system.settings, 1):
            per_seed = dict(zip(system.seeds, setting.seed_fids(system.seeds)))
            rows.append(
                {
                    "system": system.name,
                    "procs": system.procs,
                    "rank": rank,
                    "chosen": rank == 1,
                    "setting": _setting_text(setting),
                    **{key: setting.values.get(key) for key in fields},
                    **{f"fid_s{seed}": per_seed.get(seed) for seed in seeds},
                    "mean_fid": setting.mean,
                    "std_fid": setting.std,
                    "worst_runs": len(setting.problems),
                    "problems": "; ".join(setting.problems) or None,
                    "ruler": system.ruler,
                }
            )
    table = pd.DataFrame(rows)
    for key in fields:  # the values as given (an n_critic stays an integer beside the rows without it)
        table[key] = pd.Series([row[key] for row in rows], dtype=object)
    return table


def chosen_yaml(systems: list[SystemTuning], source: str) -> str:
    """``chosen.yaml``: per system, the chosen overrides to paste into its run entry."""
    entries = [
        {
            "system": s.name,
            "strategy": s.strategy,
            "loss": s.loss,
            "engine": s.engine,
            "label": s.label,
            "procs": s.procs,
            "mean_fid": None if s.chosen.mean is None else round(s.chosen.mean, 2),
            "seeds": s.seeds,
            "overrides": overrides_of(s.chosen.values),
        }
        for s in systems
    ]
    header = (
        f"# Chosen by `suite tune {source}`: each system's setting with the lowest mean end FID over the tuning seeds\n"
        "# (docs/tuning.md). Paste a system's overrides into its run entry, e.g.\n"
        "#   - {strategy: conditional, engine: horovod, procs: [2], train: {lr: 0.001}}\n"
    )
    return header + str(yaml.safe_dump({"systems": entries}, sort_keys=False, default_flow_style=None))


def tuning_markdown(systems: list[SystemTuning], source: str, scenario: str, runs: int) -> list[str]:
    """``tuning.md``: the protocol, the chosen settings, and every system's ranking."""
    seeds = sorted({seed for s in systems for seed in s.seeds}, key=str)
    lines = [
        f"# Tuning: {scenario}\n",
        f"From {code_span(source)} ({runs} runs) by `suite tune`. Each system (strategy / loss / engine [label] at P) ranks its "
        f"swept settings by the mean end FID (the FID of the run's EMA generator at the end of the budget; where a run kept none, the late FID, the geometric mean of FID over the last half of the budget; the final FID where a run has too few curve points) over the tuning seeds ({', '.join(map(str, seeds))}), under the one ruler "
        "its runs were scored with. A setting with a run that failed, diverged, could not be scored or is missing ranks "
        "below every fully scored one (it counts as worst, and is named); equal ranks go to the setting listed first "
        "in the sweep. The best is the chosen setting; `chosen.yaml` holds it as the overrides of a run entry.\n",
        "With a few seeds per setting, a difference smaller than the seeds' spread (`std`) is not a finding: the pick "
        "follows the protocol, so that every system is tuned alike; it does not claim that one setting is better.\n",
    ]
    unequal = balance(systems)
    lines.append(
        f"**Equal tuning**: {'; '.join(unequal)}.\n"
        if unequal
        else f"**Equal tuning**: every system got {len(systems[0].settings)} settings and {len(systems[0].seeds)} seeds "
        "per setting.\n"
    )
    at_edge = [f"{s.name}: {', '.join(s.edges())}" for s in systems if s.edges()]
    lines.append(
        "**At the edge** (the best setting is the grid's smallest or largest value: the optimum may lie outside the "
        f"grid, which should be extended): {'; '.join(at_edge)}.\n"
        if at_edge
        else "**Bracketed**: every system's best setting is inside its grid.\n"
    )
    lines.append("## Chosen settings\n")
    summary = pd.DataFrame(
        [
            {
                "system": s.name,
                "P": s.procs,
                "chosen": _setting_text(s.chosen),
                "mean FID": s.chosen.mean,
                "std": s.chosen.std,
                "runner-up": _setting_text(s.settings[1]) if len(s.settings) > 1 else None,
                "its mean FID": s.settings[1].mean if len(s.settings) > 1 else None,
                "note": _note(s),
            }
            for s in systems
        ]
    )
    lines.append(markdown_table(summary))
    for s in systems:
        lines.append(f"## {s.name}, P={s.procs}\n")
        lines.append(f"Ruler: {s.ruler or 'none (no run scored)'}.\n")
        table = pd.DataFrame(
            [
                {
                    "rank": rank,
                    "setting": _setting_text(setting),
                    **{f"FID s{seed}": fid for seed, fid in zip(s.seeds, setting.seed_fids(s.seeds))},
                    "mean": setting.mean,
                    "std": setting.std,
                    "counts as worst": "; ".join(setting.problems) or "",
                }
                for rank, setting in enumerate(s.settings, 1)
            ]
        )
        lines.append(markdown_table(table))
    return lines


def _note(system: SystemTuning) -> str:
    if len(system.settings) == 1:
        return "one setting: nothing to choose"
    notes = []
    if system.chosen.problems:
        notes.append(f"every setting has a run that counts as worst; chosen: the fewest ({len(system.chosen.problems)})")
    elif system.tied:
        notes.append(f"tied with the runner-up (mean FID {fmt(system.chosen.mean)}): the first listed is chosen")
    if system.edges():
        notes.append("at the edge: " + "; ".join(system.edges()))
    return "; ".join(notes)


def write_tuning(results: Path, out_dir: Path) -> Path:
    """Write ``tuning.md``, ``tuning.csv`` and ``chosen.yaml`` for the runs of ``results`` into ``out_dir``."""
    records = read_records(results)
    systems = tune(records)
    scenario = records[0].scenario or Path(results).name
    with output_folder(out_dir):  # never a link at out_dir, nor in it; nobody else may write there (records.nofollow)
        atomic_write_text(out_dir / TUNING_CSV, csv_text(tuning_table(systems)))  # sweep keys are anyone's
        atomic_write_text(out_dir / CHOSEN_YAML, chosen_yaml(systems, str(results)))
        path = out_dir / TUNING_MD
        atomic_write_text(path, "\n".join(tuning_markdown(systems, str(results), scenario, len(records))))
    return path
