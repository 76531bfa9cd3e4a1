"""Scenarios in, runs out: read a scenario file (:func:`load_scenario`) or data (:func:`parse_scenario`),
validate it, and expand it into concrete runs (:func:`expand`), one per entry, combination of its sweep,
process count, seed and repeat, each named by :func:`run_id_for`.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from .scenario import Run, RunSpec, Scenario, ScenarioError, build_section, default_loss, entry_section, run_train, seeds_of
from .sweep import sweep_id, sweep_points, with_point
from .validation import check_one_seed_field, check_scenario, fail

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; raise :class:`ScenarioError` naming the file and field."""
    path = Path(path)
    if not path.is_file():
        raise ScenarioError(f"{path}: no such scenario file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from None
    return parse_scenario(data, source=str(path))


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate already-parsed scenario data."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping with name, dataset, train, ... and runs")

    try:
        check_one_seed_field(data.get("train"), "train", fail)
        for i, entry in enumerate(data.get("runs") or []):
            if isinstance(entry, dict):
                check_one_seed_field(entry.get("train"), f"runs[{i}].train", fail)
        scenario = build_section(Scenario, data, "")
        check_scenario(scenario)
    except ScenarioError as error:
        raise ScenarioError(f"{source}: {error}") from None
    return scenario


def run_id_for(
    spec: RunSpec,
    loss: str,
    procs: int,
    scaling: str,
    repeat: int,
    grid: list[int] | None,
    seed: int | None = None,
    sweep: dict[str, Any] | None = None,
) -> str:
    """A readable, unique id such as ``label_partitioned-wgan-gp-mpi-p2-r0`` (``-s1-r0`` for seed 1 of a ``seeds`` list,
    ``-lr0.001-p2`` for a swept ``train.lr`` of 0.001)."""
    stem = spec.label or f"{spec.strategy}-{loss}-{spec.engine}"
    if spec.engine == "deepspeed" and not spec.label and spec.deepspeed.zero_stage:
        stem += f"-zero{spec.deepspeed.zero_stage}"
    parts = [stem, sweep_id(sweep)] if sweep else [stem]
    parts.append(f"p{procs}")
    if grid:
        parts.append(f"g{grid[0]}x{grid[1]}")
    if scaling == "weak":
        parts.append("weak")
    if seed is not None:
        parts.append(f"s{seed}")
    parts.append(f"r{repeat}")
    return "-".join(parts)


T = TypeVar("T", bound="DataclassInstance")


def _overlay(base: T, override: T) -> T:
    """``base`` with the fields that ``override`` sets (not null) replaced."""
    return dataclasses.replace(
        base, **{f.name: getattr(override, f.name) for f in dataclasses.fields(override) if getattr(override, f.name) is not None}
    )


def expand(scenario: Scenario) -> list[Run]:
    """All runs of a scenario: one per entry, combination of its sweep (:mod:`suite.config.sweep`), process count,
    seed and repeat.

    Ordered as every run's first repeat of its first seed (in file order, each sweep combination and process count),
    then every run's next seed, then the second repeats: interleaving spreads a machine's drift
    over time (clock boost after idle, a neighbour starting work) over every configuration,
    instead of biasing the ones that run last.
    """
    runs: list[Run] = []
    entries = [
        (i, point, with_point(spec, point)) for i, spec in enumerate(scenario.runs) for point in sweep_points(spec, f"runs[{i}]")
    ]
    for i, point, spec in entries:
        loss = spec.loss or default_loss(spec.strategy)
        scaling = spec.scaling or scenario.scaling
        for j, procs in enumerate(spec.procs):
            grid = None
            if spec.strategy == "cellular":  # validated: a grid, or one grid per process count
                grid = list(spec.grid or []) if scaling == "strong" else list((spec.grids or [])[j])
            dataset = dataclasses.replace(scenario.dataset)
            if spec.strategy == "label_partitioned" and scaling == "weak":
                dataset.classes = list((scenario.dataset.classes or list(range(procs)))[:procs])
            train = run_train(scenario, spec, f"runs[{i}].train")
            seeds = seeds_of(train)
            for repeat, (order, seed) in itertools.product(range(scenario.repeats), enumerate(seeds)):
                runs.append(
                    Run(
                        run_id=run_id_for(
                            spec, loss, procs, scaling, repeat, grid, seed if train.seeds is not None else None, point.values
                        ),
                        scenario=scenario.name,
                        strategy=spec.strategy,
                        engine=spec.engine,
                        loss=loss,
                        procs=procs,
                        scaling=scaling,
                        repeat=repeat,
                        dataset=dataset,
                        model=scenario.model,
                        train=dataclasses.replace(train, seed=seed, seeds=None),
                        wgan_gp=entry_section(scenario, spec, "wgan_gp", f"runs[{i}].wgan_gp"),
                        cellular=entry_section(scenario, spec, "cellular", f"runs[{i}].cellular"),
                        metrics=scenario.metrics,
                        deepspeed=spec.deepspeed,
                        horovod=_overlay(scenario.horovod, spec.horovod),
                        ddp=_overlay(scenario.ddp, spec.ddp),
                        performance=_overlay(scenario.performance, spec.performance),
                        trace=spec.trace,
                        logs=dataclasses.replace(scenario.logs),
                        grid=grid,
                        label=spec.label,
                        sweep_procs=list(spec.procs),
                        seed_order=order,
                        sweep=dict(point.values) or None,
                        sweep_order=point.order if point.values else None,
                    )
                )
    runs.sort(key=lambda run: (run.repeat, run.seed_order))  # stable: file order within each repeat and seed
    seen: set[str] = set()
    for run in runs:
        if run.run_id in seen:
            raise ScenarioError(f"{scenario.name}: two runs share the id {run.run_id}; give one of the entries a label")
        seen.add(run.run_id)
    return runs
