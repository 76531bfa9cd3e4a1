"""The fit of :mod:`suite.analysis.projection`: what the records say, the models fitted on them, their validation
on the runs they did not see, and projections of the fitted models.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Sequence, TypeVar

import numpy as np
import pandas as pd

from ...config.entries import CELLS, CLASS_GROUPS, ONE_GROUP, StrategyEntry
from ...config.escape import one_line
from ...config.registry import STRATEGIES
from ...measure.network import Network
from ...records.measured import TelemetrySummary
from ...records.record import Record
from ..strategy_fields import cellular_fields, class_group_fields
from .model import CellularModel, ClassGroupsModel, GanModel, Problem, StepCost, exchange_plan, predict

MIN_FIT_PROCS = 2
"""Process counts a configuration's fit runs must cover before its model is projected."""
MIN_CORE_SHARE = 0.8
"""A validated CPU run whose ranks got less than this share of their cores ran on a busy machine."""

CostModelKey = tuple[str | None, str | None, str | None, str | None, int | None, int | None, str | None]
"""What runs sharing one cost model share (:func:`config_key`)."""
PairKey = tuple[str, str | None, str | None, int | None]
"""Which networks a run's collectives carry (:func:`_pair_key`)."""

T = TypeVar("T")


def given_value(value: T | None) -> T:
    """``value``, which the checks that chose the record (:func:`usable`, :func:`_counted`) found there."""
    assert value is not None, "a record the projection fits has its per-rank fields"
    return value


def config_key(record: Record) -> CostModelKey:
    """Runs sharing a key share one cost model: strategy, engine, loss, data, threads, device."""
    dataset = record.dataset
    return (
        record.strategy,
        record.engine,
        record.loss,
        dataset.name if dataset else None,
        dataset.image_size if dataset else None,
        record.threads_per_rank,
        record.device,
    )


def model_name(key: CostModelKey) -> str:
    """``strategy / loss / engine (dataset NNpx, T threads, device)``, on one line with its controls escaped (the
    device is a record's words: :func:`suite.config.escape.one_line`)."""
    strategy, engine, loss, dataset, size, threads, device = key
    return one_line(
        f"{strategy} / {loss} / {engine} ({dataset} {size}px, {threads} thread{'s' if threads != 1 else ''}, {device})"
    )


def _entry(record: Record) -> StrategyEntry | None:
    """The registry's entry of a record's strategy; None when it is not installed."""
    strategy = record.strategy
    return STRATEGIES[strategy] if strategy is not None and strategy in STRATEGIES else None


def cost_model(record: Record) -> CostModelKind | None:
    """The cost model of a record's strategy: the kind its entry's ``cost_model`` trait names
    (:class:`suite.config.entries.StrategyEntry`, :data:`COST_MODEL_KINDS`); None when it names none or is not
    installed."""
    entry = _entry(record)
    return COST_MODEL_KINDS[entry.cost_model] if entry is not None and entry.cost_model is not None else None


def not_projected(record: Record) -> str | None:
    """Why a record's strategy is not projected (one line naming it), or None when it is."""
    strategy, entry = record.strategy, _entry(record)
    if entry is None:
        return f"not projected: strategy {strategy!r} is not installed (its plugin brings its cost model)"
    if entry.cost_model is None:
        return f"not projected: strategy {strategy!r} names no cost model the projection knows"
    return None


def _every(record: Record) -> int:
    """Steps between two allreduces of a one-group run: its strategy's ``steps_per_allreduce`` read from the record's
    part (local SGD's averaging period); 1 where the strategy has no such trait."""
    entry = _entry(record)
    steps = entry.steps_per_allreduce if entry is not None else None
    return int(steps(record.strategy_part)) if steps is not None else 1


def _pair_key(record: Record) -> PairKey:
    """Which networks a run's collectives carry: every unconditional strategy trains data_parallel's pair."""
    entry = _entry(record)
    pair = "conditional" if entry is not None and entry.conditional else "unconditional"
    dataset = record.dataset
    return (pair, record.loss, dataset.name if dataset else None, dataset.image_size if dataset else None)


def usable(record: Record) -> bool:
    """An ok run with per-rank window times, not oversubscribed: one the model may be fitted on."""
    telemetry = record.telemetry
    return (
        record.status == "ok"
        and cost_model(record) is not None
        and not record.oversubscribed
        and telemetry is not None
        and bool(telemetry.busy_s_per_rank)
        and bool(telemetry.timed_steps)
        and _per_rank_lists(record)
    )


def _per_rank_lists(record: Record) -> bool:
    """Whether the record has each rank's window steps, images, busy and blocked seconds, one per rank alike, and a
    label-partitioned run its groups' ranks and classes among its warm-up and steps (a record the suite wrote has;
    one edited by someone else may not)."""
    telemetry, comm = record.telemetry, record.comm
    lists: list[Sequence[float] | None] = [
        telemetry.work_steps_per_rank if telemetry else None,
        telemetry.work_images_per_rank if telemetry else None,
        telemetry.busy_s_per_rank if telemetry else None,
        comm.per_rank_seconds if comm else None,
    ]
    steps = lists[0]
    if not isinstance(steps, list) or not steps or not steps[0]:
        return False  # a rank's steps and images per step are taken from the first rank's, which must have made some
    if len(steps) != record.procs or not all(isinstance(v, list) and len(v) == len(steps) for v in lists):
        return False
    kind = cost_model(record)
    return kind is not None and kind.complete(record, len(steps))


def _telemetry(record: Record) -> TelemetrySummary:
    return given_value(record.telemetry)


def _ranks(record: Record) -> Iterator[tuple[int, int, float, float]]:
    """(window steps, images, busy seconds, blocked seconds) of each rank."""
    t = _telemetry(record)
    return zip(
        given_value(t.work_steps_per_rank),
        given_value(t.work_images_per_rank),
        given_value(t.busy_s_per_rank),
        given_value(given_value(record.comm).per_rank_seconds),
    )


def _counted(record: Record) -> bool:
    """An ok run whose engines counted its window traffic per rank (bytes are counts: any P will do), of a strategy
    with a cost model (its steps between two allreduces known)."""
    comm, telemetry = record.comm, record.telemetry
    return (
        record.status == "ok"
        and len((comm.per_rank_bytes if comm else None) or []) == record.procs
        and telemetry is not None
        and telemetry.work_steps_per_rank is not None
        and _per_rank_lists(record)
    )


def _class_steps(record: Record) -> dict[int, int]:
    """Window steps of each class GAN of a label-partitioned run (its steps minus its warm-up)."""
    warmup = given_value(_telemetry(record).warmup_steps_per_rank)
    generator_steps = record.generator_steps
    steps: dict[int, int] = {}
    for group in given_value(class_group_fields(record).groups):
        per_gan = warmup[group.ranks[0]] / len(group.classes)
        for c in group.classes:
            steps[int(c)] = int(generator_steps[str(c)] - per_gan)
    return steps


def _fit_step(records: list[Record], all_records: list[Record]) -> tuple[StepCost, float | None]:
    """A step cost from ``records``; the gradients' bytes a step from every counted run of the same networks."""
    points = [(images / steps, (busy - blocked) / steps) for r in records for steps, images, busy, blocked in _ranks(r) if steps]
    pair = _pair_key(records[0])
    per_step = [
        nbytes / steps * _every(r)
        for r in all_records
        if _counted(r) and _pair_key(r) == pair
        for steps, nbytes in zip(given_value(_telemetry(r).work_steps_per_rank), given_value(given_value(r.comm).per_rank_bytes))
        if steps and nbytes
    ]
    return StepCost.fit(points), float(np.mean(per_step)) if per_step else None


def _fit_cellular(records: list[Record], all_records: list[Record]) -> CellularModel:
    fitness: list[tuple[float, float]] = []
    mixture: list[tuple[float, float]] = []
    rest: list[float] = []
    for r in records:
        cells = cellular_fields(r)
        k, h, p = given_value(cells.cells_per_rank), given_value(cells.neighbourhood_size), given_value(cells.population)
        phases = given_value(cells.phases_s)
        for i, (steps, _, busy, blocked) in enumerate(_ranks(r)):
            units = steps * k
            f, m = phases["fitness"][i] / units, phases["mixture"][i] / units
            fitness.append((p * (2 * h + 1), f))
            mixture.append((1 if h == 1 else 2, m))
            rest.append((busy - blocked) / units - f - m)
    per_cell: list[float] = []
    for r in all_records:
        if _counted(r) and config_key(r)[:5] == config_key(records[0])[:5] and given_value(r.procs) > 1:
            grid, pgrid = given_value(r.grid), given_value(cellular_fields(r).process_grid)
            sent = exchange_plan(grid, (pgrid[0], pgrid[1]), given_value(cellular_fields(r).neighbourhood))
            work, nbytes = given_value(_telemetry(r).work_steps_per_rank), given_value(given_value(r.comm).per_rank_bytes)
            per_cell += [
                nbytes[i] / work[i] / sum(sent[i].values())
                for i in range(given_value(r.procs))
                if work[i] and nbytes[i] and sent[i]
            ]

    def through_origin(pairs: Sequence[tuple[float, float]]) -> float:
        u, v = np.array(pairs, dtype=float).T
        return float(u @ v / (u @ u))

    first = cellular_fields(records[0])
    return CellularModel(
        float(np.mean(rest)),
        through_origin(fitness),
        through_origin(mixture),
        float(np.mean(per_cell)) if per_cell else None,
        given_value(first.population),
        given_value(first.neighbourhood),
    )


def _image_factor(record: Record, group: int) -> float:
    """Images a rank's step drew, against its share of the group's batch (the trainer's images per step)."""
    t = _telemetry(record)
    steps, images = given_value(t.work_steps_per_rank), given_value(t.work_images_per_rank)
    return images[0] / steps[0] / (given_value(record.global_batch) / group)


class CostModelKind:
    """How one kind of strategy's window time and traffic grow with the ranks, as the projection reads it from records:
    what a record must hold, the model fitted on records, the problem a record solved, and the strong and weak problems
    a configuration is projected on. A strategy names its kind by its entry's ``cost_model`` trait
    (:data:`suite.config.entries.COST_MODELS`); :data:`COST_MODEL_KINDS` maps each name to its kind."""

    def complete(self, record: Record, ranks: int) -> bool:
        """Whether ``record`` (whose common per-rank lists hold ``ranks`` entries) has what this kind reads."""
        return bool(record.global_batch)  # the images a step of the group draws

    def fit(self, records: list[Record], all_records: list[Record]) -> GanModel | CellularModel:
        """The model of one configuration from its fit ``records`` (bytes from ``all_records``)."""
        return GanModel(*_fit_step(records, all_records))

    def problem(self, record: Record) -> Problem:
        """The problem ``record`` solved (at its own process count)."""
        t = _telemetry(record)
        factor = _image_factor(record, given_value(record.procs))
        return Problem(
            given_value(record.strategy),
            given_value(t.timed_steps),
            given_value(record.global_batch),
            factor,
            allreduce_every=_every(record),
        )

    def fitted(self, key: CostModelKey, runs: list[Record], records: list[Record]) -> Fitted:
        """The configuration ``key``'s model, fitted on ``runs`` (the smallest first), with its strong problem (the
        smallest run's whole problem) and weak one (its per-rank share)."""
        base, problem = runs[0], self.problem(runs[0])
        per_rank = dataclasses.replace(problem, batch=problem.batch // given_value(base.procs))
        return Fitted(key, self.fit(runs, records), problem, per_rank, procs=_procs(runs))


class OneGroup(CostModelKind):
    """One GAN trained by all ranks (:data:`suite.config.entries.ONE_GROUP`): the base kind."""


class ClassGroups(CostModelKind):
    """One GAN per class, the ranks split into class groups (:data:`suite.config.entries.CLASS_GROUPS`)."""

    def complete(self, record: Record, ranks: int) -> bool:
        groups, generator_steps = class_group_fields(record).groups or [], record.generator_steps
        warmup = record.telemetry.warmup_steps_per_rank if record.telemetry else None
        if not (super().complete(record, ranks) and groups and isinstance(generator_steps, dict) and isinstance(warmup, list)):
            return False
        return all(g.ranks and 0 <= g.ranks[0] < len(warmup) and g.classes for g in groups) and all(
            str(c) in generator_steps for g in groups for c in g.classes
        )

    def fit(self, records: list[Record], all_records: list[Record]) -> GanModel | CellularModel:
        return ClassGroupsModel(*_fit_step(records, all_records), max(len(_class_steps(r)) for r in records))

    def problem(self, record: Record) -> Problem:
        factor = _image_factor(record, len(given_value(class_group_fields(record).groups)[0].ranks))
        timed_steps = given_value(_telemetry(record).timed_steps)
        return Problem(given_value(record.strategy), timed_steps, given_value(record.global_batch), factor, _class_steps(record))

    def fitted(self, key: CostModelKey, runs: list[Record], records: list[Record]) -> Fitted:
        """Strong and weak alike: the largest class set measured (a rank's share is its group's classes)."""
        steps: dict[int, int] = {}
        for r in runs:
            steps = {**_class_steps(r), **steps}
        whole = dataclasses.replace(self.problem(runs[0]), class_steps=dict(sorted(steps.items())))
        return Fitted(key, self.fit(runs, records), whole, whole, procs=_procs(runs))


class Cells(CostModelKind):
    """Cellular coevolution on a grid of cells (:data:`suite.config.entries.CELLS`)."""

    def complete(self, record: Record, ranks: int) -> bool:
        cells = cellular_fields(record)
        phases = cells.phases_s  # the phases per rank, and what the exchange plan reads
        return (
            isinstance(phases, dict)
            and all(len(phases.get(part) or []) == ranks for part in ("fitness", "mixture"))
            and all((cells.cells_per_rank, cells.neighbourhood_size, cells.population, record.grid, cells.process_grid))
            and cells.neighbourhood is not None
        )

    def fit(self, records: list[Record], all_records: list[Record]) -> GanModel | CellularModel:
        return _fit_cellular(records, all_records)

    def problem(self, record: Record) -> Problem:
        grid = given_value(record.grid)
        return Problem(given_value(record.strategy), given_value(_telemetry(record).timed_steps), grid=(grid[0], grid[1]))

    def fitted(self, key: CostModelKey, runs: list[Record], records: list[Record]) -> Fitted:
        """Strong: a strong-scaling grid if one was run, else the largest; weak: the smallest run's block of cells per
        rank."""
        base = runs[0]
        grids = [(g[0], g[1]) for g in (given_value(r.grid) for r in runs)]
        strong_grids = [g for r, g in zip(runs, grids) if r.scaling == "strong"]
        grid = strong_grids[0] if strong_grids else max(grids, key=lambda g: g[0] * g[1])
        base_grid, base_pgrid = given_value(base.grid), given_value(cellular_fields(base).process_grid)
        block = (base_grid[0] // base_pgrid[0], base_grid[1] // base_pgrid[1])
        problem = self.problem(base)
        return Fitted(key, self.fit(runs, records), dataclasses.replace(problem, grid=grid), problem, block, _procs(runs))


COST_MODEL_KINDS: dict[str, CostModelKind] = {ONE_GROUP: OneGroup(), CLASS_GROUPS: ClassGroups(), CELLS: Cells()}
"""The projection's kind of each cost model a strategy's entry may name (:data:`suite.config.entries.COST_MODELS`)."""


def _procs(runs: list[Record]) -> tuple[int, ...]:
    return tuple(sorted({given_value(r.procs) for r in runs}))


def fit(records: list[Record], all_records: list[Record]) -> GanModel | CellularModel:
    """The cost model of one configuration from its fit ``records`` (bytes from ``all_records``)."""
    return given_value(cost_model(records[0])).fit(records, all_records)


def problem_of(record: Record) -> Problem:
    """The problem a record solved (at its own process count)."""
    return given_value(cost_model(record)).problem(record)


@dataclass
class Fitted:
    """One configuration's model with the problems it is projected on."""

    key: CostModelKey
    model: GanModel | CellularModel
    strong: Problem
    weak: Problem
    block: tuple[int, int] | None = None  # cellular weak scaling: cells per rank as rows x cols
    procs: tuple[int, ...] = ()
    """The process counts of the runs it was fitted on."""

    @property
    def refused(self) -> str:
        """Why this model is not projected (empty where it is): fitted on one process count, it would extrapolate a
        scaling law from one point."""
        if len(self.procs) >= MIN_FIT_PROCS:
            return ""
        counts = ", ".join(map(str, self.procs))
        return (
            f"not projected: fitted on one process count (P={counts}), and a scaling law is not extrapolated from one "
            f"point (run at least {MIN_FIT_PROCS} process counts, e.g. `scenarios/projection-check.yaml`)"
        )


def fit_all(records: list[Record], fit_procs: list[int] | None = None) -> list[Fitted]:
    """A model per configuration with a usable run, and its strong and weak problems.

    The strong problem is the smallest run's whole problem (label_partitioned: the largest class
    set measured; cellular: a strong-scaling grid if one was run); the weak one is its per-rank
    share (cellular: its block of cells per rank).
    """
    fitted: list[Fitted] = []
    for key in sorted({config_key(r) for r in records if usable(r)}, key=str):
        runs = sorted(
            (r for r in records if usable(r) and config_key(r) == key and (not fit_procs or r.procs in fit_procs)),
            key=lambda r: (given_value(r.procs), r.scaling != "strong"),
        )
        if runs:
            fitted.append(given_value(cost_model(runs[0])).fitted(key, runs, records))
    return fitted


def scaled_model(model: GanModel | CellularModel, compute_scale: float) -> GanModel | CellularModel:
    """``model`` with its computation times multiplied by ``compute_scale`` (a faster or slower device)."""
    if compute_scale == 1:
        return model
    if isinstance(model, CellularModel):
        return dataclasses.replace(
            model, rest=model.rest * compute_scale, fitness=model.fitness * compute_scale, mixture=model.mixture * compute_scale
        )
    step = dataclasses.replace(
        model.step, per_step=model.step.per_step * compute_scale, per_image=model.step.per_image * compute_scale
    )
    return dataclasses.replace(model, step=step)


def project(
    fitted: list[Fitted], net: Network, ranks: list[int], algorithm: str = "best", compute_scale: float = 1.0
) -> pd.DataFrame:
    """Strong- and weak-scaling time, speedup and efficiency of every configuration at ``ranks``.

    Speedup and efficiency are against the model's own P = 1 time of the same problem. A model fitted on one process
    count (:attr:`Fitted.refused`) gets no rows.
    """
    rows: list[dict[str, Any]] = []
    for f in (f for f in fitted if not f.refused):
        model = scaled_model(f.model, compute_scale)
        for scaling, problem in (("strong", f.strong), ("weak", f.weak)):
            weak = scaling == "weak"
            one = predict(model, problem, 1, net, algorithm, weak, f.block)
            for p in ranks:
                out = predict(model, problem, p, net, algorithm, weak, f.block)
                row = {
                    "config": model_name(f.key),
                    "strategy": f.key[0],
                    "scaling": scaling,
                    "procs": p,
                    "nodes": net.nodes(p),
                    "time_s": out.time,
                    "compute_s": out.compute,
                    "comm_s": out.comm,
                    "speedup": None,
                    "efficiency": None,
                    "note": out.note,
                }
                if out.time and one.time:
                    ratio = one.time / out.time
                    row.update(speedup=ratio if not weak else None, efficiency=ratio / p if not weak else ratio)
                rows.append(row)
    return pd.DataFrame(
        rows,
        columns=[
            "config",
            "strategy",
            "scaling",
            "procs",
            "nodes",
            "time_s",
            "compute_s",
            "comm_s",
            "speedup",
            "efficiency",
            "note",
        ],
    )


def model_table(fitted: list[Fitted]) -> pd.DataFrame:
    """The fitted parameters of every configuration, with the traffic its cost model says it has."""
    rows = [
        {
            "config": model_name(f.key),
            "parameters": f.model.describe(),
            "note": f.model.step.note if isinstance(f.model, GanModel) else "",
        }
        for f in fitted
    ]
    return pd.DataFrame(rows, columns=["config", "parameters", "note"])
