"""The fields ``cellular`` adds to its runs' records (torch-free: the suite reads this to read records), named by its
registry entry as its ``record_part``, as a plugin's: checked as a record is read, held as ``Record.strategy_part``,
and a column of the report's flat table where marked."""

from __future__ import annotations

from dataclasses import dataclass

from ...records.fields import Grid, Positive, column
from ...records.record import StrategyFields
from ...records.scored import CurvePoint


@dataclass
class CellularRecord:
    """cellular: its grid's layout over the ranks, its coevolution, and the ranking of its cells and mixtures."""

    process_grid: Grid | None = None
    """The ranks' Cartesian grid: rows and columns of ranks, each with an equal block of cells."""
    cells_per_rank: Positive | None = column()
    neighbourhood: str | None = None
    """``cellular.neighbourhood``: ``von_neumann`` or ``moore``."""
    neighbourhood_size: int | None = column()
    """Cells of the largest neighbourhood, the cell itself included."""
    population: int | None = None
    iterations: int | None = None
    """Coevolution iterations run, warm-up included."""
    batches_per_iteration: int | None = None
    """Training batches of a cell per iteration."""
    phases_s: dict[str, list[float]] | None = None
    """Seconds of each phase of the window's iterations (exchange, fitness, ...), one per rank."""
    best_cell: list[int] | None = None
    best_mixture_cell: list[int] | None = None
    mixture_weights: dict[str, float] | None = None
    mixture_score: dict | None = None
    ranking: dict | None = None
    mixture_curve: list[CurvePoint] | None = None


@dataclass
class CellularFields(CellularRecord, StrategyFields):
    """What the strategy hands the record (its ``Outcome.fields``): the fields every strategy adds, the run's grid
    as its ranks laid it out, and its own part."""

    grid: Grid | None = None
