"""``suite report RESULTS``: markdown, CSV and PNG from the run records of a results folder.

Every number in the report comes from the records it reads; where a number cannot be computed (no P=1 run for a
speedup, no GPU for utilisation, no logits for IS) the report says ``n/a`` and why, never a guess. What its pages
hold: docs/reports.md. The sections are built in :mod:`.sections` and :mod:`.quality` from the tables of
:mod:`.tables`; each returns what it shows (:class:`.section.Section`), laid out on pages by :mod:`.pages` and put
on disk by :mod:`.writer`.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ... import __version__
from ...config.escape import code_span, markdown_cell
from ...records.record import Record
from ...records.results import PROBE_FILE, iter_records, records_frame, staged_folder
from ...records.trusted import trusted_records
from ..columns import COL
from ..conditions import condition_warnings, not_learned_warnings
from ..findings import tested_findings
from ..findings_csv import findings_table
from ..headline import HeadlineRow, headline_rows
from ..markdown import cell
from ..outcomes import outcomes_section
from .diversity_view import fidelity_diversity_section
from .headline_view import first_page_headline, full_headline, headline_csv, warnings_section
from .machine_line import machine_lines
from .pages import Page, figures, figures_page, index_section, key_figures
from .quality import baseline_section, per_class_section, quality_over_time_section, quality_section
from .scaling_tables import scaling_table, sweep_warnings
from .section import Section
from .sections import (
    engine_section,
    environment_section,
    projection_section,
    runs_section,
    samples_section,
    scaling_section,
    scenario_lines,
    time_section,
)
from .tables import training_share_line
from .writer import write_first_page, write_pages

if TYPE_CHECKING:
    import pandas as pd

    from ..findings import Finding

log = logging.getLogger(__name__)

DEFAULT_BASELINES = (Path(__file__).resolve().parents[2] / "baselines_data").resolve()
"""The papers' numbers shipped with the package: ``suite/baselines_data``, in the checkout a link to ``baselines/`` (the
source of truth), in a wheel a copy of its CSVs (``pyproject.toml``'s package data), so that a pip install's report
shows them too."""

KEY_FIGURES = ("quality_vs_time", "speedup", "strong_time")
"""The figures the first page shows (by the start of their file name, in this order); every other is on a detail page."""
MOST_KEY_FIGURES = 3


def write_report(results_dir: Path, out_dir: Path, baselines: Path | None = None) -> Path:
    """Write ``report.md``, its detail pages, one CSV per table and the plots into ``out_dir``; return report.md's path.

    The files are written beside ``out_dir`` and moved in once all are complete (:func:`staged_folder`),
    so a report that fails half-way (a full disk) leaves the previous one as it was.
    """
    if not results_dir.is_dir():
        list(iter_records(results_dir))  # its one-line refusal, with the folder it may have meant
    selection = trusted_records(results_dir)  # only the records you wrote: others named in a warning, left out
    for line in selection.left_out + selection.set_aside:
        log.warning("%s", line)
    records = selection.records
    if not records:
        raise FileNotFoundError(f"{results_dir}: no result.json found; run `suite run SCENARIO --out {results_dir}` first")
    probe = results_dir / PROBE_FILE
    copy_probe = os.path.lexists(probe) and probe.resolve() != (out_dir / PROBE_FILE).resolve()
    with staged_folder(out_dir) as staging:
        first_page = _write_report_files(
            results_dir,
            records,
            staging,
            baselines,
            probe if copy_probe else None,
            [markdown_cell(line) for line in selection.left_out + selection.set_aside],  # names from anyone: data
        )
    return out_dir / first_page.relative_to(staging)


def _write_report_files(
    results_dir: Path,
    records: list[Record],
    out_dir: Path,
    baselines: Path | None,
    probe: Path | None,
    left_out: list[str],
) -> Path:
    frame = records_frame(records)
    baselines = baselines or DEFAULT_BASELINES
    ok_count = int((frame[COL.status] == "ok").sum())
    failed = int((~frame[COL.status].isin(("ok", "diverged"))).sum())
    scaling = {kind: scaling_table(frame, kind) for kind in ("strong", "weak")}
    rows = headline_rows(records, scaling)
    found = tested_findings(rows, records, scaling)
    warnings = left_out + not_learned_warnings(records) + sweep_warnings(frame) + condition_warnings(records)
    analysed = Analysed(results_dir, out_dir, baselines, records, frame, scaling, rows, found, warnings)
    pages = [Page(name, title, about, build(analysed)) for name, title, about, build in DETAIL_PAGES]
    pictures = figures(pages)
    pages.insert(
        -1,
        Page("figures", "Figures", "every figure of the report, with the page that explains it", Section(figures_page(pictures))),
    )
    written = write_pages(out_dir, pages)

    scenario = records[0].scenario if records[0].scenario is not None else results_dir.name
    lines = [f"# Benchmark report: {cell(scenario)}\n"]
    lines.append(
        f"Generated {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} by gan-scaling-suite {__version__} "
        f"from {code_span(results_dir)} ({len(records)} runs, {ok_count} ok). Words and columns: [Definitions](details/definitions.md).\n"
    )
    lines += machine_lines(records)
    lines += [line for line in [training_share_line(frame)] if line is not None]
    lines += first_page_headline(rows, found, records)
    diverse = fidelity_diversity_section(rows)
    lines += diverse.lines
    lines += warnings_section(warnings, failed)
    key = key_figures(pictures, KEY_FIGURES, MOST_KEY_FIGURES)
    if key:
        lines.append("## Key figures\n")
        lines += [f"![{alt}]({file})\n" for file, alt, _ in key]
    lines += index_section(written)
    tables = {"headline.csv": headline_csv(rows), "findings.csv": findings_table(found), **diverse.tables}
    return write_first_page(out_dir, Section(lines, tables), records, probe)


@dataclass(frozen=True)
class Analysed:
    """What the report's detail pages are written from: where the records and the report lie, the records, their flat
    table and scaling tables, the headline rows, the findings tested on them and the warnings."""

    results_dir: Path
    out_dir: Path
    baselines: Path
    records: list[Record]
    frame: pd.DataFrame
    scaling: dict[str, pd.DataFrame]
    headline: list[HeadlineRow]
    found: list[Finding]
    warnings: list[str]


DetailPage = tuple[str, str, str, Callable[[Analysed], Section]]
"""A detail page: its file name, its title, what it holds (in the index) and how its section is built."""

DETAIL_PAGES: tuple[DetailPage, ...] = (
    (
        "headline",
        "Headline in full",
        "every column, the checks, the findings and every warning",
        lambda a: Section(full_headline(a.headline, a.found, a.records, a.warnings)),
    ),
    (
        "quality",
        "Image quality",
        "every score per ruler, over seeds and per run; quality over training time and the time to the target",
        lambda a: quality_section(a.records) + quality_over_time_section(a.records, a.out_dir, a.results_dir),
    ),
    (
        "per-class",
        "Per-class scores",
        "each class's FID or KID, by generated label and by predicted class",
        lambda a: per_class_section(a.records),
    ),
    (
        "scaling",
        "Scaling",
        "strong and weak scaling, with speedup, efficiency and where efficiency went",
        lambda a: scaling_section(a.frame, a.scaling, a.out_dir),
    ),
    (
        "projection",
        "Projection",
        "the cost model fitted on these runs, validated, and projected past this machine",
        lambda a: projection_section(a.records, a.results_dir, a.out_dir, a.baselines),
    ),
    (
        "time",
        "Where the time goes",
        "wall time by phase, step times, FLOP/s, communication and GPU utilisation",
        lambda a: time_section(a.frame, a.records, a.out_dir),
    ),
    (
        "engines",
        "Engines",
        "each run's engine settings, the engine comparison and traces",
        lambda a: engine_section(a.records, a.results_dir, a.out_dir),
    ),
    (
        "papers",
        "Papers' numbers (not measured here)",
        "the papers' numbers beside ours, and where our protocol differs",
        lambda a: Section(baseline_section(a.baselines, a.records)),
    ),
    (
        "samples",
        "Samples",
        "each strategy's samples at its largest P, and every other run's",
        lambda a: samples_section(a.records, a.results_dir),
    ),
    (
        "environment",
        "Environment",
        "the machine and versions, what differs between runs, and the scenario",
        lambda a: environment_section(a.records) + Section(scenario_lines(a.results_dir)),
    ),
    (
        "runs",
        "Runs",
        "every run with its settings and status; failed, diverged and not learned runs",
        lambda a: runs_section(a.frame) + Section(outcomes_section(a.records)),
    ),
    ("definitions", "Definitions", "what every column and word of the report means", lambda a: Section([DEFINITIONS])),
)
"""The report's detail pages, in their order (their sections draw their figures into the report's folder)."""


DEFINITIONS = """## Definitions

- **headline**: one row per configuration (strategy / loss / engine) at the largest process count it ran (`P` lists
  them all), over its seeds and repeats: estimate [95 % interval] (n draws), as defined under *estimates*. `checks` states the equivalences verified on these very runs: *replicas
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
- **training window**: the training clock, from a barrier after set-up, as the warm-up begins, to a barrier after
  every rank's last training step: the warm-up (the first `train.warmup_steps` steps of every GAN, `warmup_s`) is
  inside it for every system. **train_s** is its length (the slowest rank's). The step times, their spread and
  split, the window's traffic and FLOP/s come from the timed steps after the warm-up. Set-up (engine, data,
  networks, broadcasts, engine wrappers, feature networks), finalize (gathers, hand-offs, the cellular ranking,
  saving) and scoring are timed apart (`setup_s`, `finalize_s`, `score_s`) and never enter speedup or efficiency;
  `wall_s` in runs.csv is the whole launch. Cellular iterations score mixtures inside the window (it is part of
  the algorithm). With `train.budget_s` every run's window is the budget, warm-up included (`budget_window_s` is
  what the warm-up left) and speedups compare images/s; with `train.budget_images` every run trains the same
  training images (`train_images`), warm-up included.
- **training and evaluation images**: `train_images` are the real images that reach a discriminator (critic)
  update, over all GANs (cells) and ranks, warm-up included (what `train.budget_images` charges; a cellular
  generator-only step, whose discriminators skip the batch, draws none); `eval_images` are those networks score
  without an update while training (cellular fitness and mixture evaluation). `steps_per_gan` counts one
  generator's steps, `generator_only_steps` those of them without a discriminator step.
- **contended**: the run's timings were taken on a busy host: processes outside the run kept busy more of the host's
  cores than the run left free, by more than 5 % of its cores, or CPU steal took more than 5 % of its CPU time,
  over the training clock (`host_load` in the record: `outside_cores`, `steal_share`, the 1-minute `load_avg` at
  its start and end). Its times, images/s and speedups measure the host too.
- **strong scaling**: the total problem is fixed (same data, epochs, global batch / class set / grid) while the
  number of processes P grows. Speedup S(P) = T(1)/T(P); efficiency E = S(P)/P. T(1) and T(P) are the geometric
  means of the runs at each end, and the headline and the scaling tables print the same S and E (one function).
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
  the same seed (timing varies with it).
- **estimates**: `estimate [lo, hi] (n=draws)`. Positive quantities (FID, KID, IS, times, images/s, time to target,
  speedup, efficiency) give the geometric mean and the 95 % Student-t interval of the mean of the log values,
  exponentiated: it is never below zero, and it is on the scale the tests use, so interval and verdict agree.
  `label_acc` gives the arithmetic mean, its interval clipped to [0, 1]; a KID with a draw at or below zero (the
  unbiased estimate can be) gives the arithmetic mean and its Student-t interval, unclipped (it may reach below 0,
  as the estimate may), and says `arithmetic mean`. A ratio (speedup, efficiency,
  `efficiency_work`) is the difference of the two ends' mean logs: its interval carries both ends' spread (the delta
  method, at the fewest degrees of freedom of either end, so never narrower than one end's own) and is given as `(n=a at P=1, b at P=2)`; where an end has one
  run its spread is unknown and the interval says `no interval`. Without a P=1 run a speedup is not computed
  (n/a). The scaling tables' `train_s` and `images_per_s` are the same estimate over the point's runs (their CSVs keep `_mean`
  and `_std` columns).
- **significant**: on each quantity a finding tests every pair of configurations, one family: Welch's t on the log
  values (unequal variances; a ratio's variance is both ends') at the fewest draws' degrees of freedom (the
  intervals' own), the p values Holm-corrected together at 5 %. It lists every estimate, says "A is significantly
  better than B" for each pair the test found different (with the adjusted p) and that the other pairs are not
  distinguishable; it never infers one pair from others, and a pair with one draw (or no spread) on a side is not
  testable. The test was chosen by its error rates measured on the main job's own per-seed residuals, resampled
  through the suite's procedure (`reports/verdicts/resampled-error-rates.md`): at most 5 % of reports may make any
  false claim, which Welch-Satterthwaite's degrees of freedom did not hold at four seeds. What a test could have
  found depends on the run's own spread: under "At what scale these verdicts hold" the first page gives, per pair
  not distinguishable, the smallest ratio this run would have detected at 80 % power and the seeds a 1.5-fold
  difference would need.
- **end-of-budget FID** (`end FID`, the quality family): the FID of the model each run ends with, every model scored
  on the same latent vectors and labels; the quality verdicts compare it (better, equivalent within the margin, or
  undecided). It was fixed in advance, on pilot runs with other seeds (`reports/verdicts/estimand.md`). A system
  whose every seed ended no better than its untrained generator is named, not tested; one such seed among others
  is compared with its FID.
- **learns faster** (`curve_area`, the speed family): the area under each run's log FID curve over one grid of
  budget fractions common to every system, every eighth from a quarter of the budget (or from the first point every
  system's curve has, where that is later) to its end (log FID interpolated linearly in images between curve
  points, never extrapolated), given as a
  geometric-mean FID over the budget; lower learns faster. Tested between systems as a family of its own, never as
  quality: a system still falling steeply at the end is slower, not worse.
- **draws of a pair** (`findings.csv`): `seeds_a`/`seeds_b` the draws of each estimate (a speedup's P=1 runs),
  `denominator_draws_a`/`_b` a ratio's other end (a speedup's runs at P); a pair's ratio and p-values come from the same draws (a pair decided at an
  early look of sequential seeds keeps the estimates of that look).
- **at what scale**: per family, the budget (training images per system, generator steps per GAN; in `findings.csv`
  the number `budget`, up to `budget_max`, in `budget_unit`), whether the
  family's claims were the same at every curve point of the last half of the budget (the same tests run at each
  point), and which systems were still improving at the end: the slope of each seed's log score against log
  images over the last half of its curve, a one-sided t-test over the seeds at 5 % per system, with its power for
  a 20 % fall. A verdict tag whose claims involve such a system
  ends "†": it holds at this budget only. Not found improving is not shown settled.
- **fid_at_equal_time**: each configuration's FID at the last point of its quality curve by the same training time (the
  shortest of their windows), or by the same real training images where every run had `train.budget_images` (its
  curve points sit at equal fractions of the budget): quality under a fixed budget, beside the final FID and the
  time to the target.
- **machine**: CPU model, the kernel set torch dispatches to (`cpu_capability`), versions, GPU and driver; `fingerprint`, a
  digest of those that identify the machine however it was launched (not `cpu_capability`, `onednn_max_isa`, `mpi`, `host`);
  `numerics`, a digest of one fixed forward and backward pass on the run's device and threads. Equal numerics digests: the same seed gives the same model bit for bit; different ones: it need not.
- **images_per_s**: training images (`train_images`) per second of the training window, warm-up included, summed
  over ranks, counted the same way for every strategy; `images_per_s_per_rank` is the mean per rank;
  `images_per_s_lo/hi` its 95 % interval, from the interval of the mean step time.
- **step_p50 / step_p95 / step_mean / step_ci95**: seconds per window step, all ranks' steps pooled: median, 95th
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
  the rank's window steps over their step time; `fraction_of_peak` divides it by the peak named under the table (a
  datasheet FP32 peak for known GPUs, else a measured FP32 matmul ceiling with the rank's threads; raised to a rank's own rate where it computed faster: `peak_raised_ranks`), at most 1.
- **GPU utilization**: NVML busy percentage of each rank's own GPU, sampled every 0.2 s (mean and p95 over the
  window, averaged over ranks); `gpu_mem_used_mb` is NVML's memory in use on the device (mean), `gpu_mem_peak_mb`
  the largest peak of a rank's own tensors (PyTorch allocator); n/a on CPUs.
- **IS / FID / KID**: always with the ruler that produced them, its name and the pinned sha256 of its weights file
  (`inception`: pytorch-fid's InceptionV3; `inception(fid-trunk)`: the same network's FID trunk, no IS;
  `classifier:<dataset>`: the suite's CNN, trained once and pinned) and the sample counts: `n` generated images against `n_real` real ones (a fixed seed-0 draw of the
  training split; the whole split under `metrics.protocol: standard`). Numbers from different networks are never
  compared; each quality table's caption names its ruler and protocol and says whether the papers' numbers compare
  with it (only pytorch-fid's Inception under the `standard` protocol). IS is the mean over `splits×n` (10
  splits of n/10 samples; small splits bias IS low), its standard deviation over the splits in its own column. FID is given only where `n` and `n_real` both exceed the
  network's feature dimensions (below that the covariances are singular and FID is biased); otherwise it is n/a
  with the reason, and KID stands in. KID (Binkowski et al.) is the unbiased MMD² under the kernel
  k(x, y) = (x·y/d + 1)³, the mean over `subsets×n` random subsets (100 subsets of half the smaller sample, at
  most 1000; their standard deviation in its own column); unbiased at any n, so it may be slightly negative; 0 means the same distribution. Its units are torch-fidelity's
  (the raw MMD², no ×10³): about 0.001 to 0.1 on Inception features, tens to hundreds on the `classifier:*` rulers,
  whose 128 features are larger (a mean square of about 9 per dimension on the real digits); compare under one ruler.
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
