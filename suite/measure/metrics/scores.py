"""The scores themselves: IS, FID, KID, TVD. Plain NumPy/SciPy on features and probabilities."""

from __future__ import annotations

import numpy as np
from scipy.special import rel_entr


def inception_score(probabilities: np.ndarray, splits: int = 10) -> tuple[float, float]:
    """Inception Score: mean and std over ``splits`` of ``exp(E_x KL(p(y|x) || p(y)))``.

    ``probabilities`` is (N, K), rows summing to one. K confident predictions spread evenly
    over K classes give K; identical predictions give 1.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 2 or len(p) < splits:
        raise ValueError(f"IS needs at least {splits} probability rows, got shape {p.shape}")
    scores = []
    for part in np.array_split(p, splits):
        marginal = part.mean(axis=0, keepdims=True)
        kl = rel_entr(part, marginal).sum(axis=1)  # p log(p / q) per class, 0 where p is 0
        scores.append(float(np.exp(kl.mean())))
    return float(np.mean(scores)), float(np.std(scores))


def statistics(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance (float64) of (N, d) finite features."""
    f = np.asarray(features, dtype=np.float64)
    if f.ndim != 2 or len(f) < 2:
        raise ValueError(f"FID statistics need (N, d) features with N >= 2, got shape {f.shape}")
    if not np.isfinite(f).all():
        raise ValueError(f"FID statistics: {int((~np.isfinite(f)).any(axis=1).sum())} of {len(f)} feature rows are not finite")
    return f.mean(axis=0), np.cov(f, rowvar=False)


def _psd_sqrt(sigma: np.ndarray) -> np.ndarray:
    """The symmetric square root of a covariance (eigenvalues below 0, rounding noise, clipped to 0)."""
    values, vectors = np.linalg.eigh((sigma + sigma.T) / 2)
    return (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T


def trace_sqrt_product(sigma1: np.ndarray, sigma2: np.ndarray) -> float:
    """``Tr (S1 S2)^(1/2)`` for two covariances, computed as ``sum sqrt(eig(S1^(1/2) S2 S1^(1/2)))``.

    ``S1 S2`` and the symmetric ``S1^(1/2) S2 S1^(1/2)`` have the same eigenvalues, and the
    latter's are real and non-negative: symmetric eigensolvers give them to rounding error,
    never a complex part and never a failed iteration, also for singular or rank-deficient
    covariances (where ``scipy.linalg.sqrtm`` of the product needs pytorch-fid's ``eps`` fallback).
    """
    root = _psd_sqrt(sigma1)
    middle = root @ sigma2 @ root
    values = np.linalg.eigvalsh((middle + middle.T) / 2)
    return float(np.sqrt(np.clip(values, 0, None)).sum())


def frechet_distance(mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray) -> float:
    """``||mu1 - mu2||^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2))``, the Fréchet distance of two Gaussians, in float64.

    The trace of the matrix square root comes from :func:`trace_sqrt_product` (symmetric
    eigenvalues), which agrees with pytorch-fid's ``sqrtm`` where that converges and stays
    stable where it does not. Non-finite statistics are a ``ValueError``.
    """
    mu1, mu2 = np.atleast_1d(mu1).astype(np.float64), np.atleast_1d(mu2).astype(np.float64)
    sigma1, sigma2 = np.atleast_2d(sigma1).astype(np.float64), np.atleast_2d(sigma2).astype(np.float64)
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape:
        raise ValueError(f"FID statistics differ in shape: {mu1.shape} vs {mu2.shape}")
    if not all(np.isfinite(x).all() for x in (mu1, mu2, sigma1, sigma2)):
        raise ValueError("FID statistics are not finite")
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2 * trace_sqrt_product(sigma1, sigma2))


def fid(features_a: np.ndarray, features_b: np.ndarray) -> float:
    """FID between two feature sets."""
    return frechet_distance(*statistics(features_a), *statistics(features_b))


KID_SUBSETS = 100
"""Random subsets KID is averaged over (Binkowski et al.; torchmetrics and clean-fid use 100)."""
KID_MAX_SUBSET_SIZE = 1000
"""Largest KID subset (the usual 1000)."""
KID_ONE_KERNEL_ROWS = 5000
"""Up to this many samples on both sides together, KID computes one kernel matrix for all subsets."""


def polynomial_kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Binkowski et al.'s cubic kernel ``k(x, y) = (x.y / d + 1)^3`` between the rows of ``a`` and ``b``."""
    k = a @ b.T
    k /= a.shape[1]
    k += 1.0
    return k * k * k


def mmd2_unbiased(a: np.ndarray, b: np.ndarray) -> float:
    """Unbiased estimate of MMD^2 between two sets of m samples under :func:`polynomial_kernel`.

    ``1/(m(m-1)) sum_{i!=j} [k(a_i, a_j) + k(b_i, b_j)] - 2/m^2 sum_{i,j} k(a_i, b_j)``: its
    expectation is the population MMD^2, 0 when both sets come from one distribution (so an
    estimate may be negative).
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    m = len(a)
    if len(b) != m or m < 2 or a.shape[1:] != b.shape[1:]:
        raise ValueError(f"MMD^2 needs two (m, d) feature sets with m >= 2, got {a.shape} and {b.shape}")
    k_aa, k_bb = polynomial_kernel(a, a), polynomial_kernel(b, b)
    within = (k_aa.sum() - np.trace(k_aa) + k_bb.sum() - np.trace(k_bb)) / (m * (m - 1))
    return float(within - 2 * polynomial_kernel(a, b).sum() / m**2)


KERNEL_BLOCK_ROWS = 512
"""Rows of a kernel matrix :func:`mmd2_unbiased_all` forms at a time (20 MB against 5,000 rows). The whole matrix of
5,000 samples is 200 MB of fresh memory, whose pages cost more to fault in than the products on a virtual machine:
1.5 s against 0.2 s for the EMA generator's 5,000 samples, measured on the development host."""


def _kernel_sum(a: np.ndarray, b: np.ndarray | None = None) -> float:
    """``sum_{i,j} k(a_i, b_j)`` under :func:`polynomial_kernel`, or without ``b``, ``sum_{i != j} k(a_i, a_j)`` from
    the blocks on and right of the diagonal (the matrix is symmetric: half the products), :data:`KERNEL_BLOCK_ROWS` rows
    of the matrix at a time."""
    total = 0.0
    for lo in range(0, len(a), KERNEL_BLOCK_ROWS):
        hi = min(lo + KERNEL_BLOCK_ROWS, len(a))
        block = polynomial_kernel(a[lo:hi], a[lo:] if b is None else b)
        if b is None:  # the diagonal block counts its pairs both ways already; the blocks right of it stand for their mirror too
            square = block[:, : hi - lo]
            total += float(square.sum() - np.trace(square) + 2.0 * block[:, hi - lo :].sum())
        else:
            total += float(block.sum())
    return total


def mmd2_unbiased_all(a: np.ndarray, b: np.ndarray) -> float:
    """Unbiased MMD^2 of all ``m`` rows of ``a`` against all ``n`` rows of ``b`` (``m`` and ``n`` may differ) under
    :func:`polynomial_kernel`: the quantity KID's subset mean estimates (each subset's :func:`mmd2_unbiased` is unbiased
    for it), from every pair at once (:func:`_kernel_sum`, in blocks of rows) instead of three kernel products per subset.

    ``1/(m(m-1)) sum_{i!=j} k(a_i, a_j) + 1/(n(n-1)) sum_{i!=j} k(b_i, b_j) - 2/(mn) sum_{i,j} k(a_i, b_j)``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    m, n = len(a), len(b)
    if m < 2 or n < 2 or a.shape[1:] != b.shape[1:]:
        raise ValueError(f"MMD^2 needs two (m, d) and (n, d) feature sets with m, n >= 2, got {a.shape} and {b.shape}")
    return _kernel_sum(a) / (m * (m - 1)) + _kernel_sum(b) / (n * (n - 1)) - 2 * _kernel_sum(a, b) / (m * n)


def kid_subset_size(n_a: int, n_b: int) -> int:
    """KID's subset size: half the smaller set, at most :data:`KID_MAX_SUBSET_SIZE`.

    Subsets of the whole set would all be the same set (a std of 0); at half of it, the spread
    of the subset estimates is about the sampling error of the estimate from all the samples.
    """
    return min(KID_MAX_SUBSET_SIZE, min(n_a, n_b) // 2)


def _subset_mmd2_one_kernel(a: np.ndarray, b: np.ndarray, picks: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """:func:`mmd2_unbiased` of every pair of subsets in ``picks``, from one kernel matrix of all rows.

    With 0/1 indicator columns ``s`` of the subsets, a subset's kernel sum is ``s^T K s``: three
    matrix products for all subsets instead of three kernel matrices per subset.
    """
    kernel = polynomial_kernel(np.vstack([a, b]), np.vstack([a, b]))
    s_a, s_b = np.zeros((len(kernel), len(picks))), np.zeros((len(kernel), len(picks)))
    for column, (rows_a, rows_b) in enumerate(picks):
        s_a[rows_a, column] = 1.0
        s_b[len(a) + rows_b, column] = 1.0
    m = len(picks[0][0])
    diagonal = np.diagonal(kernel)
    within = (s_a * (kernel @ s_a)).sum(0) - diagonal @ s_a + (s_b * (kernel @ s_b)).sum(0) - diagonal @ s_b
    return within / (m * (m - 1)) - 2 * (s_a * (kernel @ s_b)).sum(0) / m**2


def kernel_inception_distance(
    features_a: np.ndarray, features_b: np.ndarray, subsets: int = KID_SUBSETS, seed: int = 0
) -> tuple[float, float, int]:
    """KID (Binkowski et al., "Demystifying MMD GANs"): ``(mean, std, subset size)``.

    :func:`mmd2_unbiased` on ``subsets`` pairs of random subsets (drawn without replacement
    from a generator seeded with ``seed``) of :func:`kid_subset_size` rows each; mean and
    (population) std over the subsets, as torchmetrics reports them. Unlike FID, KID is unbiased
    at any sample count, which is why it stands in for FID where the samples are fewer than the
    feature dimensions.
    """
    a, b = np.asarray(features_a, dtype=np.float64), np.asarray(features_b, dtype=np.float64)
    size = kid_subset_size(len(a), len(b))
    if size < 2:
        raise ValueError(f"KID needs at least 4 samples on each side, got {len(a)} and {len(b)}")
    rng = np.random.default_rng(seed)
    picks = [(rng.choice(len(a), size, replace=False), rng.choice(len(b), size, replace=False)) for _ in range(subsets)]
    if len(a) + len(b) <= KID_ONE_KERNEL_ROWS:
        values = _subset_mmd2_one_kernel(a, b, picks)
    else:
        values = np.array([mmd2_unbiased(a[rows_a], b[rows_b]) for rows_a, rows_b in picks])
    return float(np.mean(values)), float(np.std(values)), size


def total_variation(labels: np.ndarray, prior: dict[int, float]) -> float:
    """TVD ``1/2 sum_y |q(y) - p(y)|`` of the label histogram ``q`` against the prior ``p``.

    Labels outside the prior count towards q on classes where p is 0.
    """
    labels = np.asarray(labels)
    classes = sorted(set(prior) | set(int(v) for v in np.unique(labels)))
    q = np.array([np.mean(labels == c) for c in classes])
    p = np.array([prior.get(c, 0.0) for c in classes])
    return float(0.5 * np.abs(q - p).sum())
