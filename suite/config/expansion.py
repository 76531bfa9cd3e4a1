"""Scenarios in, runs out: read a scenario file (:func:`load_scenario`) or data (:func:`parse_scenario`),
validate it, and expand it into concrete runs (:func:`expand`), one per entry, combination of its sweep,
process count, seed and repeat, each named by :func:`run_id_for`.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .names import close_names, did_you_mean
from .registry import ENGINES, LOSSES, STRATEGIES
from .scenario import (
    Run,
    RunSpec,
    Scenario,
    ScenarioCaps,
    ScenarioError,
    SeedPolicy,
    build_section,
    default_loss,
    entry_section,
    entry_sections,
    lift_sections,
    run_train,
    section_class,
    seeds_of,
    strategy_sections,
    unknown_strategies,
)
from .schema import Located, located_problems, section_type, type_hints
from .shown import itemised, shown, shown_name
from .sweep import sweep_id, sweep_points, with_point
from .validation import (
    NOT_READ_BY_ENTRIES,
    Unchecked,
    check_one_seed_field,
    check_scenario,
    fail,
    resolve_resolution,
    scenario_problems,
)
from .yamlfile import YamlError, YamlTooLarge, load_yaml

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None, caps: ScenarioCaps | None = None) -> Scenario:
    """Read and validate a scenario file, with ``overrides`` (``{"train.lr": 0.001}``, from ``suite run --set``) put
    over its fields first; raise :class:`ScenarioError` naming the file and every field at fault, or the cap
    (``caps``, default :class:`ScenarioCaps`) that the file or its runs exceed."""
    path, caps = Path(path), caps or ScenarioCaps()
    if not path.is_file():
        raise ScenarioError(f"{path}: no such scenario file")
    try:
        data = load_yaml(path, max_bytes=caps.scenario_bytes)
    except YamlTooLarge as error:
        raise ScenarioError(
            f"{path}: larger than the cap of {error.limit:,} bytes on a scenario file (--max-scenario-bytes raises it)"
        ) from None
    except YamlError as error:
        raise ScenarioError(str(error)) from None
    source = str(path)
    if overrides:
        data = with_overrides(data, overrides, source)
        source += " with " + " ".join(f"--set {key}={shown(value)}" for key, value in overrides.items())
    return parse_scenario(data, source=source, caps=caps)


def override_problem(key: str) -> str | None:
    """Why ``--set KEY=...`` names no field a scenario file can hold (one line), or None when it names one.

    A key is a dotted path through the sections: ``repeats``, ``train.lr``, ``train.checkpoint_every.minutes``,
    ``cellular.population``, or ``local_sgd.average_every`` for an installed plugin's section
    (:func:`suite.config.scenario.strategy_sections`).
    """
    cls: Any = Scenario
    parts = key.split(".")
    for i, part in enumerate(parts):
        if i == 0 and part in strategy_sections():
            cls = strategy_sections()[part]
            continue
        names = [f.name for f in dataclasses.fields(cls) if f.init and not (cls is Scenario and f.name in ("runs", "sections"))]
        if part not in names:
            where = ".".join(parts[:i]) or "a scenario"
            return f"{key}: {where} has no field {shown(part)}; expected one of {', '.join(names)}{did_you_mean(part, names)}"
        inner = section_type(type_hints(cls)[part])
        if i < len(parts) - 1 and inner is None:
            return f"{key}: {'.'.join(parts[: i + 1])} is not a section"
        cls = inner
    return None


def with_overrides(data: Any, overrides: dict[str, Any], source: str) -> dict[str, Any]:
    """Scenario ``data`` with each dotted field of ``overrides`` set (the sections on the way made where missing)."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping with name, dataset, train, ... and runs")
    data = copy.deepcopy(data)
    for key, value in overrides.items():
        if (problem := override_problem(key)) is not None:
            raise ScenarioError(f"--set {problem}")
        *sections, name = key.split(".")
        target = data
        for section in sections:
            if target.get(section) is None:
                target[section] = {}
            target = target[section]
            if not isinstance(target, dict):
                break  # the schema names the section that is not a mapping
        else:
            target[name] = value
    return data


def parse_scenario(data: Any, source: str = "<scenario>", caps: ScenarioCaps | None = None) -> Scenario:
    """Validate already-parsed scenario data; raise :class:`ScenarioError` naming the source and every field at fault
    (one problem: one line; several: a line that counts them, then one line each).

    The schema's problems are found in one pass (the file's sections, the entries' own section fields and the
    strategies' and losses' sections); the rules across fields run once the run count is within ``caps.runs``, so a huge
    sweep is refused before it is planned, and where the schema found problems on the parts that fit it only
    (:func:`_problems_beside`).
    """
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping with name, dataset, train, ... and runs")
    try:
        data = lift_sections(data)
    except ScenarioError as error:
        raise ScenarioError(f"{source}: {error}") from None
    own_sections = strategy_sections()
    written = data.pop("sections")
    hints = dict(unknown_strategies(data))  # the schema's problem at runs[i].strategy, with the plugin hint
    found = [(loc, hints.get(loc, text)) for loc, text in located_problems(Scenario, data)]
    found += [
        ((name, *loc), text)
        for name, section in written.items()
        for loc, text in located_problems(own_sections[name], section, name)
    ]
    found += _entry_problems(data.get("runs"))
    found += _seed_problems(data)
    if found:
        raise ScenarioError(f"{source}: " + itemised(*_problems_beside(found, data, written, caps or ScenarioCaps())))
    try:
        scenario = build_section(Scenario, data, "")
        scenario.sections = {name: build_section(own_sections[name], section, name) for name, section in written.items()}
        resolve_resolution(scenario, data)
        _check_run_count(scenario, (caps or ScenarioCaps()).runs)
        check_scenario(scenario)
    except ScenarioError as error:
        raise ScenarioError(f"{source}: {error}") from None
    return scenario


NAMED_FIELDS = ("strategy", "loss", "engine")
"""A run entry's fields that name a registry entry: the rest of the entry is not checked until they are known."""


def _problems_beside(
    found: list[Located], data: dict[str, Any], written: dict[str, Any], caps: ScenarioCaps
) -> tuple[list[str], list[str]]:
    """The schema's problems ``found``, then the rules across fields of the parts of ``data`` that fit the schema,
    and notes on what is not checked yet: each run entry whose strategy, loss or engine is not known (with the
    keys of it left unchecked, perhaps a plugin's section), and the entries that read a section that does not fit.

    Top-level sections that do not fit (and the one an unknown key most resembles, perhaps misspelt) take their
    defaults, and entries that do not fit are left out; a rule that reads any of them is not checked, so that no
    default stands in for what the file meant.
    """
    own_sections, fields = strategy_sections(), [f.name for f in dataclasses.fields(Scenario) if f.init]
    unknown: dict[int, list[str]] = {}  # entry -> its named fields not known
    for loc, _ in found:
        if len(loc) == 3 and loc[0] == "runs" and loc[2] in NAMED_FIELDS:
            unknown.setdefault(loc[1], []).append(loc[2])
    known = {f.name for f in dataclasses.fields(RunSpec)}
    hidden = [loc for loc, _ in found if len(loc) == 3 and loc[0] == "runs" and loc[1] in unknown and loc[2] not in known]
    problems = [text for loc, text in found if loc not in hidden]
    notes = [
        f"runs[{i}]: not checked until its {' and '.join(names)} {'is' if len(names) == 1 else 'are'} known"
        + "".join(f" (nor its {shown_name(loc[2])})" for loc in hidden if loc[1] == i)
        for i, names in unknown.items()
    ]
    broken: set[str] = set()
    for key in {loc[0] for loc, _ in found if loc}:
        broken.update([key] if key in fields or key in own_sections else close_names(str(key), fields))
    runs = data.get("runs")
    entries: list[Any] = runs if isinstance(runs, list) else []
    bad = {loc[1] for loc, _ in found if len(loc) > 1 and loc[0] == "runs"}
    positions = [i for i in range(len(entries)) if i not in bad]
    fitting = {key: value for key, value in data.items() if key in fields and key not in broken}
    fitting.setdefault("name", "unchecked")  # the name's own problem is listed; no rule reads this one
    fitting["runs"] = [entries[i] for i in positions]
    try:
        scenario = build_section(Scenario, fitting, "")
        scenario.sections = {
            name: build_section(own_sections[name], value, name) for name, value in written.items() if name not in broken
        }
        if "dataset" not in broken:
            resolve_resolution(scenario, fitting)
        _check_run_count(scenario, caps.runs)
    except ScenarioError as error:  # a rule on what fits that the others need: it is the last one told
        return [*problems, str(error)], notes
    problems += scenario_problems(scenario, Unchecked(frozenset(broken), tuple(positions)))
    held = sorted(broken - NOT_READ_BY_ENTRIES)
    if held and positions:
        waiting = [f"runs[{i}]" for i in positions]
        named = ", ".join(waiting) if len(waiting) <= 3 else f"{waiting[0]} and {len(waiting) - 1} more entries"
        notes.append(f"{named}: not checked until {' and '.join(held)} {'is' if len(held) == 1 else 'are'} fixed")
    return problems, notes


def run_count(scenario: Scenario) -> int:
    """How many runs the scenario expands to (:func:`expand`), counted without making them: per entry, its sweep's
    combinations times its process counts times its seeds, times the repeats. An entry whose sweep or train
    section is malformed counts as one combination and one seed (validation names its fault)."""
    total = 0
    for i, spec in enumerate(scenario.runs):
        combinations = 1
        for values in (spec.sweep or {}).values():
            combinations *= len(values) if isinstance(values, list) and values else 1
        try:
            seeds = len(seeds_of(run_train(scenario, spec, f"runs[{i}].train")))
        except ScenarioError:
            seeds = 1
        total += combinations * max(len(spec.procs), 1) * seeds
    return total * scenario.repeats


def _check_run_count(scenario: Scenario, cap: int) -> None:
    count = run_count(scenario)
    if count > cap:
        fail("runs", f"the scenario expands to {count:,} runs, more than the cap of {cap:,} (--max-runs raises it)")


def _entry_problems(runs: Any) -> list[Located]:
    """The schema's problems with the section fields run entries give (``runs[i].train: {lr: ...}``)."""
    if not isinstance(runs, list):
        return []
    sections = {name: section_class(name) for name in entry_sections()}
    found: list[Located] = []
    for i, entry in enumerate(runs):
        if not isinstance(entry, dict):
            continue
        for name, cls in sections.items():
            own = entry.get(name, (entry.get("sections") or {}).get(name))
            if isinstance(own, dict):
                found += [(("runs", i, name, *loc), text) for loc, text in located_problems(cls, own, f"runs[{i}].{name}")]
    return found


def _seed_problems(data: dict[str, Any]) -> list[Located]:
    """``seed`` and ``seeds`` given together, in the scenario's ``train`` or an entry's."""
    found: list[Located] = []
    runs = data.get("runs")
    entries: list[Any] = runs if isinstance(runs, list) else []  # not a list: the schema names it
    places = [(("train",), "train", data.get("train"))] + [
        (("runs", i, "train"), f"runs[{i}].train", entry.get("train"))
        for i, entry in enumerate(entries)
        if isinstance(entry, dict)
    ]
    for loc, path, train in places:
        try:
            check_one_seed_field(train, path, fail)
        except ScenarioError as error:
            found.append(((*loc, "seeds"), str(error)))
    return found


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
    engine = ENGINES[spec.engine]
    if not spec.label and engine.run_id_part is not None and engine.settings is not None:
        part = engine.run_id_part(getattr(spec, engine.settings))
        stem += f"-{part}" if part else ""
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
            strategy = STRATEGIES[spec.strategy]
            if strategy.grid:  # validated: a grid, or one grid per process count
                grid = list(spec.grid or []) if scaling == "strong" else list((spec.grids or [])[j])
            dataset = scenario.dataset
            if strategy.partitions_classes and scaling == "weak":
                dataset = dataclasses.replace(dataset, classes=list((dataset.classes or list(range(procs)))[:procs]))
            train = run_train(scenario, spec, f"runs[{i}].train")
            seeds = seeds_of(train)
            reads = (strategy.settings, LOSSES[loss].settings)
            reads_own = [name for name in strategy_sections() if name in reads]
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
                        train=dataclasses.replace(
                            train, seed=seed, seeds=train.seeds if isinstance(train.seeds, SeedPolicy) else None
                        ),
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
                        sections={name: entry_section(scenario, spec, name, f"runs[{i}].{name}") for name in reads_own},
                    )
                )
    runs.sort(key=lambda run: (run.repeat, run.seed_order))  # stable: file order within each repeat and seed
    seen: set[str] = set()
    for run in runs:
        if run.run_id in seen:
            raise ScenarioError(f"{scenario.name}: two runs share the id {run.run_id}; give one of the entries a label")
        seen.add(run.run_id)
    return runs
