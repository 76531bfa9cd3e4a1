"""Image-quality metrics: feature networks, IS/FID/KID/TVD, and the evaluation of a run's samples.

The names below are loaded on first use (:pep:`562`): a module that needs only a light one
(``signals``, ``curve``) does not import torch with the package, so `suite run` refuses a bad scenario,
or prints a dry run, without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .evaluate import evaluate_images, evaluate_sampler
    from .features import FeatureUnavailable, feature_net
    from .reference import Reference
    from .scores import (
        frechet_distance,
        inception_score,
        kernel_inception_distance,
        mmd2_unbiased,
        statistics,
        total_variation,
    )

_HOME = {
    "evaluate_images": "evaluate",
    "evaluate_sampler": "evaluate",
    "FeatureUnavailable": "features",
    "feature_net": "features",
    "Reference": "reference",
    "frechet_distance": "scores",
    "inception_score": "scores",
    "kernel_inception_distance": "scores",
    "mmd2_unbiased": "scores",
    "statistics": "scores",
    "total_variation": "scores",
}
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


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
