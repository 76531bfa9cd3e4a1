"""What must be there before a launch starts: the launchers and engine packages its commands name, the ranks this
machine holds for a local launch, and devices that can run the runs' ``performance`` settings and engines; each
refusal one line naming the run and what is missing."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

from ..config.scenario import Run
from .commands import LaunchError, LaunchOptions, local_procs_problem
from .planning import PlannedRun


def check_tools(planned: list[PlannedRun], opts: LaunchOptions) -> None:
    """Fail early, naming the missing launcher or engine package, how to install it and the runs that could run
    without it (:func:`missing_refusal`), rather than after the first runs; and a local launch of more ranks than this
    machine holds (:func:`.commands.local_procs_problem`)."""
    if opts.launcher == "local":
        for one in planned:
            if (problem := local_procs_problem(one.run, one.run.procs, opts)) is not None:
                raise LaunchError(problem)
    missing = missing_engines(planned, opts)
    if missing:
        raise LaunchError(missing_refusal(planned, missing))


def missing_engines(planned: list[PlannedRun], opts: LaunchOptions) -> dict[str, str]:
    """The planned runs that cannot start here, by run id, each with why: ``launcher not found: NAME`` (its command's
    first word is neither on PATH nor a file) or ``package not installed: NAME`` (its engine's
    :attr:`~suite.config.entries.EngineEntry.package`, looked for only where the ranks run this very interpreter, not
    in a container)."""
    from ..config.registry import ENGINES

    here = opts.container is None and Path(opts.python).resolve() == Path(sys.executable).resolve()
    found: dict[str, bool] = {}
    missing: dict[str, str] = {}
    for one in planned:
        first = one.command[0]
        if first != opts.python:
            if first not in found:
                found[first] = _found(first)
            if not found[first]:
                missing[one.run.run_id] = f"launcher not found: {first}"
                continue
        package = ENGINES[one.run.engine].package
        if here and package is not None and not _importable(package):
            missing[one.run.run_id] = f"package not installed: {package}"
    return missing


def _found(tool: str) -> bool:
    """Whether a command's first word is a program here: on PATH, or a file."""
    return shutil.which(tool) is not None or Path(tool).exists()


def _importable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def run_names(run_ids: list[str], at_most: int = 12) -> str:
    """``a, b, c`` or, past ``at_most``, the first ones and ``and N more``."""
    shown = ", ".join(run_ids[:at_most])
    return shown + (f" and {len(run_ids) - at_most} more" if len(run_ids) > at_most else "")


def missing_refusal(planned: list[PlannedRun], missing: dict[str, str]) -> str:
    """One line: what is missing, for the runs of which engines, how to install each (its registry entry's
    :attr:`~suite.config.entries.EngineEntry.install`), and the runs that could run here with ``--skip-missing``."""
    from ..config.registry import ENGINES

    whys: dict[str, list[str]] = {}  # "launcher not found" -> its names
    for why in dict.fromkeys(missing[one.run.run_id] for one in planned if one.run.run_id in missing):
        kind, name = why.split(": ", 1)
        whys.setdefault(kind, []).append(name)
    engines = sorted({one.run.engine for one in planned if one.run.run_id in missing})
    routes = "; ".join(f"{e}: {ENGINES[e].install}" if ENGINES[e].install else e for e in engines)
    several = len(engines) > 1
    what = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in whys.items())
    line = (
        f"{what}, for the runs of the "
        f"{' and '.join(engines)} engine{'s' if several else ''}: install {'them' if several else 'it'} ({routes}; "
        "`suite env` says which engines are installed)"
    )
    runnable = [one.run.run_id for one in planned if one.run.run_id not in missing]
    if not runnable:
        return line + ", or choose another engine or --launcher"
    return (
        f"{line}; the other {len(runnable)} run{'s' if len(runnable) > 1 else ''} can run here "
        f"({run_names(runnable)}): add --skip-missing to run {'them' if len(runnable) > 1 else 'it'} and skip the "
        f"{len(missing)} that cannot, or choose another engine or --launcher"
    )


def check_nvidia_only(runs: list[Run]) -> None:
    """On a ROCm torch, fail naming the first run whose engine's GPU path needs an NVIDIA GPU (its class says so:
    :attr:`suite.train.engines.base.Engine.needs_nvidia`). A dry run calls it without a GPU in sight (a login node's
    ROCm torch is the compute nodes'), unless ``SUITE_DEVICE=cpu`` keeps the runs off the GPUs."""
    from ..config.registry import ENGINES
    from ..measure.gpu_platform import current as current_platform

    if current_platform().name == "cuda":
        return
    for run in runs:
        if (refusal := ENGINES[run.engine].load().gpu_refusal()) is not None:
            raise LaunchError(f"{run.run_id}: {refusal}")


def check_devices(runs: list[Run]) -> None:
    """Fail before any rank starts, naming the run and setting, where a ``performance`` setting cannot run here, or
    where a run's engine needs an NVIDIA GPU and this torch is a ROCm build (:mod:`suite.measure.gpu_platform`)."""
    from ..config.validation import device_problem
    from ..train.engines.base import uses_cuda  # torch: imported only when runs are launched

    on_gpu = uses_cuda()
    compiler = os.environ.get("CXX") or next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if on_gpu:
        check_nvidia_only(runs)
    for run in runs:
        problem = device_problem(run.performance, on_gpu, compiler)
        if problem is not None:
            raise LaunchError(f"{run.run_id}: {problem[0]}: {problem[1]}")
