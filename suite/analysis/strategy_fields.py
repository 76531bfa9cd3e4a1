"""The one place analysis reaches the fields that belong to one strategy's records (cellular's grid of cells,
label-partitioned's class groups), so that moving them into the strategy's own record part changes one line here."""

from __future__ import annotations

from ..records.record import CellularFields, LabelPartitionedFields, Record


def cellular_fields(record: Record) -> CellularFields:
    """``record``'s cellular fields (cells per rank, neighbourhood, population, phases, process grid); all None in the
    record of another strategy."""
    return record


def class_group_fields(record: Record) -> LabelPartitionedFields:
    """``record``'s label-partitioned fields (its classes and class groups); None in the record of another strategy."""
    return record
