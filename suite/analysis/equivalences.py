"""The equivalences the suite verifies on a configuration's own runs (the headline's ``checks``): replicas identical,
the same model on every process count where placement cannot change it, the same model on other engines."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..config.registry import STRATEGIES
from ..records.record import Record
from .strategy_fields import class_group_fields
from .systems import procs_of


def placement_invariant(record: Record) -> bool:
    """Whether this run's model should be bitwise the same on any number of ranks."""
    if record.strategy is None or record.strategy not in STRATEGIES:  # a plugin's records, the plugin not installed
        return False
    invariant = STRATEGIES[record.strategy].placement_invariant
    return (
        invariant is not None
        and record.procs is not None
        and invariant(record.procs, len(class_group_fields(record).classes or []))
    )


def _repeat(record: Record) -> int:
    """The record's ``repeat``, 0 where it has none."""
    return record.repeat if record.repeat is not None else 0


def checks(runs: list[Record], everything: list[Record]) -> list[str]:
    """The equivalences the suite verifies for one configuration, as short statements.

    Models are compared seed by seed: a different seed is a different model by design.
    """
    out = []
    identical = [r.replicas_identical for r in runs if r.replicas_identical is not None]
    if identical:
        out.append("replicas identical" if all(identical) else "REPLICAS DIFFER")
    strong = [r for r in runs if r.scaling == "strong" and r.model_digest and _repeat(r) == 0]
    by_seed: dict[Any, list[Record]] = defaultdict(list)
    for r in strong:
        by_seed[r.seed].append(r)
    swept = [group for group in by_seed.values() if len({r.procs for r in group}) > 1]
    if swept and all(placement_invariant(r) for group in swept for r in group):
        procs = ",".join(str(p) for p in sorted({procs_of(r) for group in swept for r in group}))
        same = all(len({r.model_digest for r in group}) == 1 for group in swept)
        out.append(f"same model on P={procs}" if same else f"MODEL DIFFERS across P={procs}")
    # the same strategy on other engines: the same model?
    for r in strong:
        twins = [
            o
            for o in everything
            if o.model_digest
            and o.engine != r.engine
            and (o.strategy, o.loss, o.procs, o.scaling, _repeat(o), o.seed)
            == (r.strategy, r.loss, r.procs, r.scaling, _repeat(r), r.seed)
        ]
        equal = sorted({str(o.engine) for o in twins if o.model_digest == r.model_digest})
        text = f"same model as {'/'.join(equal)} at P={r.procs}"
        if equal and text not in out:
            out.append(text)
    return out
