"""The ``suite`` command's arguments: one sub-parser per sub-command, each calling its ``cmd_*`` function.

Every parser shows its options' defaults in ``--help`` (:class:`_HelpFormatter`) and takes ``-v/--verbose``
before or after the sub-command (:class:`_Parser`).
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..config.names import did_you_mean
from ..config.registry import FEATURES, PROTOCOLS
from ..tools.gate_settings import Settings
from .analysis import HISTORY, cmd_compare, cmd_gate, cmd_gate_history, cmd_papers, cmd_probe, cmd_project, cmd_report, cmd_tune
from .quality import cmd_env, cmd_ruler_list, cmd_ruler_train, cmd_sample, cmd_score
from .running import cmd_gpu_check, cmd_jobscript, cmd_run
from .scenarios import cmd_scenarios, cmd_schema


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults in the help, where the help does not already say its default and there is one to say."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or isinstance(action.default, bool):
            return text
        return super()._get_help_string(action)


_VERBOSE = argparse.ArgumentParser(add_help=False)
# SUPPRESS: a sub-parser that does not see -v leaves the value the main parser set
_VERBOSE.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging")


class _Parser(argparse.ArgumentParser):
    """Every parser of the command: defaults in its help, ``-v`` among its options (sub-parsers are made alike)."""

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("parents", [_VERBOSE])
        super().__init__(**kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """A value outside an argument's choices (a sub-command, a site) is refused naming the close ones."""
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(str, action.choices))
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{did_you_mean(value, action.choices)}; choose from {choices}"
            )
        super()._check_value(action, value)


def _safe_name(value: str) -> str:
    """An argument that goes into a job script as it is (an account, a queue): a safe name or refused."""
    from ..config.validation import name_problem

    if (problem := name_problem(value)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_caps(p: argparse.ArgumentParser) -> None:
    """The caps on the scenario a command reads (:class:`suite.config.scenario.ScenarioCaps`), each raised by its flag."""
    from ..config.scenario import MAX_RUNS, MAX_SCENARIO_BYTES

    g = p.add_argument_group("caps on the scenario (a huge sweep or file is refused, naming the cap)")
    g.add_argument(
        "--max-runs",
        type=_positive_int,
        default=MAX_RUNS,
        metavar="N",
        help="refuse a scenario that expands to more runs than this (default %(default)d)",
    )
    g.add_argument(
        "--max-scenario-bytes",
        type=_positive_int,
        default=MAX_SCENARIO_BYTES,
        metavar="N",
        help="refuse a scenario file larger than this (default %(default)d: 1 MiB)",
    )


def _add_placement(p: argparse.ArgumentParser) -> None:
    from ..running.commands import LAUNCHERS
    from ..running.sites import GPU_VENDORS

    g = p.add_argument_group("placement (cluster launchers)")
    g.add_argument("--launcher", choices=LAUNCHERS, default="local", help="how to start the ranks (default: local processes)")
    g.add_argument("--hosts", help="mpirun/horovodrun host list 'n1:4,n2:4', or a deepspeed hostfile")
    g.add_argument("--nodes", type=int, default=1, help="nodes in the allocation (torchrun, deepspeed, srun)")
    g.add_argument("--ranks-per-node", type=int, help="ranks per node (default: procs / nodes)")
    g.add_argument("--gpus-per-rank", type=int, default=1, help="GPUs per rank (jsrun, srun; default 1)")
    g.add_argument("--cpus-per-rank", type=int, help="CPU cores per rank (jsrun, srun)")
    g.add_argument("--master-addr", help="rendezvous host for torchrun/deepspeed across nodes")
    g.add_argument("--master-port", type=int, default=29500, help="rendezvous port for torchrun/deepspeed")
    g.add_argument(
        "--max-local-procs",
        type=_positive_int,
        metavar="N",
        help="the most ranks a local launch starts (default: 8 per core of this machine; more is refused)",
    )
    g.add_argument(
        "--python", help="interpreter on the compute nodes (default: this one; python3 on the image's PATH with --container)"
    )
    _add_container(g, "start each rank inside this container (srun, mpirun, jsrun); the image holds the suite")
    g.add_argument(
        "--container-gpus",
        choices=(*GPU_VENDORS, "none"),
        default="nvidia",
        help="the GPUs a --container is given: apptainer --nv (nvidia) or --rocm (amd); podman-hpc --gpu",
    )


def _container_image(value: str) -> str:
    """``--container``'s words: a runtime among the choices, then an image that can be written into a job script."""
    from ..config.validation import script_text_problem

    if (problem := script_text_problem(value)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def _add_container(g: Any, what: str) -> None:
    from ..running.commands import CONTAINER_RUNTIMES

    g.add_argument(
        "--container",
        nargs=2,
        type=_container_image,
        metavar=("RUNTIME", "IMAGE"),
        help=f"{what}: RUNTIME one of {', '.join(CONTAINER_RUNTIMES)}; IMAGE an image file (.sif) or registry name",
    )


def _add_run(sub: Any) -> None:
    """``suite run``: its options and handler."""
    p = sub.add_parser("run", help="run a scenario's runs and record results")
    p.add_argument(
        "scenario", help="scenario YAML file, e.g. scenarios/smoke.yaml, or a built-in scenario's name (suite scenarios)"
    )
    p.add_argument("--out", help="results folder (default results/<scenario name>)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="write the run folders (run.json) and print the launch commands, without running them",
    )
    p.add_argument("--timeout", type=float, default=3600, help="seconds before a run is stopped and recorded as failed")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue unfinished runs from their last checkpoint (finished runs are skipped either way)",
    )
    p.add_argument(
        "--rerun",
        action="store_true",
        help="train finished runs (ok or diverged) again from step 0, each old run folder kept as "
        "RUN_ID.replaced-TIMESTAMP until its new run is ok (without it they are skipped, saying so)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=60,
        help="seconds a run that checkpoints gets to save one and exit when suite run is stopped (SIGTERM, SIGINT)",
    )
    p.add_argument("--only", nargs="+", metavar="PATTERN", help="only run ids matching these shell patterns")
    p.add_argument(
        "--skip-missing",
        action="store_true",
        help="run what can run here: leave out, naming them, the runs whose launcher or engine package is not installed "
        "(without it such a scenario is refused before any run starts)",
    )
    p.add_argument(
        "--set",
        action="append",
        dest="overrides",
        metavar="FIELD=VALUE",
        help="override a scenario field, e.g. --set train.lr=1e-3 (repeatable; the value is YAML, checked by the scenario's "
        "schema; recorded in every run's record as settings.overrides)",
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="trace every run: torch profiler, Horovod timeline, DeepSpeed comms log (timings include the overhead)",
    )
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="write every run's TensorBoard events into DIR/RUN_ID (open with `tensorboard --logdir DIR`)",
    )
    p.add_argument("--mllog", action="store_true", help="write every run's MLPerf-style :::MLLOG lines into RUN_DIR/mllog.txt")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="one log line per run instead of a progress bar (automatic when not in a terminal), and a line with the "
        "run's step and images/s every 30 s while it trains",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout when done: each run's status, times, images/s and FID (the other "
        "lines go to stderr)",
    )
    _add_placement(p)
    _add_caps(p)
    p.set_defaults(func=cmd_run, timestamped=True)


def _add_report(sub: Any) -> None:
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


def _add_papers(sub: Any) -> None:
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


def _add_tune(sub: Any) -> None:
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


def _add_compare(sub: Any) -> None:
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


def _add_sample(sub: Any) -> None:
    """``suite sample``: its options and handler."""
    p = sub.add_parser("sample", help="draw samples from a trained run into an .npz file")
    p.add_argument("run_dir", help="a run folder (holding generator.pt)")
    p.add_argument("--n", type=int, default=1000, help="samples to draw")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise and labels")
    p.add_argument("--out", required=True, help="output .npz (arrays: images, labels)")
    p.set_defaults(func=cmd_sample)


def _add_score(sub: Any) -> None:
    """``suite score``: its options and handler."""
    p = sub.add_parser("score", help="IS / FID / KID / per-class FID or KID / TVD of a run or of samples")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", help="a run folder: sample its model and score it")
    src.add_argument("--samples", help=".npz with images (N, C, H, W) in [-1, 1] and optional labels")
    p.add_argument("--dataset", help="real data to compare with (default: the run's)")
    p.add_argument("--root", help="dataset folder (torchvision files / ImageNet)")
    p.add_argument("--split", default="train", choices=("train", "test"), help="split of the real data")
    p.add_argument("--features", default="auto", choices=FEATURES.names(), help="feature network (docs/image-quality.md)")
    p.add_argument(
        "--protocol",
        default="suite",
        choices=PROTOCOLS.names(),
        help="suite: samples as given, against as many real images; standard: the papers' (8-bit samples, the whole "
        "split at native size)",
    )
    p.add_argument("--inception-weights", help="path to pytorch-fid's pt_inception-2015-12-05 weights")
    p.add_argument("--n", type=int, help="number of samples to score (default: all / 1000 for --run)")
    p.add_argument("--seed", type=int, default=0, help="seed of the samples and of the score's subsets")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=cmd_score)


def _add_ruler(sub: Any) -> None:
    """``suite ruler``: its options and handler."""
    p = sub.add_parser("ruler", help="make or list the pinned feature networks (rulers) that IS / FID / KID use")
    ruler = p.add_subparsers(dest="ruler_command", required=True)
    q = ruler.add_parser("train", help="train the suite classifier of a dataset once and pin its sha256")
    q.add_argument("--dataset", required=True, help="digits, mnist, cifar10, cifar100 or imagenet")
    q.add_argument("--image-size", type=int, default=20, help="the ruler's input size; images are resized to it (default 20)")
    q.add_argument("--root", help="dataset folder (default $SUITE_DATA)")
    q.add_argument("--seed", type=int, default=0, help="seed of the classifier's training")
    q.add_argument(
        "--steering",
        action="store_true",
        help="make the dataset's steering network (steering:DATASET), which strategies use inside training, "
        "instead of its ruler (classifier:DATASET): a perceptron on raw pixels trained on half the test split, which "
        "the ruler never sees, its agreement with the ruler measured; it never scores (needs the ruler)",
    )
    q.add_argument(
        "--half",
        choices=("even", "odd"),
        help="train on one half of the split: its even or odd rows (the training split's; --steering: the test split's, "
        "default even)",
    )
    where = q.add_mutually_exclusive_group()
    where.add_argument("--out", help="ruler folder to write (default $SUITE_RULERS, else the cache's rulers/)")
    where.add_argument("--packaged", action="store_true", help="write into the package's own folder (maintainers)")
    q.set_defaults(func=cmd_ruler_train)
    q = ruler.add_parser("list", help="list the pinned rulers and check every file against its hash (exit 1 if one fails)")
    q.set_defaults(func=cmd_ruler_list)


def _add_gate(sub: Any) -> None:
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


def _add_gate_history(sub: Any) -> None:
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


_PLAIN_COMMANDS = (
    (
        "schema",
        cmd_schema,
        "print the JSON Schema of a scenario file (editors validate scenarios with it)",
        "Print the JSON Schema of a scenario file: every section and field, its type, bounds, default and "
        "doc, the registered strategies, engines and losses as choices. docs/reference/scenario.schema.json is this output.",
    ),
    (
        "scenarios",
        cmd_scenarios,
        "list the built-in scenarios (suite run NAME runs one), each with its description",
        "List the scenarios that ship with the package, by name, each with its description: `suite run NAME` "
        "runs one (a path to a scenario file works too).",
    ),
    ("env", cmd_env, "print versions and capabilities as JSON (and the Horovod build in one line on stderr)", None),
)
"""The sub-commands without options of their own: name, handler, help and description."""


def _add_plain(sub: Any) -> None:
    """``suite schema``, ``suite scenarios`` and ``suite env``: each its help and handler."""
    for name, handler, help, description in _PLAIN_COMMANDS:
        sub.add_parser(name, help=help, description=description).set_defaults(func=handler)


def _add_gpu_check(sub: Any) -> None:
    """``suite gpu-check``: its options and handler."""
    p = sub.add_parser(
        "gpu-check",
        help="self-check of the GPU paths on this node: short runs of every strategy and engine on every GPU",
        description="Train every strategy on every installed GPU engine for a few seconds at P = 1 and P = the visible "
        "GPUs, then check each run: ok, ranks on distinct GPUs, NVML utilisation and memory plausible, CUDA-event "
        "timings, quality scored on the GPU; writes gpu-check.md and gpu-check.json. Exit codes: 0 all checks "
        "passed, 1 a check failed, 2 bad input, 4 skipped: no CUDA GPU visible (one line on stderr).",
    )
    p.add_argument("--out", default="results/gpu-check", help="folder for the report and the runs (default results/gpu-check)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a run is stopped and recorded as failed")
    p.add_argument(
        "--engines",
        help="only these of the installed GPU engines, comma-separated (e.g. torch,horovod; default every one; "
        "the others are listed as not asked)",
    )
    p.set_defaults(func=cmd_gpu_check)


def _directive_value(value: str) -> str:
    """An argument that goes into a job script's directive as it is (a constraint, a GPU binding), or refused."""
    from ..config.validation import directive_problem

    if (problem := directive_problem(value)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def _add_jobscript(sub: Any) -> None:
    """``suite jobscript``: its options and handler."""
    from ..running.sites import SITES, SLURM_MPI_TYPES

    p = sub.add_parser(
        "jobscript",
        help="write an LSF or Slurm batch script running a whole scenario",
        description="Write a batch script that runs a whole scenario in one allocation (suite run, then suite report), "
        "resumable, with a site preset's placement, modules and queue limits. Before it launches anything the script "
        "checks that the suite imports and that torch sees the GPUs asked for. Submit it from the folder the results "
        "should go under (or give --workdir).",
    )
    p.add_argument(
        "scenario",
        help="a built-in scenario's name (suite scenarios lists them; the script names it, and the nodes' suite finds "
        "it) or a scenario file (the script names the path as given, read from --workdir on the nodes)",
    )
    p.add_argument("--scheduler", choices=("lsf", "slurm"), help="the batch system (default: the --site's)")
    p.add_argument(
        "--site",
        choices=tuple(SITES),
        help="site preset choosing the scheduler, ranks per node, CPUs and GPUs per rank and GPU binding ("
        + "; ".join(f"{s.name}: {s.description}" for s in SITES.values())
        + ")",
    )
    p.add_argument("--out", help="script path (default jobs/<scenario>[.<site>][.array].<scheduler>.sh)")
    p.add_argument("--results", help="results folder on the cluster (default results/<scenario>)")
    _add_job_time_and_settings(p)
    p.add_argument(
        "--account", type=_safe_name, help="project / account to charge (letters, digits, '.', '_', '-'; frontier: required)"
    )
    p.add_argument(
        "--queue",
        type=_safe_name,
        help="queue (LSF) or partition (Slurm; on perlmutter the QOS, -q, as NERSC's queues are QOSes) "
        "(default: the site's: frontier batch) (letters, digits, '.', '_', '-')",
    )
    p.add_argument(
        "--qos",
        type=_safe_name,
        help="Slurm quality of service (default: the site's: perlmutter regular) (letters, digits, '.', '_', '-')",
    )
    p.add_argument("-C", "--constraint", type=_directive_value, help="Slurm node features, e.g. gpu (default: the site's)")
    p.add_argument("--mpi", choices=SLURM_MPI_TYPES, help="Slurm's MPI plugin for srun (default: the cluster's)")
    p.add_argument(
        "--preamble",
        help="shell file copied into the script as it is, before suite runs: module load, environment activation",
    )
    p.add_argument(
        "--no-site-setup",
        dest="site_setup",
        action="store_false",
        help="leave out the site's module load lines (the --preamble then sets up the environment)",
    )
    p.add_argument(
        "--python", default="python3", help="interpreter on the compute nodes, after the preamble (default python3 on PATH)"
    )
    _add_job_environment(p)
    p.add_argument("--force", action="store_true", help="replace a script already at the path (default: refuse)")
    p.add_argument(
        "--array",
        action="store_true",
        help="Slurm: a job array, one task per run of the sweep (suite run --only RUN_ID), one task at a time",
    )
    _add_container(p, "start each rank inside this container")
    p.add_argument("--workdir", help="folder the job works in (default: the folder it was submitted from)")
    _add_job_placement(p)
    _add_caps(p)
    p.set_defaults(func=cmd_jobscript)


def _add_job_time_and_settings(p: argparse.ArgumentParser) -> None:
    """``suite jobscript``'s walltime, the site limits it is checked against, and ``--set``."""
    p.add_argument(
        "--walltime",
        help="as Slurm's --time: MINUTES, H:MM:SS, D-H, D-H:MM, D-H:MM:SS; or 90m, 6h, 1d (MM:SS is refused); "
        "default 2:00:00, or the site queue's limit for the job's nodes where shorter; a walltime past that limit is "
        "refused, naming it",
    )
    p.add_argument(
        "--no-site-limits",
        dest="site_limits",
        action="store_false",
        help="write the walltime and node count even past the --site preset's queue limits (a site that changed them)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        dest="overrides",
        help="override a scenario field, as suite run takes it (repeatable; checked here and passed to the job's suite run)",
    )


def _add_job_environment(p: argparse.ArgumentParser) -> None:
    """``suite jobscript``'s options naming the suite's Python environment on the nodes."""
    env = p.add_argument_group(
        "the suite's Python environment on the nodes (a --site needs one of these or a --preamble; the script checks "
        "that the suite imports before it launches anything)"
    )
    which = env.add_mutually_exclusive_group()
    which.add_argument("--venv", metavar="DIR", help="virtual environment holding the suite, activated (relative: to --workdir)")
    which.add_argument(
        "--conda", metavar="ENV", help="conda environment (name or path) holding the suite, activated with conda's hook"
    )
    env.add_argument(
        "--module",
        action="append",
        metavar="NAME",
        help="module to load after the site's, before --venv/--conda (repeatable): one that holds the suite, or its Python",
    )


def _add_job_placement(p: argparse.ArgumentParser) -> None:
    """``suite jobscript``'s placement of the ranks inside the allocation."""
    from ..running.jobplan import SCRIPT_LAUNCHERS

    g = p.add_argument_group("placement (inside the allocation; ranks fill a node before the next)")
    g.add_argument(
        "--launcher",
        choices=tuple(dict.fromkeys(name for names in SCRIPT_LAUNCHERS.values() for name in names)),
        help="how each run starts its ranks inside the allocation: jsrun (LSF only), srun (Slurm only), mpirun or "
        "horovodrun (default: jsrun for LSF, srun for Slurm)",
    )
    g.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="nodes to ask for at least; the script asks for more where the largest run needs them (default 1)",
    )
    g.add_argument("--ranks-per-node", type=int, help="ranks per node (default: the site's, else the largest run / --nodes)")
    g.add_argument("--gpus-per-rank", type=int, help="GPUs per rank (default: the site's, else 1)")
    g.add_argument("--cpus-per-rank", type=int, help="CPU cores per rank: srun --cpus-per-task, jsrun -c (default: the site's)")
    g.add_argument("--gpu-bind", type=_directive_value, help="Slurm --gpu-bind, e.g. closest, none (default: the site's)")
    g.add_argument("--master-addr", help="torch/deepspeed rendezvous host (default: the allocation's first compute host)")
    g.add_argument(
        "--master-port",
        type=int,
        default=29500,
        help="TCP port on --master-addr where the torch and deepspeed engines' ranks meet (torch.distributed's "
        "MASTER_PORT; a MASTER_PORT set in the job's environment wins) (default 29500)",
    )


def _add_project(sub: Any) -> None:
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


def _add_probe(sub: Any) -> None:
    """``suite probe``: its options and handler."""
    p = sub.add_parser("probe", help="measure this machine's latency and bandwidth (MPI ping-pong and allreduce)")
    p.add_argument(
        "--out", default="probe.json", help="JSON file to write (default probe.json; RESULTS/probe.json is read by suite project)"
    )
    p.add_argument("--np", type=int, default=2, help="processes (default 2)")
    p.set_defaults(func=cmd_probe)


_COMMANDS = (
    _add_run,
    _add_report,
    _add_papers,
    _add_tune,
    _add_compare,
    _add_sample,
    _add_score,
    _add_ruler,
    _add_gate,
    _add_gate_history,
    _add_plain,
    _add_gpu_check,
    _add_jobscript,
    _add_project,
    _add_probe,
)
"""Every sub-command's parser, in the order ``suite --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        parents=[],
        prog="suite",
        description="Reference benchmark suite for distributed GAN training.",
        epilog="Exit codes: docs/reference/cli.md, 'Exit codes' (0 ok, 1 failed, 2 bad input, 3 diverged, 4 no GPU, 5 inconclusive).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (also after the sub-command)")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in _COMMANDS:
        add(sub)
    return parser
