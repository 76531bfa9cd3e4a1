"""Scenario files: the scenario and its run entries (:class:`Scenario`, :class:`RunSpec`), the concrete :class:`Run`,
the sections strategies and losses bring, and the scenario's JSON Schema.

The sections are :mod:`suite.config.sections`; the rules across fields :mod:`suite.config.validation`; reading,
validating and expanding a file into runs :mod:`suite.config.expansion`. Every problem is a :class:`ScenarioError`
naming the field (``smoke.yaml: train.epoch: unknown field``). A run is self-contained: ``RUN_DIR/run.json`` is all a
worker needs.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, NoReturn, TypeVar

from pydantic import Field

from .entries import settings_type
from .jsonfile import read_json
from .names import did_you_mean
from .registry import ARCHITECTURES, LOSSES, STRATEGIES
from .schema import AtMost, Located, SchemaError, build
from .sections import (
    DatasetConfig,
    DDPConfig,
    DeepSpeedConfig,
    EngineName,
    GridSide,
    HorovodConfig,
    LogsConfig,
    LossName,
    MetricsConfig,
    ModelConfig,
    PerformanceConfig,
    Procs,
    SeedPolicy,
    StrategyName,
    TrainConfig,
)
from .shown import shown


class ScenarioError(SchemaError):
    """A scenario is invalid; the message names the file and field."""


MAX_RUNS = 1000
"""The most runs a scenario may expand to unless the command raises the cap (``--max-runs``): the largest shipped
scenario has 70, and a sweep of 15,000 took minutes to plan before its first run."""

MAX_SCENARIO_BYTES = 1 << 20
"""The largest scenario file read unless the command raises the cap (``--max-scenario-bytes``): the shipped ones
are under 4 KB."""


@dataclass(frozen=True)
class ScenarioCaps:
    """How large a scenario may be; ``suite run`` and ``suite jobscript`` raise each with a flag of its name."""

    runs: int = MAX_RUNS
    """The most runs it may expand to (``--max-runs``)."""
    scenario_bytes: int = MAX_SCENARIO_BYTES
    """The largest file (``--max-scenario-bytes``)."""


B = TypeVar("B")


def build_section(cls: type[B], data: dict[str, Any], path: str) -> B:
    """A scenario section from plain data (see :func:`suite.config.schema.build`), errors as :class:`ScenarioError`."""
    return build(cls, data, path, ScenarioError)


Fail = Callable[[str, str], NoReturn]
"""How the checks report a broken rule: ``fail(field path, message)`` raises a :class:`ScenarioError`."""


@dataclass
class RunSpec:
    """One entry of ``runs``: a strategy on an engine, swept over process counts."""

    strategy: StrategyName
    """Training strategy."""
    engine: EngineName = "mpi"
    """Communication engine."""
    procs: list[Procs] = field(default_factory=lambda: [1])
    """Process counts to run."""
    loss: LossName | None = None
    """Loss (default: bce; mustangs for cellular; minimax, mse, heuristic: cellular only)."""
    grid: list[GridSide] | None = None
    """Cellular grid [rows, cols] for strong scaling."""
    grids: list[list[GridSide]] | None = None
    """Cellular grids for weak scaling, one per procs entry, with the same cells per rank in each."""
    scaling: Literal["strong", "weak"] | None = None
    """Overrides the scenario's scaling for this entry."""
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    """Settings of the deepspeed engine."""
    horovod: HorovodConfig = field(default_factory=HorovodConfig)
    """Settings of the horovod engine (over the scenario's ``horovod``, field by field)."""
    ddp: DDPConfig = field(default_factory=DDPConfig)
    """Settings of the torch engine (over the scenario's ``ddp``, field by field)."""
    performance: PerformanceConfig = field(default_factory=PerformanceConfig)
    """compile, cuda_graphs, channels_last, bf16 (over the scenario's ``performance``, field by field)."""
    trace: bool = False
    """Write traces: torch profiler, Horovod timeline, DeepSpeed communication log (also ``suite run --trace``)."""
    label: str | None = None
    """Name used in run ids and reports (needed when two entries would share an id)."""
    train: dict | None = None
    """Fields of ``train`` that differ for this entry, e.g. ``{epochs: 60}`` (per-class GANs see fewer batches per epoch)."""
    sweep: dict | None = None
    """Settings to try, one run per combination: dotted fields of train or of a strategy's or loss's section, each
    with a list of values, e.g. ``{train.lr: [0.0001, 0.001]}`` (docs/tuning.md)."""
    sections: dict[str, dict] = field(default_factory=dict)
    """Fields of a strategy's or loss's section that differ for this entry, by section; written as the section's own
    key in the entry (``cellular: {population: 2}``, ``local_sgd: {average_every: 4}``), see :func:`lift_sections`."""


@dataclass
class Scenario:
    """A whole scenario file."""

    name: str
    """Used for the results and report folders."""
    runs: list[RunSpec]
    """What to run."""
    description: str = ""
    """Free text shown in the report."""
    scaling: Literal["strong", "weak"] = "strong"
    """What a sweep over procs means (see docs/scenarios.md, "What a sweep means")."""
    repeats: Annotated[
        int, Field(ge=1), AtMost(1000, "every repeat runs the whole sweep again, and its runs are held in memory")
    ] = 1
    """Repeat every run this many times (mean and std in the report)."""
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    horovod: HorovodConfig = field(default_factory=HorovodConfig)
    """Settings of every horovod run (a run's own ``horovod`` entries override them)."""
    ddp: DDPConfig = field(default_factory=DDPConfig)
    """Settings of every torch run (a run's own ``ddp`` entries override them)."""
    performance: PerformanceConfig = field(default_factory=PerformanceConfig)
    """compile, cuda_graphs, channels_last, bf16 for every run (a run's own ``performance`` entries override them)."""
    logs: LogsConfig = field(default_factory=LogsConfig)
    """Logs every run writes besides its own (TensorBoard events, MLPerf-style lines)."""
    sections: dict[str, Any] = field(default_factory=dict)
    """The strategies' and losses' sections the file gives, built, by name (:func:`strategy_sections`: ``cellular``,
    ``wgan_gp``, an installed plugin's ``local_sgd``, each at the top level of the file); one it leaves out has its
    defaults (:func:`scenario_section`)."""


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (``suite schema`` prints it): :class:`Scenario`, with the strategies' and
    losses' sections (:func:`strategy_sections`, the installed plugins' among them) beside the others at the top level
    and in run entries, so the docs and editors show them too."""
    from .schema import json_schema

    schema = json_schema(Scenario)
    del schema["properties"]["sections"]  # built from the strategies' and losses' sections, not written under this name
    for name, cls in sorted(strategy_sections().items()):
        section = json_schema(cls)
        schema.setdefault("$defs", {}).update(section.pop("$defs", {}))
        schema["$defs"][cls.__name__] = section
        schema["properties"][name] = {"$ref": f"#/$defs/{cls.__name__}"}
    entry = schema["$defs"][RunSpec.__name__]["properties"]
    del entry["sections"]  # a run entry also writes each section under its own name
    for name in sorted(strategy_sections()):
        entry[name] = {"type": "object", "description": f"Fields of `{name}` that differ for this entry."}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "suite scenario"
    return schema


PLACEMENT_FIELDS = (
    "sweep_ranks_per_node",
    "seed_order",
    "sweep_order",
    "sweep_procs",
    "trace",
    "logs",
    "tensorboard_dir",
    "overrides",
)
"""Fields of a :class:`Run` that say where its ranks sit and where it comes in the sweep's order, not what it
trains (``trace``, ``logs`` and ``tensorboard_dir`` only add traces and logs, and the command line sets them;
``overrides`` says how the settings were reached, which the settings themselves hold): a checkpoint resumes, and a
finished run is the same run, whatever they are."""


@dataclass(frozen=True)
class RunPlacement:
    """What ``suite run`` decides for a run after expansion, apart from its settings (every field it sets is one of
    :data:`PLACEMENT_FIELDS`): combined with the run by :meth:`Run.placed`, the one place they meet."""

    sweep_ranks_per_node: int | None = None
    """Ranks per node of the run's sweep's largest run (:func:`suite.running.commands.sweep_ranks_per_node`)."""
    trace: bool = False
    """``--trace``: trace the run too (a scenario's ``trace`` stays on without it)."""
    mllog: bool = False
    """``--mllog``: write its MLPerf-style lines too (the scenario's ``logs.mllog`` stays on without it)."""
    tensorboard_dir: str | None = None
    """``--tensorboard DIR`` as an absolute path."""
    overrides: dict[str, Any] | None = None
    """The scenario fields ``--set`` overrode, by dotted field; None without."""


@dataclass(frozen=True)
class Run:
    """One concrete run: everything a worker needs, written to ``run.json``.

    Frozen: its settings are final when :func:`suite.config.expansion.expand` returns it; what ``suite run`` decides
    later is a :class:`RunPlacement`, combined with it in one place (:meth:`placed`) into a new run."""

    run_id: str
    scenario: str
    strategy: str
    engine: str
    loss: str
    procs: int
    scaling: str
    repeat: int
    dataset: DatasetConfig
    model: ModelConfig
    train: TrainConfig
    metrics: MetricsConfig
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    horovod: HorovodConfig = field(default_factory=HorovodConfig)
    ddp: DDPConfig = field(default_factory=DDPConfig)
    performance: PerformanceConfig = field(default_factory=PerformanceConfig)
    """The step's compile, CUDA graph, memory format and autocast settings (docs/gpu.md)."""
    trace: bool = False
    """Write traces into the run folder (their timings include the tracing overhead)."""
    logs: LogsConfig = field(default_factory=LogsConfig)
    """The scenario's ``logs``, with ``suite run --mllog`` applied."""
    tensorboard_dir: str | None = None
    """``suite run --tensorboard DIR`` as an absolute path: the run's events go to ``DIR/RUN_ID`` (only the command line
    sets it, so that no scenario names a folder outside the results)."""
    grid: list[int] | None = None
    label: str | None = None
    sweep_procs: list[int] | None = None
    """Process counts of this run's sweep (its ``runs`` entry)."""
    sweep_ranks_per_node: int | None = None
    """Ranks per node of the sweep's largest run (set by ``suite run``): threads per rank follow it."""
    seed_order: int = 0
    """Position of this run's seed in its entry's ``train.seeds`` (runs are interleaved by it)."""
    sweep: dict[str, Any] | None = None
    """The settings its entry's ``sweep`` gave this run, by dotted field (``{"train.lr": 0.001}``); None without a sweep."""
    sweep_order: int | None = None
    """Position of this run's settings among its entry's sweep combinations (0: the values listed first)."""
    sections: dict[str, Any] = field(default_factory=dict)
    """The sections its strategy and loss read (:func:`strategy_sections`: ``cellular``, ``wgan_gp``, a plugin's), by
    name; left out of ``run.json`` when empty."""
    overrides: dict[str, Any] | None = None
    """The scenario fields ``suite run --set`` overrode for this run, by dotted field (``{"train.lr": 0.001}``); None without."""

    @property
    def critic_norm(self) -> str:
        """``model.critic_norm`` with ``auto`` resolved for this run's loss (its ``critic_norm`` trait); ``none`` for an
        architecture without normalisation."""
        if not ARCHITECTURES[self.model.architecture].critic_norms:
            return "none"
        if self.model.critic_norm != "auto":
            return self.model.critic_norm
        return LOSSES[self.loss].critic_norm

    def section(self, name: str) -> Any:
        """Settings section ``name`` of this run (``train``, or a strategy's or loss's, built-in or a plugin's), as its
        dataclass (one its strategy and loss do not read: its defaults)."""
        if name == "train":
            return self.train
        cls = section_class(name)
        value = self.sections.get(name)
        return value if isinstance(value, cls) else build_section(cls, value or {}, f"run.{name}")

    def placed(self, placement: RunPlacement) -> "Run":
        """This run as ``suite run`` launches it and ``run.json`` holds it: its settings, with ``placement`` (the
        command line's traces and logs added to the scenario's, its overrides, the sweep's ranks per node)."""
        return dataclasses.replace(
            self,
            sweep_ranks_per_node=placement.sweep_ranks_per_node or self.sweep_ranks_per_node,
            trace=self.trace or placement.trace,
            logs=dataclasses.replace(self.logs, mllog=self.logs.mllog or placement.mllog),
            tensorboard_dir=placement.tensorboard_dir or self.tensorboard_dir,
            overrides=placement.overrides or self.overrides,
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if not data["sections"]:  # a run whose strategy and loss read no section of their own
            del data["sections"]
        return data

    def settings(self) -> dict[str, Any]:
        """:meth:`to_dict` without :data:`PLACEMENT_FIELDS`: what two runs must share to be the same run."""
        return {k: v for k, v in self.to_dict().items() if k not in PLACEMENT_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Run":
        """The run ``data`` (``run.json``) holds, its strategy's and loss's sections built as their dataclasses (one no
        installed entry brings kept as it was written). A ``run.json`` written before every such section was held in
        ``sections`` has the built-in ones (``wgan_gp``, ``cellular``) at its top level: they are read from there."""
        known = strategy_sections()
        if isinstance(data, dict) and any(name in data for name in known):
            lifted = {name: data[name] for name in known if name in data}
            data = {k: v for k, v in data.items() if k not in known} | {"sections": {**lifted, **(data.get("sections") or {})}}
        run = build_section(cls, data, "run")
        built = {
            name: build_section(known[name], value, f"run.{name}") if name in known and isinstance(value, dict) else value
            for name, value in run.sections.items()
        }
        return dataclasses.replace(run, sections=built)

    def to_json(self) -> str:
        """The run as ``run.json`` holds it (written atomically by :func:`suite.running.planning.prepare_run_folder`)."""
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def load(cls, path: Path) -> "Run":
        return cls.from_dict(read_json(path))  # bounded (size, nesting): run.json lies in a shared results folder


def strategy_sections() -> dict[str, type]:
    """The settings sections the strategies and losses bring, built-in and plugins' alike (an entry's ``settings``
    with its ``settings_class``, :func:`suite.config.entries.settings_type`): the losses' first, then the strategies'."""
    found: dict[str, type] = {}
    for entry in (*LOSSES, *STRATEGIES):
        if entry.settings is not None and entry.settings_class is not None:
            found.setdefault(entry.settings, settings_type(entry))
    return found


def entry_sections() -> tuple[str, ...]:
    """Every section a run entry may override (and sweep) field by field: ``train`` and the strategies' and losses'."""
    return ("train", *strategy_sections())


def section_class(name: str) -> type:
    """The dataclass of entry section ``name`` (one of :func:`entry_sections`)."""
    return TrainConfig if name == "train" else strategy_sections()[name]


def lift_sections(data: dict[str, Any]) -> dict[str, Any]:
    """Scenario data with the strategies' and losses' sections, written at the top level and in run entries under
    their own names, moved into ``sections`` (as written: :func:`suite.config.expansion.parse_scenario` checks them
    against :func:`strategy_sections`' dataclasses with every other section and builds them).

    A run entry naming a strategy that is not registered keeps its keys: :func:`unknown_strategies` names the
    strategy, and the rest of the entry is not checked until it is known.
    """
    runs = data.get("runs")
    entries: list[Any] = runs if isinstance(runs, list) else []  # not a list: the schema names it later
    named = strategy_sections()
    for where, mapping in [("", data), *((f"runs[{i}].", e) for i, e in enumerate(entries))]:
        if isinstance(mapping, dict) and "sections" in mapping:
            raise ScenarioError(f"{where}sections: unknown field; give a strategy's or loss's section under its own name")
    lifted = {k: v for k, v in data.items() if k not in named}
    lifted["sections"] = {name: data[name] for name in named if name in data}
    if isinstance(runs, list):
        lifted["runs"] = [
            {**{k: v for k, v in e.items() if k not in named}, "sections": {n: e[n] for n in named if n in e}}
            if isinstance(e, dict)
            else e
            for e in runs
        ]
    return lifted


def unknown_strategies(data: dict[str, Any]) -> list[Located]:
    """The run entries of scenario ``data`` whose strategy is not registered, as the schema's problems at
    ``runs[i].strategy``, with a did-you-mean, or where none is close, the reminder that a plugin's strategy needs
    its package installed."""
    runs = data.get("runs")
    found: list[Located] = []
    for i, entry in enumerate(runs if isinstance(runs, list) else []):  # not a list: the schema names it
        strategy = entry.get("strategy") if isinstance(entry, dict) else None
        if isinstance(strategy, str) and strategy not in STRATEGIES:
            hint = did_you_mean(strategy, STRATEGIES.names()) or " (a plugin's strategy needs its package installed)"
            text = f"runs[{i}].strategy: {shown(strategy)} is not one of {', '.join(map(repr, STRATEGIES.names()))}{hint}"
            found.append((("runs", i, "strategy"), text))
    return found


def run_train(scenario: Scenario, spec: RunSpec, path: str) -> TrainConfig:
    """The ``train`` section of one entry: the scenario's, with the entry's own fields on top.

    An entry's own ``seed`` replaces the scenario's ``seeds`` (and its ``seeds`` the scenario's ``seed``).
    """
    if not spec.train:
        return scenario.train
    base = dataclasses.asdict(scenario.train)
    if "seed" in spec.train:
        base["seeds"] = None
    return build_section(TrainConfig, {**base, **spec.train}, path)


def scenario_section(scenario: Scenario, name: str) -> Any:
    """Section ``name`` of the scenario (``train``, or a strategy's or loss's; one the file leaves out: its defaults)."""
    if name == "train":
        return scenario.train
    return scenario.sections.get(name) or section_class(name)()


def entry_own(spec: RunSpec, name: str) -> dict[str, Any] | None:
    """The fields a run entry gives of section ``name`` itself."""
    return spec.train if name == "train" else spec.sections.get(name)


def with_own(spec: RunSpec, own: dict[str, dict[str, Any]]) -> RunSpec:
    """``spec`` with the fields it gives of each section in ``own`` (section name -> fields) replaced, and no sweep."""
    others = {name: fields for name, fields in own.items() if name != "train"}
    spec = dataclasses.replace(spec, sweep=None, sections={**spec.sections, **others})
    return dataclasses.replace(spec, train=own["train"]) if "train" in own else spec


def entry_section(scenario: Scenario, spec: RunSpec, name: str, path: str) -> Any:
    """Section ``name`` (one of :func:`entry_sections`) of one entry: the scenario's, with the entry's fields on top."""
    if name == "train":
        return run_train(scenario, spec, path)
    own = entry_own(spec, name)
    base = scenario_section(scenario, name)
    if not own:
        return base
    return build_section(type(base), {**dataclasses.asdict(base), **own}, path)


def seeds_of(train: TrainConfig) -> list[int]:
    """The seeds an entry may train with: ``train.seeds`` (a sequential policy's 0 to ``max`` - 1, of which it trains
    the first ``initial`` and more only where a verdict is undecided), else the one ``train.seed``."""
    if isinstance(train.seeds, SeedPolicy):
        return list(range(train.seeds.max))
    return list(train.seeds) if train.seeds is not None else [train.seed]


def critic_steps(loss: str, section: Any) -> int:
    """Discriminator (critic) steps per generator step: the loss's ``critic_steps`` trait read from ``section``, its
    settings section (``wgan_gp.n_critic`` under WGAN-GP), else one."""
    rule = LOSSES[loss].critic_steps
    return rule(section) if rule is not None else 1


def default_loss(strategy: str) -> str:
    """The loss used when a run entry names none."""
    return STRATEGIES[strategy].default_loss
