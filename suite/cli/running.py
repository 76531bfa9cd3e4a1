"""Sub-commands that run runs: ``suite run``, ``suite jobscript`` and ``suite gpu-check``."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .common import UsageError, parse_overrides

if TYPE_CHECKING:
    from ..config.scenario import Run, Scenario, ScenarioCaps
    from ..running.launch import LaunchOptions


def _launch_options(args: argparse.Namespace) -> LaunchOptions:
    from ..running.commands import CONTAINER_RUNTIMES, Container
    from ..running.launch import LaunchOptions

    container = None
    if getattr(args, "container", None):
        runtime, image = args.container
        if runtime not in CONTAINER_RUNTIMES:
            raise ValueError(f"--container {runtime}: choose one of {', '.join(CONTAINER_RUNTIMES)}")
        if image.startswith("-"):
            raise ValueError(f"--container {image}: starts with '-', which would be read as an option; write it as ./NAME")
        container = Container(runtime, image, None if args.container_gpus == "none" else args.container_gpus)
    return LaunchOptions(
        launcher=args.launcher,
        hosts=args.hosts,
        nodes=args.nodes,
        ranks_per_node=args.ranks_per_node,
        gpus_per_rank=args.gpus_per_rank,
        cpus_per_rank=args.cpus_per_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        python=args.python or ("python3" if container else sys.executable),
        container=container,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from ..running.sweep import SweepOptions, run_scenario

    scenario, runs, others, out = _selected_runs(args)
    sweep = SweepOptions(dry_run=args.dry_run, resume=args.resume, quiet=args.quiet, timeout=args.timeout, grace=args.grace)
    return run_scenario(Path(args.scenario), scenario, runs, others, out, _launch_options(args), sweep)


def _selected_runs(args: argparse.Namespace) -> tuple[Scenario, list[Run], list[Run], Path]:
    """The scenario, the runs this command runs, the scenario's other runs (not selected by ``--only``), the results folder."""
    from ..config.expansion import expand, load_scenario
    from ..records.results import path_under

    overrides = parse_overrides(args.overrides)
    scenario = load_scenario(args.scenario, overrides, _caps(args))
    runs = everything = expand(scenario)
    for run in everything:  # provenance: run.json and every record (settings.overrides) say what the command line set
        run.overrides = overrides or None
    if args.only:
        runs = [r for r in runs if any(fnmatch.fnmatch(r.run_id, pattern) for pattern in args.only)]
        if not runs:
            raise UsageError(f"--only {' '.join(args.only)} matches no run of {scenario.name}")
    if args.trace:  # the run.json files carry it, so hand launches from them trace too
        for run in runs:
            run.trace = True
    _ask_for_logs(runs, args)
    if args.grace < 0:
        raise UsageError("--grace: must not be negative")
    chosen = {r.run_id for r in runs}
    others = [r for r in everything if r.run_id not in chosen]
    return scenario, runs, others, Path(args.out) if args.out else path_under("results", scenario.name)


def _ask_for_logs(runs: list[Run], args: argparse.Namespace) -> None:
    """``--tensorboard DIR`` and ``--mllog`` onto the runs (their run.json files carry them), then check the packages."""
    from ..running.runlogs import check_available

    for run in runs:
        run.logs.mllog = run.logs.mllog or args.mllog
        if args.tensorboard:
            run.tensorboard_dir = str(Path(args.tensorboard).resolve())
    check_available(runs)


def _caps(args: argparse.Namespace) -> ScenarioCaps:
    """``--max-runs`` and ``--max-scenario-bytes``."""
    from ..config.scenario import ScenarioCaps

    return ScenarioCaps(runs=args.max_runs, scenario_bytes=args.max_scenario_bytes)


def cmd_gpu_check(args: argparse.Namespace) -> int:
    from ..running.gpucheck import gpu_check

    if args.timeout <= 0:
        raise UsageError("--timeout: must be positive")
    engines = None if args.engines is None else [e.strip() for e in args.engines.split(",") if e.strip()]
    if engines is not None and not engines:
        raise UsageError("--engines: name at least one engine")
    return gpu_check(Path(args.out), args.timeout, engines)


def cmd_jobscript(args: argparse.Namespace) -> int:
    from ..running.jobscript import JobOptions, write_jobscript

    job = JobOptions(
        scheduler=args.scheduler,
        site=args.site,
        results=args.results,
        walltime=args.walltime,
        account=args.account,
        queue=args.queue,
        qos=args.qos,
        constraint=args.constraint,
        gpu_bind=args.gpu_bind,
        mpi=args.mpi,
        preamble=Path(args.preamble) if args.preamble else None,
        python=args.python,
        workdir=args.workdir,
        launcher=args.launcher,
        nodes=args.nodes,
        ranks_per_node=args.ranks_per_node,
        gpus_per_rank=args.gpus_per_rank,
        cpus_per_rank=args.cpus_per_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        site_setup=args.site_setup,
        array=args.array,
        container=tuple(args.container) if args.container else None,
        caps=_caps(args),
    )
    path = write_jobscript(Path(args.scenario), Path(args.out) if args.out else None, job)
    print(f"job script written to {path}")
    return 0
