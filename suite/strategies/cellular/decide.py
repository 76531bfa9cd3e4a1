"""How the cellular strategy decides between two noisy scores (torch-free, pure functions).

Every discrete decision of a cellular run (the tournament, the replacement of a cell's individuals, the (1+1)-ES
acceptance of mixture weights, the choice of the best mixture) compares scores estimated from samples. The papers
take the strictly lower score; then a difference far inside the sampling noise, even one a CPU's rounding makes,
picks the winner, and the run becomes another draw (reports/cellular-decisions). Here a challenger displaces the
incumbent only when it is lower by more than ``cellular.decision_margin`` standard errors of the difference,
estimated from the very samples that made both scores; otherwise the incumbent stays, and which one is the
incumbent never depends on a score (the first drawn, the cell's previous individual, the current weights, the
first cell in grid order). ``decision_margin: 0`` is the papers' strict rule exactly.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

K = TypeVar("K")
SE = Callable[[int, int], float]
"""The standard error of the difference between the scores of two candidates (by index)."""


def displaces(incumbent: float, challenger: float, se: float, margin: float) -> bool:
    """Whether ``challenger`` is lower than ``incumbent`` by more than ``margin`` standard errors ``se``.

    With ``margin`` 0 this is the strict ``challenger < incumbent`` of the papers (for finite scores).
    """
    return incumbent - challenger > margin * se


def z_value(incumbent: float, challenger: float, se: float) -> float | None:
    """The improvement of ``challenger`` over ``incumbent`` in standard errors (None where ``se`` is 0 or unknown)."""
    if not se > 0 or not math.isfinite(se):
        return None
    return (incumbent - challenger) / se


def paired_se(rows: np.ndarray, other: np.ndarray | None = None) -> SE:
    """The standard error of the difference of two candidates' mean scores, from their per-sample values: row i of
    ``rows`` against row j of ``other`` (of ``rows`` itself where None); the columns are the same images and noise for
    every candidate, so the difference is paired."""
    second = rows if other is None else other

    def se(i: int, j: int) -> float:
        diff = np.asarray(rows[i], dtype=np.float64) - np.asarray(second[j], dtype=np.float64)
        return float(np.std(diff, ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else 0.0

    return se


def no_se(i: int, j: int) -> float:
    """No estimate of the noise: only the margin 0 rule can use it."""
    return 0.0


def first_unless_displaced(order: Sequence[K], scores: Any, se: Callable[[K, K], float], margin: float) -> tuple[K, float | None]:
    """The candidate kept: ``order[0]``, displaced in turn by each later candidate lower than the one kept by more
    than the margin (``scores[candidate]`` its score). Returns it and the z value of the closest call (the smallest |z| met, None if none)."""
    kept, closest = order[0], None
    for candidate in order[1:]:
        if candidate == kept:
            continue
        s = se(kept, candidate)
        z = z_value(scores[kept], scores[candidate], s)
        if z is not None and (closest is None or abs(z) < abs(closest)):
            closest = z
        if displaces(scores[kept], scores[candidate], s, margin):
            kept = candidate
    return kept, closest


def tournament(
    fitness: list[float], size: int, rng: random.Random, se: SE = no_se, margin: float = 0.0
) -> tuple[int, list[int], float | None]:
    """Lipizzaner's tournament: ``size`` individuals drawn without replacement (with replacement only when there are
    fewer than ``size``); the first drawn wins unless a later one is fitter (lower) by more than the margin.

    Returns the winner, the drawn individuals and the z value of the closest call. With margin 0 the winner is the
    fittest, ties going to the first drawn (the papers' rule).
    """
    n = len(fitness)
    drawn = rng.sample(range(n), size) if size <= n else [rng.randrange(n) for _ in range(size)]
    winner, z = first_unless_displaced(drawn, fitness, se, margin)
    return winner, drawn, z


def replacement(
    old: list[float], new: list[float], n: int, se: Callable[[int, int], float] = no_se, margin: float = 0.0
) -> tuple[list[tuple[str, int]], list[float | None]]:
    """Lipizzaner's replacement: the cell's population after training, best first.

    The ``n`` best new (trained) individuals each replace one of the ``n`` worst old ones, pairwise (best new against
    the n-th worst old, ...), only where fitter (lower) by more than ``margin`` standard errors ``se(old, new)`` of the
    paired difference. Returns ``("old" | "new", index)`` per slot, sorted by fitness (ties in slot order), and the
    z value of each of the ``n`` comparisons.
    """
    slots = [("old", i, old[i]) for i in sorted(range(len(old)), key=lambda i: old[i])]
    ranked_new = sorted(range(len(new)), key=lambda i: new[i])
    zs: list[float | None] = []
    for k in range(n):
        j = k - n
        s = se(slots[j][1], ranked_new[k])
        zs.append(z_value(slots[j][2], new[ranked_new[k]], s))
        if displaces(slots[j][2], new[ranked_new[k]], s, margin):
            slots[j] = ("new", ranked_new[k], new[ranked_new[k]])
    slots.sort(key=lambda slot: slot[2])
    return [(kind, i) for kind, i, _ in slots], zs


def es_step(
    weights: np.ndarray, score: float, proposal: np.ndarray, proposal_score: float, se: float = 0.0, margin: float = 0.0
) -> tuple[np.ndarray, float, bool]:
    """The (1+1)-ES: keep the proposal only when it scores lower (FID) by more than ``margin`` standard errors ``se``
    of the difference (margin 0: strictly lower, the papers' rule)."""
    if displaces(score, proposal_score, se, margin):
        return proposal, proposal_score, True
    return weights, score, False


def bootstrap_fid_se(
    a: np.ndarray, b: np.ndarray | None, score: Callable[[np.ndarray], float], draws: int, seed: int
) -> tuple[float, float]:
    """Bootstrap standard errors of ``score(a)`` and of ``score(a) - score(b)``, resampling the rows (samples) of
    ``a`` and ``b`` together: row i of both is made from the same latent vector, so the difference is paired. With
    ``b`` None the second value is 0. ``draws`` below 2 gives (0, 0): no estimate."""
    if draws < 2 or len(a) < 2:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    alone, diff = [], []
    for _ in range(draws):
        rows = rng.integers(0, len(a), len(a))
        first = score(a[rows])
        alone.append(first)
        if b is not None:
            diff.append(first - score(b[rows]))
    return float(np.std(alone, ddof=1)), float(np.std(diff, ddof=1)) if diff else 0.0
