"""The fields ``label_partitioned`` adds to its runs' records (torch-free: the suite reads this to read records),
named by its registry entry as its ``record_part``, as a plugin's: checked as a record is read, held as
``Record.strategy_part``, and a column of the report's flat table where marked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...records.fields import Count, column, comma_list
from ...records.record import StrategyFields


@dataclass
class GroupPart:
    """One entry of ``groups`` (label_partitioned): a communicator group's ranks, the classes it trains and their
    replicas' digests."""

    OPEN: ClassVar[bool] = True
    ranks: list[Count]
    classes: list[Count]
    digests: list[str] | None = None


@dataclass
class LabelPartitionedRecord:
    """label_partitioned: one GAN per class, trained by its group of ranks."""

    classes: list[int] | None = column(text=comma_list)
    """The classes it trained, one GAN each (the flat table shows them as ``0,3,7``)."""
    class_schedule: str | None = column()
    """``train.class_schedule`` as the ranks applied it: ``interleaved`` or ``sequential``."""
    groups: list[GroupPart] | None = None
    """Each communicator group's ranks, classes and replica digests."""


@dataclass
class LabelPartitionedFields(LabelPartitionedRecord, StrategyFields):
    """What the strategy hands the record (its ``Outcome.fields``): the fields every strategy adds and its own part."""
