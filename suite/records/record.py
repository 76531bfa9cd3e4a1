"""The schema of a run record (``RESULTS/<run_id>/result.json``): its parts as dataclasses.

A record is one JSON object; most parts lie at its top level, the dataset, communication, telemetry and quality
blocks are nested. Every record is checked against :class:`CoreRecord` when read
(:func:`suite.records.codec.check_record`), so that a key no part declares is an error, not a silently empty column;
records of schema 1 and 2 may hold fields renamed since, which are passed over. A strategy's own top-level fields
are its registry entry's ``record_part``, checked, built and written back the same way (``Record.strategy_part``).
The parts live in :mod:`suite.records.measured` (what the run measured), :mod:`suite.records.scored` (what it scored)
and this module; :func:`suite.records.fields.column` marks the columns of the report's flat table.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..config.schema import SchemaError
from .fields import Count, Grid, Positive, Seconds, column, grid_text, sweep_cell, total_steps
from .measured import Communication, HostLoad, Machine, TelemetrySummary, Throughput, Timing
from .scored import CurvePoint, History, Quality, TimeToTarget

if TYPE_CHECKING:
    from ..config.scenario import Run

SCHEMA_VERSION = 5
"""Version of the record layout written now, checked against :class:`Record` when read (3 added ``machine``,
``quality.ruler_sha256``, ``quality.device``, ``quality.not_scorable`` and the ``diverged`` fields; 4 added
``sweep``, ``sweep_order``, ``model_files``, ``checkpoints_skipped`` and the :class:`Provenance` fields; 5 put the
warm-up inside ``train_s``, made ``images_per_s`` count training images and added ``train_images``,
``eval_images``, ``steps_per_gan``, ``generator_only_steps``, ``host_load`` and ``warnings``: older records are
brought to its meaning as they are read, :mod:`suite.records.upgrade`)."""


class RecordError(SchemaError):
    """A record does not fit the schema, or a path names no field of it."""


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
    (:class:`suite.config.entries.StrategyEntry`), a plugin's among them."""


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
