"""``suite run`` and ``suite gpu-check``: their options, and those ``suite jobscript`` shares (the caps on the
scenario, ``--container``, the values a job script holds as they are)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..config.safe_text import directive_problem, name_problem, script_text_problem
from .running import cmd_gpu_check, cmd_run


def _refused_by(problem_of: Callable[[str], str | None]) -> Callable[[str], str]:
    """An argument type that refuses, in one line, a value in which ``problem_of`` finds a problem."""

    def checked(value: str) -> str:
        if (problem := problem_of(value)) is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    return checked


safe_name = _refused_by(name_problem)
"""An argument that goes into a job script as it is (an account, a queue): a safe name or refused."""
directive_value = _refused_by(directive_problem)
"""An argument that goes into a job script's directive as it is (a constraint, a GPU binding), or refused."""
container_image = _refused_by(script_text_problem)
"""``--container``'s words: a runtime among the choices, then an image that can be written into a job script."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_caps(p: argparse.ArgumentParser) -> None:
    """The caps on the scenario a command reads (:class:`suite.config.scenario.ScenarioCaps`), each raised by its flag."""
    from ..config.scenario import MAX_RUNS, MAX_SCENARIO_BYTES

    g = p.add_argument_group("caps on the scenario (a huge sweep or file is refused, naming the cap)")
    g.add_argument(
        "--max-runs",
        type=positive_int,
        default=MAX_RUNS,
        metavar="N",
        help="refuse a scenario that expands to more runs than this (default %(default)d)",
    )
    g.add_argument(
        "--max-scenario-bytes",
        type=positive_int,
        default=MAX_SCENARIO_BYTES,
        metavar="N",
        help="refuse a scenario file larger than this (default %(default)d: 1 MiB)",
    )


def add_placement(p: argparse.ArgumentParser) -> None:
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
        type=positive_int,
        metavar="N",
        help="the most ranks a local launch starts (default: 8 per core of this machine; more is refused)",
    )
    g.add_argument(
        "--python", help="interpreter on the compute nodes (default: this one; python3 on the image's PATH with --container)"
    )
    add_container(g, "start each rank inside this container (srun, mpirun, jsrun); the image holds the suite")
    g.add_argument(
        "--container-gpus",
        choices=(*GPU_VENDORS, "none"),
        default="nvidia",
        help="the GPUs a --container is given: apptainer --nv (nvidia) or --rocm (amd); podman-hpc --gpu",
    )


def add_container(g: Any, what: str) -> None:
    from ..running.commands import CONTAINER_RUNTIMES

    g.add_argument(
        "--container",
        nargs=2,
        type=container_image,
        metavar=("RUNTIME", "IMAGE"),
        help=f"{what}: RUNTIME one of {', '.join(CONTAINER_RUNTIMES)}; IMAGE an image file (.sif) or registry name",
    )


def add_run(sub: Any) -> None:
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
    add_placement(p)
    add_caps(p)
    p.set_defaults(func=cmd_run, timestamped=True)


def add_gpu_check(sub: Any) -> None:
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
