"""The rules of a scenario that its types cannot say: ranges, combinations of fields, and what each run
entry's strategy, engine, grid and process counts need. Every broken rule raises a
:class:`suite.config.scenario.ScenarioError` naming the field.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Iterable, NoReturn, Sequence

from .graph_rules import check_cuda_graphs
from .loss_rules import check_betas
from .plan import NATIVE_IMAGE_SIZES
from .registry import ARCHITECTURES, ENGINES, LOSSES, PROTOCOLS, STRATEGIES, engines_for
from .safe_text import name_problem
from .scenario import (
    Fail,
    MetricsConfig,
    PerformanceConfig,
    RunSpec,
    Scenario,
    ScenarioError,
    SeedPolicy,
    TrainConfig,
    default_loss,
    entry_own,
    entry_section,
    entry_sections,
    run_train,
    scenario_section,
    strategy_sections,
)
from .sections import CheckpointEvery
from .shown import itemised, shown
from .split_rules import check_batch_split, check_images_budget
from .sweep import SweepPoint, sweep_points, sweep_text, with_point


def fail(path: str, message: str) -> NoReturn:
    """Report a broken rule (:data:`Fail`)."""
    raise ScenarioError(f"{path}: {message}")


@dataclasses.dataclass(frozen=True)
class Unchecked:
    """What :func:`scenario_problems` leaves out where the file does not fit its schema: the top-level fields that
    do not (defaults stand in), and the file's index of each entry left in ``runs`` (those that do not fit are out)."""

    fields: frozenset[str] = frozenset()
    positions: tuple[int, ...] | None = None


NOT_READ_BY_ENTRIES = frozenset({"name", "description", "repeats", "logs", "runs"})
"""The top-level fields no run entry's rules read: every other one that does not fit its schema holds them back."""


def check_scenario(scenario: Scenario) -> None:
    """The rules across fields; one :class:`ScenarioError` listing every group's broken rule (:func:`scenario_problems`)."""
    if found := scenario_problems(scenario):
        raise ScenarioError(itemised(found))


def scenario_problems(scenario: Scenario, unchecked: Unchecked = Unchecked()) -> list[str]:
    """One line per group of rules broken; a group that reads a field of ``unchecked`` is left out. Each group stops
    at its first broken rule (a later rule of the group may need an earlier one to hold), and every group runs."""
    positions = unchecked.positions if unchecked.positions is not None else range(len(scenario.runs))
    entries = set(unchecked.fields - NOT_READ_BY_ENTRIES)  # an entry's rules read every other field: any unchecked holds them
    groups: list[tuple[set[str], Callable[[], object]]] = [
        ({"name", "model", "dataset", "repeats", "metrics"}, lambda: _check_top_level(scenario)),
        ({"runs"}, lambda: scenario.runs or fail("runs", "at least one run is needed")),
        ({"train"}, lambda: _check_train(scenario.train, "train", fail)),
        ({"metrics"}, lambda: _check_protocol(scenario.metrics, fail)),
        *_section_groups(scenario, LOSSES),  # each loss's section, by its entry's traits
        ({"metrics", "train"}, lambda: _check_budget_and_target(scenario, positions, fail)),
        ({"train"}, lambda: _check_checkpoints(scenario.train.checkpoint_every, fail)),
        *_section_groups(scenario, STRATEGIES, LOSSES),  # each strategy's section, by its entry's traits
    ]
    groups += [(entries, functools.partial(_check_entries, scenario, i, spec)) for i, spec in zip(positions, scenario.runs)]
    found = []
    for reads, group in groups:
        try:
            if not reads & unchecked.fields:
                group()
        except ScenarioError as error:
            found.append(str(error))
    return found


def _check_top_level(scenario: Scenario) -> None:
    if (problem := name_problem(scenario.name)) is not None:  # the results folder, the job's name
        fail("name", problem)
    _check_model(scenario, fail)
    classes = scenario.dataset.classes  # each label's range is the schema's
    if classes is not None and (not classes or len(set(classes)) != len(classes)):
        fail("dataset.classes", f"expected distinct non-negative labels, got {shown(classes)}")


def _check_entries(scenario: Scenario, i: int, spec: RunSpec) -> None:
    """The rules of run entry ``i``, for each combination of its sweep."""
    path = f"runs[{i}]"
    points = sweep_points(spec, path)  # the sweep's own shape and values first
    _check_entry_sections(spec, path, fail)
    for point in points:  # each combination as the entry reads with its values given
        _check_entry(with_point(spec, point), path, scenario, _naming_sweep(spec, point, path, scenario))


def _check_protocol(metrics: MetricsConfig, fail: Fail) -> None:
    """A protocol that fixes the sample count (``standard``: 10000 or 50000) gets one of its counts; ``prdc_k`` is below
    the sample count."""
    counts = PROTOCOLS[metrics.protocol].sample_counts
    if metrics.enabled and counts and metrics.samples not in counts:
        allowed = " or ".join(str(c) for c in counts)
        fail("metrics.samples", f"protocol {metrics.protocol} scores {allowed} samples, got {shown(metrics.samples)}")
    if metrics.enabled and metrics.prdc_k >= metrics.samples:  # a k-th neighbour needs k other samples
        fail("metrics.prdc_k", f"must be below metrics.samples ({shown(metrics.samples)}), got {shown(metrics.prdc_k)}")


def _check_entry(spec: RunSpec, path: str, scenario: Scenario, fail: Fail) -> None:
    """The rules of one run entry, with its own sections over the scenario's."""
    if spec.train:  # without its own fields the entry's train is the scenario's, checked once as that
        _check_train(run_train(scenario, spec, f"{path}.train"), f"{path}.train", fail)
    for name in strategy_sections():  # without its own fields the entry's section is the scenario's, checked as that
        if entry_own(spec, name):
            _check_section(name, scenario, f"{path}.{name}", fail, entry_section(scenario, spec, name, f"{path}.{name}"))
    _check_run_spec(spec, path, scenario, fail)


def _section_groups(
    scenario: Scenario, registry: Iterable[Any], checked: Iterable[Any] = ()
) -> list[tuple[set[str], Callable[[], object]]]:
    """The rule groups of the scenario's sections that the entries of ``registry`` bring (once each, and none that an
    entry of ``checked`` brings), with the top-level sections each group reads."""
    done = {entry.settings for entry in checked}
    names = list(dict.fromkeys(entry.settings for entry in registry if entry.settings is not None and entry.settings not in done))
    return [({name, *_section_reads(name)}, functools.partial(_check_section, name, scenario, name, fail)) for name in names]


def _section_entries(name: str) -> list[Any]:
    """The strategy and loss entries that bring section ``name``."""
    return [entry for entry in (*LOSSES, *STRATEGIES) if entry.settings == name]


def _section_reads(name: str) -> set[str]:
    """The other top-level sections the rules of section ``name`` read (its entries' ``scenario_reads``)."""
    return {read for entry in _section_entries(name) for read in entry.scenario_reads}


def _check_section(name: str, scenario: Scenario, path: str, fail: Fail, section: Any = None) -> None:
    """A strategy's or loss's section (the scenario's, or ``section``: an entry's with its own fields on top): the
    rules beyond its types that its entries bring, ``check_settings`` and then ``scenario_rules``."""
    section = scenario_section(scenario, name) if section is None else section
    for entry in _section_entries(name):
        if entry.check_settings is not None:
            entry.check_settings(section, path, fail)
    for entry in _section_entries(name):
        if entry.scenario_rules is not None:
            entry.scenario_rules(section, path, scenario, fail)


def _naming_sweep(spec: RunSpec, point: SweepPoint, path: str, scenario: Scenario) -> Fail:
    """How a combination's rules fail: naming the swept value a rule breaks on (``runs[3].sweep.train.lr[1]``);
    a rule on another field names the combination, unless the entry breaks it without its sweep too."""
    if not point.values:
        return fail
    swept = {f"{path}.{key}": f"{path}.sweep.{key}[{point.indices[key]}]" for key in point.values}

    def failing(where: str, message: str) -> NoReturn:
        if where in swept:
            fail(swept[where], message)
        _check_entry(dataclasses.replace(spec, sweep=None), path, scenario, fail)  # raises where the sweep is not the cause
        fail(where, f"{message} (with {path}.sweep's {sweep_text(point.values)})")

    return failing


def _check_entry_sections(spec: RunSpec, path: str, fail: Fail) -> None:
    """An entry overrides or sweeps only the sections its loss and strategy read (their registry traits)."""
    loss = LOSSES[spec.loss or default_loss(spec.strategy)]
    readers = {"train"} | {s for s in (loss.settings, STRATEGIES[spec.strategy].settings) if s}
    swept = [str(key) for key in (spec.sweep or {})]
    sections = entry_sections()
    given = [(f"{path}.{name}", name, set(entry_own(spec, name) or {})) for name in sections if entry_own(spec, name)]
    given += [(f"{path}.sweep.{key}", key.partition(".")[0], {key.partition(".")[2]}) for key in swept]
    for where, section, fields in given:
        if section in sections and section not in readers:
            fail(where, f"a {spec.strategy} entry with loss {loss.name} does not read {section} settings")
        optimizer = fields & {"lr", "betas"}
        if section == "train" and optimizer and loss.optimizer != "train":
            name = sorted(optimizer)[0]
            fail(
                where if where.startswith(f"{path}.sweep.") else f"{where}.{name}",
                f"the {loss.name} loss takes its Adam lr and betas from {loss.optimizer}: use {loss.optimizer}.{name}",
            )


def _check_train(train: TrainConfig, path: str, fail: Fail) -> None:
    """The rules of a ``train`` section (the scenario's, or one entry's with its own fields on top)."""
    check_betas(train.betas, f"{path}.betas", fail)
    if train.budget_images is not None and train.budget_s is not None:
        fail(f"{path}.budget_images", f"given alongside {path}.budget_s: give one budget, in seconds or in images")
    if train.ema_half_life is not None and train.budget_s is not None:  # its range: the schema's bounds
        fail(
            f"{path}.ema_half_life",
            f"given with {path}.budget_s: its half-life is a share of the steps, which a time budget does not fix",
        )
    _check_seeds(train, path, fail)


def _check_seeds(train: TrainConfig, path: str, fail: Fail) -> None:
    """A ``train.seeds`` list (distinct, not negative) or sequential policy (a cap at or above the first block)."""
    if isinstance(train.seeds, SeedPolicy):
        if train.seeds.max < train.seeds.initial:
            fail(
                f"{path}.seeds.max",
                f"is below initial ({train.seeds.max} < {train.seeds.initial}): the cap must allow the first block",
            )
    elif train.seeds is not None:
        if not train.seeds:
            fail(f"{path}.seeds", "is empty: give at least one seed, e.g. [0, 1, 2], or use seed")
        repeated = sorted({s for s in train.seeds if train.seeds.count(s) > 1})
        if repeated:
            fail(f"{path}.seeds", f"seeds repeat: {shown(repeated)} (a seed is one training draw; timing repeats are `repeats`)")


def resolve_resolution(scenario: Scenario, data: dict[str, Any]) -> None:
    """``dataset.resolution: native`` sets ``dataset.image_size`` to the size the dataset's files hold."""
    dataset = scenario.dataset
    if dataset.resolution != "native":
        return
    native = NATIVE_IMAGE_SIZES.get(dataset.name)
    if native is None:
        fail(
            "dataset.resolution",
            f"{dataset.name} images have no one original size: give dataset.image_size with resolution: resized",
        )
    given = (data.get("dataset") or {}).get("image_size")
    if given is not None and given != native:
        fail(
            "dataset.image_size",
            f"{given} is not {dataset.name}'s original {native}px, which resolution: native keeps; leave it out",
        )
    scenario.dataset = dataclasses.replace(dataset, image_size=native)  # sections are frozen: a new one, resolved


def _check_model(scenario: Scenario, fail: Fail) -> None:
    """The image size and the discriminator normalisation the architecture offers (its registry traits)."""
    model, entry = scenario.model, ARCHITECTURES[scenario.model.architecture]
    try:
        entry.check_image_size(scenario.dataset.image_size)
    except ValueError as error:
        fail("dataset.image_size", f"{error} (model.architecture {entry.name})")
    if model.critic_norm != "auto" and model.critic_norm not in entry.critic_norms:
        offered = f"one of auto, {', '.join(entry.critic_norms)}" if entry.critic_norms else "auto (it has no normalisation)"
        fail("model.critic_norm", f"'{model.critic_norm}' is not offered by the {entry.name} architecture; use {offered}")


def check_one_seed_field(data: Any, path: str, fail: Fail) -> None:
    """``seed`` and ``seeds`` are alternatives: a section gives one of them."""
    if isinstance(data, dict) and "seed" in data and "seeds" in data:
        fail(f"{path}.seeds", f"given alongside {path}.seed: give either one seed or a list of seeds")


def _check_budget_and_target(scenario: Scenario, positions: Sequence[int], fail: Fail) -> None:
    target = scenario.metrics.target
    if target is not None:
        if (target.fid is None) == (target.kid is None):
            fail("metrics.target", "give exactly one of fid or kid, e.g. {fid: 30}")
        if scenario.metrics.features == "auto":
            fail(
                "metrics.target",
                "a target holds under one named feature network: set metrics.features to classifier or inception",
            )
        if not scenario.metrics.enabled or scenario.metrics.curve_points < 1:
            fail(
                "metrics.target",
                "time to a target needs scoring during training: metrics.enabled true and curve_points at least 1",
            )
    for i, spec in zip(positions, scenario.runs):
        if not run_train(scenario, spec, f"runs[{i}].train").stop_at_target:
            continue
        path = "train.stop_at_target" if not (spec.train or {}).get("stop_at_target") else f"runs[{i}].train.stop_at_target"
        if target is None:
            fail(path, "needs metrics.target, e.g. metrics: {target: {fid: 30}}")
        if not STRATEGIES[spec.strategy].data_parallel:
            together = ", ".join(e.name for e in STRATEGIES if e.data_parallel)
            fail(
                path,
                f"stops one model trained by all ranks ({together}), not {spec.strategy}: "
                "its time to target is read from the quality curve instead",
            )


def _check_checkpoints(every: CheckpointEvery | None, fail: Fail) -> None:
    if every is None:
        return
    if (every.steps is None) == (every.minutes is None):
        fail("train.checkpoint_every", "give exactly one of steps or minutes, e.g. {minutes: 30} or {steps: 500}")


def _check_performance(spec: RunSpec, path: str, scenario: Scenario, fail: Fail) -> None:
    """The ``performance`` settings an entry runs with (the scenario's, the entry's on top) suit its strategy and engine."""
    own, base = spec.performance, scenario.performance
    settings = PerformanceConfig(**{k: v if v is not None else getattr(base, k) for k, v in dataclasses.asdict(own).items()})
    wanted = [name for name, on in settings.active().items() if on]
    if wanted and not STRATEGIES[spec.strategy].performance:
        fail(
            f"{path}.performance.{wanted[0]}",
            f"the {spec.strategy} strategy trains populations of networks swapped every iteration and does not honour it",
        )
    check_cuda_graphs(spec, settings, path, scenario, fail)


def device_problem(settings: PerformanceConfig, on_gpu: bool, compiler: str | None) -> tuple[str, str] | None:
    """Why ``settings`` cannot run on this machine, as (field, reason), or None: checked before any rank starts.

    ``on_gpu``: the ranks train on a GPU; ``compiler``: the C++ compiler found (Inductor needs one on CPUs).
    """
    if settings.cuda_graphs and not on_gpu:
        return (
            "performance.cuda_graphs",
            "CUDA graphs need a GPU, and this machine trains on the CPU (no CUDA, or SUITE_DEVICE=cpu)",
        )
    if settings.compile and not on_gpu and compiler is None:
        return "performance.compile", "torch.compile on the CPU needs a C++ compiler (c++, g++ or clang++ on PATH, or CXX)"
    return None


def _check_run_spec(spec: RunSpec, path: str, scenario: Scenario, fail: Fail) -> None:
    if spec.label is not None and (problem := name_problem(spec.label)) is not None:  # the run folders' names
        fail(f"{path}.label", problem)
    own = ENGINES[spec.engine]
    if own.settings is not None and own.check_settings is not None:
        own.check_settings(getattr(spec, own.settings), f"{path}.{own.settings}", fail)
    _check_performance(spec, path, scenario, fail)
    for engine in ENGINES:
        section = engine.settings
        if section is not None and engine.name != spec.engine and getattr(spec, section) != type(getattr(spec, section))():
            fail(f"{path}.{section}", f"only the {engine.name} engine takes {section} settings, not {spec.engine}")
    loss, losses, engines = spec.loss or default_loss(spec.strategy), STRATEGIES[spec.strategy].losses, engines_for(spec.strategy)
    if loss not in losses:
        fail(f"{path}.loss", f"'{loss}' is not available for {spec.strategy}; choose one of {', '.join(losses)}")
    if spec.engine not in engines:
        fail(f"{path}.engine", f"'{spec.engine}' does not run {spec.strategy}; choose one of {', '.join(engines)}")
    if not spec.procs:  # each count's bound is the schema's
        fail(f"{path}.procs", f"expected process counts of at least 1, got {shown(spec.procs)}")
    if len(set(spec.procs)) != len(spec.procs):
        fail(f"{path}.procs", f"process counts repeat: {shown(spec.procs)}")
    scaling = spec.scaling or scenario.scaling
    strategy = STRATEGIES[spec.strategy]
    if strategy.check_entry is not None:
        strategy.check_entry(spec, path, scaling, fail)
    if not strategy.grid and (spec.grid is not None or spec.grids is not None):
        on_grids = [e.name for e in STRATEGIES if e.grid]
        takes = "strategy takes" if len(on_grids) == 1 else "strategies take"
        fail(f"{path}.grid", f"only the {' and '.join(on_grids)} {takes} a grid, not {spec.strategy}")
    norms = strategy.critic_norms
    if norms is not None and scenario.model.critic_norm not in norms:
        fail(
            "model.critic_norm",
            f"'{scenario.model.critic_norm}' is not available to the {spec.strategy} strategy ({path}); use {' or '.join(norms)}",
        )
    check_batch_split(spec, path, scaling, scenario, fail)
    check_images_budget(spec, path, scaling, scenario, fail)
