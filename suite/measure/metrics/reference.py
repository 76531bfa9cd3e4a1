"""The real side of every comparison: which real images, scored by which networks, and their cached features.

:class:`Reference` names the real data and the networks that score it; :func:`reference_rows` draws the real reference
rows; :func:`real_statistics` (the draw's mean, covariance and features) and :func:`real_class_features` (every real
image's features and label) are computed once and cached in ``cache_dir()/stats`` (:mod:`.cachefiles`), each read
checked against the network's features of a few rows drawn afresh (:func:`features_problem`). The samples' side, and
the scores, are :mod:`.evaluate`'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch

from ...config.registry import PROTOCOLS
from ...gan.data import load_dataset, native_size
from . import cachefiles
from .features import ClassifierNet, FeatureNet, Features, cache_dir, feature_net
from .protocol import protocol_images
from .scores import statistics

if TYPE_CHECKING:
    from ...config.scenario import Run


log = logging.getLogger(__name__)
REAL_CHUNK = 2000  # real images featurised at a time for the per-class cache


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
    protocol: str = "suite"
    """``metrics.protocol``: how samples and real images are prepared and how many real images are scored."""
    prdc_k: int = 5
    """``metrics.prdc_k``: the nearest neighbours of precision, recall, density and coverage (:mod:`.manifold`)."""

    @property
    def real_size(self) -> int:
        """The resolution real images are scored at: native under a whole-split protocol, else the image size."""
        return native_size(self.dataset, self.image_size) if PROTOCOLS[self.protocol].whole_split else self.image_size

    @classmethod
    def for_run(cls, run: Run, device: torch.device | str) -> Reference:
        """The real data of ``run`` (a :class:`suite.config.scenario.Run`), scored as its metrics settings say."""
        return cls(
            dataset=run.dataset.name,
            image_size=run.dataset.image_size,
            root=run.dataset.root,
            split=run.dataset.split,
            classes=run.dataset.classes,
            features=run.metrics.features,
            n=run.metrics.samples,
            inception_weights=run.metrics.inception_weights,
            device=str(device),
            protocol=run.metrics.protocol,
            prdc_k=run.metrics.prdc_k,
        )

    def networks(self) -> tuple[FeatureNet, ClassifierNet]:
        """(feature network for IS/FID/KID, suite classifier for class predictions)."""
        net = feature_net(
            self.features,
            self.dataset,
            self.image_size,
            root=self.root,
            split=self.split,
            inception_weights=self.inception_weights,
            device=self.device,
        )
        classifier = net if isinstance(net, ClassifierNet) else ClassifierNet(self.dataset, self.device)
        return net, classifier


def prepares(ref: Reference) -> bool:
    """Whether ``ref``'s protocol changes the images or the real set (so its statistics are cached apart)."""
    entry = PROTOCOLS[ref.protocol]
    return entry.quantised or entry.whole_split


def _cache_path(ref: Reference, net: Features, *key: object) -> Path:
    protocol = [ref.protocol, ref.real_size] if prepares(ref) else []  # one that prepares nothing keeps the earlier caches
    digest = hashlib.sha1(
        json.dumps([ref.dataset, ref.split, ref.image_size, ref.classes, net.name, net.sha256, *key, *protocol]).encode()
    )
    return cache_dir() / "stats" / f"{ref.dataset}-{ref.split}-{digest.hexdigest()[:16]}.npz"


SPOT_ROWS = 4
"""Rows of a cached set of real features recomputed from the images at each read and compared with the stored ones."""
STORED_FEATURES = "features"
"""The key of a statistics cache file's feature rows (a cache file's, not a record's)."""
_IN_PROCESS: dict[Path, tuple[tuple[int, int, int], dict]] = {}
"""The statistics this process read or computed and checked, by cache file and its state: a launch that carries
several runs reads each once, and a file changed since is read and checked again."""


def _cached(path: Path, compute: Callable[[], dict], check: Callable[[dict], str | None] | None = None) -> dict:
    """The statistics cached at ``path`` where they check out against the digest beside them and against their
    features (:mod:`.cachefiles`) and ``check`` finds nothing wrong (:func:`features_problem`), else ``compute()``'s,
    cached with their digest; read and checked once per process (:data:`_IN_PROCESS`: callers read the arrays, never
    change them)."""
    key = _file_state(path)
    if key is not None and _IN_PROCESS.get(path, (None,))[0] == key:  # the same file as read and checked before
        return dict(_IN_PROCESS[path][1])
    stored = cachefiles.read_cached_arrays(path)
    if stored is not None and check is not None and (problem := check(stored)) is not None:
        log.warning("%s: %s; not used, computed again", path, problem)
        stored = None
    if stored is None:
        stored = compute()
        cachefiles.write_cached_arrays(path, stored)
    if (key := _file_state(path)) is not None:
        _IN_PROCESS[path] = (key, stored)
    return dict(stored)


def _file_state(path: Path) -> tuple[int, int, int] | None:
    """What tells a cache file apart from the one read before (inode, size, modification time), None without one."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def reference_rows(size: int, n: int) -> np.ndarray:
    """The rows of a ``size``-image split that make up the ``n``-image real reference draw.

    The first ``n`` of a permutation drawn from seed 0, sorted: the same rows for every run.
    """
    return np.sort(np.random.default_rng(0).permutation(size)[:n])


def features_problem(features: np.ndarray, fetch: Callable[[np.ndarray], Any], net: Features) -> str | None:
    """Why stored real ``features`` are not the network's features of their images, or None: :data:`SPOT_ROWS` rows
    drawn afresh are recomputed (``fetch(positions)``: those rows' images, prepared as scored) and compared. Cheap (a
    few images through the network); a forger who changes a share f of the rows is caught with probability
    1 - (1 - f)^SPOT_ROWS at each read, and FID moves only as far as the changed rows move it."""
    features = np.asarray(features)
    if features.ndim != 2 or not len(features):
        return "its features are not a table of rows"
    positions = np.sort(np.random.default_rng().choice(len(features), size=min(SPOT_ROWS, len(features)), replace=False))
    fresh = np.asarray(net(fetch(positions))[0], dtype=np.float64)
    scale = max(1.0, float(np.abs(features).max()))
    if fresh.shape != (len(positions), features.shape[1]) or not np.allclose(
        fresh, features[positions], rtol=1e-3, atol=1e-3 * scale
    ):
        return f"its features of rows {', '.join(map(str, positions))} are not the network's features of those images"
    return None


def real_statistics(ref: Reference, net: Features) -> dict:
    """Real-data mean/covariance and features, cached per dataset/split/network/n.

    Of the ``ref.n`` reference draw, or of every image of the split under a whole-split protocol.
    """
    if PROTOCOLS[ref.protocol].whole_split:
        every = real_class_features(ref, net)["features"]
        mu, sigma = statistics(every)
        return {"mu": mu, "sigma": sigma, "n": np.array(len(every)), "features": every}

    def compute() -> dict:
        data = load_dataset(ref.dataset, ref.image_size, ref.split, ref.root, ref.classes)
        images, _ = data.fetch(reference_rows(len(data), ref.n))
        features, _ = net(protocol_images(images, ref.protocol))
        mu, sigma = statistics(features)
        return {"mu": mu, "sigma": sigma, "n": np.array(len(features)), "features": features}

    def check(stored: dict) -> str | None:
        data = load_dataset(ref.dataset, ref.image_size, ref.split, ref.root, ref.classes)
        rows = reference_rows(len(data), ref.n)
        return features_problem(stored[STORED_FEATURES], lambda at: protocol_images(data.fetch(rows[at])[0], ref.protocol), net)

    return _cached(_cache_path(ref, net, ref.n), compute, check)


def real_class_features(ref: Reference, net: Features) -> dict:
    """Features (float32) and labels of every real image of the split's selected classes.

    Per-class scores compare with all real images of a class, not only those in the reference
    draw. Computed in chunks and cached per dataset/split/image size/classes/network: one pass
    over the split, once. Float32 loses nothing: the networks compute in float32 (the classifier's
    float64 features are rounded, as per-class scores can afford). At ``ref.real_size``, prepared
    as the protocol says.
    """

    def compute() -> dict:
        data = load_dataset(ref.dataset, ref.real_size, ref.split, ref.root, ref.classes)
        features = []
        for lo in range(0, len(data), REAL_CHUNK):
            images, _ = data.fetch(np.arange(lo, min(lo + REAL_CHUNK, len(data))))
            features.append(net(protocol_images(images, ref.protocol))[0].astype(np.float32))
        return {"features": np.concatenate(features), "labels": data.labels, "num_classes": np.array(data.num_classes)}

    def check(stored: dict) -> str | None:
        data = load_dataset(ref.dataset, ref.real_size, ref.split, ref.root, ref.classes)
        return features_problem(stored[STORED_FEATURES], lambda at: protocol_images(data.fetch(at)[0], ref.protocol), net)

    return _cached(_cache_path(ref, net, "all images"), compute, check)
