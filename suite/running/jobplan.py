"""What a batch script asks for: the job's options merged with its site preset and the defaults, checked against the
runs it will start and the site queue's limits; errors name the option."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.scenario import Run, ScenarioCaps
from ..config.shown import shown
from .commands import Container, LaunchOptions, command_for
from .sites import SCHEDULER_LAUNCHER, SITES, QueueLimits, Site
from .walltime import DEFAULT_WALLTIME, parse_walltime

SCRIPT_LAUNCHERS = {"lsf": ("jsrun", "mpirun", "horovodrun"), "slurm": ("srun", "mpirun", "horovodrun")}
"""The launchers a batch script of each scheduler can start its runs with from inside its allocation."""

SLURM_ONLY = ("qos", "constraint", "gpu_bind", "mpi", "array")
"""Job settings only Slurm has (LSF binds GPUs through jsrun's resource sets)."""
_A_SCRIPT = {"lsf": "an LSF", "slurm": "a Slurm"}


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
class JobPlan:
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


def plan_job(job: JobOptions, runs: list[Run]) -> JobPlan:
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
    return JobPlan(
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


def check_runs(runs: list[Run], plan: JobPlan) -> None:
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


def _queue_limits(plan: JobPlan, job: JobOptions) -> list[QueueLimits]:
    """The limits the job's partition and QOS (Slurm) or queue (LSF) have, as the site preset knows them."""
    if plan.site is None or not job.site_limits:
        return []
    if plan.scheduler == "lsf":
        named = [(job.queue or plan.site.default_queue, "queue")]
    else:
        named = [(plan.partition, "partition"), (plan.qos, "QOS")]
    return [limit for name, kind in named if (limit := plan.site.limits_of(name, kind)) is not None]


def job_walltime(plan: JobPlan, job: JobOptions) -> int:
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
