"""A run's record from the parts its stages return: :func:`assemble` (the one constructor of a record that a process
makes from what it measured) and :func:`completed` (a record with some of its fields given anew, the launcher's).

Every part is a dataclass whose fields are fields of :class:`suite.records.record.Record`, named the same: the
record's own parts where they fit (:class:`~suite.records.record.RunSettings`, :class:`~suite.records.measured.Timing`,
...), and the frozen parts below for what a stage adds that no record part groups.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from .codec import record_data
from .record import AT_TOP_LEVEL, Provenance, Record, RunSettings, provenance, run_identity
from .results import new_record

if TYPE_CHECKING:
    from ..config.scenario import Run
    from .measured import Communication, TelemetrySummary
    from .record import DatasetInfo


@dataclass(frozen=True)
class Ending:
    """How the run ended: its ``status`` (``ok``, ``failed``, ``interrupted``, ``diverged``) and its words."""

    status: str
    error: str | None = None
    """A failed or interrupted run: what ended it, its first line naming the cause."""
    reason: str | None = None
    """A diverged run: which value at which step on which rank."""
    diverged: dict[str, Any] | None = None
    """A diverged run: :meth:`suite.gan.divergence.Divergence.as_dict`."""


@dataclass(frozen=True)
class FailurePart:
    """The rank that failed first (:meth:`suite.records.failures.Failure.as_dict`) and, where it is the writer's own,
    its traceback."""

    failure: dict[str, Any] | None
    traceback: str | None = None


@dataclass(frozen=True)
class Trained:
    """Rank 0's measurements of a run that trained, besides its :class:`~suite.records.measured.Timing`,
    :class:`~suite.records.measured.Throughput` and :class:`~suite.records.record.Placement`: what it trained on, where,
    its traffic and every rank's telemetry summarised."""

    dataset: DatasetInfo
    launcher: str
    engine_settings: dict[str, Any]
    device: str
    host_load: dict[str, Any]
    """:func:`suite.measure.hostload.host_load` of every rank's readings."""
    comm: Communication
    telemetry: TelemetrySummary
    env: dict[str, Any]
    machine: dict[str, Any]
    warnings: list[str] | None = None


@dataclass(frozen=True)
class ModelPart:
    """The trained model's digest and its files in the run folder (``generator.pt`` and the strategy's others)."""

    model_digest: str
    model_files: dict[str, Any]
    """:class:`~suite.records.record.FileDigest` by file name."""


@dataclass(frozen=True)
class Scored:
    """A finished run's scores (:func:`suite.running.scoring.quality_fields`): its model's quality, the curve over
    training, the time to target, and the strategy's extra models' quality (``quality_<name>``)."""

    quality: dict[str, Any]
    curve: list[dict[str, Any]]
    time_to_target: dict[str, Any] | None = None
    extra_quality: dict[str, Any] = dataclasses.field(default_factory=dict, metadata={AT_TOP_LEVEL: True})
    """``quality_<name>`` of each of the strategy's extra models, at the record's top level."""


@dataclass(frozen=True)
class StrategyPart:
    """The fields the strategy adds (its ``Outcome.fields``): the record's loader puts each where the strategy's record
    part or the core record declares it."""

    fields: Mapping[str, Any] = dataclasses.field(metadata={AT_TOP_LEVEL: True})


@dataclass(frozen=True)
class LaunchPart:
    """How ``suite run``'s launch ended: its command, exit code, wall time and the checkpoint ``--resume`` continues
    from (None: from step 0)."""

    command: str
    exit_code: int | None
    wall_s: float
    checkpoint: dict[str, Any] | None


def identity(run: Run) -> RunSettings:
    """The part that names ``run`` in its record (a failed one too)."""
    return RunSettings(**run_identity(run))


def made_now(run: Run, source: dict[str, Any], started_utc: str) -> Provenance:
    """The :class:`~suite.records.record.Provenance` of a record written now (:func:`suite.records.record.provenance`)."""
    return Provenance(**provenance(run, source, started_utc))


def _part_fields(part: object) -> dict[str, Any]:
    """The part's fields by name, as typed values; an :data:`~suite.records.record.AT_TOP_LEVEL` field's items at the top
    level."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(part):  # type: ignore[arg-type]
        value = getattr(part, f.name)
        if f.metadata.get(AT_TOP_LEVEL):
            fields.update(value or {})
        else:
            fields[f.name] = value
    return fields


def assemble(source: str, *parts: object | None) -> Record:
    """The :class:`Record` of ``parts`` (None: a part the run does not have), checked and built as every record read is
    (numbers that are not finite made null; :class:`~suite.records.record.RecordError` naming ``source`` and the field).

    Where two parts give a field, the later one's stands: the scores' curve over the one the strategy scored while it
    trained, the strategy's grid over the run's."""
    fields: dict[str, Any] = {}
    for part in parts:
        if part is not None:
            fields.update(_part_fields(part))
    return new_record(record_data(fields), source)


def completed(record: Record, *parts: object) -> Record:
    """``record`` with every field of ``parts`` given anew (null ones too): the launcher's completion of the worker's."""
    return dataclasses.replace(record, **{name: value for part in parts for name, value in _part_fields(part).items()})


def provenance_kept(record: Record, made: Provenance) -> Provenance:
    """``record``'s provenance where it has one, field by field, else ``made``'s (a record from a worker that wrote
    none)."""
    return Provenance(
        **{f.name: v if (v := getattr(record, f.name)) is not None else getattr(made, f.name) for f in dataclasses.fields(made)}
    )
