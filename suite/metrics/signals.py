"""Honest signals: has a model learned anything?

Three checks, each cheap and each with a reason a reader can verify:

* **IS within 5 % of 1**: the feature network's class predictions are the same for every
  sample (an untrained or collapsed generator scores 1.0);
* **pixel std near 0**: the samples barely differ from each other (the mean over pixels of
  each pixel's standard deviation across samples, images in [-1, 1]);
* **FID no better than an untrained generator's**: measured once per dataset, split, image size,
  feature network and sample count with the suite's generator at its seeded initialisation,
  and cached.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from .evaluate import Reference
    from .features import ClassifierNet, FeatureNet


IS_FLOOR = 1.05
"""IS below this (within 5 % of 1) means the feature network sees no variety of classes."""
PIXEL_STD_FLOOR = 0.05
"""Mean per-pixel standard deviation across samples below which samples are all alike."""
UNTRAINED_MARGIN = 0.9
"""A FID above this fraction of the untrained generator's is no real improvement on it."""


def pixel_std(images: torch.Tensor) -> float:
    """Mean over pixels of each pixel's standard deviation across the samples."""
    return float(images.float().std(dim=0).mean())


def untrained_baseline(ref: Reference, networks: tuple[FeatureNet, ClassifierNet], latent_dim: int = 100) -> dict:
    """FID (and KID, when available) of the suite's untrained generator against ``ref``'s real data.

    ``ref`` is a :class:`suite.metrics.evaluate.Reference`; the result is cached beside the
    real-data statistics.
    """
    from ..data import CHANNELS
    from ..models import build_pair
    from ..results import atomic_write_text
    from .evaluate import evaluate_images
    from .features import cache_dir

    net = networks[0]
    key = json.dumps([ref.dataset, ref.split, ref.image_size, ref.classes, net.name, net.detail, ref.n, latent_dim])
    path = cache_dir() / "stats" / f"untrained-{ref.dataset}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.json"
    if path.is_file():
        return json.loads(path.read_text())
    generator, _ = build_pair(ref.image_size, CHANNELS[ref.dataset], latent_dim, seed=0)
    z = torch.randn(ref.n, latent_dim, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        images = generator.eval()(z)
    quality = evaluate_images(images, np.full(ref.n, -1), ref, networks)
    baseline = {"fid": quality["fid"], "kid_mean": quality.get("kid_mean"), "features": quality["features"], "n": quality["n"]}
    atomic_write_text(path, json.dumps(baseline))
    return baseline


def not_learned(quality: dict) -> list[str]:
    """Why a model's quality block says it has not learned (empty when it passes every check)."""
    reasons = []
    if quality.get("not_scorable"):
        reasons.append(f"not scorable: {quality['not_scorable']}")
    if quality.get("is_mean") is not None and quality["is_mean"] < IS_FLOOR:
        reasons.append(f"IS {quality['is_mean']:.3f} is within 5 % of 1")
    if quality.get("pixel_std") is not None and quality["pixel_std"] < PIXEL_STD_FLOOR:
        reasons.append(f"pixel std {quality['pixel_std']:.3f} is near 0: the samples are all alike")
    untrained = quality.get("untrained_fid")
    if untrained is not None and quality.get("fid") is not None and quality["fid"] > UNTRAINED_MARGIN * untrained:
        reasons.append(f"FID {quality['fid']:.1f} is no better than the untrained generator's {untrained:.1f}")
    return reasons
