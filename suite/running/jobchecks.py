"""Nothing in a job script is free text but the preamble, the user's own shell file: every other value is a safe name,
a directive value, one of its choices or a module name, or else holds no control character or line break and is
quoted with :func:`shlex.quote` wherever it is written, comments included (:mod:`suite.config.safe_text`).
:func:`suite.running.jobscript.render` checks them all, whether the options came from the command line or from Python,
and an error names the option.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..config.safe_text import directive_problem, name_problem, script_text_problem
from ..config.shown import shown
from .commands import CONTAINER_RUNTIMES
from .jobplan import JobOptions
from .sites import SLURM_MPI_TYPES


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
