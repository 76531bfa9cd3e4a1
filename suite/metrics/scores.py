"""The scores themselves: IS, FID, TVD. Plain NumPy/SciPy on features and probabilities."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg


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
        kl = np.where(part > 0, part * (np.log(np.clip(part, 1e-300, None)) - np.log(np.clip(marginal, 1e-300, None))), 0.0)
        scores.append(float(np.exp(kl.sum(axis=1).mean())))
    return float(np.mean(scores)), float(np.std(scores))


def statistics(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance (float64) of (N, d) features."""
    f = np.asarray(features, dtype=np.float64)
    if len(f) < 2:
        raise ValueError(f"FID statistics need at least 2 samples, got {len(f)}")
    return f.mean(axis=0), np.cov(f, rowvar=False)


def frechet_distance(mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray, eps: float = 1e-6) -> float:
    """``||mu1 - mu2||^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2))`` as pytorch-fid computes it.

    When the product is near-singular, ``eps`` is added to both diagonals (pytorch-fid's
    fallback); a matrix square root with a significant imaginary part is an error.
    """
    mu1, mu2 = np.atleast_1d(mu1).astype(np.float64), np.atleast_1d(mu2).astype(np.float64)
    sigma1, sigma2 = np.atleast_2d(sigma1).astype(np.float64), np.atleast_2d(sigma2).astype(np.float64)
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape:
        raise ValueError(f"FID statistics differ in shape: {mu1.shape} vs {mu2.shape}")
    diff = mu1 - mu2
    with warnings.catch_warnings():  # singular products are expected with few samples; handled below
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        covmean = linalg.sqrtm(sigma1 @ sigma2)
        if not np.isfinite(covmean).all():
            offset = np.eye(sigma1.shape[0]) * eps
            covmean = linalg.sqrtm((sigma1 + offset) @ (sigma2 + offset))
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            raise ValueError(f"FID: imaginary component {np.max(np.abs(covmean.imag)):.3g} in the matrix square root")
        covmean = covmean.real
    return float(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(covmean))


def fid(features_a: np.ndarray, features_b: np.ndarray) -> float:
    """FID between two feature sets."""
    return frechet_distance(*statistics(features_a), *statistics(features_b))


def total_variation(labels: np.ndarray, prior: dict[int, float]) -> float:
    """TVD ``1/2 sum_y |q(y) - p(y)|`` of the label histogram ``q`` against the prior ``p``.

    Labels outside the prior count towards q on classes where p is 0.
    """
    labels = np.asarray(labels)
    classes = sorted(set(prior) | set(int(v) for v in np.unique(labels)))
    q = np.array([np.mean(labels == c) for c in classes])
    p = np.array([prior.get(c, 0.0) for c in classes])
    return float(0.5 * np.abs(q - p).sum())
