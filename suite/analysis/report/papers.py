"""The papers the suite reproduces (:data:`PAPERS`): each one's setting, its printed numbers beside the suite's and
its claims, judged on the suite's runs (``suite papers`` writes one page per paper, :mod:`.paper_pages`).

Runs belong to a paper by their scenario's name (``paper000-...`` to ``paper003-...``; records made under the old
names, ``seed000-...``, count too: :data:`suite.config.names.RENAMED_PREFIXES`). A claim is ``holds``, ``does not
hold`` or ``cannot be judged at this scale`` (:mod:`.paper_verdicts`: Welch's test over seeds for "A beats B", the
95 % interval for a scaling claim, at least :data:`~.paper_verdicts.MIN_DRAWS` runs per arm and every system of a
quality claim learned). What users read: docs/reports.md (The papers' numbers beside the suite's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import pandas as pd

from ...config.registry import STRATEGIES
from ...records.record import DatasetInfo, Record
from ...records.scored import Quality
from ..baselines import PAPER000, PAPER001, PAPER003, read_baseline
from ..stats.speedup import efficiency, speedup
from ..stats.summary import Summary
from ..strategy_fields import cellular_fields
from .paper_verdicts import (
    FAILS,
    HOLDS,
    MIN_DRAWS,
    UNJUDGED,
    Score,
    Verdict,
    better,
    fid_score,
    is_score,
    judged_if_learned,
    ok_runs,
    runs_score_summary,
    summary_words,
    tvd_score,
    untrained_fid_score,
)

FLAT_EFFICIENCY = 0.9
"""Weak-scaling efficiency at or above which the time counts as "not affected" by the processes (paper 000, 3.7)."""


@dataclass(frozen=True)
class Claim:
    """One statement of a paper and how the suite's runs judge it."""

    text: str
    """The claim, with where the paper makes it."""
    judge: Callable[[list[Record]], Verdict]


PAPER_NAME = "paper {}"
"""The papers' one name in prose, pages and plots: ``paper 000`` to ``paper 003`` ("seed" is a random seed)."""
PAPER_KEY_PREFIX = "paper"
"""The prefix of a paper's key (``paper000``), as its scenarios and report folders are named."""


@dataclass(frozen=True)
class PaperSetting:
    """The paper's own settings that a run's may differ from (None: the paper does not fix it)."""

    dataset: str | None = None
    image_size: int | None = None
    features: str | None = None
    """The ruler its scores were measured with; a run's ``quality.features`` starting with it is the same."""
    epochs: int | None = None
    iterations: int | None = None
    training: str | None = None
    """How long the paper trained, in words (``1000 epochs``)."""


@dataclass(frozen=True)
class Paper:
    """A paper: its title, the setting its numbers come from, its printed numbers beside ours, its claims."""

    key: str
    title: str
    setting: PaperSetting
    numbers: Callable[[list[Record], Path, PaperSetting], pd.DataFrame]
    claims: tuple[Claim, ...]
    printed: str | None = None
    """The ``baselines/`` file of what the paper prints (None: it prints no number the suite measures)."""
    run_with: str = "make papers"
    """The command that runs its reduced scenarios here."""

    @property
    def name(self) -> str:
        """What every page, plot and doc calls it: ``paper 000`` (``key`` ``paper000`` names its scenarios and folders)."""
        return PAPER_NAME.format(self.key.removeprefix(PAPER_KEY_PREFIX))


def _model_runs(records: list[Record], model: str) -> list[Record]:
    """The scored runs of paper 000's ``model`` (the strategy entry's ``paper_models`` trait) over all the classes."""
    return [r for r in ok_runs(records) if r.quality is not None and paper_model(r) == model and _all_classes(r)]


def _all_classes(r: Record) -> bool:
    q = r.quality or Quality()
    return not q.classes or len(q.classes) == (q.num_classes if q.num_classes is not None else len(q.classes))


def setting_differences(r: Record, setting: PaperSetting) -> str:
    """``same setting``, or what a run's settings differ in from the paper's (``setting``)."""
    settings = r.settings or {}  # the run's whole settings, as the record keeps them
    dataset = r.dataset or DatasetInfo()
    quality = r.quality or Quality()
    found = []
    if setting.dataset and dataset.name != setting.dataset:
        found.append(f"{dataset.name} at {dataset.image_size}px, not {setting.dataset}")
    elif setting.image_size and dataset.image_size != setting.image_size:
        found.append(f"{dataset.image_size}px, not {setting.image_size}px")
    features = quality.features
    if setting.features and features and not features.startswith(setting.features):
        found.append(f"scored with {features}, not {setting.features}")
    if r.budget_images:
        found.append(f"an equal budget of {r.budget_images:,} images, not {setting.training or 'the length the paper trained'}")
    elif r.budget_s:
        found.append(f"a budget of {r.budget_s:g} s")
    elif setting.epochs and r.epochs != setting.epochs:
        steps = (settings.get("train") or {}).get("steps")
        found.append((f"{steps} steps" if steps else f"{r.epochs} epochs") + f", not {setting.epochs} epochs")
    iterations = cellular_fields(r).iterations
    if setting.iterations and iterations and iterations != setting.iterations:
        found.append(f"{iterations} iterations, not {setting.iterations}")
    return "same setting" if not found else "; ".join(found)


def _first(records: list[Record]) -> Record:
    return records[0] if records else Record()


# --- paper 000 ------------------------------------------------------------------------------------------------

SEED000_MODELS = ("DC-GAN", "DC-CGAN", "Distributed DC-CGAN")


def _paper000_numbers(records: list[Record], baselines: Path, setting: PaperSetting) -> pd.DataFrame:
    paper = read_baseline(baselines / "paper000_inception_scores.csv")
    rows = []
    for model in SEED000_MODELS:
        runs = _model_runs(records, model)
        if not runs:
            continue
        found = _first(runs).dataset
        dataset = found.name if found is not None else None
        printed = paper[
            (paper[PAPER000.model] == model)
            & (paper[PAPER000.dataset] == (dataset if dataset in set(paper[PAPER000.dataset]) else "mnist"))
        ]
        row = printed.iloc[0]
        rows.append(
            {
                "model": model,
                "dataset": dataset,
                "IS (suite, over seeds)": summary_words(runs_score_summary(runs, is_score)),
                "IS (paper)": f"{row[PAPER000.is_mean]} ± {row[PAPER000.is_std]} ({row[PAPER000.dataset]})",
                "where": row[PAPER000.table],
                "setting": setting_differences(_first(runs), replace(setting, dataset=row[PAPER000.dataset])),
            }
        )
    return pd.DataFrame(rows)


def _is_order(upper: str, lower: str) -> Callable[[list[Record]], Verdict]:
    def judge(records: list[Record]) -> Verdict:
        arms = {name: _model_runs(records, name) for name in (upper, lower)}
        return judged_if_learned(
            arms, better(runs_score_summary(arms[upper], is_score), runs_score_summary(arms[lower], is_score), False, "IS")
        )

    return judge


def paper_model(r: Record) -> str | None:
    """The papers' model a run reproduces (its strategy entry's ``paper_models`` trait), if any."""
    entry = STRATEGIES[r.strategy] if r.strategy is not None and r.strategy in STRATEGIES else None
    return entry.paper_models.get(r.loss if r.loss is not None else "") if entry is not None else None


def _procs(r: Record) -> int:
    """A run's processes (every record read has them: :data:`suite.records.codec.IDENTITY`)."""
    if r.procs is None:
        raise KeyError("procs")
    return r.procs


def _grid(r: Record) -> tuple[int, ...]:
    """A cellular run's grid (rows, columns); empty for a run without one."""
    return tuple(r.grid or ())


def _weak_flat(records: list[Record]) -> Verdict:
    weak = [r for r in ok_runs(records) if r.scaling == "weak" and paper_model(r) == "Distributed DC-CGAN"]
    procs = sorted({_procs(r) for r in weak})
    if len(procs) < 2 or procs[0] != 1:
        return UNJUDGED, "no weak sweep from one process here (run the timing scenario, `make papers-timing`)"
    if any(r.oversubscribed for r in weak):
        return UNJUDGED, "the sweep's largest point had more processes than cores"
    top = procs[-1]
    e = efficiency([r for r in weak if r.procs == 1], [r for r in weak if r.procs == top], top, "weak")
    return _at_least(e, FLAT_EFFICIENCY, f"weak-scaling efficiency T(1)/T({top})")


def _at_least(value: Summary | None, floor: float, what: str) -> Verdict:
    if value is None:
        return UNJUDGED, f"{what} not measured"
    interval = value.interval
    evidence = f"{what} = {value.text()}, against {floor:g}"
    if min(value.ns) < MIN_DRAWS:
        return UNJUDGED, f"{evidence}: fewer than {MIN_DRAWS} runs at an end"
    if interval is None:
        return UNJUDGED, f"{evidence}: one draw at an end, no interval"
    if interval[0] >= floor:
        return HOLDS, evidence
    if interval[1] < floor:
        return FAILS, evidence
    return UNJUDGED, f"{evidence}: the interval straddles it"


# --- paper 001 ------------------------------------------------------------------------------------------------


def _grid_speedups(records: list[Record]) -> dict[str, tuple[int, Summary | None]]:
    """Each grid's speedup of its most processes over one process: grid -> (processes, speedup)."""
    cellular = [r for r in ok_runs(records) if r.grid and r.scaling == "strong"]
    out = {}
    for grid in sorted({_grid(r) for r in cellular}, key=lambda g: (g[0] * g[1], g)):
        runs = [r for r in cellular if _grid(r) == grid]
        top = max(_procs(r) for r in runs)
        if top == 1:
            continue
        out[f"{grid[0]}x{grid[1]}"] = (
            top,
            speedup([r for r in runs if r.procs == 1], [r for r in runs if r.procs == top], top),
        )
    return out


def _paper001_numbers(records: list[Record], baselines: Path, setting: PaperSetting) -> pd.DataFrame:
    paper = read_baseline(baselines / "paper001_cellular_speedups.csv").set_index(PAPER001.grid)
    rows = []
    for grid, (procs, s) in _grid_speedups(records).items():
        cells = math.prod(int(v) for v in grid.split("x"))
        run = _first([r for r in ok_runs(records) if r.grid and "x".join(map(str, r.grid)) == grid])
        what = setting_differences(run, setting)
        if procs != cells:
            what = ("" if what == "same setting" else what + "; ") + f"{procs} processes for {cells} cells"
        if r_oversubscribed(records, grid):
            what += "; oversubscribed (more processes than cores)"
        rows.append(
            {
                "grid": grid,
                "processes": procs,
                "speedup (suite)": summary_words(s),
                "speedup (paper)": paper.loc[grid, PAPER001.speedup] if grid in paper.index else "none printed (2x2 to 4x4 only)",
                "where": paper.loc[grid, PAPER001.table] if grid in paper.index else "",
                "setting": what,
            }
        )
    return pd.DataFrame(rows)


def r_oversubscribed(records: list[Record], grid: str) -> bool:
    """Whether a run of ``grid`` had more processes than cores."""
    return any(r.oversubscribed for r in ok_runs(records) if r.grid and "x".join(map(str, r.grid)) == grid)


def _speedup_grows(records: list[Record]) -> Verdict:
    measured = {g: s for g, (p, s) in _grid_speedups(records).items() if s is not None and not r_oversubscribed(records, g)}
    if len(measured) < 2:
        return UNJUDGED, "fewer than two grids with a measured speedup on enough cores"
    ordered = list(measured.items())
    evidence = ", ".join(f"{g}: {s.text(2)}" for g, s in ordered)
    verdicts = [better(b, a, False, "")[0] for (_, a), (_, b) in zip(ordered, ordered[1:])]
    if all(v == HOLDS for v in verdicts):
        return HOLDS, evidence
    if any(v == FAILS for v in verdicts):
        return FAILS, evidence
    return UNJUDGED, f"{evidence}: not separated beyond the repeats' spread"


def _superlinear(records: list[Record]) -> Verdict:
    """Speedup above the processes (one cell each) for the grids measured."""
    found = []
    for grid, (procs, s) in _grid_speedups(records).items():
        if procs == math.prod(int(v) for v in grid.split("x")) and not r_oversubscribed(records, grid):
            found.append(_at_least(s, float(procs), f"{grid} speedup"))
    if not found:
        return UNJUDGED, "no grid measured with one cell per process on enough cores"
    verdicts = {v for v, _ in found}
    verdict = HOLDS if verdicts == {HOLDS} else FAILS if FAILS in verdicts else UNJUDGED
    return verdict, "; ".join(e for _, e in found)


SEED002_MODELS = ("W-CGAN", "Distributed DC-CGAN")
"""Paper 002's per-class W-CGANs and the per-class DC-CGANs of paper 000 they improve on."""


# --- paper 002 ------------------------------------------------------------------------------------------------


def _paper002_numbers(records: list[Record], baselines: Path, setting: PaperSetting) -> pd.DataFrame:
    rows = []
    for name in SEED002_MODELS:
        runs = _model_runs(records, name)
        if runs:
            rows.append(
                {
                    "model": name,
                    "FID (suite)": summary_words(runs_score_summary(runs, fid_score)),
                    "IS (suite)": summary_words(runs_score_summary(runs, is_score)),
                    "paper": "none: the paper's text (the abstract) prints no IS or FID",
                    "setting": setting_differences(_first(runs), setting),
                }
            )
    return pd.DataFrame(rows)


def _wcgan_better(records: list[Record]) -> Verdict:
    w, d = (_model_runs(records, name) for name in SEED002_MODELS)
    fid = better(runs_score_summary(w, fid_score), runs_score_summary(d, fid_score), True, "FID")
    inception = better(runs_score_summary(w, is_score), runs_score_summary(d, is_score), False, "IS")
    verdicts = {fid[0], inception[0]}
    verdict = HOLDS if verdicts == {HOLDS} else FAILS if FAILS in verdicts else UNJUDGED
    return judged_if_learned(dict(zip(SEED002_MODELS, (w, d))), (verdict, f"{fid[1]}; {inception[1]}"))


# --- paper 003 ------------------------------------------------------------------------------------------------


def _grid_runs(records: list[Record]) -> dict[str, list[Record]]:
    runs: dict[str, list[Record]] = {}
    for r in ok_runs(records):
        if r.grid and r.quality is not None:
            runs.setdefault("x".join(map(str, r.grid)), []).append(r)
    return dict(sorted(runs.items(), key=lambda kv: math.prod(int(v) for v in kv[0].split("x"))))


def _paper003_numbers(records: list[Record], baselines: Path, setting: PaperSetting) -> pd.DataFrame:
    paper = read_baseline(baselines / "paper003_fid.csv")
    mnist = paper[paper[PAPER003.dataset] == "mnist"].set_index(PAPER003.grid)
    rows = []
    for grid, runs in _grid_runs(records).items():
        printed = mnist.loc[grid] if grid in mnist.index else None
        rows.append(
            {
                "grid": grid,
                "FID of the mixture (suite)": summary_words(runs_score_summary(runs, fid_score)),
                "TVD (suite)": summary_words(runs_score_summary(runs, tvd_score)),
                "untrained FID (suite)": summary_words(runs_score_summary(runs, untrained_fid_score)),
                "FID (paper, MNIST)": f"{printed[PAPER003.statistic]} {printed[PAPER003.fid]}"
                if printed is not None
                else "none printed",
                "where": printed[PAPER003.table] if printed is not None else "Figure 3 (boxes, no values printed)",
                "setting": setting_differences(runs[0], setting),
            }
        )
    return pd.DataFrame(rows)


def _larger_grid(score: Score, what: str) -> Callable[[list[Record]], Verdict]:
    def judge(records: list[Record]) -> Verdict:
        grids = _grid_runs(records)
        if len(grids) < 2:
            return UNJUDGED, "fewer than two grids scored"
        (small, a), (large, b) = list(grids.items())[0], list(grids.items())[-1]
        verdict = better(runs_score_summary(b, score), runs_score_summary(a, score), True, f"{what} {large} against {small}:")
        return judged_if_learned({large: b, small: a}, verdict)

    return judge


# --- the papers ----------------------------------------------------------------------------------------------

PAPERS = {
    p.key: p
    for p in (
        Paper(
            "paper000",
            "Lupo Pasini et al., Scalable Balanced Training of Conditional GANs on Image Data",
            PaperSetting(features="inception", epochs=1000, training="1000 epochs", image_size=32),
            _paper000_numbers,
            (
                Claim(
                    "Distributed DC-CGANs score a higher IS than DC-CGANs (Tables 5, 9, 13, 17)",
                    _is_order("Distributed DC-CGAN", "DC-CGAN"),
                ),
                Claim(
                    "DC-CGANs score a higher IS than DC-GANs (Tables 9, 13, 17; about equal on MNIST, Table 5)",
                    _is_order("DC-CGAN", "DC-GAN"),
                ),
                Claim(
                    "Weak scaling: the wall-clock time is not affected by the classes and processes (section 3.7, Figure 4)",
                    _weak_flat,
                ),
            ),
            printed="paper000_inception_scores.csv",
            run_with="make papers (quality), make papers-timing (weak scaling, on a quiet machine)",
        ),
        Paper(
            "paper001",
            "Perez et al., Parallel/distributed implementation of cellular training for GANs",
            PaperSetting(dataset="mnist", iterations=200),
            _paper001_numbers,
            (
                Claim("The speedup grows with the grid: 8.53 (2x2), 13.65 (3x3), 15.17 (4x4) (summary table)", _speedup_grows),
                Claim("Superlinear speedup for 2x2 and 3x3: above the processes (Experimental evaluation)", _superlinear),
            ),
            printed="paper001_cellular_speedups.csv",
            run_with="make papers-timing (on a quiet machine)",
        ),
        Paper(
            "paper002",
            "Lupo Pasini and Yin, Stable Parallel Training of Wasserstein Conditional GANs",
            PaperSetting(features="inception", training="a fixed training time"),
            _paper002_numbers,
            (Claim("Per-class W-CGANs improve IS and FID over per-class DC-CGANs at a fixed budget (abstract)", _wcgan_better),),
        ),
        Paper(
            "paper003",
            "Schmiedlechner et al., Lipizzaner: A System That Scales Robust GAN Training",
            PaperSetting(dataset="mnist", iterations=200, features="Lipizzaner's MNIST classifier"),
            _paper003_numbers,
            (
                Claim("Larger grids give a lower FID on MNIST (section 4.1, Figure 3)", _larger_grid(fid_score, "FID")),
                Claim(
                    "Larger grids give a lower TVD, a more even class mix (section 4.1, Figure 4a)",
                    _larger_grid(tvd_score, "TVD"),
                ),
            ),
            printed="paper003_fid.csv",
        ),
    )
}
