"""The schema of a run record (``RESULTS/<run_id>/result.json``): its parts as dataclasses.

A record is one JSON object. Most of its parts lie at its top level (the run's settings, where
it ran, its times, its throughput, a strategy's own fields, the checkpoints, the launch); the
dataset, the communication, the telemetry and each quality block are nested objects. The
worker writes the parts it builds whole with :func:`dataclasses.asdict`; every record of this
schema version is checked against :class:`CoreRecord` when it is read (:func:`suite.records.codec.check_record`), so
that a key no part declares is an error, not a silently empty column. A strategy's own top-level
fields (a plugin's) are its registry entry's ``record_part``, a dataclass checked, built and written
back the same way (``Record.strategy_part``). :func:`suite.records.codec.record_field` reads a dotted path and fails on
one the schema does not have.

Fields marked with :func:`column` are the columns of the report's flat table
(:data:`suite.records.codec.FLAT_COLUMNS`, and the installed strategies' parts' :func:`suite.records.codec.flat_columns`): the column is named
after the field unless the mark names it.

Records of every schema version are checked when read (:func:`suite.records.codec.check_record`); those of schema 1 and 2 (before this
module) have the same layout less the later fields, and fields renamed since are passed over.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, ClassVar, Literal, TypeVar

from pydantic import Field

from ..config.schema import SchemaError
from ..config.sweep import sweep_text

if TYPE_CHECKING:
    from ..config.scenario import Run

SCHEMA_VERSION = 5
"""Version of the record layout written now, checked against :class:`Record` when read (3 added ``machine``,
``quality.ruler_sha256``, ``quality.device``, ``quality.not_scorable`` and the ``diverged`` fields; 4 added
``sweep``, ``sweep_order``, ``model_files``, ``checkpoints_skipped`` and the :class:`Provenance` fields; 5 put the
warm-up inside ``train_s``, made ``images_per_s`` count training images and added ``train_images``,
``eval_images``, ``steps_per_gan``, ``generator_only_steps``, ``host_load`` and ``warnings``: older records are
brought to its meaning as they are read, :mod:`suite.records.upgrade`)."""


Count = Annotated[int, Field(ge=0)]
"""A record's count of steps, images or bytes."""
Positive = Annotated[int, Field(ge=1)]
"""A record's count that is at least 1: processes, threads, cores, a batch, a grid's side."""
Seconds = Annotated[float, Field(ge=0)]
"""A record's duration."""
Grid = Annotated[list[Positive], Field(min_length=2, max_length=2)]
"""A cellular grid or process grid: rows and columns."""


class RecordError(SchemaError):
    """A record does not fit the schema, or a path names no field of it."""


RUNS = "runs"
"""The report's per-run table (its Runs section and ``runs.csv``): a table a column may join (:func:`column`)."""
REPORT_TABLES = (RUNS,)
"""The report's tables that a strategy's column may join besides the flat table, which every column is in."""


def column(name: str | None = None, *, tables: tuple[str, ...] = (), text: Callable[[Any], Any] | None = None) -> Any:
    """A field (default None) that is a column of the flat table, named ``name`` or after the field.

    ``tables``: the report's tables (:data:`REPORT_TABLES`) that a strategy's column also joins, after the core's columns
    (:func:`suite.records.codec.joined_columns`); ``text``: how the flat table shows its value (None: as it is).
    """
    unknown = [t for t in tables if t not in REPORT_TABLES]
    if unknown:
        raise ValueError(f"column {name or ''!r}: no report table {unknown[0]!r} (one of {', '.join(REPORT_TABLES)})")
    metadata: dict[str, Any] = {"column": name or True}
    if tables:
        metadata["tables"] = tuple(tables)
    if text is not None:
        metadata["text"] = text
    return dataclasses.field(default=None, metadata=metadata)


def comma_list(value: Any) -> str | None:
    """A list of values as the flat table shows it: ``0,3,7`` (None where empty)."""
    return ",".join(map(str, value)) if value else None


def grid_text(value: Any) -> str | None:
    """A grid as the flat table shows it: ``2x3`` (None where there is none)."""
    return "x".join(map(str, value)) if value else None


def total_steps(value: Any) -> Any:
    """Generator steps as the flat table shows them: their total where a run counts them per GAN (a mapping)."""
    return sum(value.values()) if isinstance(value, dict) else value


def sweep_cell(value: Any) -> str | None:
    """A run's swept values as the flat table shows them: ``lr=0.001, n_critic=5`` (None where it has none)."""
    return sweep_text(value) or None


# --- nested parts ----------------------------------------------------------------------------------------


@dataclass
class DatasetInfo:
    """``dataset``: what the run trained on."""

    name: str | None = column("dataset")
    split: str | None = None
    image_size: Positive | None = None
    images: Count | None = None
    """Training images (after class selection and limit)."""
    classes: list[int] | None = None


@dataclass
class Communication:
    """``comm``: what the engine moved inside the training window."""

    bytes: Count | None = column("comm_bytes")
    """Payload bytes handed to collectives by all ranks inside the window."""
    bytes_outside_window: int | None = None
    seconds: Seconds | None = column("comm_s")
    """Mean over ranks of the seconds each was blocked in communication, over the whole window
    (``telemetry.comm_wait_s`` is the same wait per window step)."""
    largest_group: int | None = None
    per_rank_bytes: list[Count] | None = None
    per_rank_seconds: list[Seconds] | None = None


@dataclass
class StepTimesPart:
    """``step_times`` of a rank's telemetry: the count, mean and spread of its window steps and a sample of them."""

    OPEN: ClassVar[bool] = True  # keys it does not declare are passed over (the parts of telemetry grow)
    count: Count | None = None
    mean: float | None = None
    std: float | None = None
    sample: list[float] | None = None


@dataclass
class WarmupPart:
    """``warmup`` of a rank's telemetry: its warm-up steps, images and seconds."""

    OPEN: ClassVar[bool] = True
    steps: Count | None = None
    images: Count | None = None
    seconds: Seconds | None = None


@dataclass
class WindowPart:
    """``window`` of a rank's telemetry: its timed steps, images, seconds and where the seconds went."""

    OPEN: ClassVar[bool] = True
    steps: Count
    step_seconds: Seconds
    seconds: Seconds | None = None
    images: Count | None = None
    busy_seconds: Seconds | None = None
    data: Seconds | None = None
    comm: Seconds | None = None
    compute: Seconds | None = None
    comm_bytes: Count | None = None


@dataclass
class PeakPart:
    """``peak`` of a rank's telemetry: the FLOP/s it could reach, and how that was found."""

    OPEN: ClassVar[bool] = True
    flops: float | None
    source: str | None = None


@dataclass
class SampledPart:
    """A quantity a rank's sampler read over its run (:func:`suite.measure.telemetry.summary`): its mean and 95th
    percentile."""

    OPEN: ClassVar[bool] = True
    mean: float | None = None
    p95: float | None = None


@dataclass
class RankTelemetry:
    """One entry of ``telemetry.per_rank`` (:meth:`suite.measure.telemetry.Telemetry.as_dict`): every field it writes
    is checked; keys it does not declare (a newer suite's) are kept as they are."""

    OPEN: ClassVar[bool] = True
    rank: Count | None = None
    host: str | None = None
    steps: Count | None = None
    images: Count | None = None
    setup_s: Seconds | None = None
    paused_s: Seconds | None = None
    checkpoint_s: Seconds | None = None
    images_per_s: float | None = None
    flops_per_step: float | None = None
    comm_bytes: Count | None = None
    peak: PeakPart | None = None
    window: WindowPart | None = None
    warmup: WarmupPart | None = None
    step_times: StepTimesPart | None = None
    device: str | None = None
    """This rank's device (``cpu``, ``cuda:1``)."""
    timeline: str | None = None
    """How its steps were timed: ``host_clock`` or ``cuda_events``."""
    train_images: Count | None = None
    eval_images: Count | None = None
    host_load: dict[str, Any] | None = None
    """The load of its host over the training clock (:meth:`suite.measure.hostload.HostLoadSampler.as_dict`)."""
    cpu_util: SampledPart | None = None
    host_mem_peak_bytes: Count | None = None
    gpu_util: SampledPart | None = None
    gpu_mem_used_bytes: SampledPart | None = None
    gpu_mem_peak_bytes: Count | None = None
    gpu_note: str | None = None
    comm_largest_group: int | None = None
    budget_window_s: Seconds | None = None


@dataclass
class GroupPart:
    """One entry of ``groups`` (label_partitioned): a communicator group's ranks, the classes it trains and their
    replicas' digests."""

    OPEN: ClassVar[bool] = True
    ranks: list[Count]
    classes: list[Count]
    digests: list[str] | None = None


@dataclass
class TimeToTarget:
    """``time_to_target``: when the run's score first reached the target (``metrics.target``), on which ruler."""

    OPEN: ClassVar[bool] = True
    reached: bool
    metric: str | None = None
    target: float | None = None
    features: str | None = None
    n: Count | None = None
    clock_s: Seconds | None = None
    """When the score reached the target: interpolated between the curve points ``clock_lo`` and ``clock_hi`` that
    bracket it, linear in the log score (:func:`suite.measure.metrics.curve.crossing`); in records written before
    the bracket was recorded, the clock of the first point that met it."""
    clock_lo: Seconds | None = None
    """The clock of the last curve point before ``clock_hi`` (0, the window's start, where the first point met the
    target); absent in older records."""
    clock_hi: Seconds | None = None
    """The clock of the first curve point that met the target; absent in older records."""
    step: Count | None = None
    best: float | None = None
    points: Count | None = None


@dataclass
class CurvePoint:
    """A point of ``curve`` or ``mixture_curve``: a model scored during training, at a clock reading and a step (or a
    cellular iteration)."""

    OPEN: ClassVar[bool] = True
    clock_s: Seconds
    step: Count | None = None
    iteration: Count | None = None
    images: Count | None = None
    fid: float | None = None
    kid_mean: float | None = None
    kid_std: float | None = None
    is_mean: float | None = None
    features: str | None = None
    n: Count | None = None


@dataclass
class LossPoint:
    """A point of ``history``: the losses at a generator step (null where they were not finite)."""

    OPEN: ClassVar[bool] = True
    step: Count
    epoch: Count | None = None
    clock_s: Seconds | None = None
    d_loss: float | None = None
    g_loss: float | None = None


@dataclass
class CellPoint:
    """A point of a cellular cell's ``history``: its learning rates and mixture FID at an iteration."""

    OPEN: ClassVar[bool] = True
    iteration: Count
    clock_s: Seconds | None = None
    lr_d: float | list[float] | None = None
    lr_g: float | list[float] | None = None
    mixture_fid: float | None = None
    accepted: bool | None = None
    decisions: list[dict] | None = None
    """The iteration's decisions (tournament, replace, mixture): what was chosen and the z value of the closest
    call, the improvement in standard errors (:mod:`suite.strategies.cellular.decide`)."""


History = list[LossPoint] | dict[str, list[LossPoint]] | dict[str, list[CellPoint]]
"""``history``: the losses along training, a list, or per class GAN (label_partitioned) or per cell (cellular)."""


@dataclass
class PerClassScore:
    """One class of ``quality.per_class_label`` or ``per_class_predicted``: its samples and FID or KID."""

    OPEN: ClassVar[bool] = True
    n: Count
    metric: Literal["fid", "kid"] | None
    n_real: Count | None
    fid: float | None
    kid_mean: float | None
    kid_std: float | None
    kid_subset_size: Count | None
    kid_subsets: Count | None
    note: str | None


@dataclass
class TelemetrySummary:
    """``telemetry``: the ranks' step timers and samplers, summarised (see :mod:`suite.measure.telemetry`)."""

    warmup_steps_per_rank: list[Count] | None = None
    timed_steps: Count | None = column()
    """Window steps of the rank that made the fewest."""
    step_s: float | None = column()
    step_p50: float | None = column()
    step_p95: float | None = column()
    step_mean: float | None = None
    step_ci95: float | None = column()
    data_s: float | None = column()
    compute_s: float | None = column()
    comm_wait_s: float | None = column()
    """Seconds per window step blocked in communication (mean over ranks)."""
    comm_share: float | None = column()
    steps: Count | None = None
    work_images_per_rank: list[Count] | None = column()
    work_steps_per_rank: list[Count] | None = column()
    busy_s_per_rank: list[Seconds] | None = None
    flops_per_step: float | None = column()
    flops_per_step_per_rank: list[float | None] | None = None
    achieved_flops_per_rank: float | None = column("achieved_flops")
    peak_flops_per_rank: float | None = column("peak_flops")
    peak_source: str | None = column()
    peak_raised_ranks: list[int] | None = column()
    """Ranks that computed faster than their measured or datasheet peak, whose peak is their achieved rate
    (:func:`suite.measure.flops.peak_use`)."""
    fraction_of_peak: float | None = column()
    cpu_util_mean: float | None = column()
    host_mem_peak_mb: float | None = column()
    gpu_util_mean: float | None = column()
    gpu_util_p95: float | None = column()
    gpu_mem_used_mb: float | None = column()
    gpu_mem_peak_mb: float | None = column()
    gpu_note: str | None = None
    per_rank: list[RankTelemetry] | None = None
    """Each rank's raw telemetry (:meth:`suite.measure.telemetry.Telemetry.as_dict`), read as :class:`RankTelemetry`."""


@dataclass
class Quality:
    """``quality`` (and ``quality_<model>``): one model's scores (see :mod:`suite.measure.metrics.evaluate`)."""

    features: str | None = column()
    """The ruler: the feature network (``inception``, ``classifier:<dataset>``, ...)."""
    ruler_sha256: str | None = column()
    """The pinned sha256 of the ruler's weights file (:mod:`suite.measure.metrics.rulers`)."""
    protocol: str | None = column()
    """``metrics.protocol``: ``suite`` or ``standard`` (the papers'); null in records written before protocols (``suite``)."""
    papers_comparable: bool | None = column()
    """The papers' network and protocol both: its IS and FID are comparable with the numbers papers print."""
    comparability: str | None = None
    """One line: comparable with the papers' numbers, or why not."""
    features_detail: str | None = None
    device: str | None = None
    """Where the feature network ran (``cpu``, ``cuda:0``)."""
    feature_dim: int | None = None
    n: int | None = column("quality_n")
    n_real: int | None = None
    classes: list[int] | None = None
    num_classes: int | None = None
    pixel_std: float | None = None
    is_mean: float | None = column()
    is_std: float | None = column()
    is_splits: int | None = None
    is_split_n: int | None = None
    is_note: str | None = None
    fid: float | None = column()
    fid_note: str | None = None
    kid_mean: float | None = column()
    kid_std: float | None = column()
    kid_subset_size: int | None = None
    kid_subsets: int | None = None
    precision: float | None = column()
    """Fidelity: the share of samples inside the real k-NN manifold (Kynkäänniemi et al. 2019; :mod:`suite.measure.metrics.manifold`)."""
    recall: float | None = column()
    """Diversity: the share of real samples inside the samples' k-NN manifold."""
    density: float | None = column()
    """Fidelity: real k-NN balls holding a sample, per sample and per k (Naeem et al. 2020); about 1 where samples are as the data."""
    coverage: float | None = column()
    """Diversity: the share of real samples whose k-NN ball holds a sample; near 0 for a collapse (:mod:`suite.analysis.collapse`)."""
    prdc_k: int | None = None
    """The k of the four scores above (``metrics.prdc_k``); null in records written before them."""
    prdc_n_real: int | None = None
    """Real samples of the four scores (``n`` generated beside them)."""
    tvd: float | None = column()
    label_acc: float | None = column()
    classifier_accuracy: float | None = None
    per_class_label: dict[str, PerClassScore] | None = None
    per_class_predicted: dict[str, PerClassScore] | None = None
    untrained_fid: float | None = None
    untrained_kid: float | None = None
    ema_fid: float | None = column()
    """FID of the run's EMA generator (``train.ema_half_life``) at the end of its budget, on ``ema_n`` samples of the
    common latents: the end-of-budget estimand (:func:`suite.analysis.estimand.end_fid`)."""
    ema_kid_mean: float | None = column()
    """KID of the EMA generator on the same samples: the unbiased MMD^2 of all of them against the real draw, the
    quantity KID's subset mean estimates (:func:`suite.measure.metrics.scores.mmd2_unbiased_all`)."""
    ema_n: int | None = column()
    """Generated samples that scored the EMA generator (``metrics.ema_samples``)."""
    latent_seed: int | None = None
    """The seed of the latent vectors and labels the model was scored on: the same for every system, seed and curve
    point (common random numbers); null in records written before (each run scored on its own seed's draws)."""
    not_scorable: str | None = None
    """Why the samples could not be scored (non-finite, constant, a singular problem); the scores are then null."""


@dataclass
class Machine:
    """``machine``: what computed the run (:func:`suite.measure.env.machine`), for telling which runs should agree bitwise."""

    cpu_model: str | None = None
    cores: int | None = None
    cpu_capability: str | None = None
    """The kernel set torch dispatches to (``torch.backends.cpu.get_cpu_capability()``, e.g. AVX512, AVX2)."""
    onednn_max_isa: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: int | None = None
    nccl: str | None = None
    mpi: str | None = None
    gpu: str | None = None
    gpu_driver: str | None = None
    fingerprint: str | None = column("machine")
    """A digest of the fields that identify the machine (:data:`suite.measure.env.MACHINE_IDENTITY`), not of those
    that depend on the launch (``cpu_capability``, ``onednn_max_isa``, ``mpi``, ``host``). Records written before
    it left those out digest every field above; the report and ``suite compare`` recompute it."""
    host: str | None = None
    numerics: str | None = column()
    """A digest of one fixed forward and backward pass on the run's device and threads (:func:`suite.measure.env.numerics_digest`)."""


@dataclass
class HostLoad:
    """``host_load``: the host's load over the run's training clock (:mod:`suite.measure.hostload`), on its busiest host."""

    contended: bool | None = column()
    """The run's timings were taken while other processes used its cores, or steal took the CPUs
    (:func:`suite.measure.hostload.contention`); None: unknown (no ``/proc/stat``)."""
    contention: str | None = None
    """Why, in a few words."""
    outside_cores: float | None = column()
    """Cores that processes outside the run kept busy, on average over its training clock."""
    outside_share: float | None = None
    """``outside_cores`` as a share of the host's cores (of the window's core-seconds, those others used)."""
    free_cores: float | None = None
    """The host's cores that the run's ranks did not claim (its cores less their threads)."""
    cores: int | None = None
    steal_share: float | None = column()
    """CPU steal as a share of the host's CPU time."""
    load_avg: list[float | None] | None = column()
    """The host's 1-minute load average as the training clock started and as it stopped."""
    hosts: list[dict] | None = None
    """The same per host, for a run over several nodes."""


# --- top-level parts ---------------------------------------------------------------------------------------


@dataclass
class RunSettings:
    """What names the run (also in a failed record): :func:`run_identity`."""

    run_id: str | None = column()
    scenario: str | None = None
    strategy: str | None = column()
    engine: str | None = column()
    loss: str | None = column()
    procs: Positive | None = column()
    scaling: str | None = column()
    repeat: Count | None = column()
    grid: Grid | None = column(text=grid_text)
    label: str | None = column()
    sweep: dict[str, Any] | None = column(text=sweep_cell)
    """The values its entry's ``sweep`` gave this run, by dotted field (:mod:`suite.config.sweep`); the flat
    table shows them as text (``lr=0.001, n_critic=5``)."""
    sweep_order: Count | None = None
    """Position of those values among the sweep's combinations (0: the first listed)."""
    epochs: Count | None = column()
    seed: Count | None = column()
    budget_s: Seconds | None = column()
    budget_images: Count | None = column()
    critic_norm: str | None = None
    architecture: str | None = None
    """``model.architecture``: the networks every run of its scenario trains (:data:`suite.config.registry.ARCHITECTURES`)."""
    traced: bool | None = None


@dataclass
class Placement:
    """How the run sat on its node."""

    threads_per_rank: Positive | None = column()
    cores_per_node: Positive | None = column()
    cores_allowed: Positive | None = None
    ranks_per_node: Positive | None = column()
    oversubscribed: bool | None = column()


@dataclass
class Timing:
    """Seconds of each phase (the slowest rank's); ``train_s`` is the training clock: the warm-up (``warmup_s``)
    and the timed steps after it, the same for every system."""

    setup_s: Seconds | None = column()
    warmup_s: Seconds | None = column()
    budget_window_s: Seconds | None = column()
    """Under ``train.budget_s``: the training window the budget left after the slowest rank's warm-up."""
    train_s: Seconds | None = column()
    eval_s: Seconds | None = column()
    """Scoring during training (stop_at_target), with the window's clock stopped."""
    finalize_s: Seconds | None = column()
    score_s: Seconds | None = column()
    worker_s: Seconds | None = None
    wall_s: Seconds | None = column()
    """The launch, as ``suite run`` timed it."""


@dataclass
class Throughput:
    """Training images per second of the training clock, and the work counted the same way for every strategy
    (:mod:`suite.measure.telemetry`)."""

    images_per_s: float | None = column()
    """Training images (real images that reach a discriminator update) per second of ``train_s``, warm-up
    included, all ranks."""
    images_per_s_ci95: Annotated[list[float | None], Field(min_length=2, max_length=2)] | None = column()
    images_per_s_per_rank: float | None = column()
    train_images: int | None = column()
    """Training images of the run, all ranks, warm-up included: what ``images_per_s`` counts (and
    ``train.budget_images`` charges)."""
    eval_images: int | None = column()
    """Evaluation images: images that networks scored without an update during training (cellular's fitness
    and mixture evaluation), all ranks; 0 for a strategy that scores nothing while it trains."""


@dataclass
class Steering:
    """``steering``: the network a strategy used inside training, never the ruler that scores the comparison
    (``quality.features`` and ``quality.ruler_sha256``; see :mod:`suite.measure.metrics.rulers`)."""

    name: str | None = None
    """``steering:<dataset>``."""
    sha256: str | None = None
    """The pinned sha256 of its weights file."""
    use: str | None = None
    """What it steered: ``cellular mixture weights (class logits)``."""
    architecture: str | None = None
    """Its architecture (``pixel-mlp``: a perceptron on raw pixels), never the ruler's; absent in records written
    before it was recorded."""
    trained_on: str | None = None
    """In words, the data it was trained on: data the ruler was not trained on."""
    agreement_top1: float | None = None
    """The share of held-out images on whose top-1 class it and the ruler agree (measured once, when it was made)."""
    rank_correlation: float | None = None
    """Spearman's rank correlation between its FIDs (in the space it steered in) and the ruler's over a fixed set
    of degraded and mode-dropped image sets (``reports/steering/steering.md``)."""
    measured_against: str | None = None
    """The sha256 of the ruler those agreements were measured against."""


@dataclass
class StrategyFields:
    """What every strategy adds to the record (its ``Outcome.fields``); a strategy's own fields are its entry's
    ``record_part``, defined in its own package (a built-in's ``record.py``), as a plugin's."""

    global_batch: Positive | None = column()
    generator_steps: Any = column("steps", text=total_steps)
    """Generator steps: a number, or per class GAN (label_partitioned)."""
    history: History | None = None
    """Losses along training: a list, or per class (label_partitioned) or per cell (cellular)."""
    images_consumed: Count | None = column()
    """Real training images drawn into the system's training batches, over all its GANs (cells) and ranks, warm-up
    included: what ``train.budget_images`` counts (defined in :mod:`suite.config.plan`)."""
    warmup_images_consumed: Count | None = column()
    """The part of ``images_consumed`` that warm-up steps consumed."""
    budget_steps: Count | None = column()
    """Under ``train.budget_images``: the whole steps the budget bought, warm-up included: generator steps of the model
    (label_partitioned: of each class GAN; cellular: iterations)."""
    steering: Steering | None = None
    """The network that steered training (cellular's mixture weights); null where none did."""
    steps_per_gan: int | None = column()
    """Generator steps of one GAN's generator, warm-up included (label_partitioned: the fewest of a class GAN;
    cellular: of each generator of a cell, an iteration's batches per iteration)."""
    generator_only_steps: int | None = column()
    """Of ``steps_per_gan``, the steps without a discriminator step (cellular's ``discriminator_skip``; 0 elsewhere)."""
    replica_digests: list[str] | None = None
    """A model replicated on every rank: each rank's digest of its parameters."""
    replicas_identical: bool | None = None
    """Whether the replicas of each model (over all ranks, or each class group's) ended bitwise identical."""


@dataclass
class FileDigest:
    """A file as the suite wrote it: its size and sha256, checked before it is read back (:mod:`suite.records.integrity`)."""

    sha256: str
    bytes: int


@dataclass
class CheckpointInfo:
    """Checkpoints of a run that saves them (:meth:`suite.train.checkpoint.Checkpointer.part`)."""

    checkpoint_every: dict | None = None
    checkpoint_s: float | None = None
    checkpoints_written: int | None = None
    resumed_from: dict | None = None
    """The checkpoint this segment continued from (index, step, training seconds), None for a fresh start."""
    checkpoints_skipped: list[str] | None = None
    """Newer checkpoints that resuming passed over, one line each naming the file and what is wrong with it."""
    segments: list[dict] | None = None


@dataclass
class LaunchResult:
    """How the launch ended, added by ``suite run``."""

    command: str | None = None
    exit_code: int | None = None
    failure: dict | None = None
    """The rank that failed first (:meth:`suite.records.failures.Failure.as_dict`)."""
    traceback: str | None = None
    checkpoint: dict | None = None
    """A failed or interrupted run: the checkpoint ``--resume`` continues from (None: from step 0)."""


@dataclass
class RunOutcome:
    """The run's status and what the worker measured and scored."""

    schema: int | None = None
    status: str | None = column()
    """``ok``, ``failed``, ``interrupted`` or ``diverged`` (see :mod:`suite.gan.divergence`)."""
    error: str | None = column()
    reason: str | None = column()
    """A diverged run: ``diverged at step 12 on rank 0: discriminator loss inf``."""
    diverged: dict | None = None
    """A diverged run: the first value out of bounds (:meth:`suite.gan.divergence.Divergence.as_dict`:
    step, rank, quantity, value, bound, where, unit)."""
    launcher: str | None = None
    engine_settings: dict | None = None
    device: str | None = column()
    env: dict[str, Any] | None = None
    machine: Machine | None = None
    model_digest: str | None = None
    model_files: dict[str, FileDigest] | None = None
    """The model files of the run folder (``generator.pt``, ``generator_best_cell.pt``) by name, checked when loaded."""
    dataset: DatasetInfo | None = None
    comm: Communication | None = None
    telemetry: TelemetrySummary | None = None
    quality: Quality | None = None
    quality_best_cell: Quality | None = None
    """cellular: the best single cell's generator, scored like the model."""
    curve: list[CurvePoint] | None = None
    time_to_target: TimeToTarget | None = None
    host_load: HostLoad | None = None
    """The host's load over the training clock, and whether it makes the run's timings contended."""
    warnings: list[str] | None = column()
    """What to distrust about an ``ok`` run, one line each (e.g. no timed step after the warm-up)."""


@dataclass
class Provenance:
    """What the run was made from and when (:func:`provenance`), in every record, a failed one too."""

    settings: dict | None = None
    """The run's whole resolved settings: its :class:`suite.config.scenario.Run` as ``run.json`` held it."""
    suite_version: str | None = column()
    git_commit: str | None = column()
    """The commit of the checkout the suite's code came from; null without git or outside a checkout (``git_note``)."""
    git_dirty: bool | None = column()
    """A tracked file differed from ``git_commit`` (untracked files are not counted); null as ``git_commit``."""
    git_note: str | None = None
    """Why ``git_commit`` is null."""
    started_utc: str | None = column()
    """When the worker started (``suite run``'s launch where no worker recorded), ISO 8601 in UTC."""
    ended_utc: str | None = column()
    """When the record was written, ISO 8601 in UTC."""


@dataclass
class CoreRecord(
    Provenance,
    RunOutcome,
    LaunchResult,
    CheckpointInfo,
    StrategyFields,
    Throughput,
    Timing,
    Placement,
    RunSettings,
):
    """The fields a run's record may have whatever its strategy: the union of the parts above (every field may be
    missing: a failed run has few). A strategy's own fields are its entry's ``record_part``
    (:class:`suite.config.registry.StrategyEntry`), a plugin's among them."""


AT_TOP_LEVEL = "at_top_level"
"""Field metadata: the field's part is written with its keys at the top level of the record (:func:`suite.records.codec.record_data`)."""


@dataclass
class Record(CoreRecord):
    """A whole run record: its :class:`CoreRecord` fields and its strategy's own (every field may be missing)."""

    strategy_part: Any = dataclasses.field(default=None, metadata={AT_TOP_LEVEL: True})
    """The fields of the record's strategy's ``record_part``, built as that dataclass (their keys lie at the top level
    of the record's JSON); where the strategy is a plugin's that is not installed, the keys the core record does not
    declare, as they were read (unchecked); None where the strategy brings no part."""


P = TypeVar("P")


def part_of(record: Record, part: type[P]) -> P:
    """``record``'s strategy part (``Record.strategy_part``) as dataclass ``part``, a strategy's ``record_part``; where
    the record is another strategy's (or has none), ``part()``, every field None: a typed read of a strategy's own
    fields that mypy checks."""
    own = record.strategy_part
    return own if isinstance(own, part) else part()


def run_identity(run: Run) -> dict[str, Any]:
    """The fields that name ``run`` in its record (also in a failed record): its :class:`RunSettings`."""
    shared = {f.name: getattr(run, f.name) for f in dataclasses.fields(RunSettings) if hasattr(run, f.name)}
    train = run.train
    settings = RunSettings(
        **shared,
        epochs=train.epochs,
        seed=train.seed,
        budget_s=train.budget_s,
        budget_images=train.budget_images,
        architecture=run.model.architecture,
        traced=run.trace,
    )
    return dataclasses.asdict(settings)


def run_setting(record: Record, section: str, name: str) -> Any:
    """One setting of the run ``record`` describes (its ``settings``, as ``run.json`` held them), None where absent."""
    part = (record.settings or {}).get(section)
    return part.get(name) if isinstance(part, dict) else None


def utc_now() -> str:
    """This moment as ISO 8601 in UTC, to the second: ``2025-01-31T14:05:09Z``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance(run: Run, source: dict[str, Any], started_utc: str) -> dict[str, Any]:
    """The :class:`Provenance` of a record written now: ``run``'s settings, the code's ``source`` revision
    (:func:`suite.measure.env.source_revision`) and the start and end times."""
    part = Provenance(settings=run.to_dict(), started_utc=started_utc, ended_utc=utc_now(), **source)
    return dataclasses.asdict(part)
