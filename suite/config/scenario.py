"""Scenario files: the schema, its validation, and the expansion into runs.

A scenario is a YAML file with a handful of sections (each a small dataclass below, one
docstring line per field) and a list of ``runs``. Validation happens here and only here:
unknown fields, wrong types and impossible combinations are rejected with a
:class:`ScenarioError` that names the field, e.g. ``smoke.yaml: train.epoch: unknown field``.

:func:`expand` turns a scenario into concrete :class:`Run` objects, one per process count,
grid and repeat. A run is self-contained: it is written to ``RUN_DIR/run.json`` and is all
that a worker needs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal, NoReturn, TypeVar

import yaml

from .plan import CLASSIFIER_FEATURE_DIM, TrainingError, check_image_size, class_plan, local_batch, process_grid
from .registry import ENGINES, FEATURES, LOSSES, STRATEGIES, engines_for
from .schema import SchemaError, build

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Fields whose value must be a registered name (the converter checks them against the registry).
StrategyName = Annotated[str, STRATEGIES]
EngineName = Annotated[str, ENGINES]
LossName = Annotated[str, LOSSES]
FeatureName = Annotated[str, FEATURES]


class ScenarioError(SchemaError):
    """A scenario is invalid; the message names the file and field."""


B = TypeVar("B")


def _build(cls: type[B], data: dict[str, Any], path: str) -> B:
    """A scenario section from plain data (see :func:`suite.config.schema.build`), errors as :class:`ScenarioError`."""
    return build(cls, data, path, ScenarioError)


Fail = Callable[[str, str], NoReturn]
"""How the checks report a broken rule: ``fail(field path, message)`` raises a :class:`ScenarioError`."""


@dataclass
class DatasetConfig:
    """What every run of the scenario trains on."""

    name: Literal["digits", "mnist", "cifar10", "cifar100", "imagenet"] = "digits"
    """Dataset; ``digits`` (scikit-learn, embedded) needs no files."""
    image_size: int = 32
    """Height and width the images are resized to (a multiple of 4; 32 in the papers)."""
    root: str | None = None
    """Folder holding torchvision's files or ImageNet's train/ and val/ (default ``$SUITE_DATA``)."""
    split: Literal["train", "test"] = "train"
    """Which split trains the GANs (the metrics compare with the same split)."""
    classes: list[int] | None = None
    """Labels to keep (all when omitted)."""
    download: bool = False
    """Let torchvision download MNIST/CIFAR into ``root`` (needs internet)."""
    limit: int | None = None
    """Use only the first N images after class selection (quick trials)."""
    workers: int = 0
    """Loader processes per rank for datasets read from disk (ImageNet)."""


@dataclass
class ModelConfig:
    """The networks of seed 000's tables; only these knobs are exposed."""

    latent_dim: int = 100
    """Size of the noise vector z."""
    dropout: float = 0.25
    """Dropout after each discriminator convolution."""
    sync_batchnorm: bool = False
    """Normalise over the whole data-parallel batch instead of each rank's shard."""
    critic_norm: Literal["auto", "batch", "layer", "none"] = "auto"
    """Discriminator normalisation: batch (the tables), layer, none; auto: layer for wgan-gp, else batch."""


@dataclass
class CheckpointEvery:
    """How often a run saves its training state: one of the two."""

    steps: int | None = None
    """Every this many generator steps of each GAN (cellular: iterations)."""
    minutes: float | None = None
    """Every this many minutes of the training window, agreed by the ranks that train together."""


@dataclass
class TrainConfig:
    """Optimisation settings shared by all strategies."""

    epochs: int = 2
    """Passes over each GAN's training data."""
    steps: int | None = None
    """Stop each GAN after this many generator steps (overrides epochs when smaller)."""
    batch_size: int = 64
    """Global batch of one GAN (split over the ranks that train it); per rank under weak scaling."""
    lr: float = 0.0002
    """Adam learning rate (generator and discriminator)."""
    betas: list[float] = field(default_factory=lambda: [0.5, 0.999])
    """Adam betas."""
    seed: int = 0
    """Every random number of a run derives from this."""
    seeds: list[int] | None = None
    """Train every run once per seed, e.g. ``[0, 1, 2]`` (instead of ``seed``): quality is compared over seeds."""
    warmup_steps: int = 2
    """Generator steps (cellular: iterations) of every GAN made before the training window opens."""
    threads: int | None = None
    """CPU threads per rank (default: the node's cores / the sweep's largest ranks per node)."""
    budget_s: float | None = None
    """Training-window seconds of every run, instead of epochs (still capped by ``steps``): equal-time comparisons."""
    stop_at_target: bool = False
    """End training when the generator first meets ``metrics.target`` (data_parallel, conditional)."""
    checkpoint_every: CheckpointEvery | None = None
    """Save every rank's training state this often, e.g. ``{minutes: 30}`` or ``{steps: 500}`` (off when omitted);
    ``suite run --resume`` continues an unfinished run from its last checkpoint."""


@dataclass
class WganGpConfig:
    """Settings used when ``loss: wgan-gp`` (Gulrajani et al. defaults)."""

    n_critic: int = 5
    """Critic steps per generator step."""
    gp_weight: float = 10.0
    """Gradient-penalty coefficient lambda."""
    lr: float = 0.0001
    """Adam learning rate for critic and generator."""
    betas: list[float] = field(default_factory=lambda: [0.0, 0.9])
    """Adam betas for critic and generator."""


@dataclass
class CellularConfig:
    """Lipizzaner / Mustangs coevolution; defaults are Lipizzaner's MNIST settings (seed 003, Table 1)."""

    iterations: int | None = None
    """Coevolution iterations (default: train.epochs; 200 in the paper; one telemetry step each)."""
    population: int = 1
    """Generators and discriminators per cell."""
    neighbourhood: Literal["von_neumann", "moore"] = "von_neumann"
    """Cell plus its 4 (von Neumann) or 8 (Moore) torus neighbours."""
    tournament_size: int = 2
    """Individuals drawn per tournament."""
    n_replacements: int = 1
    """Trained individuals that may replace the cell's worst ones each iteration (at most population)."""
    mutation_probability: float = 0.5
    """Probability that a learning rate is mutated before each training step."""
    mutation_rate: float = 0.0001
    """Lipizzaner's alpha: a mutated learning rate moves by mutation_rate * N(-train.lr / 10, train.lr)."""
    fitness_samples: int = 1000
    """Real images (and as many generated) per fitness evaluation, run in batches of train.batch_size."""
    batches_per_iteration: int = 0
    """Training batches per cell per iteration, without replacement (0 or more than a pass: one full pass)."""
    discriminator_skip: int = 1
    """Discriminators train on every (discriminator_skip + 1)-th batch only (0: on every batch)."""
    mixture_scale: float = 0.01
    """Standard deviation of the (1+1)-ES step on mixture weights."""
    mixture_samples: int = 1000
    """Generated (and real) images that score a mixture; more than the feature dimension."""
    mixture_features: Literal["logits", "metrics"] = "logits"
    """Mixture FID space: the suite classifier's class logits (10-d on digits, mnist, cifar10) or metrics.features."""
    mixture_sampling: Literal["exact_proportion", "independent_probability"] = "exact_proportion"
    """How a mixture's samples pick their generator: exact shares of the weights, or each independently."""
    mustangs_choice: Literal["batch", "cell"] = "batch"
    """Mustangs draws its loss per batch or once per cell."""


@dataclass
class QualityTarget:
    """A quality to reach, under the run's feature network (``metrics.features``): one of the two."""

    fid: float | None = None
    """Reached when FID is at most this."""
    kid: float | None = None
    """Reached when KID (mean) is at most this."""

    @property
    def metric(self) -> str:
        """``fid`` or ``kid``."""
        return "fid" if self.fid is not None else "kid"

    @property
    def value(self) -> float:
        """The target's number (validation ensures exactly one of fid, kid is given)."""
        value = self.fid if self.fid is not None else self.kid
        assert value is not None, "a target gives fid or kid"
        return value


@dataclass
class MetricsConfig:
    """Image-quality measurement after training."""

    features: FeatureName = "auto"
    """``auto``, ``inception`` or ``classifier`` (see docs/image-quality.md)."""
    samples: int = 1000
    """Generated (and real) images scored."""
    inception_weights: str | None = None
    """Path to pytorch-fid's Inception weights (else ``$SUITE_INCEPTION_WEIGHTS`` or the torch hub cache)."""
    enabled: bool = True
    """Score the trained generators (off: timing-only runs)."""
    curve_points: int = 3
    """Generator snapshots at evenly spaced steps (or times, with a budget), scored for quality over time."""
    target: QualityTarget | None = None
    """Quality target for time-to-quality, e.g. ``{fid: 30}``; needs ``features`` other than ``auto``."""


@dataclass
class DeepSpeedConfig:
    """DeepSpeed engine settings."""

    zero_stage: Literal[0, 1] = 0
    """ZeRO stage (0: plain data parallel; 1: optimizer state partitioned)."""
    config: dict | None = None
    """Extra DeepSpeed config entries merged into the generated one."""


@dataclass
class HorovodConfig:
    """Horovod engine settings: the environment variables Horovod reads at ``hvd.init()``.

    A field left null is not set by the scenario: the launch environment's value is kept where
    it has one (``horovodrun --cycle-time-ms 5`` sets ``HOROVOD_CYCLE_TIME``), else the suite's
    default applies (docs/engine-settings.md). With ``autotune`` the null fields are tuned
    and the others held fixed.
    """

    cycle_time_ms: float | None = None
    """HOROVOD_CYCLE_TIME: milliseconds between the background thread's cycles (default: 10 on CPUs, Horovod's 1 on GPUs)."""
    fusion_threshold_mb: int | None = None
    """HOROVOD_FUSION_THRESHOLD in MiB: the largest fused allreduce buffer, 0 disables fusion (default: Horovod's 128)."""
    cache_capacity: int | None = None
    """HOROVOD_CACHE_CAPACITY: tensors in the response cache, 0 disables it (default: Horovod's 1024)."""
    hierarchical_allreduce: bool | None = None
    """HOROVOD_HIERARCHICAL_ALLREDUCE: reduce inside each node, then across nodes (NCCL builds, several nodes; default off)."""
    hierarchical_allgather: bool | None = None
    """HOROVOD_HIERARCHICAL_ALLGATHER: the same for allgather (default off)."""
    groups: int | None = None
    """DistributedOptimizer groups: reduce each network's gradients in this many groups, each once complete (default: none)."""
    autotune: bool | None = None
    """HOROVOD_AUTOTUNE: tune the null settings while training, logged to RUN_DIR/horovod-autotune.csv (default off)."""
    timeline_mark_cycles: bool | None = None
    """HOROVOD_TIMELINE_MARK_CYCLES: mark every background cycle on a traced run's timeline (default off)."""


@dataclass
class DDPConfig:
    """torch engine settings: arguments of ``DistributedDataParallel`` (null: the suite's default)."""

    bucket_cap_mb: float | None = None
    """Gradient bucket size in MiB (default: DDP's 25)."""
    gradient_as_bucket_view: bool | None = None
    """Gradients are views into the allreduce buckets: no copy, less memory (default: true)."""
    static_graph: bool | None = None
    """Promise DDP that every step uses the same parameters the same way (default: false)."""


@dataclass
class RunSpec:
    """One entry of ``runs``: a strategy on an engine, swept over process counts."""

    strategy: StrategyName
    """Training strategy."""
    engine: EngineName = "mpi"
    """Communication engine."""
    procs: list[int] = field(default_factory=lambda: [1])
    """Process counts to run."""
    loss: LossName | None = None
    """Loss (default: bce; mustangs for cellular; minimax, mse, heuristic: cellular only)."""
    grid: list[int] | None = None
    """Cellular grid [rows, cols] for strong scaling."""
    grids: list[list[int]] | None = None
    """Cellular grids for weak scaling, one per procs entry, with the same cells per rank in each."""
    scaling: Literal["strong", "weak"] | None = None
    """Overrides the scenario's scaling for this entry."""
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    """Settings of the deepspeed engine."""
    horovod: HorovodConfig = field(default_factory=HorovodConfig)
    """Settings of the horovod engine (over the scenario's ``horovod``, field by field)."""
    ddp: DDPConfig = field(default_factory=DDPConfig)
    """Settings of the torch engine (over the scenario's ``ddp``, field by field)."""
    trace: bool = False
    """Write traces: torch profiler, Horovod timeline, DeepSpeed communication log (also ``suite run --trace``)."""
    label: str | None = None
    """Name used in run ids and reports (needed when two entries would share an id)."""
    train: dict | None = None
    """Fields of ``train`` that differ for this entry, e.g. ``{epochs: 60}`` (per-class GANs see fewer batches per epoch)."""


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
    repeats: int = 1
    """Repeat every run this many times (mean and std in the report)."""
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    wgan_gp: WganGpConfig = field(default_factory=WganGpConfig)
    cellular: CellularConfig = field(default_factory=CellularConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    horovod: HorovodConfig = field(default_factory=HorovodConfig)
    """Settings of every horovod run (a run's own ``horovod`` entries override them)."""
    ddp: DDPConfig = field(default_factory=DDPConfig)
    """Settings of every torch run (a run's own ``ddp`` entries override them)."""


@dataclass
class Run:
    """One concrete run: everything a worker needs, written to ``run.json``."""

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
    wgan_gp: WganGpConfig
    cellular: CellularConfig
    metrics: MetricsConfig
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    horovod: HorovodConfig = field(default_factory=HorovodConfig)
    ddp: DDPConfig = field(default_factory=DDPConfig)
    trace: bool = False
    """Write traces into the run folder (their timings include the tracing overhead)."""
    grid: list[int] | None = None
    label: str | None = None
    sweep_procs: list[int] | None = None
    """Process counts of this run's sweep (its ``runs`` entry)."""
    sweep_ranks_per_node: int | None = None
    """Ranks per node of the sweep's largest run (set by ``suite run``): threads per rank follow it."""
    seed_order: int = 0
    """Position of this run's seed in its entry's ``train.seeds`` (runs are interleaved by it)."""

    @property
    def critic_norm(self) -> str:
        """``model.critic_norm`` with ``auto`` resolved for this run's loss (``layer`` for wgan-gp)."""
        if self.model.critic_norm != "auto":
            return self.model.critic_norm
        return "layer" if self.loss == "wgan-gp" else "batch"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Run":
        return _build(cls, data, "run")

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, path: Path) -> "Run":
        return cls.from_dict(json.loads(Path(path).read_text()))


# --- scenario-level checks ------------------------------------------------------------------------


def _fail(path: str, message: str) -> NoReturn:
    """Report a broken rule (:data:`Fail`)."""
    raise ScenarioError(f"{path}: {message}")


def _check(scenario: Scenario) -> None:
    try:
        check_image_size(scenario.dataset.image_size)
    except ValueError as error:
        _fail("dataset.image_size", str(error))
    positive = {
        "model.latent_dim": scenario.model.latent_dim,
        "repeats": scenario.repeats,
        "wgan_gp.n_critic": scenario.wgan_gp.n_critic,
        "cellular.population": scenario.cellular.population,
        "cellular.tournament_size": scenario.cellular.tournament_size,
        "cellular.n_replacements": scenario.cellular.n_replacements,
        "cellular.fitness_samples": scenario.cellular.fitness_samples,
        "cellular.mixture_samples": scenario.cellular.mixture_samples,
        "metrics.samples": scenario.metrics.samples,
    }
    for path, value in positive.items():
        if value < 1:
            _fail(path, f"must be at least 1, got {value}")
    _check_train(scenario.train, "train", _fail)
    if scenario.wgan_gp.lr <= 0:
        _fail("wgan_gp.lr", "must be positive")
    _check_betas(scenario.wgan_gp.betas, "wgan_gp.betas", _fail)
    if not 0 <= scenario.model.dropout < 1:
        _fail("model.dropout", f"must be in [0, 1), got {scenario.model.dropout}")
    _check_budget_and_target(scenario, _fail)
    _check_checkpoints(scenario.train.checkpoint_every, _fail)
    _check_cellular(scenario, _fail)
    classes = scenario.dataset.classes
    if classes is not None and (not classes or len(set(classes)) != len(classes) or min(classes) < 0):
        _fail("dataset.classes", f"expected distinct non-negative labels, got {classes}")
    _check_engine_settings(scenario.horovod, scenario.ddp, "", _fail)
    if not scenario.runs:
        _fail("runs", "at least one run is needed")
    for i, spec in enumerate(scenario.runs):
        path = f"runs[{i}]"
        _check_train(run_train(scenario, spec, f"{path}.train"), f"{path}.train", _fail)
        _check_run_spec(spec, path, scenario, _fail)


def _check_betas(betas: list[float], path: str, fail: Fail) -> None:
    if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
        fail(path, f"expected two numbers in [0, 1), got {betas}")


def _check_train(train: TrainConfig, path: str, fail: Fail) -> None:
    """The rules of a ``train`` section (the scenario's, or one entry's with its own fields on top)."""
    for name in ("epochs", "batch_size"):
        if getattr(train, name) < 1:
            fail(f"{path}.{name}", f"must be at least 1, got {getattr(train, name)}")
    if train.steps is not None and train.steps < 1:
        fail(f"{path}.steps", f"must be at least 1, got {train.steps}")
    if train.warmup_steps < 0:
        fail(f"{path}.warmup_steps", "must not be negative")
    if train.lr <= 0:
        fail(f"{path}.lr", "must be positive")
    _check_betas(train.betas, f"{path}.betas", fail)
    if train.budget_s is not None and train.budget_s <= 0:
        fail(f"{path}.budget_s", f"must be positive, got {train.budget_s}")
    if train.seed < 0:
        fail(f"{path}.seed", f"must not be negative, got {train.seed}")
    if train.seeds is not None:
        if not train.seeds:
            fail(f"{path}.seeds", "is empty: give at least one seed, e.g. [0, 1, 2], or use seed")
        repeated = sorted({s for s in train.seeds if train.seeds.count(s) > 1})
        if repeated:
            fail(f"{path}.seeds", f"seeds repeat: {repeated} (a seed is one training draw; timing repeats are `repeats`)")
        if min(train.seeds) < 0:
            fail(f"{path}.seeds", f"seeds must not be negative, got {train.seeds}")


def _check_one_seed_field(data: Any, path: str, fail: Fail) -> None:
    """``seed`` and ``seeds`` are alternatives: a section gives one of them."""
    if isinstance(data, dict) and "seed" in data and "seeds" in data:
        fail(f"{path}.seeds", f"given alongside {path}.seed: give either one seed or a list of seeds")


def _check_budget_and_target(scenario: Scenario, fail: Fail) -> None:
    target = scenario.metrics.target
    if target is not None:
        if (target.fid is None) == (target.kid is None):
            fail("metrics.target", "give exactly one of fid or kid, e.g. {fid: 30}")
        if target.value < 0:
            fail(f"metrics.target.{target.metric}", f"must not be negative, got {target.value}")
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
    for i, spec in enumerate(scenario.runs):
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
    if every.steps is not None and every.steps < 1:
        fail("train.checkpoint_every.steps", f"must be at least 1, got {every.steps}")
    if every.minutes is not None and every.minutes <= 0:
        fail("train.checkpoint_every.minutes", f"must be positive, got {every.minutes}")


# Classes of the datasets whose count is known before loading them (imagenet's is checked at run time).
_DATASET_CLASSES = {"digits": 10, "mnist": 10, "cifar10": 10, "cifar100": 100}


def _mixture_feature_space(cellular: CellularConfig, dataset: DatasetConfig, metrics: MetricsConfig) -> tuple[int | None, str]:
    """Dimension (None where unknown before loading the data) and name of the mixture FID space."""
    if cellular.mixture_features == "logits":
        return _DATASET_CLASSES.get(dataset.name), f"class-logit space of the {dataset.name} classifier"
    if metrics.features == "classifier":
        return CLASSIFIER_FEATURE_DIM, "classifier feature space (metrics.features)"
    # auto picks Inception wherever its weights are cached, so a scenario must be valid with it
    return 2048, f"Inception pool space (metrics.features: {metrics.features})"


def _check_cellular(scenario: Scenario, fail: Fail) -> None:
    cellular = scenario.cellular
    if cellular.iterations is not None and cellular.iterations < 1:
        fail("cellular.iterations", "must be at least 1")
    for name in ("batches_per_iteration", "discriminator_skip", "mutation_rate", "mixture_scale"):
        if getattr(cellular, name) < 0:
            fail(f"cellular.{name}", "must not be negative")
    if not 0 <= cellular.mutation_probability <= 1:
        fail("cellular.mutation_probability", f"must be in [0, 1], got {cellular.mutation_probability}")
    if cellular.n_replacements > cellular.population:
        fail("cellular.n_replacements", f"{cellular.n_replacements} is more than the population ({cellular.population})")
    dim, space = _mixture_feature_space(cellular, scenario.dataset, scenario.metrics)
    if dim is not None and cellular.mixture_samples <= dim:
        fail(
            "cellular.mixture_samples",
            f"{cellular.mixture_samples} samples give a rank-deficient covariance in the "
            f"{dim}-d {space}: an FID needs more samples than dimensions (Lipizzaner: 1000 in 10-d)",
        )


def _check_engine_settings(horovod: HorovodConfig, ddp: DDPConfig, prefix: str, fail: Fail) -> None:
    for name in ("cycle_time_ms", "fusion_threshold_mb", "cache_capacity"):
        value = getattr(horovod, name)
        if value is not None and value < 0:
            fail(f"{prefix}horovod.{name}", f"must not be negative, got {value}")
    if horovod.groups is not None and horovod.groups < 1:
        fail(f"{prefix}horovod.groups", f"must be at least 1, got {horovod.groups}")
    if ddp.bucket_cap_mb is not None and ddp.bucket_cap_mb <= 0:
        fail(f"{prefix}ddp.bucket_cap_mb", f"must be positive, got {ddp.bucket_cap_mb}")


def _check_run_spec(spec: RunSpec, path: str, scenario: Scenario, fail: Fail) -> None:
    _check_engine_settings(spec.horovod, spec.ddp, f"{path}.", fail)
    for section, engine, default in (("horovod", "horovod", HorovodConfig()), ("ddp", "torch", DDPConfig())):
        if getattr(spec, section) != default and spec.engine != engine:
            fail(f"{path}.{section}", f"only the {engine} engine takes {section} settings, not {spec.engine}")
    loss, losses, engines = spec.loss or default_loss(spec.strategy), STRATEGIES[spec.strategy].losses, engines_for(spec.strategy)
    if loss not in losses:
        fail(f"{path}.loss", f"'{loss}' is not available for {spec.strategy}; choose one of {', '.join(losses)}")
    if spec.engine not in engines:
        fail(f"{path}.engine", f"'{spec.engine}' does not run {spec.strategy}; choose one of {', '.join(engines)}")
    if not spec.procs or any(p < 1 for p in spec.procs):
        fail(f"{path}.procs", f"expected process counts of at least 1, got {spec.procs}")
    if len(set(spec.procs)) != len(spec.procs):
        fail(f"{path}.procs", f"process counts repeat: {spec.procs}")
    scaling = spec.scaling or scenario.scaling
    if spec.strategy == "cellular":
        _check_cellular_spec(spec, path, scaling, fail)
    elif spec.grid is not None or spec.grids is not None:
        fail(f"{path}.grid", f"only the cellular strategy takes a grid, not {spec.strategy}")
    if spec.strategy == "cellular" and scenario.model.critic_norm not in ("auto", "batch"):
        fail(
            "model.critic_norm",
            f"'{scenario.model.critic_norm}' is not available to the cellular strategy ({path}), "
            "which keeps the tables' BatchNorm discriminator; use auto or batch",
        )
    _check_batch_split(spec, path, scaling, scenario, fail)


def _check_cellular_spec(spec: RunSpec, path: str, scaling: str, fail: Fail) -> None:
    """A cellular entry's grids: one grid shared evenly (strong), or the same block of cells per rank (weak)."""
    if scaling == "strong":
        grid = spec.grid
        if grid is None or len(grid) != 2 or min(grid) < 1:
            fail(f"{path}.grid", "cellular strong scaling needs grid: [rows, cols]")
        for p in spec.procs:
            try:
                process_grid(grid, p)
            except ValueError as error:
                fail(f"{path}.procs", str(error))
    else:
        if spec.grids is None or len(spec.grids) != len(spec.procs):
            fail(f"{path}.grids", "cellular weak scaling needs one grid [rows, cols] per procs entry")
        blocks = set()
        for p, g in zip(spec.procs, spec.grids):
            try:
                if len(g) != 2 or min(g) < 1:
                    raise ValueError(f"{g} is not [rows, cols]")
                process_grid(g, p)
            except ValueError:
                fail(
                    f"{path}.grids",
                    f"grid {g} cannot be shared evenly by {p} processes; give each rank the same number of cells",
                )
            blocks.add(g[0] * g[1] // p)
        if len(blocks) > 1:
            fail(
                f"{path}.grids",
                f"weak scaling keeps the cells per rank fixed, but these grids give {sorted(blocks)} cells per rank; "
                "e.g. grids: [[3, 3], [3, 6], [6, 6]] for procs: [1, 2, 4] (a 3x3 block per rank)",
            )


def _check_batch_split(spec: RunSpec, path: str, scaling: str, scenario: Scenario, fail: Fail) -> None:
    """The global batch must split over the ranks that share it; label-partitioned ranks must map onto classes.

    The rules are the runtime's own (:func:`suite.config.plan.local_batch`,
    :func:`suite.config.plan.class_plan`); their errors are re-raised under the entry's field.
    """
    batch = run_train(scenario, spec, f"{path}.train").batch_size
    if STRATEGIES[spec.strategy].data_parallel and scaling == "strong":
        for p in spec.procs:
            try:
                local_batch(batch, p)
            except TrainingError as error:
                fail(f"{path}.procs", f"{error}; use process counts that divide it, or weak scaling")
    classes = scenario.dataset.classes
    if spec.strategy == "label_partitioned" and classes:
        for p in spec.procs:
            if scaling == "weak" and p > len(classes):
                fail(
                    f"{path}.procs",
                    f"weak scaling trains one class per rank, but only {len(classes)} classes are selected ({p} processes)",
                )
            try:
                for ranks, _ in class_plan(classes, p):
                    local_batch(batch, len(ranks))
            except TrainingError as error:  # the class plan names its field (procs); the batch split does not
                fail(
                    f"{path}.procs",
                    f"{p} processes for {len(classes)} classes: {error.reason}"
                    if error.field
                    else f"{error} (each class group at {p} processes)",
                )


def run_train(scenario: Scenario, spec: RunSpec, path: str) -> TrainConfig:
    """The ``train`` section of one entry: the scenario's, with the entry's own fields on top.

    An entry's own ``seed`` replaces the scenario's ``seeds`` (and its ``seeds`` the scenario's ``seed``).
    """
    if not spec.train:
        return scenario.train
    base = dataclasses.asdict(scenario.train)
    if "seed" in spec.train:
        base["seeds"] = None
    return _build(TrainConfig, {**base, **spec.train}, path)


def seeds_of(train: TrainConfig) -> list[int]:
    """The seeds an entry trains with: ``train.seeds``, else the one ``train.seed``."""
    return list(train.seeds) if train.seeds is not None else [train.seed]


def default_loss(strategy: str) -> str:
    """The loss used when a run entry names none."""
    return STRATEGIES[strategy].default_loss


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
        _check_one_seed_field(data.get("train"), "train", _fail)
        for i, entry in enumerate(data.get("runs") or []):
            if isinstance(entry, dict):
                _check_one_seed_field(entry.get("train"), f"runs[{i}].train", _fail)
        scenario = _build(Scenario, data, "")
        _check(scenario)
    except ScenarioError as error:
        raise ScenarioError(f"{source}: {error}") from None
    return scenario


def run_id_for(
    spec: RunSpec, loss: str, procs: int, scaling: str, repeat: int, grid: list[int] | None, seed: int | None = None
) -> str:
    """A readable, unique id such as ``label_partitioned-wgan-gp-mpi-p2-r0`` (``-s1-r0`` for seed 1 of a ``seeds`` list)."""
    stem = spec.label or f"{spec.strategy}-{loss}-{spec.engine}"
    if spec.engine == "deepspeed" and not spec.label and spec.deepspeed.zero_stage:
        stem += f"-zero{spec.deepspeed.zero_stage}"
    parts = [stem, f"p{procs}"]
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
    """All runs of a scenario: one per entry, process count, seed and repeat.

    Ordered as every run's first repeat of its first seed (in file order, each process count),
    then every run's next seed, then the second repeats: interleaving spreads a machine's drift
    over time (clock boost after idle, a neighbour starting work) over every configuration,
    instead of biasing the ones that run last.
    """
    runs: list[Run] = []
    for i, spec in enumerate(scenario.runs):
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
                        run_id=run_id_for(spec, loss, procs, scaling, repeat, grid, seed if train.seeds is not None else None),
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
                        wgan_gp=scenario.wgan_gp,
                        cellular=scenario.cellular,
                        metrics=scenario.metrics,
                        deepspeed=spec.deepspeed,
                        horovod=_overlay(scenario.horovod, spec.horovod),
                        ddp=_overlay(scenario.ddp, spec.ddp),
                        trace=spec.trace,
                        grid=grid,
                        label=spec.label,
                        sweep_procs=list(spec.procs),
                        seed_order=order,
                    )
                )
    runs.sort(key=lambda run: (run.repeat, run.seed_order))  # stable: file order within each repeat and seed
    seen: set[str] = set()
    for run in runs:
        if run.run_id in seen:
            raise ScenarioError(f"{scenario.name}: two runs share the id {run.run_id}; give one of the entries a label")
        seen.add(run.run_id)
    return runs
