"""Image-quality metrics: feature networks, IS/FID/KID/TVD, and the evaluation of a run's samples."""

from .evaluate import PER_CLASS_BASES, Reference, evaluate_images, evaluate_sampler, per_class_summary
from .features import FeatureUnavailable, feature_net
from .scores import frechet_distance, inception_score, kernel_inception_distance, mmd2_unbiased, statistics, total_variation

__all__ = [
    "PER_CLASS_BASES", "Reference", "evaluate_images", "evaluate_sampler", "per_class_summary", "FeatureUnavailable", "feature_net",
    "frechet_distance", "inception_score", "kernel_inception_distance", "mmd2_unbiased", "statistics", "total_variation",
]
