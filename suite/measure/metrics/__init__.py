"""Image-quality metrics: feature networks, IS/FID/KID/TVD, and the evaluation of a run's samples."""

from .evaluate import evaluate_images, evaluate_sampler
from .features import FeatureUnavailable, feature_net
from .reference import Reference
from .scores import frechet_distance, inception_score, kernel_inception_distance, mmd2_unbiased, statistics, total_variation

__all__ = [
    "Reference",
    "evaluate_images",
    "evaluate_sampler",
    "FeatureUnavailable",
    "feature_net",
    "frechet_distance",
    "inception_score",
    "kernel_inception_distance",
    "mmd2_unbiased",
    "statistics",
    "total_variation",
]
