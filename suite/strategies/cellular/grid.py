"""The toroidal grid of the cellular strategy and its evolutionary operators.

Pure functions, no communication: neighbourhoods on a torus, which rank owns which cell (both in
:mod:`suite.config.plan`, which the projection reads too), and Lipizzaner's operators (learning-rate mutation, the (1+1)-ES proposal on
mixture weights and the sampling of a mixture; the decisions between scores are in :mod:`.decide`). Lipizzaner (paper 003) hard-codes its
neighbourhood with a transposed index; here a cell is ``(row, col)`` everywhere and the
tests compare every neighbourhood with brute-force torus arithmetic.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...config.plan import OFFSETS, Cell, cells, neighbourhood, owner  # noqa: F401  (the grid's geometry, shared with the projection)


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
