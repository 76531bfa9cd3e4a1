"""The sub-commands that read results: ``suite report``, ``papers``, ``tune``, ``compare``, ``gate``, ``gate-history``,
``project`` and ``probe``: their options and handlers."""

from __future__ import annotations

from typing import Any

from ..tools.gate_settings import Settings
from .analysis import HISTORY, cmd_compare, cmd_gate, cmd_gate_history, cmd_papers, cmd_probe, cmd_project, cmd_report, cmd_tune


def add_report(sub: Any) -> None:
    """``suite report``: its options and handler."""
    p = sub.add_parser("report", help="write report.md, CSVs and plots from a results folder")
    p.add_argument("results", help="results folder written by suite run")
    p.add_argument("--out", help="report folder (default RESULTS/report)")
    p.add_argument(
        "--baselines",
        help="papers' numbers CSV (default: the papers' numbers shipped with the suite, baselines/ in the checkout)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout: what the first page says (each system's times, images/s and quality, "
        "the tested findings with their verdicts, the report's path)",
    )
    p.set_defaults(func=cmd_report)


def add_papers(sub: Any) -> None:
    """``suite papers``: its options and handler."""
    p = sub.add_parser(
        "papers",
        help="set each paper's printed numbers beside its scenarios' runs, one line per claim; write OUT/<paper>/papers.md",
        description="Runs belong to a paper by their scenario's name (paper000-... to paper003-..., scenarios/papers/; the old seed000-... names too). "
        "Each page sets the paper's numbers (baselines/) beside the suite's, each row saying 'same setting' or what "
        "differs, and judges each claim: holds, does not hold, or cannot be judged at this scale.",
    )
    p.add_argument("results", nargs="+", help="results folders written by suite run, or folders of them")
    p.add_argument("--out", default="reports/papers", help="output folder (default reports/papers)")
    p.add_argument(
        "--baselines",
        help="papers' numbers folder (default: the papers' numbers shipped with the suite, baselines/ in the checkout)",
    )
    p.set_defaults(func=cmd_papers)


def add_tune(sub: Any) -> None:
    """``suite tune``: its options and handler."""
    p = sub.add_parser(
        "tune",
        help="rank each system's swept settings by mean final FID over its seeds; write tuning.md, tuning.csv, chosen.yaml",
        description="For each system (strategy / loss / engine [label] at P) of a results folder, rank the settings its "
        "run entry swept (sweep: in the scenario) by mean final FID over the seeds, under the runs' ruler; a failed, "
        "diverged, unscored or missing run counts as worst; ties go to the setting listed first. See docs/tuning.md.",
    )
    p.add_argument("results", help="results folder written by suite run (or a report folder or records.json)")
    p.add_argument("--out", help="output folder (default RESULTS/tuning)")
    p.set_defaults(func=cmd_tune)


def add_compare(sub: Any) -> None:
    """``suite compare``: its options and handler."""
    p = sub.add_parser("compare", help="compare results with a baseline: exit 1 on a regression beyond tolerance and noise")
    p.add_argument("new", help="results folder, run folder (one run) or records JSON to check")
    p.add_argument(
        "baseline", help="baseline: a results folder, a run folder, a records JSON list, or a folder holding records.json"
    )
    p.add_argument(
        "--tolerance",
        action="append",
        metavar="METRIC=PCT",
        help="accepted worsening of a metric in %% of the baseline (comm_share: percentage points); repeatable; "
        "the defaults are in docs/benchmarks-and-ci.md and in the tolerance column of the output",
    )
    p.add_argument("--allow-different-device", action="store_true", help="compare results from different devices anyway")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON instead of markdown")
    p.set_defaults(func=cmd_compare)


def add_gate(sub: Any) -> None:
    """``suite gate``: its options and handler."""
    p = sub.add_parser(
        "gate",
        help="regression gate: this checkout against a baseline revision, paired and interleaved on this host",
        description="Run the regression workload alternately from a baseline revision (a git worktree) and from this "
        "checkout (A B B A ...), then test the per-pair ratios (Wilcoxon signed-rank) against a practical threshold. "
        "Exit codes: 0 PASS, 1 FAIL (significantly worse by the threshold or more), 5 INCONCLUSIVE (too noisy to "
        "tell), 2 bad input or a side whose workload failed. See docs/benchmarks-and-ci.md.",
    )
    p.add_argument("--baseline", help="baseline revision (default: the merge base of HEAD with the main branch)")
    p.add_argument("--scenario", default="scenarios/gate.yaml", help="the workload (default scenarios/gate.yaml)")
    p.add_argument("--out", default="results/gate", help="folder for the runs and gate.md (default results/gate)")
    gate = Settings  # the defaults are the gate's own: one definition
    p.add_argument(
        "--threshold", type=float, default=gate.threshold, help="percent worse that counts as a regression (default %(default)g)"
    )
    p.add_argument("--alpha", type=float, default=gate.alpha, help="significance level (default %(default)g)")
    p.add_argument(
        "--min-pairs",
        type=int,
        default=gate.min_pairs,
        help="pairs before the first verdict (default %(default)d, the fewest that can fail)",
    )
    p.add_argument("--max-pairs", type=int, default=gate.max_pairs, help="pairs at most while undecided (default %(default)d)")
    p.add_argument(
        "--max-minutes",
        type=float,
        default=gate.max_minutes,
        help="no new pair once this would be exceeded (default %(default)g)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=gate.timeout,
        help="seconds per workload run before it counts as failed (default %(default)g)",
    )
    p.add_argument("--allow-dirty", action="store_true", help="measure the working tree with its uncommitted changes")
    p.add_argument(
        "--max-foreign-cores",
        type=float,
        default=gate.max_foreign_cores,
        help="discard and rerun a pair during which other processes kept more than this many cores busy "
        "(default %(default)g; raise it on a runner whose own agent keeps a steady load)",
    )
    p.add_argument(
        "--inject-slowdown",
        type=float,
        default=gate.inject_slowdown,
        metavar="F",
        help="measurement knob: slow the candidate's steps by the fraction F (sets SUITE_TEST_SLOWDOWN; "
        "used by ci/gate_error_rates.py to measure the detection rate)",
    )
    p.add_argument(
        "--history",
        default=HISTORY,
        help="asv results folder this run's paired changes are appended to (default %(default)s; see suite gate-history)",
    )
    p.add_argument("--no-history", action="store_true", help="append nothing to the history")
    p.add_argument("--machine", help="this machine's name in the history (default: the host's name, as asv takes it)")
    p.set_defaults(func=cmd_gate)


def add_gate_history(sub: Any) -> None:
    """``suite gate-history show`` and ``bisect``: the series of the gate's history on a branch."""
    p = sub.add_parser(
        "gate-history",
        help="the gate's history: the cumulative change of a branch since a commit, and where it moved",
        description="Read the asv results folder each suite gate run appends to, chain its steps along a branch's "
        "first-parent history, and judge the cumulative change since a commit by the gate's rule. See "
        "docs/benchmarks-and-ci.md.",
    )
    history = p.add_subparsers(dest="history_command", required=True)
    show = history.add_parser(
        "show",
        help="each quantity's series and cumulative change; exit 1 when it passes the threshold though each step passed",
    )
    where = history.add_parser("bisect", help="name the commit where each series moved: its largest step, its first FAIL")
    for q in (show, where):
        q.add_argument("--history", default=HISTORY, help="the asv results folder (default %(default)s)")
        q.add_argument("--branch", default="HEAD", help="the branch whose first-parent history is the series")
        q.add_argument("--since", help="the commit the change is counted from (default: the baseline of its first step)")
        q.add_argument("--machine", help="whose steps (default: this host's name, as the gate writes it)")
        q.add_argument("--env", help="the asv environment, gate-suite<version> (default: this suite's)")
        q.add_argument(
            "--threshold", type=float, default=Settings.threshold, help="percent worse that fails (default %(default)g)"
        )
        q.add_argument("--alpha", type=float, default=Settings.alpha, help="one-sided level of the bounds (default %(default)g)")
        q.set_defaults(func=cmd_gate_history)


def add_project(sub: Any) -> None:
    """``suite project``: its options and handler."""
    from ..analysis.projection_defaults import DEFAULT_NETWORK, DEFAULT_RANKS
    from ..measure.network import ALGORITHMS, PRESETS

    p = sub.add_parser("project", help="fit a cost model per strategy on the runs, validate it, project it to many ranks")
    p.add_argument(
        "results", help="results folder written by suite run, or a report folder or records.json written by suite report"
    )
    p.add_argument(
        "--ranks", default=",".join(map(str, DEFAULT_RANKS)), help="process counts to project (default 1,2,4,...,4096)"
    )
    p.add_argument(
        "--network",
        help=f"network to project on: a preset ({', '.join(PRESETS)}), a probe file, or 'measure' (default {DEFAULT_NETWORK})",
    )
    p.add_argument("--alpha", type=float, help="latency in seconds of one link everywhere (with --beta)")
    p.add_argument("--beta", type=float, help="seconds per byte of that link (with --alpha)")
    p.add_argument("--ranks-per-node", type=int, help="ranks per node of the projected network (default: the preset's)")
    p.add_argument(
        "--probe", help="probe file of the machine the runs were measured on (default RESULTS/probe.json, else the shm preset)"
    )
    p.add_argument("--fit-procs", help="fit on these process counts and predict the others (default: hold each out in turn)")
    p.add_argument(
        "--allreduce", choices=ALGORITHMS, default="best", help="allreduce algorithm of the model (default: the cheapest)"
    )
    p.add_argument(
        "--compute-scale", type=float, default=1.0, help="multiply computation times by this (0.01: a 100x faster device)"
    )
    p.add_argument("--out", help="output folder (default RESULTS/projection)")
    p.add_argument(
        "--baselines",
        help="folder of the papers' numbers (default: the papers' numbers shipped with the suite, baselines/ in the checkout)",
    )
    p.set_defaults(func=cmd_project)


def add_probe(sub: Any) -> None:
    """``suite probe``: its options and handler."""
    p = sub.add_parser("probe", help="measure this machine's latency and bandwidth (MPI ping-pong and allreduce)")
    p.add_argument(
        "--out", default="probe.json", help="JSON file to write (default probe.json; RESULTS/probe.json is read by suite project)"
    )
    p.add_argument("--np", type=int, default=2, help="processes (default 2)")
    p.set_defaults(func=cmd_probe)
