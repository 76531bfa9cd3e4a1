"""A batch script's lines before ``suite run``: the site's setup and the user's preamble, the suite's Python
environment, and the checks that it imports and that torch sees the GPUs; each failure ends the job in one line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from .jobplan import JobOptions, JobPlan


def preamble_lines(path: Path) -> list[str]:
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


def setup_lines(plan: JobPlan, job: JobOptions) -> list[str]:
    """The site's setup lines, then the user's preamble: both before ``set -u`` (module and conda scripts read unset
    variables), the preamble last so that it can load other versions."""
    lines = []
    if plan.site and plan.site.setup and job.site_setup:
        lines += [
            f"# --- {plan.site.name}'s setup, as its user guide writes it (leave out: --no-site-setup) ---",
            *plan.site.setup,
        ]
    if job.preamble:
        lines += preamble_lines(job.preamble)
    return lines


def failed_line(message: str, *words: str) -> str:
    """Shell that prints ``error: MESSAGE`` (a printf format of our own text; ``words``: shell words, quoted values or
    ``"$(hostname)"``, for its ``%s``) on one line to stderr and ends the job with exit code 2."""
    line = shlex.quote("error: " + message + "\\n")  # printf's \\n, inside the quoted format
    return f"{{ printf {line} {' '.join(words)} >&2; exit 2; }}"


def environment_lines(plan: JobPlan, job: JobOptions) -> list[str]:
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
        failed = failed_line("module load %s failed on %s (--module): see module avail", word, '"$(hostname)"')
        lines.append(f"module load {word} || {failed}")
    if job.venv:
        venv = shlex.quote(job.venv)
        missing = failed_line(
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
        no_conda = failed_line(
            f"conda is not on PATH on %s (--conda): load the module that gives it first{hint}", '"$(hostname)"'
        )
        failed = failed_line("conda activate %s failed on %s (--conda): see conda env list", conda, '"$(hostname)"')
        lines += [
            f"command -v conda >/dev/null || {no_conda}",
            'eval "$(conda shell.bash hook)"',
            f"conda activate {conda} || {failed}",
        ]
    return [*lines, "set -u"]


def import_check_lines(job: JobOptions) -> list[str]:
    """Before anything is launched: the interpreter imports the suite, or the job ends in one line naming the fix."""
    python = shlex.quote(job.python)
    given = [option for option, value in (("--module", job.module), ("--venv", job.venv), ("--conda", job.conda)) if value]
    set_up = f"the environment of {' and '.join(given)}" if given else "the environment the job was given"
    failed = failed_line(
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


def gpu_check_lines(plan: JobPlan, job: JobOptions) -> list[str]:
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
    failed = failed_line(
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
