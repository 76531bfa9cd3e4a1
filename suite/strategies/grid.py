"""The toroidal grid of the cellular strategy and its evolutionary operators.

Pure functions, no communication: neighbourhoods on a torus, which rank owns which cell, the
tournament and the (1+1)-ES on mixture weights. Lipizzaner (seed 003) hard-codes its
neighbourhood with a transposed index; here a cell is ``(row, col)`` everywhere and the
tests compare every neighbourhood with brute-force torus arithmetic.
"""

from __future__ import annotations

import random
from typing import Sequence

import numpy as np

Cell = tuple[int, int]

OFFSETS = {
    # the cell itself first, then north, south, west, east (and the diagonals for Moore)
    "von_neumann": [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)],
    "moore": [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)],
}


def cells(grid: Sequence[int]) -> list[Cell]:
    """All cells of an R x C grid in row-major order."""
    rows, cols = grid
    return [(i, j) for i in range(rows) for j in range(cols)]


def neighbourhood(cell: Cell, grid: Sequence[int], kind: str = "von_neumann") -> list[Cell]:
    """The cell and its torus neighbours, each once, the cell first.

    On small grids several offsets land on the same cell (on a 1x3 grid north and south are the
    cell itself); such repeats are dropped, so no individual counts twice in a tournament.
    """
    rows, cols = grid
    seen: list[Cell] = []
    for di, dj in OFFSETS[kind]:
        other = ((cell[0] + di) % rows, (cell[1] + dj) % cols)
        if other not in seen:
            seen.append(other)
    return seen


def process_grid(grid: Sequence[int], procs: int) -> tuple[int, int]:
    """Split an R x C cell grid into ``procs`` equal rectangular blocks: (ranks per column, per row).

    Each rank owns a block of (R/pr) x (C/pc) cells, which keeps neighbours on the same or an
    adjacent rank. Such a split exists whenever ``procs`` divides R x C (pr = gcd(procs, R) works);
    otherwise ``ValueError``.
    """
    rows, cols = grid
    if (rows * cols) % procs:
        raise ValueError(f"{procs} processes cannot share a {rows}x{cols} grid evenly ({rows * cols} cells); use a divisor of {rows * cols}")
    options = [(pr, procs // pr) for pr in range(1, procs + 1) if procs % pr == 0 and rows % pr == 0 and cols % (procs // pr) == 0]
    # the most square blocks exchange the least model state
    return min(options, key=lambda o: (abs(rows / o[0] - cols / o[1]), o[0]))


def owner(cell: Cell, grid: Sequence[int], pgrid: tuple[int, int]) -> tuple[int, int]:
    """Process-grid coordinates of the rank that owns ``cell``."""
    return cell[0] // (grid[0] // pgrid[0]), cell[1] // (grid[1] // pgrid[1])


def tournament(fitness: Sequence[float], size: int, rng: random.Random) -> int:
    """Index of the fittest (lowest value) of ``size`` individuals drawn without replacement.

    Draws with replacement only when there are fewer individuals than the tournament size.
    Ties go to the individual drawn first.
    """
    n = len(fitness)
    drawn = rng.sample(range(n), size) if size <= n else [rng.randrange(n) for _ in range(size)]
    return min(drawn, key=lambda i: (fitness[i], drawn.index(i)))


def mutate_learning_rate(lr: float, probability: float, scale: float, rng: random.Random) -> float:
    """Gaussian step on a learning rate with the given probability, kept positive."""
    if rng.random() < probability:
        lr = lr + rng.gauss(0.0, scale)
    return max(lr, 1e-8)


def propose_weights(weights: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """(1+1)-ES proposal: Gaussian step on mixture weights, clipped at 0 and normalised."""
    proposal = np.clip(weights + rng.normal(0.0, scale, size=weights.shape), 0.0, None)
    total = proposal.sum()
    return proposal / total if total > 0 else np.full_like(weights, 1.0 / len(weights))


def es_step(weights: np.ndarray, score: float, proposal: np.ndarray, proposal_score: float) -> tuple[np.ndarray, float, bool]:
    """Keep the proposal only when it scores strictly better (lower FID)."""
    if proposal_score < score:
        return proposal, proposal_score, True
    return weights, score, False
