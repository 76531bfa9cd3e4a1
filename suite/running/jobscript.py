"""``suite jobscript``: an LSF or Slurm batch script that runs a whole scenario in one allocation.

The script asks for enough nodes for the largest run, runs the user's preamble (``--preamble``:
``module load`` and environment activation lines, copied as they are), then calls ``suite run``
with ``--launcher jsrun`` (LSF, as on Summit) or ``--launcher srun`` (Slurm), or ``mpirun`` or
``horovodrun`` inside the allocation when asked, so every run of the sweep is started inside the
same allocation, and finishes with ``suite report``. A site preset (``--site``,
:mod:`suite.running.sites`) chooses the ranks per node, CPUs and GPUs per rank and GPU binding.

Placement is one rule under every launcher (:func:`suite.running.commands.placement`): ranks fill
a node (the site's ranks per node, ``--ranks-per-node``) before the next one is used, so a run of
P ranks uses ceil(P / R) nodes; the allocation asks for R tasks per node, R never more than the
largest run.

``--resume`` makes a resubmitted job continue where the last one stopped: finished runs are kept
and an unfinished one continues from its last checkpoint.

Before the walltime the scheduler warns the job with SIGTERM (Slurm ``--signal=B:TERM@120``,
LSF ``-wa TERM -wt 2``), which the script passes to ``suite run``: the current run checkpoints
(``--grace``), its ranks stop, and it is recorded as interrupted; the report is skipped. The
walltime is given in Slurm's ``--time`` forms (:func:`parse_walltime`) and written in each
scheduler's own.

Nothing in the script is free text but the preamble, the user's own shell file: the scenario's
name (the job's name, its output files) is a safe name (:func:`suite.config.validation.name_problem`,
checked with the scenario), so are ``--account``, ``--queue`` and ``--qos``, ``--constraint`` and
``--gpu-bind`` are directive values (:func:`suite.config.validation.directive_problem`), ``--mpi``,
``--site``, ``--scheduler`` and ``--launcher`` are among their choices, ``--module`` is a module name
(:data:`MODULE_NAME`), and every other string (the scenario's path, ``--results``, ``--python``, ``--workdir``,
``--master-addr``, ``--venv``, ``--conda``, ``--preamble``'s path) holds no control
character or line break (:func:`suite.config.validation.script_text_problem`) and is quoted with
:func:`shlex.quote` wherever it is written, comments included. :func:`render` checks them all, whether the
options came from the command line or from Python, and an error names the option.

A site preset also writes what the site's guide asks of every job (:mod:`suite.running.sites`): Frontier refuses a
job without ``--account`` (so does this command) and takes ``-p batch``; Perlmutter takes ``-C gpu``, a QOS
(``-q regular``; ``--queue`` there names the QOS, as NERSC's queues are QOSes), ``--gpus-per-node`` and
``--cpu-bind=cores``; each starts with the ``module load`` lines of its guide (``--no-site-setup`` leaves them out),
before the user's preamble (Frontier's also put MIOpen's kernel cache on node-local ``/tmp``, as OLCF's PyTorch guide
does). Summit refuses a job without ``--account`` too (``-P``). The script is written to
``jobs/NAME.SITE.SCHEDULER.sh`` (``jobs/NAME.SCHEDULER.sh`` without a site), so presets do not overwrite each other's;
a file already there is replaced only with ``--force``.

No site's modules hold the suite, so a site preset is refused without the suite's Python environment: ``--venv DIR``,
``--conda ENV``, ``--module NAME`` (repeatable) or a ``--preamble``. Their lines come after ``cd`` (a relative venv is
read from the working folder), each ending the job in one line naming its option when it fails; then every script
checks that ``--python`` imports the suite before anything is launched, and ends in one line naming the fix when it
cannot. A run whose engine needs an NVIDIA GPU (Horovod's) is refused for an AMD site's GPUs (Frontier's).

``--array`` (Slurm) writes the sweep as a job array: task ``i`` runs the scenario's run ``i`` alone
(``suite run --only RUN_ID``) in its own allocation, sized for the largest run, then updates the report. The tasks
run one at a time (``%1``): one ``suite run`` holds a results folder at a time (:mod:`suite.running.lock`).

``--container RUNTIME IMAGE`` starts each rank inside a container (apptainer or NERSC's podman-hpc;
:func:`suite.running.commands.container_words`); the image is a quoted word like every other string.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.builtin import BUILTIN_DIR, resolve_scenario
from ..config.expansion import expand, load_scenario
from ..config.scenario import Run, ScenarioCaps
from ..config.shown import shown
from ..config.validation import directive_problem, name_problem, script_text_problem
from ..records.nofollow import output_folder
from ..records.results import atomic_write_text, path_under
from .commands import CONTAINER_RUNTIMES, Container, LaunchOptions, command_for
from .sites import SCHEDULER_LAUNCHER, SITES, SLURM_MPI_TYPES, QueueLimits, Site

DEFAULT_WALLTIME = "2:00:00"
"""``--walltime`` when none is given, or the site queue's limit for the job's nodes where that is shorter."""

WARNING_S = 120
"""Seconds before the walltime at which the scheduler sends SIGTERM; ``--grace`` fits inside them."""

WALLTIME_FORMS = (
    "MINUTES, HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS "
    "or a number with a unit (90m, 6h, 1d, 5400s)"
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_walltime(text: str) -> int:
    """``--walltime`` in seconds, from Slurm's ``--time`` forms or a number with a unit.

    Slurm's forms: ``M``, ``H:MM:SS``, ``D-H``, ``D-H:MM``, ``D-H:MM:SS`` (minutes and seconds
    below 60), and a single number with a unit: ``5400s``, ``90m``, ``6h``, ``1d``. Slurm's
    ``MM:SS`` is refused: this suite read two fields as HH:MM before, and reading ``06:00`` as
    six minutes now would cut jobs short without a word. The walltime must leave room for the
    scheduler's warning (:data:`WARNING_S`). Errors are :class:`ValueError` naming ``--walltime``.
    """

    def bad(why: str) -> ValueError:
        return ValueError(f"--walltime {shown(text)}: {why}")

    value = text.strip().lower()
    clock = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", value)
    if re.fullmatch(r"\d+[smhd]", value):
        seconds = int(value[:-1]) * _UNITS[value[-1]]
    elif not clock:
        raise bad(f"expected {WALLTIME_FORMS}")
    else:
        days, first, second, third = clock.groups()  # days, second and third may be absent
        if days is None and second is None:  # M
            hours, minutes, secs = 0, int(first), 0
        elif days is None and third is None:
            h, m = int(first), int(second)
            raise bad(
                "ambiguous: Slurm reads MM:SS, this suite read HH:MM before; "
                f"write {h}:{m:02d}:00 for {h} h {m} min or 0:{h:02d}:{m:02d} for {h} min {m} s"
            )
        else:  # H:MM:SS, D-H, D-H:MM, D-H:MM:SS
            hours, minutes, secs = int(first), int(second or 0), int(third or 0)
            if minutes > 59 or secs > 59:
                raise bad("minutes and seconds after a colon must be below 60")
        seconds = (int(days or 0) * 24 + hours) * 3600 + minutes * 60 + secs
    if seconds <= WARNING_S:
        raise bad(f"must be longer than the {WARNING_S} s warning the scheduler sends before it (SIGTERM)")
    return seconds


def slurm_time(seconds: int) -> str:
    """``#SBATCH --time``: ``HH:MM:SS`` below a day, ``D-HH:MM:SS`` from one."""
    days, rest = divmod(seconds, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


def lsf_time(seconds: int) -> str:
    """``#BSUB -W``: ``HH:MM`` (hours may pass 24); LSF counts whole minutes, so seconds round up, as Slurm does."""
    minutes = math.ceil(seconds / 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


SCRIPT_LAUNCHERS = {"lsf": ("jsrun", "mpirun", "horovodrun"), "slurm": ("srun", "mpirun", "horovodrun")}
"""The launchers a batch script of each scheduler can start its runs with from inside its allocation."""

SLURM_ONLY = ("qos", "constraint", "gpu_bind", "mpi", "array")
"""Job settings only Slurm has (LSF binds GPUs through jsrun's resource sets)."""

_ALLOCATION_HOSTS = {
    "lsf": 'sort -u "$LSB_DJOB_HOSTFILE" | grep -v -e batch -e login',
    "slurm": 'scontrol show hostnames "$SLURM_JOB_NODELIST"',
}
"""Shell that lists the allocation's compute hosts, one a line."""

_A_SCRIPT = {"lsf": "an LSF", "slurm": "a Slurm"}

_SUBMIT_DIR = {"lsf": "LS_SUBCWD", "slurm": "SLURM_SUBMIT_DIR"}
"""The variable each scheduler sets to the folder the job was submitted from."""


@dataclass
class JobOptions:
    """What a batch script asks the scheduler for and runs before ``suite run``; ``None`` takes the site's or the default."""

    scheduler: str | None = None  # lsf | slurm; the site's when a site is given
    site: str | None = None  # a key of suite.running.sites.SITES
    results: str | None = None  # results folder on the cluster (default results/NAME)
    walltime: str | None = None  # default DEFAULT_WALLTIME, or the site queue's limit for the job's nodes where shorter
    account: str | None = None
    queue: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gpu_bind: str | None = None
    mpi: str | None = None
    preamble: Path | None = None  # a shell file copied into the script as it is
    python: str = "python3"  # the interpreter on the compute nodes, found on PATH after the preamble
    workdir: str | None = None  # default: the folder the job was submitted from
    launcher: str | None = None  # default: the scheduler's (jsrun, srun)
    nodes: int = 1  # at least this many nodes
    ranks_per_node: int | None = None
    gpus_per_rank: int | None = None  # default 1
    cpus_per_rank: int | None = None
    master_addr: str | None = None  # default: the allocation's first compute host
    master_port: int = 29500
    site_setup: bool = True  # the site's module load lines (False: --no-site-setup)
    venv: str | None = None  # a virtual environment holding the suite, activated on the nodes (--venv)
    conda: str | None = None  # a conda environment holding the suite (--conda), activated with conda's shell hook
    module: tuple[str, ...] = ()  # modules loaded after the site's (--module, repeatable): one may hold the suite
    array: bool = False  # a Slurm job array, one task per run
    container: tuple[str, str] | None = None  # (runtime, image): each rank starts inside it
    caps: ScenarioCaps = field(default_factory=ScenarioCaps)  # --max-runs, --max-scenario-bytes
    overrides: dict[str, Any] = field(default_factory=dict)  # --set FIELD=VALUE, as suite run takes them (values parsed)
    site_limits: bool = True  # refuse a walltime or node count past the site's queue limits (False: --no-site-limits)

    def scheduler_name(self) -> str:
        """``--scheduler``, else the site's (errors name the option)."""
        if self.site is not None and self.site not in SITES:
            raise ValueError(f"--site {shown(self.site)}: not a site preset; choose one of {', '.join(SITES)}")
        if self.scheduler is not None and self.scheduler not in SCRIPT_LAUNCHERS:
            raise ValueError(f"--scheduler {shown(self.scheduler)}: choose one of {', '.join(SCRIPT_LAUNCHERS)}")
        site = SITES[self.site] if self.site else None
        scheduler = self.scheduler or (site.scheduler if site else None)
        if scheduler is None:
            raise ValueError("--scheduler: give --scheduler lsf|slurm or a --site preset")
        if site and site.scheduler != scheduler:
            raise ValueError(f"--scheduler {scheduler}: site {site.name} runs {site.scheduler}")
        return scheduler


@dataclass(frozen=True)
class _Plan:
    """The settings a script is written with: the job's, the site's, then the defaults."""

    scheduler: str
    launcher: str
    nodes: int
    per_node: int
    gpus_per_rank: int
    cpus_per_rank: int | None
    gpu_bind: str | None
    constraint: str | None
    mpi: str | None
    partition: str | None
    qos: str | None
    site: Site | None
    container: Container | None


def _plan(job: JobOptions, runs: list[Run]) -> _Plan:
    """Merge the command line with the site preset; errors name the option."""
    scheduler = job.scheduler_name()  # checks --site and --scheduler first
    site = SITES[job.site] if job.site else None
    for option, value, least in (
        ("--nodes", job.nodes, 1),
        ("--ranks-per-node", job.ranks_per_node, 1),
        ("--cpus-per-rank", job.cpus_per_rank, 1),
        ("--gpus-per-rank", job.gpus_per_rank, 0),
    ):
        if value is not None and value < least:
            raise ValueError(f"{option} {value}: must be at least {least}")
    if scheduler != "slurm":
        for field in SLURM_ONLY:
            if getattr(job, field) not in (None, False):
                raise ValueError(f"--{field.replace('_', '-')}: a Slurm setting; this is {_A_SCRIPT[scheduler]} script")
    launcher = job.launcher or SCHEDULER_LAUNCHER[scheduler]
    if launcher not in SCRIPT_LAUNCHERS[scheduler]:
        raise ValueError(
            f"--launcher {launcher}: {_A_SCRIPT[scheduler]} job script starts its runs inside its allocation with "
            f"{', '.join(SCRIPT_LAUNCHERS[scheduler])}; {launcher} is not one of them"
        )
    if job.array and (odd := next((r.run_id for r in runs if any(c in r.run_id for c in "*?[]")), None)):
        raise ValueError(
            f"--array: run id {shown(odd)} holds a shell pattern character; its task could not select it with --only"
        )
    largest = max(r.procs for r in runs)
    wanted = job.ranks_per_node or (site.ranks_per_node if site else None)
    per_node = min(wanted, largest) if wanted else math.ceil(largest / job.nodes)
    gpus = job.gpus_per_rank if job.gpus_per_rank is not None else (site.gpus_per_rank if site else 1)
    if site and site.account_required and not job.account:
        flag = "-P" if scheduler == "lsf" else "-A"
        raise ValueError(f"--account: site {site.name} refuses a job without an account ({flag}); give --account PROJECT")
    partition, qos = job.queue, job.qos
    if site and site.queue_is_qos and job.queue is not None:
        if job.qos is not None and job.qos != job.queue:
            raise ValueError(f"--queue {job.queue}: on {site.name} a queue is a QOS (-q), and --qos says {job.qos}; give one")
        partition, qos = None, job.queue
    if site and not (job.venv or job.conda or job.module or job.preamble):
        raise ValueError(
            f"--venv: site {site.name}'s modules do not hold the suite; say which Python environment does: "
            "--venv DIR (a virtual environment with the suite installed), --conda ENV, --module NAME, "
            "or a --preamble FILE that activates one"
        )
    container = None
    if job.container is not None:
        runtime, image = job.container
        container = Container(runtime, image, (site.gpu_vendor if site else "nvidia") if gpus else None)
    return _Plan(
        scheduler=scheduler,
        launcher=launcher,
        nodes=max(job.nodes, math.ceil(largest / per_node)),
        per_node=per_node,
        gpus_per_rank=gpus,
        cpus_per_rank=job.cpus_per_rank or (site.cpus_per_rank if site else None),
        gpu_bind=(job.gpu_bind or (site.gpu_bind if site else None)) if gpus else None,
        constraint=job.constraint or (site.constraint if site else None),
        mpi=job.mpi or (site.mpi if site else None),
        partition=partition or (site.partition if site else None),
        qos=qos or (site.qos if site else None),
        site=site,
        container=container,
    )


def _check_runs(runs: list[Run], plan: _Plan) -> None:
    """Every run can start under the script's launcher and placement (one line naming the run if not)."""
    opts = LaunchOptions(
        launcher=plan.launcher,
        nodes=plan.nodes,
        ranks_per_node=plan.per_node,
        gpus_per_rank=plan.gpus_per_rank,
        cpus_per_rank=plan.cpus_per_rank,
        hosts="HOSTS",
        master_addr="MASTER",
        container=plan.container,
    )
    for run in runs:
        command_for(run, Path("RESULTS") / run.run_id, opts)
    if plan.site and plan.site.gpu_vendor == "amd" and plan.gpus_per_rank:
        from ..config.registry import ENGINES  # the engine classes (torch): loaded only for an AMD site's GPUs

        for run in runs:
            if (refusal := ENGINES[run.engine].load().gpu_refusal(amd=f"site {plan.site.name}'s GPUs are AMD")) is not None:
                raise ValueError(f"{run.run_id}: {refusal} (--gpus-per-rank 0 runs it on the CPUs)")


def check_strings(scenario_path: Path, job: JobOptions) -> None:
    """Every string the script will hold is data: :class:`ValueError` naming the option of the first that is not.

    Paths and command words hold no control character or line break (they are quoted where written); names and
    directive values written unquoted into ``#BSUB`` / ``#SBATCH`` lines keep to their safe characters; a results
    folder or working folder does not start with ``-`` (``suite run --out`` and ``cd`` would read it as an option).
    """
    quoted = {
        "scenario": str(scenario_path),
        "--results": job.results,
        "--python": job.python,
        "--workdir": job.workdir,
        "--master-addr": job.master_addr,
        "--preamble": None if job.preamble is None else str(job.preamble),
        "--walltime": job.walltime,
        "--venv": job.venv,
        "--conda": job.conda,
    }
    for option, value in quoted.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"{option}: expected text, got {type(value).__name__}")
        if (problem := script_text_problem(value)) is not None:
            raise ValueError(f"{option} {problem}")
        if option in ("--results", "--workdir", "--python", "--venv", "--conda") and value.startswith("-"):
            raise ValueError(f"{option} {shown(value)}: starts with '-', which would be read as an option; write it as ./NAME")
    for option, value, problem_of in (
        ("--account", job.account, name_problem),
        ("--queue", job.queue, name_problem),
        ("--qos", job.qos, name_problem),
        ("--constraint", job.constraint, directive_problem),
        ("--gpu-bind", job.gpu_bind, directive_problem),
    ):
        if value is not None and (problem := problem_of(value)) is not None:
            raise ValueError(f"{option}: {problem}")
    _check_overrides(job.overrides)
    if job.venv is not None and job.conda is not None:
        raise ValueError("--venv and --conda: give one environment for the suite")
    if not isinstance(job.module, tuple) or not all(isinstance(name, str) for name in job.module):
        raise ValueError(f"--module: expected module names, got {shown(job.module)}")
    for name in job.module:
        if (problem := module_problem(name)) is not None:
            raise ValueError(f"--module {problem}")
    if job.container is not None:
        _check_container(job.container)
    if job.mpi is not None and job.mpi not in SLURM_MPI_TYPES:
        raise ValueError(f"--mpi {shown(job.mpi)}: choose one of {', '.join(SLURM_MPI_TYPES)}")
    if isinstance(job.master_port, bool) or not isinstance(job.master_port, int) or not 0 < job.master_port < 65536:
        raise ValueError(f"--master-port {shown(job.master_port)}: expected a port number from 1 to 65535")


def _check_overrides(overrides: object) -> None:
    """``--set``: field/value pairs, each ``FIELD=VALUE`` word (the value as JSON) a word a script can hold."""
    if not isinstance(overrides, dict):
        raise ValueError(f"--set: expected FIELD=VALUE pairs, got {shown(overrides)}")
    for key, value in overrides.items():
        if (problem := script_text_problem(f"{key}={json.dumps(value)}")) is not None:
            raise ValueError(f"--set {problem}")


MODULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+/@-]{0,199}")
"""A ``--module`` name as Lmod and Environment Modules write them (``pytorch/2.3.1``, ``cray-python``): letters, digits
and ``. _ + / @ -``, starting with a letter or digit (so never an option), at most 200 characters."""


def module_problem(name: str) -> str | None:
    """Why ``name`` cannot be a ``--module`` (one line, the value shown), or None."""
    if MODULE_NAME.fullmatch(name):
        return None
    return f"{shown(name)}: not a module name: use ASCII letters, digits and . _ + / @ -, starting with a letter or digit"


def _check_container(container: object) -> None:
    """``--container RUNTIME IMAGE``: a runtime among the choices and an image that is one word of text."""
    if not isinstance(container, tuple) or len(container) != 2:
        raise ValueError(f"--container: expected RUNTIME IMAGE, got {shown(container)}")
    runtime, image = container
    if runtime not in CONTAINER_RUNTIMES:
        raise ValueError(f"--container {shown(runtime)}: choose one of {', '.join(CONTAINER_RUNTIMES)}")
    if not isinstance(image, str) or not image:
        raise ValueError(f"--container {runtime}: expected an image (a file or a registry name), got {shown(image)}")
    if (problem := script_text_problem(image)) is not None:
        raise ValueError(f"--container {problem}")
    if image.startswith("-"):
        raise ValueError(f"--container {shown(image)}: starts with '-', which would be read as an option; write it as ./NAME")


def _preamble(path: Path) -> list[str]:
    """The preamble file's lines between two marking comments."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"--preamble {path}: no such file") from None
    except UnicodeDecodeError:
        raise ValueError(f"--preamble {path}: not a text file (UTF-8)") from None
    except OSError as error:
        raise ValueError(f"--preamble {path}: {error.strerror}") from None
    # json.dumps: a file name with a newline stays inside its comment
    return [f"# --- preamble {json.dumps(str(path))}, as it is ---", *text.splitlines(), "# --- end of the preamble ---"]


def render(scenario_path: str | Path, job: JobOptions) -> str:
    """The batch script for ``scenario_path``, a scenario file or a built-in scenario's name (:func:`scenario_word`:
    how the script names it), validated first; errors name the field or the option."""
    word = scenario_word(scenario_path)
    scenario_path = resolve_scenario(scenario_path)
    check_strings(scenario_path, job)
    if job.walltime is not None:
        parse_walltime(job.walltime)  # a malformed walltime is named before the scenario is read
    scenario = load_scenario(scenario_path, job.overrides or None, caps=job.caps)
    runs = expand(scenario)
    plan = _plan(job, runs)
    _check_runs(runs, plan)
    seconds = _walltime(plan, job)
    largest = max(r.procs for r in runs)
    nodes, per_node = plan.nodes, plan.per_node
    out = job.results or f"results/{scenario.name}"
    suite = [job.python, "-m", "suite"]  # the interpreter (and its environment) of the compute nodes
    run_line = _run_line(suite, word, out, plan, job)
    name = scenario.name
    if plan.scheduler == "lsf":
        header = _lsf_header(name, nodes, seconds, job)
    else:
        header = _slurm_header(name, plan, seconds, job, len(runs) if job.array else None)
    if job.master_addr:
        master = f"export MASTER_ADDR={shlex.quote(job.master_addr)}  # torch/deepspeed rendezvous (--master-addr)"
    else:  # LSF's batch script runs on a launch node: the first compute host hosts the rendezvous
        master = f"export MASTER_ADDR=$({_ALLOCATION_HOSTS[plan.scheduler]} | head -n 1)  # torch/deepspeed rendezvous"
    cpus = f", {plan.cpus_per_rank} CPUs" if plan.cpus_per_rank else ""
    lines = [
        "#!/bin/bash",
        *header,
        f"# Scenario {name}: {len(runs)} runs, up to {largest} ranks on {nodes} node{'s' if nodes > 1 else ''} "
        f"({per_node} per node, {plan.gpus_per_rank} GPU{cpus} each; started by {plan.launcher}).",
    ]
    if plan.site:
        lines.append(
            f"# Site {plan.site.name}: {plan.site.description}; "
            f"its network for the projection: suite project {shlex.quote(out)} --network {plan.site.network}"
        )
        if plan.site.works:
            lines.append(f"# What runs on {plan.site.name}'s GPUs: {plan.site.works}.")
    if job.array:
        lines.append(
            f"# A job array: task i runs run i of the {len(runs)} alone, in its own allocation sized for the largest run, then "
            "updates the report; one task at a time (%1), as one suite run holds a results folder at a time."
        )
    lines.append(f"# Generated by `suite jobscript`; submit with `{'bsub' if plan.scheduler == 'lsf' else 'sbatch'} THIS_FILE`.")
    lines += _setup(plan, job)
    lines += [
        "set -euo pipefail",
        f"cd {shlex.quote(job.workdir)}" if job.workdir else f'cd "${{{_SUBMIT_DIR[plan.scheduler]}:-$PWD}}"',
        *_environment(plan, job),
        *_import_check(job),
        *_gpu_check(plan, job),
        master,
        f"export MASTER_PORT=${{MASTER_PORT:-{job.master_port}}}",
    ]
    lines += _slurm_exports(plan, job, runs)
    if plan.launcher == "horovodrun":
        lines.append(f"hosts=$({_ALLOCATION_HOSTS[plan.scheduler]} | sed 's/$/:{per_node}/' | paste -sd, -)  # horovodrun -H")
    lines += [
        "# suite run in the background, so that the scheduler's SIGTERM reaches it at once",
        "trap 'kill -TERM \"$runner\" 2>/dev/null' TERM INT",
        run_line + " &",
        "runner=$!",
        "status=0",
        'wait "$runner" || status=$?',
        'while kill -0 "$runner" 2>/dev/null; do wait "$runner" || status=$?; done  # a trapped signal ends the first wait early',
        'if [ "$status" -eq 143 ] || [ "$status" -eq 130 ]; then',
        '  echo "stopped before the walltime; submit this script again to continue" >&2'
        if not job.array
        else '  echo "stopped before the walltime; submit this task again to continue: sbatch --array=$SLURM_ARRAY_TASK_ID THIS_FILE" >&2',
        '  exit "$status"',
        "fi",
        shlex.join([*suite, "report", out]),
        'exit "$status"',
        "",
    ]
    return "\n".join(lines)


def scenario_word(given: str | Path) -> str:
    """How the job's ``suite run`` names the scenario: a built-in scenario given by name, or by a path that is not
    relative to the working folder (the login node's installed package), by its name, which the node's suite resolves
    wherever its package lies; a scenario file by the path given (read from ``--workdir``, as everything else)."""
    text = str(given)
    path = Path(given)
    resolved = resolve_scenario(given)
    builtin = resolved.resolve().parent == BUILTIN_DIR.resolve()
    if builtin and (not path.exists() or path.is_absolute()):
        return resolved.stem
    return text if path.exists() else str(resolved)


def _queue_limits(plan: _Plan, job: JobOptions) -> list[QueueLimits]:
    """The limits the job's partition and QOS (Slurm) or queue (LSF) have, as the site preset knows them."""
    if plan.site is None or not job.site_limits:
        return []
    if plan.scheduler == "lsf":
        named = [(job.queue or plan.site.default_queue, "queue")]
    else:
        named = [(plan.partition, "partition"), (plan.qos, "QOS")]
    return [limit for name, kind in named if (limit := plan.site.limits_of(name, kind)) is not None]


def _walltime(plan: _Plan, job: JobOptions) -> int:
    """The job's walltime in seconds: ``--walltime``, refused past its queue's limit for the job's nodes in one line naming
    the limit; without ``--walltime``, :data:`DEFAULT_WALLTIME` or that limit where shorter. A node count past every row
    of the queue is refused too."""
    limits = _queue_limits(plan, job)
    site = plan.site.name if plan.site else ""
    for limit in limits:
        if (problem := limit.nodes_problem(site, plan.nodes)) is not None:
            raise ValueError(f"nodes: the largest run needs {plan.nodes:,} nodes of {plan.per_node} ranks; {problem}")
    if job.walltime is None:
        caps = [cap for limit in limits if (cap := limit.max_seconds(plan.nodes)) is not None]
        return min([parse_walltime(DEFAULT_WALLTIME), *caps])
    seconds = parse_walltime(job.walltime)
    for limit in limits:
        if (problem := limit.walltime_problem(site, plan.nodes, seconds)) is not None:
            raise ValueError(f"--walltime {shown(job.walltime)}: {problem}; --no-site-limits writes it anyway")
    return seconds


def _gpu_check(plan: _Plan, job: JobOptions) -> list[str]:
    """Before anything is launched: torch on a compute node sees the GPUs the job asked for, of the site's vendor, or
    the job ends in one line saying what torch sees (:mod:`suite.running.visible_gpus`). A Slurm script checks the
    node it runs on (its GPUs: every rank's there); an LSF script runs on a launch node, so it asks jsrun for one rank's.
    ``SUITE_DEVICE=cpu`` (the runs stay on the CPUs) skips it; a container's torch is the image's, not checked here."""
    if not plan.gpus_per_rank or plan.container is not None:
        return []
    vendor = plan.site.gpu_vendor if plan.site else "nvidia"
    if plan.scheduler == "lsf":
        want = plan.gpus_per_rank
        start = ["jsrun", "-n", "1", "-r", "1", "-a", "1", "-c", "1", "-g", str(want)]
    else:
        want, start = plan.gpus_per_rank * plan.per_node, []
    check = shlex.join([*start, job.python, "-m", "suite.running.visible_gpus", str(want), vendor])
    failed = _fail(
        "on %s, %s: install the torch build for these GPUs into the suite's environment (the script's header says what "
        "runs on this site), or run on the CPUs (--gpus-per-rank 0, or SUITE_DEVICE=cpu)",
        '"$(hostname)"',
        '"$(printf \'%s\\n\' "$why" | tail -n 1)"',
    )
    return [
        f"# torch must see the {want} GPU{'s' if want != 1 else ''} asked for ({vendor}) before anything is launched "
        "(SUITE_DEVICE=cpu: the runs stay on the CPUs, unchecked)",
        f'if [ "${{SUITE_DEVICE:-auto}}" != cpu ]; then why=$({check} 2>&1) || {failed}; fi',
    ]


def _run_line(suite: list[str], scenario: str, out: str, plan: _Plan, job: JobOptions) -> str:
    """The script's ``suite run`` line: the scenario into ``out``, resumable, placed as ``plan`` says (shell words
    quoted; the rendezvous, hosts and array task's run come from variables the script sets)."""
    nodes, per_node = plan.nodes, plan.per_node
    run_args = [
        *suite,
        "run",
        scenario,
        "--out",
        out,
        "--resume",
        "--quiet",
        "--grace",
        str(WARNING_S // 2),
        "--launcher",
        plan.launcher,
        "--nodes",
        str(nodes),
        "--ranks-per-node",
        str(per_node),
        "--gpus-per-rank",
        str(plan.gpus_per_rank),
    ]
    if plan.cpus_per_rank:
        run_args += ["--cpus-per-rank", str(plan.cpus_per_rank)]
    if plan.container:
        run_args += ["--container", plan.container.runtime, plan.container.image]
        run_args += ["--container-gpus", plan.container.gpus or "none"]
    for key, value in job.overrides.items():  # JSON is YAML 1.2: suite run reads each value back as it was parsed here
        run_args += ["--set", f"{key}={json.dumps(value)}"]
    # the rendezvous of the torch and deepspeed engines (mpirun passes it with -x; the others pass the environment)
    run_line = shlex.join(run_args) + ' --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"'
    if plan.launcher == "horovodrun":
        run_line += ' --hosts "$hosts"'
    if job.array:
        run_line += ' --only "$run_id"'
    return run_line


def _setup(plan: _Plan, job: JobOptions) -> list[str]:
    """The site's setup lines, then the user's preamble: both before ``set -u`` (module and conda scripts read unset
    variables), the preamble last so that it can load other versions."""
    lines = []
    if plan.site and plan.site.setup and job.site_setup:
        lines += [
            f"# --- {plan.site.name}'s setup, as its user guide writes it (leave out: --no-site-setup) ---",
            *plan.site.setup,
        ]
    if job.preamble:
        lines += _preamble(job.preamble)
    return lines


def _fail(message: str, *words: str) -> str:
    """Shell that prints ``error: MESSAGE`` (a printf format of our own text; ``words``: shell words, quoted values or
    ``"$(hostname)"``, for its ``%s``) on one line to stderr and ends the job with exit code 2."""
    line = shlex.quote("error: " + message + "\\n")  # printf's \\n, inside the quoted format
    return f"{{ printf {line} {' '.join(words)} >&2; exit 2; }}"


def _environment(plan: _Plan, job: JobOptions) -> list[str]:
    """The suite's Python environment (``--module``, then ``--venv`` or ``--conda``), after ``cd`` so that a relative
    path is read from the working folder; each step that fails ends the job in one line naming the option."""
    if not (job.module or job.venv or job.conda):
        return []
    options = [*(["--module"] if job.module else []), *(["--venv"] if job.venv else []), *(["--conda"] if job.conda else [])]
    lines = [
        f"# --- the suite's Python environment ({', '.join(options)}) ---",
        "set +u  # module and activation scripts read unset variables",
    ]
    for name in job.module:
        word = shlex.quote(name)
        failed = _fail("module load %s failed on %s (--module): see module avail", word, '"$(hostname)"')
        lines.append(f"module load {word} || {failed}")
    if job.venv:
        venv = shlex.quote(job.venv)
        missing = _fail(
            "no virtual environment at %s on %s (--venv, read from %s): make it there (python3 -m venv DIR; "
            "DIR/bin/pip install the suite) or write this script again with --venv DIR",
            venv,
            '"$(hostname)"',
            '"$PWD"',
        )
        lines += [f"[ -f {venv}/bin/activate ] || {missing}", f"source {venv}/bin/activate"]
    if job.conda:
        conda = shlex.quote(job.conda)
        hint = f" (--module {plan.site.conda_module} on {plan.site.name})" if plan.site and plan.site.conda_module else ""
        no_conda = _fail(f"conda is not on PATH on %s (--conda): load the module that gives it first{hint}", '"$(hostname)"')
        failed = _fail("conda activate %s failed on %s (--conda): see conda env list", conda, '"$(hostname)"')
        lines += [
            f"command -v conda >/dev/null || {no_conda}",
            'eval "$(conda shell.bash hook)"',
            f"conda activate {conda} || {failed}",
        ]
    return [*lines, "set -u"]


def _import_check(job: JobOptions) -> list[str]:
    """Before anything is launched: the interpreter imports the suite, or the job ends in one line naming the fix."""
    python = shlex.quote(job.python)
    given = [option for option, value in (("--module", job.module), ("--venv", job.venv), ("--conda", job.conda)) if value]
    set_up = f"the environment of {' and '.join(given)}" if given else "the environment the job was given"
    failed = _fail(
        f"%s on %s cannot import the suite (%s): install it into {set_up} (pip install the suite there), or write "
        "this script again with --venv DIR, --conda ENV or --module NAME of an environment that holds it",
        python,
        '"$(hostname)"',
        '"$(printf \'%s\\n\' "$why" | tail -n 1)"',
    )
    return [
        "# the suite must import on the nodes before anything is launched",
        f"why=$({python} -c 'import suite' 2>&1) || {failed}",
    ]


def _slurm_exports(plan: _Plan, job: JobOptions, runs: list[Run]) -> list[str]:
    """srun's MPI plugin and CPU binding as its input variables (sbatch has no --cpu-bind), and a job array's runs."""
    lines = []
    if plan.mpi:
        lines.append(f"export SLURM_MPI_TYPE={plan.mpi}  # srun --mpi={plan.mpi}")
    if plan.scheduler == "slurm" and plan.gpu_bind:  # a step does not take #SBATCH --gpu-bind: srun reads it from here
        lines.append(f"export SLURM_GPU_BIND={plan.gpu_bind}  # srun --gpu-bind={plan.gpu_bind}, for every run's srun")
    if plan.scheduler == "slurm" and plan.site and plan.site.cpu_bind:
        bind = plan.site.cpu_bind
        lines.append(f"export SLURM_CPU_BIND={bind}  # srun --cpu-bind={bind}, as the site's guide does")
    if job.array:
        lines += [
            f"runs=({' '.join(shlex.quote(run.run_id) for run in runs)})  # task i runs runs[i]",
            "run_id=${runs[$SLURM_ARRAY_TASK_ID]}",
        ]
    return lines


def _lsf_header(name: str, nodes: int, seconds: int, job: JobOptions) -> list[str]:
    header = [
        f"#BSUB -J {name}",
        f"#BSUB -nnodes {nodes}",
        f"#BSUB -W {lsf_time(seconds)}",
        f"#BSUB -o {name}.%J.out",
        f"#BSUB -e {name}.%J.err",
        f"#BSUB -wa TERM -wt {WARNING_S // 60}  # SIGTERM {WARNING_S // 60} minutes before the walltime",
    ]
    if job.account:
        header.append(f"#BSUB -P {job.account}")
    if job.queue:
        header.append(f"#BSUB -q {job.queue}")
    return header


def _slurm_header(name: str, plan: _Plan, seconds: int, job: JobOptions, array: int | None) -> list[str]:
    """``#SBATCH`` lines; ``array``: the tasks of a job array (one per run), or None."""
    header = [
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodes={plan.nodes}",
        f"#SBATCH --ntasks-per-node={plan.per_node}",
        f"#SBATCH --time={slurm_time(seconds)}",
        f"#SBATCH --output={name}.%A_%a.out" if array else f"#SBATCH --output={name}.%j.out",
        f"#SBATCH --signal=B:TERM@{WARNING_S}  # SIGTERM to this script {WARNING_S} s before the walltime",
    ]
    if array:
        header.append(f"#SBATCH --array=0-{array - 1}%1  # one task per run, one at a time")
    if plan.gpus_per_rank and plan.site and plan.site.gpus_per_node:
        header.append(f"#SBATCH --gpus-per-node={plan.gpus_per_rank * plan.per_node}")
    elif plan.gpus_per_rank:
        header.append(f"#SBATCH --gpus-per-task={plan.gpus_per_rank}")
    if plan.gpu_bind:
        header.append(f"#SBATCH --gpu-bind={plan.gpu_bind}")
    if plan.cpus_per_rank:
        header.append(f"#SBATCH --cpus-per-task={plan.cpus_per_rank}")
    for option, value in (
        ("account", job.account),
        ("partition", plan.partition),
        ("qos", plan.qos),
        ("constraint", plan.constraint),
    ):
        if value:
            header.append(f"#SBATCH --{option}={value}")
    return header


def default_name(name: str, job: JobOptions) -> str:
    """``NAME[.SITE][.array].SCHEDULER.sh``: the site in the name, so that presets do not overwrite each other's."""
    parts = [name, *([job.site] if job.site else []), *(["array"] if job.array else []), job.scheduler_name(), "sh"]
    return ".".join(parts)


JOBS_DIR = "jobs"
"""Where ``suite jobscript`` writes its script without ``--out`` (in the working folder)."""


def write_jobscript(scenario_path: str | Path, out: Path | None, job: JobOptions, force: bool = False) -> Path:
    """Render and write the batch script; returns its path (default :func:`default_name` under ``jobs/``; a link, FIFO
    or other non-folder at ``jobs`` is refused, never followed: :func:`suite.records.nofollow.make_folders`). A file
    already there is replaced only with ``force`` (``--force``): it may be a script already submitted, or edited."""
    text = render(scenario_path, job)
    name = load_scenario(resolve_scenario(scenario_path), job.overrides or None, caps=job.caps).name
    path = out or path_under(Path(JOBS_DIR), default_name(name, job))
    if not force and (path.exists() or path.is_symlink()):
        raise ValueError(f"{shown(str(path))} exists; give --force to replace it, or --out FILE to write another")
    with output_folder(path.parent):  # its folder: never a link, nobody else may write it (records.nofollow)
        atomic_write_text(path, text, mode=0o777)  # executable; made so before it is in place, never through a link
    return path
