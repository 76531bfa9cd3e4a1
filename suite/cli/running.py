"""Sub-commands that run runs: ``suite run``, ``suite jobscript`` and ``suite gpu-check``."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .common import DIVERGED_EXIT_CODE, UsageError, log, stamped

if TYPE_CHECKING:
    from ..config.scenario import Run, Scenario
    from ..running.launch import LaunchOptions


def _launch_options(args: argparse.Namespace) -> LaunchOptions:
    from ..running.launch import LaunchOptions

    return LaunchOptions(
        launcher=args.launcher,
        hosts=args.hosts,
        nodes=args.nodes,
        ranks_per_node=args.ranks_per_node,
        gpus_per_rank=args.gpus_per_rank,
        cpus_per_rank=args.cpus_per_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        python=args.python or sys.executable,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from ..measure.metrics.features import FeatureUnavailable
    from ..running.finished import check_unchanged
    from ..running.launch import command_for
    from ..running.lock import ResultsLock

    scenario, runs, others, out = _selected_runs(args)
    opts = _launch_options(args)
    for run in runs:  # build every command first: a launcher problem shows before anything is written
        command_for(run, out / run.run_id, opts)
    try:
        _check_rulers(runs)
    except FeatureUnavailable as error:
        if not args.dry_run:
            raise
        log.warning("warning: %s", error)  # a dry run shows the commands; the real run stops here
    check_unchanged(out, runs, others)  # before the first write: a refusal leaves the folder as it was
    with ResultsLock(out):
        return _run_sweep(args, scenario, runs, out, opts)


def _check_rulers(runs: list[Run]) -> None:
    """Every ruler the runs will score with is there and is the pinned file, before anything trains."""
    from ..measure.metrics.rulers import find_classifier

    for dataset in sorted({r.dataset.name for r in runs if r.metrics.enabled or r.strategy == "cellular"}):
        find_classifier(dataset)  # every scored run also predicts classes with it; cellular ranks mixtures with it


def _selected_runs(args: argparse.Namespace) -> tuple[Scenario, list[Run], list[Run], Path]:
    """The scenario, the runs this command runs, the scenario's other runs (not selected by ``--only``), the results folder."""
    from ..config.expansion import expand, load_scenario
    from ..records.results import path_under

    scenario = load_scenario(args.scenario)
    runs = everything = expand(scenario)
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


def _result_lines(position: str, run: Run, record: dict) -> list[str]:
    """What ``suite run`` prints for one finished launch: skipped checkpoints, then its outcome."""
    if record["status"] == "diverged":  # "RUN: diverged at step 12 on rank 0: discriminator loss inf"
        line = f"{position} {run.run_id}: {record['reason']} ({record['wall_s']:.1f}s)"
    else:
        line = f"{position} {run.run_id}: {record['status']} in {record['wall_s']:.1f}s" + (
            "" if record["status"] == "ok" else f": {record['error'].splitlines()[0]}"
        )
    resumed = record.get("resumed_from")
    return [
        f"{run.run_id}: skipped {skipped}; continued from " + (f"checkpoint {resumed['index']}" if resumed else "step 0")
        for skipped in record.get("checkpoints_skipped") or []
    ] + [line]


def _run_sweep(args: argparse.Namespace, scenario: Scenario, runs: list[Run], out: Path, opts: LaunchOptions) -> int:
    """``suite run`` inside its results folder's lock."""
    import shlex

    from ..records.results import atomic_write_text, read_record
    from ..running.buildlocks import check_build_locks
    from ..running.launch import SignalGuard, Stop, check_devices, check_tools, command_for, launch, prepare
    from ..running.lock import check_room
    from ..running.reaper import Reaper

    atomic_write_text(out / "scenario.yaml", Path(args.scenario).read_text())
    run_dirs = [prepare(run, out, opts) for run in runs]  # run.json: all a worker needs, also for hand launches
    if args.dry_run:
        for run, run_dir in zip(runs, run_dirs):
            print(shlex.join(command_for(run, run_dir.resolve(), opts)))
        return 0
    check_tools(runs, opts)
    check_devices(runs)
    kept = {
        run.run_id for run, run_dir in zip(runs, run_dirs) if args.resume and ((read_record(run_dir) or {}).get("status") == "ok")
    }
    check_room(out, [run for run in runs if run.run_id not in kept])
    check_build_locks([run for run in runs if run.run_id not in kept])
    failures = diverged = 0
    progress = None
    if not args.quiet and sys.stderr.isatty():  # a progress bar in a terminal, plain lines in logs
        from tqdm import tqdm

        progress = tqdm(total=len(runs), unit="run", desc=scenario.name, dynamic_ncols=True)
    current = None  # the run being launched
    with Reaper(), SignalGuard() as guard:  # the reaper ends the launches should this process die unawares
        try:
            for i, (run, run_dir) in enumerate(zip(runs, run_dirs)):
                if run.run_id in kept:
                    log.info("[%d/%d] %s: kept (--resume)", i + 1, len(runs), run.run_id)
                    progress and progress.update(1)
                    continue
                if progress:
                    progress.set_postfix_str(f"{run.run_id} 0s")
                    tick = lambda elapsed, rid=run.run_id: progress.set_postfix_str(f"{rid} {elapsed:.0f}s")  # noqa: E731
                else:
                    log.info("[%d/%d] %s: started", i + 1, len(runs), run.run_id)
                    tick = None
                current = run, run_dir
                try:
                    record = launch(run, run_dir, opts, timeout=args.timeout, tick=tick, grace=args.grace, guard=guard)
                except OSError as error:  # its log or record could not be written: the disk is full, read-only or gone
                    progress and progress.close()
                    print(
                        f"error: run {i + 1} of {len(runs)}, {run.run_id}, has no record: {error}; the sweep stops "
                        "here, and `suite run ... --resume` continues once that is fixed",
                        file=sys.stderr,
                    )
                    return 1
                current = None
                ok, diverging = record["status"] == "ok", record["status"] == "diverged"
                failures += not ok and not diverging
                diverged += diverging
                lines = _result_lines(f"[{i + 1}/{len(runs)}]", run, record)
                if progress:
                    for text in lines:
                        progress.write(stamped(text))
                    progress.update(1)
                else:
                    for text in lines:
                        log.info(text)
        except Stop as stop:
            progress and progress.close()
            record = (read_record(current[1]) or {}) if current else {}
            if not current:
                where = "no run was going"
            elif record.get("status") == "interrupted":
                where = f"{current[0].run_id}: {record['error']}"
            else:
                where = f"{current[0].run_id} has no record (it could not be written)"
            print(
                f"stopped by {stop}; {where}\nfinished runs keep their results; `suite run ... --resume` continues",
                file=sys.stderr,
            )
            return 128 + stop.signum
    if progress:
        progress.close()
    print(
        f"results in {out}; {len(runs) - failures - diverged} ok, {failures} failed, {diverged} diverged. "
        f"Next: suite report {out}"
    )
    return 1 if failures else DIVERGED_EXIT_CODE if diverged else 0


def cmd_gpu_check(args: argparse.Namespace) -> int:
    from ..running.gpucheck import gpu_check

    if args.timeout <= 0:
        raise UsageError("--timeout: must be positive")
    return gpu_check(Path(args.out), args.timeout)


def cmd_jobscript(args: argparse.Namespace) -> int:
    from ..running.jobscript import write_jobscript

    path = write_jobscript(
        Path(args.scenario),
        args.scheduler,
        Path(args.out) if args.out else None,
        _launch_options(args),
        results=args.results,
        walltime=args.walltime,
        account=args.account,
        queue=args.queue,
    )
    print(f"job script written to {path}")
    return 0
