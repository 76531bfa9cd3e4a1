"""``suite jobscript``: an LSF or Slurm batch script that runs a whole scenario in one allocation.

The script asks for enough nodes for the largest run, then calls ``suite run`` with
``--launcher jsrun`` (LSF, as on Summit) or ``--launcher srun`` (Slurm), so every run of the
sweep is started by the site's own launcher inside the same allocation, and finishes with
``suite report``. ``--resume`` makes a resubmitted job continue where the last one stopped:
finished runs are kept and an unfinished one continues from its last checkpoint.

Before the walltime the scheduler warns the job with SIGTERM (Slurm ``--signal=B:TERM@120``,
LSF ``-wa TERM -wt 2``), which the script passes to ``suite run``: the current run checkpoints
(``--grace``), its ranks stop, and it is recorded as interrupted; the report is skipped. The
walltime is given in Slurm's ``--time`` forms (:func:`parse_walltime`) and written in each
scheduler's own.

Nothing in the script is free text: the scenario's name (the job's name, its output files) is a
safe name (:func:`suite.config.validation.name_problem`, checked with the scenario), so are
``--account`` and ``--queue`` (checked when the command line is parsed), and every path and
command word is quoted with :func:`shlex.quote`.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import Any

from ..config.expansion import expand, load_scenario
from ..records.results import atomic_write_text, path_under
from .launch import LaunchOptions

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
        return ValueError(f"--walltime {text!r}: {why}")

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


def render(
    scenario_path: Path,
    scheduler: str,
    opts: LaunchOptions,
    results: str | None = None,
    walltime: str = "2:00:00",
    account: str | None = None,
    queue: str | None = None,
) -> str:
    """The batch script for ``scenario_path`` (validated first; errors name the field)."""
    seconds = parse_walltime(walltime)
    scenario = load_scenario(scenario_path)
    runs = expand(scenario)
    largest = max(r.procs for r in runs)
    per_node = opts.ranks_per_node or (6 if scheduler == "lsf" else 4)  # Summit: 6 GPUs per node
    nodes = max(opts.nodes, math.ceil(largest / per_node))
    out = results or f"results/{scenario.name}"
    launcher = "jsrun" if scheduler == "lsf" else "srun"
    suite = [opts.python, "-m", "suite"]  # the interpreter (and its environment) of the compute nodes
    run_args = [
        *suite,
        "run",
        str(scenario_path),
        "--out",
        out,
        "--resume",
        "--quiet",
        "--grace",
        str(WARNING_S // 2),
        "--launcher",
        launcher,
        "--nodes",
        str(nodes),
        "--ranks-per-node",
        str(per_node),
        "--gpus-per-rank",
        str(opts.gpus_per_rank),
    ]
    if opts.cpus_per_rank:
        run_args += ["--cpus-per-rank", str(opts.cpus_per_rank)]
    name = scenario.name
    if scheduler == "lsf":
        header = [
            f"#BSUB -J {name}",
            f"#BSUB -nnodes {nodes}",
            f"#BSUB -W {lsf_time(seconds)}",
            f"#BSUB -o {name}.%J.out",
            f"#BSUB -e {name}.%J.err",
            f"#BSUB -wa TERM -wt {WARNING_S // 60}  # SIGTERM {WARNING_S // 60} minutes before the walltime",
        ]
        if account:
            header.append(f"#BSUB -P {account}")
        if queue:
            header.append(f"#BSUB -q {queue}")
        # The batch script runs on a launch node; rank 0 of the torch/deepspeed engines runs on the
        # first compute host, which hosts their rendezvous.
        master = (
            'export MASTER_ADDR=$(sort -u "$LSB_DJOB_HOSTFILE" | grep -v -e batch -e login | head -n 1)'
            "  # torch/deepspeed rendezvous"
        )
    else:
        header = [
            f"#SBATCH --job-name={name}",
            f"#SBATCH --nodes={nodes}",
            f"#SBATCH --ntasks-per-node={per_node}",
            f"#SBATCH --time={slurm_time(seconds)}",
            f"#SBATCH --output={name}.%j.out",
            f"#SBATCH --signal=B:TERM@{WARNING_S}  # SIGTERM to this script {WARNING_S} s before the walltime",
        ]
        if opts.gpus_per_rank:
            header.append(f"#SBATCH --gpus-per-task={opts.gpus_per_rank}")
        if opts.cpus_per_rank:
            header.append(f"#SBATCH --cpus-per-task={opts.cpus_per_rank}")
        if account:
            header.append(f"#SBATCH --account={account}")
        if queue:
            header.append(f"#SBATCH --partition={queue}")
        master = 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)  # torch/deepspeed rendezvous'
    lines = [
        "#!/bin/bash",
        *header,
        f"# Scenario {name}: {len(runs)} runs, up to {largest} ranks ({per_node} per node, {opts.gpus_per_rank} GPU each).",
        f"# Generated by `suite jobscript`; submit with `{'bsub' if scheduler == 'lsf' else 'sbatch'} THIS_FILE`.",
        "set -euo pipefail",
        f"cd {shlex.quote(str(Path.cwd()))}",
        master,
        "export MASTER_PORT=${MASTER_PORT:-29500}",
        "# suite run in the background, so that the scheduler's SIGTERM reaches it at once",
        "trap 'kill -TERM \"$runner\" 2>/dev/null' TERM INT",
        shlex.join(run_args) + " &",
        "runner=$!",
        "status=0",
        'wait "$runner" || status=$?',
        'while kill -0 "$runner" 2>/dev/null; do wait "$runner" || status=$?; done  # a trapped signal ends the first wait early',
        'if [ "$status" -eq 143 ] || [ "$status" -eq 130 ]; then',
        '  echo "stopped before the walltime; submit this script again to continue" >&2',
        '  exit "$status"',
        "fi",
        shlex.join([*suite, "report", out]),
        'exit "$status"',
        "",
    ]
    return "\n".join(lines)


def write_jobscript(scenario_path: Path, scheduler: str, out: Path | None, opts: LaunchOptions, **kwargs: Any) -> Path:
    """Render and write the batch script; returns its path."""
    text = render(scenario_path, scheduler, opts, **kwargs)
    name = load_scenario(scenario_path).name
    path = out or path_under("jobs", f"{name}.{scheduler}.sh")
    atomic_write_text(path, text)
    path.chmod(0o755)
    return path
