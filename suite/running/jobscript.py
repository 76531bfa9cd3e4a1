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
walltime is given in Slurm's ``--time`` forms (:func:`suite.running.walltime.parse_walltime`) and written in each
scheduler's own.

What a site preset writes (the site guide's directives and ``module load`` lines; ``--no-site-setup`` leaves the
latter out), the suite's Python environment on the nodes (``--venv``, ``--conda``, ``--module``: a site preset is refused
without one), job arrays (``--array``) and containers (``--container``) are told in docs/clusters.md. The script goes to
``jobs/NAME[.SITE][.array].SCHEDULER.sh`` (:func:`default_name`), replaced only with ``--force``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..config.builtin import BUILTIN_DIR, resolve_scenario
from ..config.expansion import expand, load_scenario
from ..config.scenario import Run
from ..config.shown import shown
from ..records.nofollow import output_folder
from ..records.results import atomic_write_text, path_under
from .jobchecks import check_strings
from .jobplan import JobOptions, JobPlan, check_runs, job_walltime, plan_job
from .jobshell import environment_lines, gpu_check_lines, import_check_lines, setup_lines
from .walltime import WARNING_S, lsf_time, parse_walltime, slurm_time

_ALLOCATION_HOSTS = {
    "lsf": 'sort -u "$LSB_DJOB_HOSTFILE" | grep -v -e batch -e login',
    "slurm": 'scontrol show hostnames "$SLURM_JOB_NODELIST"',
}
"""Shell that lists the allocation's compute hosts, one a line."""

_SUBMIT_DIR = {"lsf": "LS_SUBCWD", "slurm": "SLURM_SUBMIT_DIR"}
"""The variable each scheduler sets to the folder the job was submitted from."""


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
    plan = plan_job(job, runs)
    check_runs(runs, plan)
    seconds = job_walltime(plan, job)
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
    lines += setup_lines(plan, job)
    lines += [
        "set -euo pipefail",
        f"cd {shlex.quote(job.workdir)}" if job.workdir else f'cd "${{{_SUBMIT_DIR[plan.scheduler]}:-$PWD}}"',
        *environment_lines(plan, job),
        *import_check_lines(job),
        *gpu_check_lines(plan, job),
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


def _run_line(suite: list[str], scenario: str, out: str, plan: JobPlan, job: JobOptions) -> str:
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


def _slurm_exports(plan: JobPlan, job: JobOptions, runs: list[Run]) -> list[str]:
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


def _slurm_header(name: str, plan: JobPlan, seconds: int, job: JobOptions, array: int | None) -> list[str]:
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
