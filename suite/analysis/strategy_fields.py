"""The one place analysis reaches the fields that belong to one strategy's records (cellular's grid of cells,
label-partitioned's class groups): each strategy's record part, defined in its own package and held as
``Record.strategy_part``, read typed (:func:`suite.records.record.part_of`)."""

from __future__ import annotations

from ..records.record import Record, part_of
from ..strategies.cellular.record import CellularRecord
from ..strategies.label_partitioned.record import LabelPartitionedRecord


def cellular_fields(record: Record) -> CellularRecord:
    """``record``'s cellular fields (cells per rank, neighbourhood, population, phases, process grid); all None in the
    record of another strategy."""
    return part_of(record, CellularRecord)


def class_group_fields(record: Record) -> LabelPartitionedRecord:
    """``record``'s label-partitioned fields (its classes and class groups); None in the record of another strategy."""
    return part_of(record, LabelPartitionedRecord)
