"""Runs that share a launch: the ranks start once (imports, ``MPI_Init``, ``hvd.init()``, process groups) and train
run after run, each with its own seed, settings, training window, record and folder (docs/architecture.md, "Runs that
share a launch").

Runs share a launch where their commands are the same but for the run (:func:`launch_key`); a run that needs a
process of its own says why (:func:`alone_reason`). The launch's command is its first run's with a
``--next-run RUN_DIR SHA256`` for each further run, and its output is cut into each run's ``log.txt`` where a rank logs
:data:`.commands.RUN_MARK` (:func:`split_log`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .commands import NEXT_RUN_OPTION, RUN_MARK

if TYPE_CHECKING:
    from ..train.engines.base import Engine
    from .planning import PlannedRun

PERFORMANCE_ALONE = ("compile", "cuda_graphs")
"""``performance`` settings whose compiled code or captured graphs stay in the process: such a run launches alone."""


def alone_reason(planned: PlannedRun) -> str | None:
    """Why ``planned``'s run needs a launch of its own (one line naming the setting), or None."""
    from ..config.registry import ENGINES

    run = planned.run
    if run.trace:
        return "--trace: a traced run's profiler and timeline cover its process"
    if run.train.checkpoint_every:
        return "train.checkpoint_every: a stop request checkpoints the run of a launch"
    active = [name for name in PERFORMANCE_ALONE if run.performance.active().get(name)]
    if active:
        return f"performance.{active[0]}: its compiled code stays in the process"
    engine: type[Engine] = ENGINES[run.engine].load()
    return engine.shared_launch_refusal(run)


def launch_key(planned: PlannedRun) -> str:
    """What runs that share a launch have in common: the launch command less the run's folder and digest, the engine's
    settings section and what else of the run it is started with (:meth:`~suite.train.engines.base.Engine.
    launch_traits`: Horovod's process sets), the threads per rank and the ``performance`` settings."""
    from ..config.registry import ENGINES

    run, folder = planned.run, planned.command[-3]  # every launcher's words end with RUN_DIR --run-sha256 DIGEST
    section = ENGINES[run.engine].settings
    engine: type[Engine] = ENGINES[run.engine].load()
    return json.dumps(
        [
            [word.replace(folder, "{RUN_DIR}") for word in planned.command[:-2]],  # torchrun's --log-dir is in it too
            run.engine,
            run.procs,
            run.train.threads,
            run.sweep_ranks_per_node,
            run.performance.active(),
            repr(getattr(run, section)) if section else None,
            engine.launch_traits(run),
        ]
    )


def plan_launches(planned: list[PlannedRun]) -> tuple[list[list[PlannedRun]], dict[str, str]]:
    """The launches that carry ``planned``, in the order of their first runs, the runs of each in their order; and the
    runs that launch alone because of a setting, by run id, with why (:func:`alone_reason`)."""
    launches: list[list[PlannedRun]] = []
    by_key: dict[str, list[PlannedRun]] = {}
    alone: dict[str, str] = {}
    for one in planned:
        reason = alone_reason(one)
        if reason is not None:
            alone[one.run.run_id] = reason
            launches.append([one])
            continue
        key = launch_key(one)
        if key in by_key:
            by_key[key].append(one)
        else:
            launches.append(by_key.setdefault(key, [one]))
    return launches, alone


def group_command(group: list[PlannedRun]) -> list[str]:
    """The command of a launch that carries ``group``: its first run's, with ``--next-run RUN_DIR SHA256`` for each
    further run."""
    extra = [word for one in group[1:] for word in (NEXT_RUN_OPTION, one.command[-3], one.run_digest)]
    return group[0].command + extra


def split_log(text: str, run_ids: list[str]) -> list[str]:
    """A launch's output cut at each run's :data:`.commands.RUN_MARK` lines: the text of each of ``run_ids`` (the first
    keeps what came before: the command, the start-up); a run whose mark is not there gets ''. Every rank logs the
    mark as it starts the run: the cut is at the last rank's (before the next run's first), so that what a slower
    rank still said of the run before stays with it."""
    lines = text.splitlines(keepends=True)
    marks = [[i for i, line in enumerate(lines) if f"{RUN_MARK}{run_id} " in line] for run_id in run_ids[1:]]
    cuts, limit = [len(lines)] * len(marks), len(lines)
    for k in reversed(range(len(marks))):  # each run's cut: its last mark before the next run's first
        before = [i for i in marks[k] if i < limit]
        cuts[k] = before[-1] if before else limit
        limit = min(marks[k], default=limit)
    starts = [0, *cuts]
    ends = [*cuts, len(lines)]
    return ["".join(lines[start : max(start, end)]) for start, end in zip(starts, ends)]


def dry_run_lines(group: list[PlannedRun], alone: dict[str, str], command: list[str]) -> list[str]:
    """What a dry run prints for one launch: a comment naming its runs where it carries several, or the reason a run
    launches alone; then its command."""
    import shlex

    if len(group) > 1:
        note = [f"# one launch, {len(group)} runs: {', '.join(one.run.run_id for one in group)}"]
    elif group[0].run.run_id in alone:
        note = [f"# {group[0].run.run_id}: a launch of its own: {alone[group[0].run.run_id]}"]
    else:
        note = []
    return [*note, shlex.join(command)]
