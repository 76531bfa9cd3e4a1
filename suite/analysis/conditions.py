"""What a run's conditions say about comparing it, from the records alone: equal work (:func:`unequal_work`), a quiet
host (:func:`contention_warnings`, after :func:`suite.measure.hostload.contention`), a run's own warnings
(:func:`run_warnings`) and models that have not learned (:func:`not_learned_warnings`).

Systems stopped by ``train.steps`` or ``train.epochs`` (no images or time budget) get the work their own step makes,
so where the systems of one scenario and process count trained different numbers of training images their quality is
compared at unequal work; a run timed on a busy host measures the host too.
"""

from __future__ import annotations

from collections import defaultdict

from ..measure.metrics.signals import not_learned
from ..records.record import Record
from .systems import config_name, contended

MOST_NAMED = 3
"""Runs named in one warning line before the rest are counted."""


def _training_images(record: Record) -> float | None:
    """A run's training images: ``train_images`` (schema 5), else ``images_consumed``."""
    value = record.train_images
    if value is None:
        value = record.images_consumed
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: float) -> str:
    return f"{value:,.0f}"


def unequal_work(records: list[Record]) -> list[str]:
    """One warning per scenario and process count whose systems, stopped by steps or epochs (no images budget),
    trained unequal numbers of training images: the systems and their images (mean over seeds), fewest first."""
    groups: dict[tuple[str, str, int | None], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.status != "ok" or r.budget_images is not None or r.budget_s is not None:
            continue
        images = _training_images(r)
        if images is None:
            continue
        key = (r.scenario or "?", r.scaling or "strong", r.procs)
        groups[key][config_name(r)].append(images)
    lines = []
    for (scenario, scaling, procs), systems in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        means = {name: sum(v) / len(v) for name, v in systems.items()}
        if len(means) < 2 or max(means.values()) - min(means.values()) <= 0.01 * max(means.values()):
            continue
        named = ", ".join(f"{name} {_count(images)}" for name, images in sorted(means.items(), key=lambda kv: (kv[1], kv[0])))
        lines.append(
            f"Unequal work in scenario {scenario} ({scaling} scaling, P = {procs}), stopped by train.steps or epochs "
            f"without an images budget: training images {named} (up to {max(means.values()) / min(means.values()):.3g}x); their quality "
            "is compared at unequal training: give train.budget_images for equal work"
        )
    return lines


def contention_warnings(records: list[Record]) -> list[str]:
    """One line naming the runs timed on a busy host and why (the first :data:`MOST_NAMED`), or none."""
    busy = [r for r in records if r.status in ("ok", "diverged") and contended(r)]
    if not busy:
        return []
    timed = sum(1 for r in records if r.status in ("ok", "diverged"))
    named = "; ".join(f"{r.run_id}: {r.host_load.contention if r.host_load else None}" for r in busy[:MOST_NAMED])
    more = f"; and {len(busy) - MOST_NAMED} more" if len(busy) > MOST_NAMED else ""
    return [
        f"Busy host: {len(busy)} of {timed} runs were timed while other processes used their cores ({named}{more}): "
        "their times, images/s and speedups measure the host too (host_load in their records)"
    ]


def run_warnings(records: list[Record]) -> list[str]:
    """Every ``ok`` run's own warnings (its record's ``warnings``), one line each, prefixed by the run id."""
    return [f"{r.run_id}: {w}" for r in records if r.status == "ok" for w in (r.warnings or [])]


def condition_warnings(records: list[Record]) -> list[str]:
    """The report's warnings about the conditions of its runs: unequal work, busy hosts, the runs' own."""
    return unequal_work(records) + contention_warnings(records) + run_warnings(records)


def not_learned_warnings(records: list[Record]) -> list[str]:
    """One line per scored model that has not learned, with the reasons."""
    out = []
    for r in records:
        if r.status != "ok":
            continue
        for name, quality in (("", r.quality), (" (best cell)", r.quality_best_cell)):
            reasons = not_learned(quality) if quality is not None else []
            if reasons:
                out.append(f"{r.run_id}{name} has not learned: {'; '.join(reasons)}.")
    return out
