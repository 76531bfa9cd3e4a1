"""Honest signals: has a model learned anything?

Three checks, each cheap and each with a reason a reader can verify:

* **IS within 5 % of 1**: the feature network's class predictions are the same for every
  sample (an untrained or collapsed generator scores 1.0);
* **pixel std near 0**: the samples barely differ from each other (the mean over pixels of
  each pixel's standard deviation across samples, images in [-1, 1]);
* **FID no better than an untrained generator's**: measured once per dataset, split, image size,
  feature network and sample count with the suite's generator at its seeded initialisation,
  and cached (:func:`suite.measure.metrics.evaluate.untrained_baseline`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...records.scored import Quality

if TYPE_CHECKING:  # the report reads the checks without torch; only pixel_std is handed tensors
    import torch

IS_FLOOR = 1.05
"""IS below this (within 5 % of 1) means the feature network sees no variety of classes."""
PIXEL_STD_FLOOR = 0.05
"""Mean per-pixel standard deviation across samples below which samples are all alike."""
UNTRAINED_MARGIN = 0.9
"""A FID above this fraction of the untrained generator's is no real improvement on it."""
CONSTANT_SAMPLES = "the samples are constant"
"""How ``not_scorable`` opens for samples all alike (a collapse: :mod:`suite.analysis.collapse`)."""


def pixel_std(images: torch.Tensor) -> float:
    """Mean over pixels of each pixel's standard deviation across the samples."""
    return float(images.float().std(dim=0).mean())


def not_learned(quality: Quality) -> list[str]:
    """Why a model's quality block says it has not learned (empty when it passes every check)."""
    reasons = []
    if quality.not_scorable:
        reasons.append(f"not scorable: {quality.not_scorable}")
    if quality.is_mean is not None and quality.is_mean < IS_FLOOR:
        reasons.append(f"IS {quality.is_mean:.3f} is within 5 % of 1")
    if quality.pixel_std is not None and quality.pixel_std < PIXEL_STD_FLOOR:
        reasons.append(f"pixel std {quality.pixel_std:.3f} is near 0: the samples are all alike")
    untrained = quality.untrained_fid
    if untrained is not None and quality.fid is not None and quality.fid > UNTRAINED_MARGIN * untrained:
        reasons.append(f"FID {quality.fid:.1f} is no better than the untrained generator's {untrained:.1f}")
    return reasons
