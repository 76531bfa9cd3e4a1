"""Score generated images against the real data: the ``quality`` block of every record.

``quality`` holds: ``features`` (the network's name) and ``features_detail``; ``n`` generated and
``n_real`` real images; ``is_mean``/``is_std`` (or ``is_note`` saying why IS is absent);
``fid``; ``fid_per_class`` with ``per_class_basis`` (``generated label`` when the sampler knows
each sample's class, else ``predicted class`` from the suite classifier) and ``per_class_n``;
``tvd`` of the classifier's predicted-class histogram against the real class prior (mode
coverage); ``label_acc``, the fraction of labelled samples the classifier assigns to their label;
``classifier_accuracy``, that classifier's held-out accuracy.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

import numpy as np
import torch

from ..data import class_prior, load_dataset
from ..results import atomic_write
from .features import ClassifierNet, ClassifierSpec, FeatureNet, cache_dir, feature_net
from .scores import fid, frechet_distance, inception_score, statistics, total_variation

log = logging.getLogger(__name__)
MIN_PER_CLASS = 10  # per-class FID is not reported from fewer samples than this


@dataclass
class Reference:
    """The real side of a comparison: which data, scored by which networks."""

    dataset: str
    image_size: int
    root: str | None = None
    split: str = "train"
    classes: list[int] | None = None
    features: str = "auto"
    n: int = 1000
    inception_weights: str | None = None
    device: str = "cpu"

    @classmethod
    def for_run(cls, run, device) -> "Reference":
        """The real data of ``run`` (a :class:`suite.scenario.Run`), scored as its metrics settings say."""
        return cls(dataset=run.dataset.name, image_size=run.dataset.image_size, root=run.dataset.root,
                   split=run.dataset.split, classes=run.dataset.classes, features=run.metrics.features,
                   n=run.metrics.samples, inception_weights=run.metrics.inception_weights, device=str(device))

    def networks(self) -> tuple[FeatureNet, ClassifierNet]:
        """(feature network for IS/FID, suite classifier for class predictions)."""
        net = feature_net(self.features, self.dataset, self.image_size, self.root, self.split, self.inception_weights, self.device)
        classifier = net if isinstance(net, ClassifierNet) else ClassifierNet(
            ClassifierSpec(self.dataset, self.image_size, self.root, self.split), self.device
        )
        return net, classifier


def real_statistics(ref: Reference, net: FeatureNet) -> dict:
    """Real-data mean/covariance, overall and per class, cached per dataset/split/network/n."""
    key = json.dumps([ref.dataset, ref.split, ref.image_size, ref.classes, net.name, net.detail, ref.n])
    path = cache_dir() / "stats" / f"{ref.dataset}-{ref.split}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.npz"
    if path.is_file():
        stored = np.load(path, allow_pickle=False)
        return {k: stored[k] for k in stored.files}
    data = load_dataset(ref.dataset, ref.image_size, ref.split, ref.root, ref.classes)
    rows = np.sort(np.random.default_rng(0).permutation(len(data))[: ref.n])
    images, labels = data.fetch(rows)
    features, _ = net(images)
    mu, sigma = statistics(features)
    stats = {"mu": mu, "sigma": sigma, "n": np.array(len(rows)), "labels": labels.numpy(), "features": features}
    with atomic_write(path) as tmp:
        np.savez(tmp, **stats)
    return stats


def evaluate_images(images: torch.Tensor, labels: torch.Tensor | np.ndarray, ref: Reference, networks=None) -> dict:
    """Quality of ``images`` (N, C, H, W) in [-1, 1]; ``labels`` are -1 where unknown."""
    labels = np.asarray(labels, dtype=np.int64)
    if images.ndim != 4 or images.shape[-1] != ref.image_size or images.shape[-2] != ref.image_size:
        raise ValueError(f"images must be (N, C, {ref.image_size}, {ref.image_size}) for this dataset, got {tuple(images.shape)}")
    net, classifier = networks or ref.networks()
    real = real_statistics(ref, net)
    features, probs = net(images)
    quality: dict = {"features": net.name, "features_detail": net.detail, "n": int(len(images)), "n_real": int(real["n"])}
    if probs is not None:
        quality["is_mean"], quality["is_std"] = inception_score(probs)
        quality["is_note"] = None
    else:
        quality["is_mean"] = quality["is_std"] = None
        quality["is_note"] = net.is_unavailable
    quality["fid"] = frechet_distance(*statistics(features), real["mu"], real["sigma"])

    _, class_probs = classifier(images) if classifier is not net else (None, probs)
    predicted = class_probs.argmax(axis=1)
    known = labels >= 0
    real_labels = real["labels"]
    quality["tvd"] = total_variation(predicted, class_prior(real_labels))
    quality["label_acc"] = float(np.mean(predicted[known] == labels[known])) if known.all() else None
    quality["classifier_accuracy"] = classifier.info["heldout_accuracy"]

    groups = labels if known.all() else predicted
    quality["per_class_basis"] = "generated label" if known.all() else "predicted class"
    per_class, per_class_n = {}, {}
    for c in sorted(set(int(v) for v in np.unique(real_labels))):
        mine, theirs = features[groups == c], real["features"][real_labels == c]
        per_class_n[str(c)] = int(len(mine))
        if len(mine) >= MIN_PER_CLASS and len(theirs) >= MIN_PER_CLASS:
            per_class[str(c)] = fid(mine, theirs)
        else:
            per_class[str(c)] = None
    quality["fid_per_class"] = per_class
    quality["per_class_n"] = per_class_n
    return quality


def evaluate_sampler(sampler, ref: Reference, seed: int = 0, networks=None) -> dict:
    """Draw ``ref.n`` samples from ``sampler`` (a :class:`suite.sampling.Sampler`) and score them."""
    images, labels = sampler.sample(ref.n, seed=seed)
    return evaluate_images(images, labels, ref, networks)
