"""The scenario's sections, each a small dataclass whose fields carry their types, bounds (``Annotated[...,
Field(...)]``, :class:`suite.config.schema.AtMost`) and docs (the docstring under each field), from which the
schema checks a file and the JSON Schema and the docs' reference are made. :mod:`suite.config.scenario` puts
them together into a scenario, its run entries and its runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from .plan import DATASET_CLASSES
from .registry import ARCHITECTURES, ENGINES, FEATURES, LOSSES, PROTOCOLS, STRATEGIES
from .schema import AtMost, OneOf

# Fields whose value must be a registered name (the schema checks them against the registry).
StrategyName = Annotated[str, OneOf(STRATEGIES)]
EngineName = Annotated[str, OneOf(ENGINES)]
LossName = Annotated[str, OneOf(LOSSES)]
FeatureName = Annotated[str, OneOf(FEATURES)]
ProtocolName = Annotated[str, OneOf(PROTOCOLS)]
ArchitectureName = Annotated[str, OneOf(ARCHITECTURES)]

# Why an upper bound is where it is (the error gives the reason).
_NEVER = "a run this long would never finish"
_MONTH = "longer than a month"
_IMAGES = "the images are held in memory while they are scored"
_BUFFER = "a buffer this large does not fit a device's memory"

# at most 1e6: a record reads back numbers up to 1e18, and the divergence tests train at 1e6 on purpose
LearningRate = Annotated[float, Field(gt=0), AtMost(1e6, "a step this large only diverges")]
Beta = Annotated[float, Field(ge=0, lt=1)]
Seed = Annotated[int, Field(ge=0), AtMost(2**32 - 1, "NumPy's seeds are 32-bit")]
Procs = Annotated[int, Field(ge=1), AtMost(1_000_000, "more ranks than the largest machines have")]
GridSide = Annotated[int, Field(ge=1), AtMost(10_000, "every cell trains its own networks")]


@dataclass(frozen=True)
class DatasetConfig:
    """What every run of the scenario trains on."""

    name: Literal["digits", "mnist", "cifar10", "cifar100", "imagenet"] = "digits"
    """Dataset; ``digits`` (scikit-learn, embedded) needs no files."""
    image_size: Annotated[
        int,
        Field(ge=1),  # the architecture's own rule says which sizes it takes (dcgan: a multiple of 4, at least 20)
        AtMost(256, "the generator's first layer holds latent_dim x 128 x (image_size / 4)^2 weights"),
    ] = 32
    """Height and width the images are resized to (32 in the papers; the architecture says which sizes it takes:
    ``dcgan`` a multiple of 4 from 20, ``mlp`` any)."""
    resolution: Literal["resized", "native"] = "resized"
    """``native``: keep the images at the size their files hold (digits 8, mnist 28, cifar 32; paper 002), which
    sets ``image_size`` to it; ``resized``: resize them to ``image_size``."""
    root: str | None = None
    """Folder holding torchvision's files or ImageNet's train/ and val/ (default ``$SUITE_DATA``)."""
    split: Literal["train", "test"] = "train"
    """Which split trains the GANs (the metrics compare with the same split)."""
    classes: (
        list[Annotated[int, Field(ge=0), AtMost(999, "ImageNet, the dataset with the most classes, has labels 0..999")]] | None
    ) = None
    """Labels to keep (all when omitted)."""
    download: bool = False
    """Let torchvision download MNIST/CIFAR into ``root`` (needs internet)."""
    limit: Annotated[int, Field(ge=1), AtMost(10**8, "more images than any dataset the suite reads")] | None = None
    """Use only the first N images after class selection (quick trials)."""
    workers: Annotated[int, Field(ge=0), AtMost(256, "each loader process holds its own prefetch queue")] = 0
    """Loader processes per rank for datasets read from disk (ImageNet)."""

    @property
    def class_count(self) -> int | None:
        """Classes trained: those of ``classes``, else all of the dataset's (None where only its files tell)."""
        return len(self.classes) if self.classes else DATASET_CLASSES[self.name]

    @property
    def class_labels(self) -> list[int] | None:
        """The labels trained: ``classes``, else all of the dataset's (None where only its files tell)."""
        if self.classes:
            return list(self.classes)
        count = DATASET_CLASSES[self.name]
        return list(range(count)) if count is not None else None


@dataclass(frozen=True)
class ModelConfig:
    """The networks every run of the scenario trains (one architecture for all, so strategies compare fairly)."""

    architecture: ArchitectureName = "dcgan"
    """``dcgan``: paper 000's Tables 1-4; ``mlp``: Lipizzaner's perceptrons (paper 003, Table 1: 2 hidden layers of 256, tanh)."""
    latent_dim: Annotated[
        int, Field(ge=1), AtMost(4096, "the generator's first layer holds latent_dim x 128 x (image_size / 4)^2 weights")
    ] = 100
    """Size of the noise vector z."""
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.25
    """Dropout after each discriminator convolution."""
    sync_batchnorm: bool = False
    """Normalise over the whole data-parallel batch instead of each rank's shard."""
    critic_norm: Literal["auto", "batch", "layer", "none"] = "auto"
    """Discriminator normalisation: batch (the tables), layer, none; auto: layer for wgan-gp, else batch."""


@dataclass(frozen=True)
class CheckpointEvery:
    """How often a run saves its training state: one of the two."""

    steps: Annotated[int, Field(ge=1), AtMost(10**9, _NEVER)] | None = None
    """Every this many generator steps of each GAN (cellular: iterations)."""
    minutes: Annotated[float, Field(gt=0), AtMost(43_200, _MONTH)] | None = None
    """Every this many minutes of the training window, agreed by the ranks that train together."""


@dataclass(frozen=True)
class SeedPolicy:
    """Sequential seeds: ``initial`` seeds for every system, then ``step`` more for the systems in a pair the quality
    verdicts leave undecided (neither different nor equivalent), until every pair is decided or ``max`` is reached.

    The seeds are 0, 1, 2, ... in order. The family-wise error of the whole procedure stays at most 5 %: the level
    is spent equally over its looks, Holm's step-down inside each (docs/results.md, "Verdicts")."""

    initial: Annotated[int, Field(ge=2), AtMost(1000, _NEVER)] = 3
    """Seeds every system trains first (at least 2: a test needs a spread)."""
    step: Annotated[int, Field(ge=1), AtMost(1000, _NEVER)] = 3
    """Seeds added at each look to the systems of an undecided pair."""
    max: Annotated[int, Field(ge=2), AtMost(1000, _NEVER)] = 12
    """The cap: seeds a system trains at most (at least ``initial``)."""

    @property
    def looks(self) -> int:
        """How often the verdicts are taken: after the initial block and after every step up to the cap."""
        return 1 + -(-(self.max - self.initial) // self.step)

    def seeds_at(self, look: int) -> int:
        """Seeds a system still in the procedure has at ``look`` (from 1)."""
        return min(self.initial + (look - 1) * self.step, self.max)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings shared by all strategies."""

    epochs: Annotated[int, Field(ge=1), AtMost(100_000, _NEVER)] = 2
    """Passes over each GAN's training data."""
    steps: Annotated[int, Field(ge=1), AtMost(10**9, _NEVER)] | None = None
    """Stop each GAN after this many generator steps (overrides epochs when smaller)."""
    batch_size: Annotated[int, Field(ge=1), AtMost(65_536, "the activations of a larger batch do not fit a device's memory")] = 64
    """Global batch of one GAN (split over the ranks that train it); per rank under weak scaling."""
    lr: LearningRate = 0.0002
    """Adam learning rate (generator and discriminator)."""
    betas: list[Beta] = field(default_factory=lambda: [0.5, 0.999])
    """Adam betas."""
    seed: Seed = 0
    """Every random number of a run derives from this."""
    seeds: list[Seed] | SeedPolicy | None = None
    """Train every run once per seed, e.g. ``[0, 1, 2]`` (instead of ``seed``): quality is compared over seeds; or
    sequential seeds, ``{initial: 3, step: 3, max: 12}``: more seeds only where a quality verdict is undecided."""
    warmup_steps: Annotated[int, Field(ge=0), AtMost(10**6, _NEVER)] = 2
    """Generator steps (cellular: iterations) of every GAN at the start of the training window: on its clock, not timed as steps."""
    threads: Annotated[int, Field(ge=1), AtMost(1024, "more threads per rank than any node has cores")] | None = None
    """CPU threads per rank (default: the node's cores / the sweep's largest ranks per node; at most 4 on a rank that trains on a GPU)."""
    budget_s: Annotated[float, Field(gt=0), AtMost(2_592_000, _MONTH)] | None = None
    """Seconds of every run's training, instead of epochs (still capped by ``steps``): equal-time comparisons. Warm-up
    counts inside it: the window gets the budget less the slowest rank's warm-up seconds."""
    budget_images: Annotated[int, Field(ge=1), AtMost(10**12, _NEVER)] | None = None
    """Training images (real images that reach a discriminator update) of every system, summed over its GANs (cells)
    and ranks, warm-up included, instead of epochs, ``steps`` and ``cellular.iterations``:
    equal-compute comparisons that do not depend on the host's speed (docs/scenarios.md, "Equal budgets"; not with
    ``budget_s``)."""
    ema_half_life: Annotated[float, Field(gt=0, le=1)] | None = None
    """Keep an EMA generator: an exponential moving average of every generator's weights (BatchNorm buffers copied),
    updated after each generator step, never feeding back into training, scored at the end as ``quality.ema_fid``
    (docs/image-quality.md). Its half-life as a share of the GAN's generator steps (cellular: of a cell's), so that
    every system averages over the same share of its budget; bias-corrected (the weights after steps 1..t, weighted
    by the decay, the initial weights not among them). Off when omitted; not with ``budget_s`` (a time budget does
    not fix the steps)."""
    class_schedule: Literal["interleaved", "sequential"] = "interleaved"
    """How a rank that trains several class GANs (label_partitioned) orders their steps: round-robin, one step of
    each in turn (every curve point has every class trained), or each GAN to its end before the next."""
    stop_at_target: bool = False
    """End training when the generator first meets ``metrics.target`` (data_parallel, conditional)."""
    checkpoint_every: CheckpointEvery | None = None
    """Save every rank's training state this often, e.g. ``{minutes: 30}`` or ``{steps: 500}`` (off when omitted);
    ``suite run --resume`` continues an unfinished run from its last checkpoint."""


@dataclass(frozen=True)
class QualityTarget:
    """A quality to reach, under the run's feature network (``metrics.features``): one of the two."""

    fid: Annotated[float, Field(ge=0), AtMost(10_000, "FIDs of images in [-1, 1] stay far below it")] | None = None
    """Reached when FID is at most this."""
    kid: Annotated[float, Field(ge=0), AtMost(100, "KIDs of images in [-1, 1] stay far below it")] | None = None
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


@dataclass(frozen=True)
class MetricsConfig:
    """Image-quality measurement after training."""

    features: FeatureName = "auto"
    """``auto``, ``inception`` or ``classifier`` (see docs/image-quality.md)."""
    samples: Annotated[int, Field(ge=1), AtMost(10**6, _IMAGES)] = 1000
    """Generated (and real) images scored."""
    inception_weights: str | None = None
    """Path to pytorch-fid's Inception weights (else ``$SUITE_INCEPTION_WEIGHTS`` or the torch hub cache)."""
    protocol: ProtocolName = "suite"
    """``suite`` (samples as generated, against ``samples`` real images at ``image_size``) or ``standard``
    (the papers' protocol: 8-bit samples, the whole real split at native size, 10000 or 50000 samples;
    see docs/image-quality.md)."""
    enabled: bool = True
    """Score the trained generators (off: timing-only runs)."""
    curve_points: Annotated[int, Field(ge=0), AtMost(1000, "every point samples and scores the generator")] = 3
    """Generator snapshots at evenly spaced steps (or times, with a budget), scored for quality over time."""
    ema_samples: Annotated[int, Field(ge=1), AtMost(10**6, _IMAGES)] | None = None
    """Generated images that score the EMA generator at the end (``train.ema_half_life``; default ``samples``), against
    as many real ones (at most the split's): more than the curve's, so that sampling noise is a small share of the
    spread between seeds (reports/verdicts/estimand.md)."""
    target: QualityTarget | None = None
    """Quality target for time-to-quality, e.g. ``{fid: 30}``; needs ``features`` other than ``auto``."""
    equivalence_margin: Annotated[float, Field(gt=1), AtMost(1000, "every pair would be equivalent")] = 1.5
    """Two systems whose quality ratio's interval lies inside [1/m, m] are "equivalent within m-fold" (two one-sided
    tests): a verdict of its own, beside "better" and "undecided"."""
    prdc_k: Annotated[
        int, Field(ge=1), AtMost(100, "a neighbourhood this wide covers every mode: the scores lose their meaning")
    ] = 5
    """Nearest neighbours of precision, recall, density and coverage (every scored model; 5 as Naeem et al. and their
    ``prdc`` package use; must be below ``samples``; see docs/image-quality.md)."""


@dataclass(frozen=True)
class DeepSpeedConfig:
    """DeepSpeed engine settings."""

    zero_stage: Literal[0, 1] = 0
    """ZeRO stage (0: plain data parallel; 1: optimizer state partitioned)."""
    config: dict | None = None
    """Extra DeepSpeed config entries merged into the generated one."""


@dataclass(frozen=True)
class HorovodConfig:
    """Horovod engine settings: the environment variables Horovod reads at ``hvd.init()``.

    A field left null is not set by the scenario: the launch environment's value is kept where
    it has one (``horovodrun --cycle-time-ms 5`` sets ``HOROVOD_CYCLE_TIME``), else the suite's
    default applies (docs/engine-settings.md). With ``autotune`` the null fields are tuned
    and the others held fixed.
    """

    cycle_time_ms: Annotated[float, Field(ge=0), AtMost(60_000, "a cycle of a minute would stall every step")] | None = None
    """HOROVOD_CYCLE_TIME: milliseconds between the background thread's cycles (default: 10 on CPUs, Horovod's 1 on GPUs)."""
    fusion_threshold_mb: Annotated[int, Field(ge=0), AtMost(65_536, _BUFFER)] | None = None
    """HOROVOD_FUSION_THRESHOLD in MiB: the largest fused allreduce buffer, 0 disables fusion (default: Horovod's 128)."""
    cache_capacity: Annotated[int, Field(ge=0), AtMost(10**7, "the networks have far fewer tensors")] | None = None
    """HOROVOD_CACHE_CAPACITY: tensors in the response cache, 0 disables it (default: Horovod's 1024)."""
    hierarchical_allreduce: bool | None = None
    """HOROVOD_HIERARCHICAL_ALLREDUCE: reduce inside each node, then across nodes (NCCL builds, several nodes; default off)."""
    hierarchical_allgather: bool | None = None
    """HOROVOD_HIERARCHICAL_ALLGATHER: the same for allgather (default off)."""
    groups: Annotated[int, Field(ge=1), AtMost(1000, "the networks have far fewer tensors")] | None = None
    """DistributedOptimizer groups: reduce each network's gradients in this many groups, each once complete (default: none)."""
    autotune: bool | None = None
    """HOROVOD_AUTOTUNE: tune the null settings while training, logged to RUN_DIR/horovod-autotune.csv (default off)."""
    timeline_mark_cycles: bool | None = None
    """HOROVOD_TIMELINE_MARK_CYCLES: mark every background cycle on a traced run's timeline (default off)."""


@dataclass(frozen=True)
class DDPConfig:
    """torch engine settings: arguments of ``DistributedDataParallel`` (null: the suite's default)."""

    bucket_cap_mb: Annotated[float, Field(gt=0), AtMost(65_536, _BUFFER)] | None = None
    """Gradient bucket size in MiB (default: DDP's 25)."""
    gradient_as_bucket_view: bool | None = None
    """Gradients are views into the allreduce buckets: no copy, less memory (default: true)."""
    static_graph: bool | None = None
    """Promise DDP that every step uses the same parameters the same way (default: false)."""


@dataclass(frozen=True)
class LogsConfig:
    """Logs in other tools' formats, written by rank 0 from the run's record as it ends (docs/logs.md)."""

    tensorboard: bool = False
    """TensorBoard event files in ``RUN_DIR/tensorboard`` (``suite run --tensorboard DIR`` writes them under DIR instead)."""
    mllog: bool = False
    """MLPerf-style ``:::MLLOG`` lines in ``RUN_DIR/mllog.txt`` (also ``suite run --mllog``)."""


@dataclass(frozen=True)
class PerformanceConfig:
    """Settings that keep a GPU busy, for every strategy that trains with the shared GAN trainer (docs/gpu.md).

    A field left null is off; a run entry's own fields override the scenario's, field by field.
    """

    compile: bool | None = None
    """``torch.compile`` the networks' forward passes (Inductor; on CPUs it needs a C++ compiler; default off)."""
    cuda_graphs: bool | None = None
    """CUDA graphs: the whole training step captured once and replayed (GPUs, torch engine, one rank; default off)."""
    channels_last: bool | None = None
    """Networks and images in the channels-last memory format (default off)."""
    bf16: bool | None = None
    """bfloat16 autocast of the forward passes and losses (default off; the models then differ from float32's)."""

    def active(self) -> dict[str, bool]:
        """Every setting, null read as off."""
        return {f.name: bool(getattr(self, f.name)) for f in dataclasses.fields(self)}
