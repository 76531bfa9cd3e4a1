"""Fidelity and diversity apart: precision, recall, density and coverage of generated features against real ones.

The k-nearest-neighbour manifolds of Kynkäänniemi et al. 2019 and the density and coverage of Naeem et al. 2020,
as the authors' ``prdc`` package defines them (docs/image-quality.md). Precision and density are about the fake
features inside the *real* manifold, recall and coverage about the real ones inside the *fake* one; swapping the
sets (torch-fidelity's issue #58) turns "high precision, low recall" into the reverse (``tests/test_manifold.py``
checks the order). Distances are Euclidean, in float64, from the Gram matrix, in blocks of at most
:data:`BLOCK_ENTRIES` entries.
"""

from __future__ import annotations

import numpy as np

PRDC_FIELDS = ("precision", "recall", "density", "coverage")
"""The four scores, as the quality block names them."""
BLOCK_ENTRIES = 2**22
"""Distances computed at a time (32 MiB of float64): blocks of rows, so that 50,000 samples fit in memory."""


def _step(columns: int) -> int:
    """Rows per block of a distance matrix with ``columns`` columns (:data:`BLOCK_ENTRIES` entries at most)."""
    return max(1, BLOCK_ENTRIES // max(columns, 1))


def _distances(a: np.ndarray, b: np.ndarray, b_squared: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of ``a`` and ``b`` (``b_squared``: the squared norms of ``b``'s rows)."""
    squared = np.einsum("ij,ij->i", a, a)[:, None] + b_squared[None, :] - 2.0 * (a @ b.T)
    return np.sqrt(np.maximum(squared, 0.0))


def nearest_neighbour_radii(features: np.ndarray, k: int) -> np.ndarray:
    """Each row's distance to its ``k``-th nearest neighbour among the other rows of ``features`` (float64)."""
    f = np.asarray(features, dtype=np.float64)
    squared = np.einsum("ij,ij->i", f, f)
    radii = np.empty(len(f))
    step = _step(len(f))
    for lo in range(0, len(f), step):
        block = _distances(f[lo : lo + step], f, squared)
        rows = np.arange(len(block))
        block[rows, lo + rows] = 0.0  # a row's distance to itself, exactly (rounding leaves ~1e-7)
        radii[lo : lo + len(block)] = np.partition(block, k, axis=1)[:, k]  # index 0 is the row itself
    return radii


def check_prdc_sizes(n_real: int, n_fake: int, k: int) -> None:
    """A ``ValueError`` naming what is wrong where ``k`` is not below both sample counts (a k-th neighbour needs k others)."""
    if k < 1:
        raise ValueError(f"prdc k must be at least 1, got {k}")
    if min(n_real, n_fake) <= k:
        raise ValueError(f"prdc k = {k} needs more than {k} samples on each side, got {n_real} real and {n_fake} generated")


def prdc(real_features: np.ndarray, fake_features: np.ndarray, k: int, real_radii: np.ndarray | None = None) -> dict[str, float]:
    """Precision, recall, density and coverage of ``fake_features`` against ``real_features`` (see the module docstring).

    ``real_radii``: the real rows' :func:`nearest_neighbour_radii` at ``k`` where already computed (the real side is
    the same for every model a run scores). A ``ValueError`` where ``k`` is not below both sample counts.
    """
    real = np.asarray(real_features, dtype=np.float64)
    fake = np.asarray(fake_features, dtype=np.float64)
    check_prdc_sizes(len(real), len(fake), k)
    if real.shape[1:] != fake.shape[1:] or real.ndim != 2:
        raise ValueError(f"prdc needs two (N, d) feature sets of one d, got {real.shape} and {fake.shape}")
    real_r = nearest_neighbour_radii(real, k) if real_radii is None else np.asarray(real_radii, dtype=np.float64)
    fake_r = nearest_neighbour_radii(fake, k)
    fake_squared = np.einsum("ij,ij->i", fake, fake)
    balls_holding = np.zeros(len(fake))  # per fake sample: the real balls it lies in
    recalled = np.zeros(len(real), dtype=bool)
    covered = np.zeros(len(real), dtype=bool)
    step = _step(len(fake))
    for lo in range(0, len(real), step):
        d = _distances(real[lo : lo + step], fake, fake_squared)  # real rows x fake columns
        inside_real = d < real_r[lo : lo + step, None]
        balls_holding += inside_real.sum(axis=0)
        recalled[lo : lo + step] = (d < fake_r[None, :]).any(axis=1)
        covered[lo : lo + step] = d.min(axis=1) < real_r[lo : lo + step]
    return {
        "precision": float(np.mean(balls_holding > 0)),
        "recall": float(np.mean(recalled)),
        "density": float(balls_holding.sum() / (k * len(fake))),
        "coverage": float(np.mean(covered)),
    }
