"""``suite jobscript``: its options and handler."""

from __future__ import annotations

import argparse
from typing import Any

from .args_running import add_caps, add_container, directive_value, safe_name
from .running import cmd_jobscript


def add_jobscript(sub: Any) -> None:
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
    add_job_time_and_settings(p)
    p.add_argument(
        "--account", type=safe_name, help="project / account to charge (letters, digits, '.', '_', '-'; frontier: required)"
    )
    p.add_argument(
        "--queue",
        type=safe_name,
        help="queue (LSF) or partition (Slurm; on perlmutter the QOS, -q, as NERSC's queues are QOSes) "
        "(default: the site's: frontier batch) (letters, digits, '.', '_', '-')",
    )
    p.add_argument(
        "--qos",
        type=safe_name,
        help="Slurm quality of service (default: the site's: perlmutter regular) (letters, digits, '.', '_', '-')",
    )
    p.add_argument("-C", "--constraint", type=directive_value, help="Slurm node features, e.g. gpu (default: the site's)")
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
    add_job_environment(p)
    p.add_argument("--force", action="store_true", help="replace a script already at the path (default: refuse)")
    p.add_argument(
        "--array",
        action="store_true",
        help="Slurm: a job array, one task per run of the sweep (suite run --only RUN_ID), one task at a time",
    )
    add_container(p, "start each rank inside this container")
    p.add_argument("--workdir", help="folder the job works in (default: the folder it was submitted from)")
    add_job_placement(p)
    add_caps(p)
    p.set_defaults(func=cmd_jobscript)


def add_job_time_and_settings(p: argparse.ArgumentParser) -> None:
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


def add_job_environment(p: argparse.ArgumentParser) -> None:
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


def add_job_placement(p: argparse.ArgumentParser) -> None:
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
    g.add_argument("--gpu-bind", type=directive_value, help="Slurm --gpu-bind, e.g. closest, none (default: the site's)")
    g.add_argument("--master-addr", help="torch/deepspeed rendezvous host (default: the allocation's first compute host)")
    g.add_argument(
        "--master-port",
        type=int,
        default=29500,
        help="TCP port on --master-addr where the torch and deepspeed engines' ranks meet (torch.distributed's "
        "MASTER_PORT; a MASTER_PORT set in the job's environment wins) (default 29500)",
    )
