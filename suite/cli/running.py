"""Sub-commands that run runs: ``suite run``, ``suite jobscript`` and ``suite gpu-check``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import UsageError, log, options_from, parse_overrides

if TYPE_CHECKING:
    from ..config.scenario import Run, Scenario, ScenarioCaps
    from ..running.commands import LaunchOptions
    from ..running.sweep import RunOptions


def _launch_options(args: argparse.Namespace) -> LaunchOptions:
    from ..running.commands import CONTAINER_RUNTIMES, Container, LaunchOptions

    container = None
    if getattr(args, "container", None):
        runtime, image = args.container
        if runtime not in CONTAINER_RUNTIMES:
            raise ValueError(f"--container {runtime}: choose one of {', '.join(CONTAINER_RUNTIMES)}")
        if image.startswith("-"):
            raise ValueError(f"--container {image}: starts with '-', which would be read as an option; write it as ./NAME")
        container = Container(runtime, image, None if args.container_gpus == "none" else args.container_gpus)
    return options_from(
        LaunchOptions, args, python=args.python or ("python3" if container else sys.executable), container=container
    )


def cmd_run(args: argparse.Namespace) -> int:
    from ..config.builtin import resolve_scenario
    from ..tools.sequential_seeds import run_with_seeds

    args.scenario = str(resolve_scenario(args.scenario))  # a path, or a built-in scenario's name
    overrides = parse_overrides(args.overrides)
    scenario, runs, others, out = _selected_runs(args, overrides)
    options = _run_options(args, runs, overrides)
    if args.skip_missing:
        runs, others = _skip_missing(runs, others, out, options)
    if not args.json:
        return run_with_seeds(Path(args.scenario), scenario, runs, others, out, options)
    from ..tools.json_summary import dumps, run_summary

    with contextlib.redirect_stdout(sys.stderr):  # stdout holds the JSON document alone
        code = run_with_seeds(Path(args.scenario), scenario, runs, others, out, options)
    print(dumps(run_summary(out, int(code))))
    return code


def _skip_missing(runs: list[Run], others: list[Run], out: Path, options: RunOptions) -> tuple[list[Run], list[Run]]:
    """``--skip-missing``: the runs whose launcher or engine package is not installed here move from the runs to run
    to the others (as ``--only`` leaves them out), named in one warning; none left to run is a usage error."""
    from ..running.planning import plan_run
    from ..running.preflight import missing_engines, missing_refusal, run_names

    planned = [plan_run(run, out, options.launch, options.placement) for run in runs]
    missing = missing_engines(planned, options.launch)
    if not missing:
        return runs, others
    if len(missing) == len(runs):
        raise UsageError(f"--skip-missing: no run can run here; {missing_refusal(planned, missing)}")
    skipped = [run for run in runs if run.run_id in missing]
    whys = ", ".join(dict.fromkeys(missing.values()))
    log.warning(
        "--skip-missing: skipping %d of %d runs (%s): %s",
        len(skipped),
        len(runs),
        whys,
        run_names([r.run_id for r in skipped], len(skipped)),
    )
    return [run for run in runs if run.run_id not in missing], others + skipped


def _selected_runs(args: argparse.Namespace, overrides: dict[str, Any]) -> tuple[Scenario, list[Run], list[Run], Path]:
    """The scenario, the runs this command runs, the scenario's other runs (not selected by ``--only``), the results
    folder; the runs as expansion made them (final: the command line's additions are :func:`_run_options`' placement)."""
    from ..config.expansion import expand, load_scenario
    from ..config.names import did_you_mean

    scenario = load_scenario(args.scenario, overrides, _caps(args))
    out = Path(args.out) if args.out else _default_out(scenario.name)
    scenario = _under_recorded_name(scenario, out)
    runs = everything = expand(scenario)
    if args.only:
        ids = [r.run_id for r in everything]
        words = sorted({*ids, *(part for i in ids for part in i.split("-"))})  # whole ids and their parts
        for pattern in args.only:  # each pattern must select a run: a typo is named, not skipped
            if not fnmatch.filter(ids, pattern):
                hint = did_you_mean(pattern.strip("*?"), words, n=2)
                raise UsageError(
                    f"--only {pattern} matches no run of {scenario.name}{hint}; "
                    f"`suite run {args.scenario} --dry-run` lists its {len(ids)} runs"
                )
        runs = [r for r in runs if any(fnmatch.fnmatch(r.run_id, pattern) for pattern in args.only)]
    chosen = {r.run_id for r in runs}
    others = [r for r in everything if r.run_id not in chosen]
    return scenario, runs, others, out


def _default_out(name: str) -> Path:
    """``results/NAME``; a folder begun under the scenario's old name (:data:`suite.config.names.RENAMED_PREFIXES`)
    when only that one exists, so that its runs resume."""
    from ..config.names import old_names
    from ..records.results import path_under

    found = [path_under("results", old) for old in old_names(name) if path_under("results", old).is_dir()]
    return found[0] if found and not path_under("results", name).exists() else path_under("results", name)


def _under_recorded_name(scenario: Scenario, out: Path) -> Scenario:
    """``scenario`` under the old name its runs in ``out`` were recorded with, where they were made before it was
    renamed (``seed000-...`` -> ``paper000-...``): a run's settings hold its scenario's name, and a finished run's
    settings are never rewritten, so the folder keeps the name it began with."""
    from ..config.names import old_names
    from ..records.trusted import trusted_records

    olds = old_names(scenario.name)
    if not olds or not out.is_dir():
        return scenario
    recorded = {record.scenario for record in trusted_records(out).records}  # yours: a planted record renames nothing
    for old in olds:
        if old in recorded and scenario.name not in recorded:
            log.info("%s: its runs were recorded as scenario %s (its old name); they keep it", out, old)
            return dataclasses.replace(scenario, name=old)
    return scenario


def _run_options(args: argparse.Namespace, runs: list[Run], overrides: dict[str, Any]) -> RunOptions:
    """``suite run``'s options, built once: how it launches, how it goes through the runs, and the placement it adds
    to every run it launches (their run.json files carry it, so that hand launches from them trace and log too);
    the log packages the runs then ask for are checked here."""
    from ..config.scenario import RunPlacement
    from ..running.runlogs import check_available
    from ..running.sweep import RunOptions, SweepOptions

    placement = RunPlacement(
        trace=args.trace,
        mllog=args.mllog,
        tensorboard_dir=str(Path(args.tensorboard).resolve()) if args.tensorboard else None,
        overrides=overrides or None,  # provenance: run.json and every record (settings.overrides) say what --set set
    )
    check_available(runs, placement)
    if args.grace < 0:
        raise UsageError("--grace: must not be negative")
    return RunOptions(launch=_launch_options(args), sweep=options_from(SweepOptions, args), placement=placement)


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
    from ..config.builtin import resolve_scenario
    from ..running.jobplan import JobOptions
    from ..running.jobscript import write_jobscript

    job = options_from(
        JobOptions,
        args,
        preamble=Path(args.preamble) if args.preamble else None,
        container=tuple(args.container) if args.container else None,
        module=tuple(args.module or ()),
        caps=_caps(args),
        overrides=parse_overrides(args.overrides),
    )
    resolve_scenario(args.scenario)  # an unknown name is refused naming the close ones, before anything else
    path = write_jobscript(args.scenario, Path(args.out) if args.out else None, job, force=args.force)
    print(f"job script written to {path}")
    return 0
