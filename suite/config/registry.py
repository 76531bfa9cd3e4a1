"""One registry per axis of a run: strategies, engines, losses and feature networks.

Each entry registers its name and what it accepts; the scenario's validation, the CLI's
choices, the launcher and the report read these registries instead of keeping lists of their
own. An entry names its implementation as ``"module:attribute"`` and imports it only when a
run builds it, so that validating a scenario or parsing the command line stays free of torch,
MPI and the other heavy libraries.

Adding an engine (or a strategy, a loss, a feature network) is one new module and one
``register`` call below, e.g.::

    ENGINES.register(EngineEntry("gloo", "suite.train.engines.gloo:GlooEngine", local_launcher="torchrun", launchers=("torchrun",)))
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, TypeVar

from .plan import SystemSize, cellular_step_images, one_model_step_images, per_class_step_images


@dataclass(frozen=True)
class Entry:
    """What every registered name has: the name and where its implementation lives."""

    name: str
    """The name scenarios, the command line and records use."""
    target: str | None = None
    """``"module:attribute"`` of the implementation, imported on first use (None: nothing to build)."""

    def load(self) -> Any:
        """The implementation (imported now)."""
        if self.target is None:
            raise LookupError(f"{self.name} has no implementation of its own")
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


CUDA_GRAPHS = "cuda_graphs"
"""Engine capability: its gradient reduction can run in a training step captured as CUDA graphs (``performance.cuda_graphs``)."""
CARTESIAN = "cartesian"
"""Engine capability: a Cartesian (torus) communicator over all ranks, for neighbour exchanges."""

ONE_GROUP = "one_group"
"""Cost model: all ranks train one GAN, allreducing its gradients every step (:mod:`suite.analysis.projection`)."""
CLASS_GROUPS = "class_groups"
"""Cost model: one GAN per class; up to one rank per class, a rank trains its classes alone and moves no bytes;
above, each class has a group of ranks that allreduces its gradients."""
CELLS = "cells"
"""Cost model: a grid of cells, each exchanging its genomes with its neighbours every iteration."""


@dataclass(frozen=True)
class EngineEntry(Entry):
    """A communication engine; its class has ``from_run(run, launch, run_dir)``."""

    local_launcher: str = "mpirun"
    """The launcher ``suite run`` uses for this engine on one machine."""
    launchers: tuple[str, ...] = ()
    """Engine-specific launchers that can start it (the generic ones, mpirun, jsrun and srun, start every engine)."""
    capabilities: frozenset[str] = frozenset()
    """What the engine offers beyond the common interface, e.g. :data:`CARTESIAN`."""
    builds_extensions: bool = False
    """Whether its ranks may build torch C++ extensions (and wait on their build lock; :mod:`suite.running.buildlocks`)."""


@dataclass(frozen=True)
class StrategyEntry(Entry):
    """A training strategy; its class takes ``(run, engine, data, telemetry, scratch)``."""

    losses: tuple[str, ...] = ()
    """The losses it trains with."""
    default_loss: str = "bce"
    """The loss used when a run entry names none."""
    engines: tuple[str, ...] | None = None
    """The engines it runs on (None: every engine that has the ``requires`` capabilities)."""
    requires: frozenset[str] = frozenset()
    """Engine capabilities it needs."""
    splits: bool = False
    """Whether its ranks train in groups smaller than the world (engines that prepare groups up front need to know)."""
    data_parallel: bool = False
    """Whether all ranks train one model together (the global batch is split over them; training can stop at a target)."""
    cost_model: str = ONE_GROUP
    """How its window time and traffic grow with the ranks: :data:`ONE_GROUP`, :data:`CLASS_GROUPS` or :data:`CELLS`."""
    conditional: bool = False
    """Whether its networks take the class label (the conditional pair), which sets the bytes its gradients weigh."""
    paper_models: dict[str, str] = field(default_factory=dict)
    """Seed 000's model that each of its losses reproduces, for the report."""
    settings: str | None = None
    """The scenario section of its own settings (``cellular``), which a run entry may override or sweep."""
    performance: bool = True
    """Whether it trains with the shared GAN trainer, which honours the ``performance`` settings (compile, CUDA graphs, ...)."""
    step_images: Callable[[SystemSize], int | None] | None = None
    """Real images one step of the system draws (:mod:`suite.config.plan`): how it turns ``train.budget_images``
    into its stopping rule, whole steps of this size (None: it cannot honour an images budget; the function
    returns None where only the data tells)."""


@dataclass(frozen=True)
class LossEntry(Entry):
    """A GAN loss (:class:`suite.gan.losses.Loss` subclass), or a random draw among others (``draws``)."""

    draws: tuple[str, ...] = ()
    """For a loss drawn at random per batch or per cell: the losses it draws from."""
    optimizer: str = "train"
    """The scenario section whose ``lr`` and ``betas`` its Adam optimisers take."""
    settings: str | None = None
    """The scenario section of its own settings (``wgan_gp``), which a run entry may override or sweep."""


@dataclass(frozen=True)
class FeatureEntry(Entry):
    """A feature network for IS, FID and KID; its builder takes the run's dataset settings (see :mod:`suite.measure.metrics.features`)."""


E = TypeVar("E", bound=Entry)


class Registry(Generic[E]):
    """The entries of one axis, in registration order."""

    def __init__(self, axis: str):
        self.axis = axis
        self._entries: dict[str, E] = {}

    def register(self, entry: E) -> E:
        """Add ``entry``; a name can be registered once."""
        if entry.name in self._entries:
            raise ValueError(f"{self.axis} '{entry.name}' is registered twice")
        self._entries[entry.name] = entry
        return entry

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order."""
        return tuple(self._entries)

    def __getitem__(self, name: str) -> E:
        if name not in self._entries:
            raise ValueError(f"unknown {self.axis} '{name}'; choose one of {', '.join(self._entries)}")
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[E]:
        return iter(self._entries.values())


STRATEGIES: Registry[StrategyEntry] = Registry("strategy")
ENGINES: Registry[EngineEntry] = Registry("engine")
LOSSES: Registry[LossEntry] = Registry("loss")
FEATURES: Registry[FeatureEntry] = Registry("feature network")


def engines_for(strategy: str) -> tuple[str, ...]:
    """The engines that run ``strategy``: those it names (or all), with the capabilities it requires."""
    entry = STRATEGIES[strategy]
    return tuple(
        e.name for e in ENGINES if (entry.engines is None or e.name in entry.engines) and entry.requires <= e.capabilities
    )


def launcher_engines() -> dict[str, tuple[str, ...]]:
    """Each engine-specific launcher and the engines it can start."""
    starts: dict[str, list[str]] = {}
    for engine in ENGINES:
        for launcher in engine.launchers:
            starts.setdefault(launcher, []).append(engine.name)
    return {launcher: tuple(engines) for launcher, engines in starts.items()}


# --- the registrations --------------------------------------------------------------------------------

ENGINES.register(
    EngineEntry("horovod", "suite.train.engines.horovod:HorovodEngine", local_launcher="horovodrun", launchers=("horovodrun",))
)
ENGINES.register(
    EngineEntry(
        "torch",
        "suite.train.engines.torch_dist:TorchEngine",
        local_launcher="torchrun",
        launchers=("torchrun", "deepspeed"),
        capabilities=frozenset({CUDA_GRAPHS}),
    )
)
ENGINES.register(
    EngineEntry("mpi", "suite.train.engines.mpi:MPIEngine", local_launcher="mpirun", capabilities=frozenset({CARTESIAN}))
)
ENGINES.register(
    EngineEntry(
        "deepspeed",
        "suite.train.engines.deepspeed:DeepSpeedEngine",
        local_launcher="torchrun",
        launchers=("torchrun", "deepspeed"),
        builds_extensions=True,  # its CPU ops (the shared-memory allreduce), on first use
    )
)

LOSSES.register(LossEntry("bce", "suite.gan.losses:BCELoss"))
LOSSES.register(LossEntry("wgan-gp", "suite.gan.losses:WassersteinLoss", optimizer="wgan_gp", settings="wgan_gp"))
LOSSES.register(LossEntry("minimax", "suite.gan.losses:MinimaxLoss"))
LOSSES.register(LossEntry("mse", "suite.gan.losses:MSELoss"))
LOSSES.register(LossEntry("heuristic", "suite.gan.losses:HeuristicLoss"))
LOSSES.register(LossEntry("mustangs", draws=("minimax", "mse", "heuristic")))

_GAN_LOSSES = ("bce", "wgan-gp")
_DATA_PARALLEL = "suite.train.strategies.data_parallel:DataParallel"  # one class, conditional or not
STRATEGIES.register(
    StrategyEntry(
        "data_parallel",
        _DATA_PARALLEL,
        _GAN_LOSSES,
        data_parallel=True,
        paper_models={"bce": "DC-GAN"},
        step_images=one_model_step_images,
    )
)
STRATEGIES.register(
    StrategyEntry(
        "conditional",
        _DATA_PARALLEL,
        _GAN_LOSSES,
        data_parallel=True,
        conditional=True,
        paper_models={"bce": "DC-CGAN"},
        step_images=one_model_step_images,
    )
)
STRATEGIES.register(
    StrategyEntry(
        "label_partitioned",
        "suite.train.strategies.label_partitioned:LabelPartitioned",
        _GAN_LOSSES,
        engines=("horovod", "torch", "mpi"),
        splits=True,
        cost_model=CLASS_GROUPS,
        paper_models={"bce": "Distributed DC-CGAN"},
        step_images=per_class_step_images,
    )
)
STRATEGIES.register(
    StrategyEntry(
        "cellular",
        "suite.train.strategies.cellular:CellularStrategy",
        ("bce", "minimax", "mse", "heuristic", "mustangs"),
        default_loss="mustangs",
        requires=frozenset({CARTESIAN}),
        settings="cellular",
        cost_model=CELLS,
        performance=False,  # populations of networks swapped every iteration: a compiled graph per genome
        step_images=cellular_step_images,
    )
)

FEATURES.register(FeatureEntry("auto", "suite.measure.metrics.features:auto_net"))
FEATURES.register(FeatureEntry("inception", "suite.measure.metrics.features:inception_net"))
FEATURES.register(FeatureEntry("classifier", "suite.measure.metrics.features:classifier_net"))
