"""``suite run`` with sequential seeds: a block of seeds, the quality verdicts, another block where they are undecided.

A scenario whose ``train.seeds`` is a policy (:class:`suite.config.sections.SeedPolicy`) runs the first ``initial``
seeds of each entry (and every run of the entries with fixed seeds), takes the quality verdicts as the report will
(:func:`suite.analysis.findings.sequential_quality`) and runs the next ``step`` seeds of the systems still in an
undecided pair, until every pair is decided or the cap is reached. Each block is one ordinary sweep
(:func:`suite.running.sweep.run_scenario`), so a stopped procedure resumes where it stopped. The verdicts read only
the records this user wrote for the planned runs (:func:`planned_records`): a record planted in a shared folder
steers nothing; the folder's records are read once, before the first block.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..analysis.systems import config_name
from ..config.scenario import Run, Scenario, SeedPolicy
from ..records.record import Record
from ..records.trusted import trusted_records
from ..running.finished import as_recorded
from ..running.sweep import RunOptions, run_scenario

log = logging.getLogger(__name__)


def policy_of(runs: list[Run]) -> SeedPolicy | None:
    """The one sequential-seeds policy of ``runs`` (None: fixed seeds); entries with two different policies are refused."""
    policies = {run.train.seeds for run in runs if isinstance(run.train.seeds, SeedPolicy)}
    if len(policies) > 1:
        raise ValueError(
            "train.seeds: entries give different sequential-seeds policies "
            f"({', '.join(sorted(str(p) for p in policies))}); the verdicts of one family take their looks together"
        )
    return next(iter(policies), None)


def _sequential(run: Run) -> bool:
    return isinstance(run.train.seeds, SeedPolicy)


def planned_records(out: Path, runs: list[Run]) -> list[Record]:
    """The records in ``out`` that the sequential procedure reads: those this user wrote for ``runs`` with their
    settings (:func:`suite.records.trusted.trusted_records`); every other record there is named in a warning line and
    left out, so a planted record cannot end, skip or extend a sequence. A folder not made yet holds none (a link, a
    file or anything else there is the reader's to refuse)."""
    if not os.path.lexists(out):
        return []
    selection = trusted_records(out, plan={run.run_id: as_recorded(run.settings()) for run in runs})
    for line in selection.left_out:
        log.warning("sequential seeds: %s; its record is left out", line)
    return selection.records


def run_with_seeds(
    scenario_file: Path, scenario: Scenario, runs: list[Run], others: list[Run], out: Path, options: RunOptions
) -> int:
    """Run ``runs`` into ``out``: all at once with fixed seeds, block by block with a sequential policy."""
    policy = policy_of(runs)
    if policy is None:
        return run_scenario(scenario_file, scenario, runs, others, out, options)
    everything = runs + others
    fixed_only = sorted({config_name(r) for r in everything} - {config_name(r) for r in everything if _sequential(r)})
    if fixed_only:
        raise ValueError(
            f"train.seeds: {', '.join(fixed_only)} train a fixed list of seeds beside a sequential policy: the quality "
            "verdicts take their looks together, so give every system the policy (a timing entry of a system that "
            "has it may keep a list)"
        )
    names = {config_name(r) for r in everything}  # the whole family decides, even when --only runs part of it
    block = [r for r in runs if not _sequential(r) or r.seed_order < policy.initial]
    # the records an earlier suite run left, read once; each block's are kept as the sweep returns them
    known = {} if options.sweep.dry_run else {r.run_id: r for r in planned_records(out, everything) if r.run_id}
    look = 1
    while True:
        chosen = {r.run_id for r in block}
        others_now = [r for r in everything if r.run_id not in chosen]
        code = run_scenario(scenario_file, scenario, block, others_now, out, options, known) if block else 0  # --only: maybe none
        if code != 0 or options.sweep.dry_run:
            if options.sweep.dry_run:
                print(f"# sequential seeds: the first block; up to {policy.looks - 1} more block(s) where verdicts are undecided")
            else:
                log.warning(
                    "sequential seeds: a block did not finish cleanly; `suite run` again takes the verdicts and continues"
                )
            return code
        from ..analysis.findings import sequential_quality  # its statistics: only once a block has finished

        procedure = sequential_quality(
            [known[run_id] for run_id in sorted(known) if config_name(known[run_id]) in names]
        )  # folder order
        if procedure is None:
            log.warning("sequential seeds: the systems are not compared on the end-of-budget FID (see the report); no more seeds")
            return code
        family = procedure.family
        log.info(
            "sequential seeds, look %d of %d: %d pairs decided, %d undecided%s",
            procedure.look,
            policy.looks,
            len([p for p in family.pairs if p.decided]),
            len(family.undecided) + len(family.untestable),
            f"; {policy.step} more seeds for {', '.join(procedure.continuing)}" if procedure.continuing else "",
        )
        if procedure.done:
            return code
        start, end = policy.seeds_at(procedure.look), policy.seeds_at(procedure.look + 1)
        wanted = set(procedure.continuing)
        block = [r for r in runs if _sequential(r) and config_name(r) in wanted and start <= r.seed_order < end]
        if not block or procedure.look <= look - 1:
            return code
        look = procedure.look + 1
