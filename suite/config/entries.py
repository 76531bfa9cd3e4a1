"""What a registry's entry holds, one dataclass per axis: a strategy's, an engine's, a loss's, a feature network's, a
metrics protocol's and an architecture's traits, the capabilities and cost models they name, and the classes their
entries name as ``"module:Class"``, imported when first read (:mod:`suite.config.registry` holds the entries)."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from .plan import ModelBytes, SystemSize, check_image_size


def named(target: str) -> Any:
    """What ``"module:attribute"`` names, imported now."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def lazy(target: str) -> Callable[..., Any]:
    """The function ``"module:attribute"``, imported on its first call: a built-in trait whose module reads the scenario's
    sections, which read this registry (a plugin's module imports the registry instead, and gives the function)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return named(target)(*args, **kwargs)

    call.__name__ = call.__qualname__ = target.partition(":")[2]
    call.__doc__ = f"{target}, imported on first call."
    call.target = target  # type: ignore[attr-defined]  # where the trait lives (tests/test_plugins.py reads it)
    return call


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
        return named(self.target)

    def problems(self) -> list[str]:
        """What the suite needs of an entry of this axis that this one lacks (empty: nothing); plugins are checked."""
        return [] if self.target is not None else ["no implementation (target)"]


CUDA_GRAPHS = "cuda_graphs"
"""Engine capability: its step on one rank holds nothing outside the device's stream (the plain network and optimizer,
no thread, library or host callback of its own), so that the whole step can be captured as one CUDA graph
(``performance.cuda_graphs``, :mod:`suite.train.graphs`)."""
CUDA_GRAPHS_REDUCTION = "cuda_graphs_reduction"
"""Engine capability: its gradient reduction over two or more ranks runs on the device's stream and is documented as
capturable, so that ``performance.cuda_graphs`` runs at ``procs`` above 1 (no engine has it yet: DDP's bucket hooks
run on the host every step)."""
CARTESIAN = "cartesian"
"""Engine capability: a Cartesian (torus) communicator over all ranks, for neighbour exchanges."""

ONE_GROUP = "one_group"
"""Cost model: all ranks train one GAN, allreducing its gradients every step (:mod:`suite.analysis.projection`)."""
CLASS_GROUPS = "class_groups"
"""Cost model: one GAN per class; up to one rank per class, a rank trains its classes alone and moves no bytes;
above, each class has a group of ranks that allreduces its gradients."""
CELLS = "cells"
"""Cost model: a grid of cells, each exchanging its genomes with its neighbours every iteration."""
COST_MODELS = (ONE_GROUP, CLASS_GROUPS, CELLS)
"""The cost models :mod:`suite.analysis.projection` knows; a strategy names one of them or None (not projected)."""


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
    settings: str | None = None
    """The run entry's section of its own settings (``horovod``, ``ddp``, ``deepspeed``): only its runs may set it."""
    run_id_part: Callable[[Any], str] | None = None
    """What its settings section adds to a run id (``zero2`` for ZeRO stage 2; '' for nothing)."""
    check_settings: Callable[[Any, str, Callable[[str, str], Any]], None] | None = None
    """The rules of its settings section beyond their types: ``check(section, path, fail)`` calls ``fail(field, message)``
    (the deepspeed engine's: which keys of its free-form ``config`` it hands on, :mod:`suite.config.engine_configs`)."""
    rendezvous: bool = False
    """Whether its ranks meet at ``MASTER_ADDR:MASTER_PORT``, which a generic launcher (mpirun) must pass them."""
    baseline: bool = False
    """Whether the engine comparison measures the other engines against this one (the papers' Horovod)."""
    package: str | None = None
    """The Python package its ranks import (None: torch's own, always there); ``suite run`` refuses a run whose package
    this interpreter lacks, giving :attr:`install`."""
    install: str = ""
    """How to install what it needs (its package, its launcher), said where either is missing."""
    gpu_ready: Callable[[dict[str, Any]], str | None] | None = None
    """From :func:`suite.measure.env.capabilities`, why it cannot train on GPUs here (None: it can); gpu-check
    leaves an engine without this trait out."""


@dataclass(frozen=True, kw_only=True)
class SectionEntry(Entry):
    """An entry that may bring a scenario section of its own settings: a strategy's or a loss's (its fields are
    keyword-only, after the entry's own)."""

    settings: str | None = None
    """The scenario section of its own settings (a strategy's ``cellular``, a plugin's ``local_sgd``, a loss's ``wgan_gp``), which a run entry may
    override or sweep."""
    settings_class: type | str | None = None
    """The dataclass of that section, or ``"module:Class"`` naming it (imported when first read; :func:`settings_type`)."""
    check_settings: Callable[[Any, str, Callable[[str, str], Any]], None] | None = None
    """The rules of its section beyond their types: ``check(section, path, fail)`` calls ``fail(field, message)``."""
    scenario_rules: Callable[[Any, str, Any, Callable[[str, str], Any]], None] | None = None
    """The rules of its section that read other sections of the scenario (those in ``scenario_reads``):
    ``check(section, path, scenario, fail)``, run after ``check_settings`` (cellular's mixture feature space)."""
    scenario_reads: frozenset[str] = frozenset()
    """The other top-level sections ``scenario_rules`` reads: where one of them does not fit its schema the rules wait."""

    def section_problems(self) -> list[str]:
        """What its section lacks (empty: nothing, or no section)."""
        if self.settings is not None and self.settings_class is None:
            return [f"section {self.settings!r} without its settings_class"]
        return []


@dataclass(frozen=True)
class StrategyEntry(SectionEntry):
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
    """Whether all ranks share one global batch (it is split over them; training can stop at a target)."""
    cost_model: str | None = None
    """How its window time and traffic grow with the ranks: one of :data:`COST_MODELS` (None: the projection
    reports its runs as not projected)."""
    conditional: bool = False
    """Whether its networks take the class label (the conditional pair), which sets the bytes its gradients weigh."""
    paper_models: dict[str, str] = field(default_factory=dict)
    """The papers' model that each of its losses reproduces (paper 000's DC-GANs, paper 002's W-CGAN), for the reports."""
    speedups_baseline: str | None = None
    """File under ``baselines/`` of the papers' speedups of this strategy, shown beside its runs in the report."""
    check_entry: Callable[[Any, str, str, Callable[[str, str], Any]], None] | None = None
    """The rules of a run entry of it beyond the common ones: ``check(spec, path, scaling, fail)`` (cellular's grids)."""
    step_settings: Callable[[Any], dict[str, Any]] | None = None
    """What its settings section says about the size of one step, as fields of :class:`suite.config.plan.SystemSize`
    (cellular's batches per iteration and discriminator skip), for ``step_images`` before the data is read."""
    footprint: Callable[[Any, ModelBytes], tuple[int, int]] | None = None
    """About how many bytes one checkpoint of a run (over all ranks) and its finished files take, from the sizes of its
    networks: ``footprint(run, sizes)`` (None: one model, or one per class where it partitions the classes;
    :func:`suite.train.checkpoint.footprint`)."""
    performance: bool = True
    """Whether it trains with the shared GAN trainer, which honours the ``performance`` settings (compile, CUDA graphs, ...)."""
    step_images: Callable[[SystemSize], int | None] | None = None
    """Real images one step of the system draws (:mod:`suite.config.plan`): how it turns ``train.budget_images``
    into its stopping rule, whole steps of this size (None: it cannot honour an images budget; the function
    returns None where only the data tells)."""
    grid: bool = False
    """Whether it trains a grid of cells (``grid`` for strong, ``grids`` for weak scaling; one per run)."""
    partitions_classes: bool = False
    """Whether its ranks share out the classes, one GAN each: process counts map onto the classes, weak scaling
    trains one class per rank, and each class generator is handed over once through the run folder."""
    replicas_differ: bool = False
    """Whether its ranks' copies of the model differ between synchronisations (local SGD): a checkpoint keeps each
    rank's weights and optimiser state, not one copy."""
    placement_invariant: Callable[[int, int], bool] | None = None
    """From a run's process count and its classes (the record's ``procs`` and how many ``classes`` it names), whether
    its model is bitwise the same on any number of ranks (None: never)."""
    critic_norms: tuple[str, ...] | None = None
    """The ``model.critic_norm`` values it accepts (None: every one)."""
    steering: str | None = None
    """The scenario field under which it uses a network inside training (``cellular.mixture_features``), None where
    it uses none. Such a network is the dataset's steering network (:func:`suite.measure.metrics.features.steering_net`),
    never the ruler that scores the comparison: ``suite run`` checks it is pinned before any rank starts (an error
    line names this field), and the record's ``steering`` names it."""
    gpu_check: Callable[[int], list[dict[str, Any]]] | None = None
    """What ``suite gpu-check`` runs of it on ``gpus`` GPUs: run entries without strategy and engine (None: nothing)."""
    record_part: type | str | None = None
    """The dataclass of the fields its runs add at the top level of their records (from its ``Outcome.fields``;
    None: none), or ``"module:Class"`` naming it in the strategy's own package (imported when first read;
    :func:`record_part_type`): as a record is read (:func:`suite.records.codec.parse_record`) they are checked
    against it, types and bounds, and held as an instance (``Record.strategy_part``); the fields it marks with
    :func:`suite.records.fields.column` are columns of the report's flat table, and of the report's tables their
    mark names (``tables``: the per-run table). Every field has a default (a failed run's record has none of them)
    and none is a field every record has."""
    steps_per_allreduce: Callable[[Any], int] | None = None
    """From its record part (``Record.strategy_part``, None where a record has none), the steps between two
    allreduces of its one group, which the projection's one-group cost model reads (None: every step)."""

    def problems(self) -> list[str]:
        """What the suite needs of a strategy that this entry lacks (empty: nothing)."""
        found = []
        if self.target is None:
            found.append("no implementation (target)")
        if not self.losses or self.default_loss not in self.losses:
            found.append(f"its default loss {self.default_loss!r} is not among its losses {list(self.losses)}")
        if self.cost_model is not None and self.cost_model not in COST_MODELS:
            found.append(f"cost model {self.cost_model!r}, which the projection does not know ({', '.join(COST_MODELS)})")
        found += self.section_problems()
        if self.record_part is not None:
            found += _record_part_problems(record_part_type(self))
        return found


def _record_part_problems(part: Any) -> list[str]:
    """What a strategy's ``record_part`` lacks: a dataclass whose every field has a default."""
    if not (isinstance(part, type) and dataclasses.is_dataclass(part)):
        return [f"record part {part!r}, which is not a dataclass"]
    return [
        f"a default for field {f.name!r} of its record part {part.__name__} (a failed run's record has none of them)"
        for f in dataclasses.fields(part)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


@dataclass(frozen=True)
class LossEntry(SectionEntry):
    """A GAN loss (:class:`suite.gan.losses.Loss` subclass), or a random draw among others (``draws``)."""

    draws: tuple[str, ...] = ()
    """For a loss drawn at random per batch or per cell: the losses it draws from."""
    optimizer: str = "train"
    """The scenario section whose ``lr`` and ``betas`` its Adam optimisers take."""
    gpu_check_settings: dict[str, Any] | None = None
    """Its section's fields in the scenario ``suite gpu-check`` runs (None: the defaults)."""
    critic_steps: Callable[[Any], int] | None = None
    """Discriminator steps per generator step, from its settings section (None: one)."""
    critic_norm: str = "batch"
    """The discriminator's normalisation that ``model.critic_norm: auto`` means for it."""
    loss_bound: float = 1e4
    """Largest loss magnitude before a run has diverged (:mod:`suite.gan.divergence`): 1e4 for bounded scores."""
    uncapturable: str | None = None
    """Why its training step cannot be captured as a CUDA graph (``performance.cuda_graphs`` is then refused, naming
    this reason); None: it can."""

    def problems(self) -> list[str]:
        """What the suite needs of a loss that this entry lacks (empty: nothing)."""
        found = [] if self.target is not None or self.draws else ["no implementation (target) and nothing it draws"]
        found += self.section_problems()
        return found


def record_part_type(entry: StrategyEntry) -> type | None:
    """The dataclass of a strategy's own record fields: its ``record_part``, imported where it names one as
    ``"module:Class"`` (a built-in strategy's, in its own package); None where it brings none."""
    part = entry.record_part
    return named(part) if isinstance(part, str) else part


def settings_type(entry: SectionEntry) -> type:
    """The dataclass of an entry's own settings section: its ``settings_class``, imported where it names one as
    ``"module:Class"`` (a built-in one, in its strategy's or loss's own package)."""
    cls = entry.settings_class
    if isinstance(cls, str):
        return named(cls)
    if cls is None:
        raise LookupError(f"{entry.name} has no settings section")
    return cls


@dataclass(frozen=True)
class FeatureEntry(Entry):
    """A feature network for IS, FID and KID; its builder takes the run's dataset settings (see :mod:`suite.measure.metrics.features`)."""

    inception_weights: bool = False
    """It scores with pytorch-fid's Inception when ``metrics.inception_weights`` (or the hub cache) has it: that
    file's hash is checked before any rank starts."""


@dataclass(frozen=True)
class ProtocolEntry(Entry):
    """How samples and real images are prepared and counted for IS, FID and KID (``metrics.protocol``)."""

    quantised: bool = False
    """Samples and real images are rounded to 8 bits per channel, as a PNG stores them, before scoring."""
    whole_split: bool = False
    """The real statistics cover every image of the split at the dataset's native resolution (else the
    reference draw of ``metrics.samples`` images at ``dataset.image_size``)."""
    sample_counts: tuple[int, ...] = ()
    """The generated sample counts it allows (empty: any)."""
    literature: bool = False
    """The protocol papers report FID and IS with: with the same network, their numbers are comparable with ours."""


@dataclass(frozen=True)
class ArchitectureEntry(Entry):
    """A generator and discriminator pair; its builder takes ``(image_size, channels, latent_dim, num_classes, dropout,
    critic_norm)`` and returns the two networks, initialised from the global random state (:mod:`suite.gan.models`)."""

    check_image_size: Callable[[int], None] = check_image_size
    """Raises ``ValueError`` (one line) unless both networks work at this image side."""
    critic_norms: tuple[str, ...] = ()
    """The discriminator normalisations it offers (``model.critic_norm``); empty: none, the setting stays ``auto``."""
    paper: str = ""
    """Where its layers are printed (shown in the report)."""


GPU_CHECK_DATASET = "digits"
"""The dataset ``suite gpu-check`` trains on (:func:`suite.running.gpucheck.scenario_for`): its class count says
which process counts a label-partitioned run takes (P up to it, or a multiple of it)."""
