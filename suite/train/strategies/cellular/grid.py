"""The toroidal grid of the cellular strategy and its evolutionary operators.

Pure functions, no communication: neighbourhoods on a torus, which rank owns which cell (both in
:mod:`suite.config.plan`, which the projection reads too), and Lipizzaner's operators (tournament, learning-rate mutation, replacement, the (1+1)-ES on
mixture weights and the sampling of a mixture). Lipizzaner (paper 003) hard-codes its
neighbourhood with a transposed index; here a cell is ``(row, col)`` everywhere and the
tests compare every neighbourhood with brute-force torus arithmetic.
"""

from __future__ import annotations

import random
from typing import Sequence

import numpy as np

from ....config.plan import OFFSETS, Cell, cells, neighbourhood, owner  # noqa: F401  (the grid's geometry, shared with the projection)


def tournament(fitness: Sequence[float], size: int, rng: random.Random) -> int:
    """Index of the fittest (lowest value) of ``size`` individuals drawn without replacement.

    Draws with replacement only when there are fewer individuals than the tournament size.
    Ties go to the individual drawn first.
    """
    n = len(fitness)
    drawn = rng.sample(range(n), size) if size <= n else [rng.randrange(n) for _ in range(size)]
    return min(drawn, key=lambda i: (fitness[i], drawn.index(i)))


def mutate_learning_rates(
    lrs: Sequence[float], initial: float, rate: float, probability: float, rng: np.random.Generator
) -> list[float]:
    """Lipizzaner's learning-rate mutation, applied before every training step of a population.

    Each rate takes the step ``rate * delta`` with ``delta ~ N(-initial / 10, initial)`` (so a
    slow downward drift) with ``probability``, and is clipped at 0 (``mutate_hyperparams`` in
    lipizzaner_gan_trainer.py; ``rate`` is its ``alpha``, the paper's "mutation rate").
    """
    deltas = rng.normal(-initial / 10, initial, size=len(lrs))
    deltas[rng.random(len(lrs)) < 1 - probability] = 0.0
    return [max(0.0, lr + rate * delta) for lr, delta in zip(lrs, deltas)]


def discriminator_trains(batch: int, skip: int) -> bool:
    """Whether discriminators train on ``batch``: every batch with ``skip`` 0, else every (skip+1)-th."""
    return skip == 0 or batch % (skip + 1) == 0


def replacement(old: Sequence[float], new: Sequence[float], n: int) -> list[tuple[str, int]]:
    """Lipizzaner's replacement: the cell's population after training, best first.

    The ``n`` best new (trained) individuals each replace one of the ``n`` worst old ones, pairwise
    (best new against the n-th worst old, ...), only where strictly fitter (lower). Returns
    ``("old" | "new", index)`` per slot, sorted by fitness (``Population.replacement``).
    """
    slots = [("old", i, old[i]) for i in sorted(range(len(old)), key=lambda i: old[i])]
    ranked_new = sorted(range(len(new)), key=lambda i: new[i])
    for k in range(n):
        j = k - n
        if slots[j][2] > new[ranked_new[k]]:
            slots[j] = ("new", ranked_new[k], new[ranked_new[k]])
    slots.sort(key=lambda slot: slot[2])
    return [(kind, i) for kind, i, _ in slots]


def propose_weights(weights: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """(1+1)-ES proposal: Gaussian step on mixture weights, clipped at 0 and normalised."""
    proposal = np.clip(weights + rng.normal(0.0, scale, size=weights.shape), 0.0, None)
    total = proposal.sum()
    return proposal / total if total > 0 else np.full_like(weights, 1.0 / len(weights))


def mixture_assignment(weights: np.ndarray, n: int, mode: str, rng: np.random.Generator) -> np.ndarray:
    """Which mixture member draws each of ``n`` samples (``MixedGeneratorDataset``).

    ``exact_proportion``: ceil(n * w_k) copies of member k, shuffled, the first ``n`` kept.
    ``independent_probability``: each sample draws its member with probability w_k.
    """
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    if mode == "independent_probability":
        return rng.choice(len(w), size=n, p=w)
    return rng.permutation(np.repeat(np.arange(len(w)), np.ceil(n * w).astype(int)))[:n]


def es_step(weights: np.ndarray, score: float, proposal: np.ndarray, proposal_score: float) -> tuple[np.ndarray, float, bool]:
    """Keep the proposal only when it scores strictly better (lower FID)."""
    if proposal_score < score:
        return proposal, proposal_score, True
    return weights, score, False
