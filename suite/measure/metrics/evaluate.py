"""Score generated images against the real data (:mod:`.reference`): the ``quality`` block of every record.

``quality`` holds, every number with the network and the sample count it was computed at:

* ``features`` (the ruler's name), ``ruler_sha256`` (the pinned hash of its weights file),
  ``features_detail`` and ``feature_dim`` (d, the feature size); ``device``, where the ruler ran;
* ``protocol`` (``metrics.protocol``, :mod:`.protocol`), ``papers_comparable`` (the papers' network
  and protocol both) and ``comparability``, the one line saying so or why not;
* ``n`` generated images and ``n_real`` real ones (the reference draw of :func:`reference_rows`, or
  the whole split under the ``standard`` protocol);
  ``classes``, the real classes compared with, of the dataset's ``num_classes``;
* ``is_mean``/``is_std`` over ``is_splits`` splits of ``is_split_n`` images each (the first
  ``n mod is_splits`` splits hold one more), or ``is_note`` saying why IS is absent;
* ``fid`` where ``n`` and ``n_real`` both exceed d, else null with ``fid_note`` saying why
  (with fewer samples than dimensions the covariances are singular and FID is biased);
* ``kid_mean``/``kid_std`` over ``kid_subsets`` subsets of ``kid_subset_size`` (always);
* ``precision``, ``recall`` (fidelity and diversity apart, Kynkäänniemi et al. 2019), ``density`` and ``coverage``
  (Naeem et al. 2020) in the same features, with ``prdc_k`` nearest neighbours, the ``n`` samples against
  ``prdc_n_real`` real ones (the reference draw; under a whole-split protocol ``n`` rows of it, drawn as
  :func:`reference_rows` draws): :mod:`.manifold`;
* per-class scores in two fields, never mixed: ``per_class_label`` groups the samples by the
  label they were generated for (conditional, label-partitioned and per-class models; null for
  unconditional ones), ``per_class_predicted`` by the class the suite classifier predicts
  (unconditional models only; null otherwise; biased low, since the classifier picks the
  class-like samples). Each maps a class to ``n`` samples of that class, ``n_real`` (every real
  image of the class in the split), ``metric`` (``fid`` where both exceed d, else ``kid``; null
  below :data:`MIN_PER_CLASS` samples), ``fid`` (or null), the four ``kid_*`` fields and ``note``;
* ``not_scorable`` (only where the samples cannot be scored): why, e.g. ``3 of 500 samples are
  not finite (NaN or inf)``, ``the samples are constant``, or the error of a singular problem;
  every score is then null (never a traceback: see :func:`unscorable_samples`);
* ``tvd`` of the classifier's predicted-class histogram against the real class prior (mode
  coverage); ``label_acc``, the fraction of labelled samples the classifier assigns to their
  label; ``classifier_accuracy``, that classifier's held-out accuracy.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import TYPE_CHECKING

import numpy as np
import torch

from ...config.registry import PROTOCOLS
from ...gan.data import CHANNELS, class_prior
from ...gan.models import build_pair
from ...records.results import KID_FIELDS, PER_CLASS_BASES
from . import cachefiles
from .features import ClassifierNet, FeatureNet, cache_dir
from .manifold import PRDC_FIELDS, nearest_neighbour_radii, prdc
from .protocol import comparability, protocol_images
from .reference import Reference, prepares, real_class_features, real_statistics, reference_rows
from .scores import (
    KID_SUBSETS,
    fid,
    frechet_distance,
    inception_score,
    kernel_inception_distance,
    mmd2_unbiased_all,
    statistics,
    total_variation,
)
from .signals import CONSTANT_SAMPLES, pixel_std

if TYPE_CHECKING:
    from ...gan.sampling import Sampler


log = logging.getLogger(__name__)
MIN_PER_CLASS = 10  # no per-class score from fewer samples than this
IS_SPLITS = 10  # IS is the mean and std over this many splits of the samples
STEERING_PROTOCOL = "suite"
"""The protocol of scores that steer training (cellular's mixture weights): samples as generated, against a draw of as many real images."""


def _kid(features_a: np.ndarray, features_b: np.ndarray) -> dict:
    """The ``kid_*`` fields of ``features_a`` against ``features_b``."""
    mean, std, size = kernel_inception_distance(features_a, features_b)
    return dict(zip(KID_FIELDS, (mean, std, size, KID_SUBSETS)))


def fid_withheld(n: int, n_real: int, dim: int) -> str | None:
    """Why FID is not sound for ``n`` generated and ``n_real`` real samples in ``dim`` dimensions, or None if it is.

    FID needs both covariances estimated from more samples than dimensions.
    """
    if n > dim and n_real > dim:
        return None
    return f"FID withheld: {n} generated and {n_real} real samples are not both above the {dim} feature dimensions; KID instead"


def per_class_scores(features: np.ndarray, groups: np.ndarray, real_features: np.ndarray, real_labels: np.ndarray) -> dict:
    """Per real class ``c``: the samples with ``groups == c`` against every real image of class ``c``.

    Returns ``{str(c): entry}`` with the fields listed in the module docstring: FID only where
    both sides have more samples than feature dimensions (``metric: fid``), KID always
    (``metric: kid`` where FID is withheld), nothing below :data:`MIN_PER_CLASS` samples.
    """
    scores = {}
    for c in sorted(int(v) for v in np.unique(real_labels)):
        mine, theirs = features[groups == c], real_features[real_labels == c]
        entry: dict = {"n": int(len(mine)), "n_real": int(len(theirs))}
        if min(len(mine), len(theirs)) < MIN_PER_CLASS:
            entry.update(
                metric=None, fid=None, **dict.fromkeys(KID_FIELDS), note=f"not scored: fewer than {MIN_PER_CLASS} samples"
            )
        else:
            note = fid_withheld(len(mine), len(theirs), features.shape[1])
            entry.update(
                metric="kid" if note else "fid", fid=None if note else fid(mine, theirs), **_kid(mine, theirs), note=note
            )
        scores[str(c)] = entry
    return scores


SCORABLE_PIXEL_STD = 1e-4
"""Samples whose pixel standard deviation across samples is below this are constant: nothing to score."""


def unscorable_samples(images: torch.Tensor) -> str | None:
    """Why ``images`` cannot be scored at all (not finite, or all the same), or None."""
    finite = torch.isfinite(images.reshape(len(images), -1)).all(dim=1)
    if not finite.all():
        return f"{int((~finite).sum())} of {len(images)} samples are not finite (NaN or inf)"
    std = pixel_std(images)
    if std < SCORABLE_PIXEL_STD:
        return f"{CONSTANT_SAMPLES} (pixel std {std:.2g} across samples)"
    return None


def not_scorable(net: FeatureNet, real: dict, reason: str) -> dict:
    """The quality block of samples that cannot be scored: every score null, ``not_scorable`` the reason."""
    return {
        "features": net.name,
        "features_detail": net.detail,
        "feature_dim": int(len(real["mu"])),
        "pixel_std": None,
        **dict.fromkeys(("is_mean", "is_std", "is_splits", "is_split_n", "fid", "tvd", "label_acc", "classifier_accuracy")),
        "is_note": f"not scorable: {reason}",
        "fid_note": f"not scorable: {reason}",
        **dict.fromkeys(KID_FIELDS),
        **dict.fromkeys((*PRDC_FIELDS, "prdc_k", "prdc_n_real")),
        **dict.fromkeys(PER_CLASS_BASES),
        "not_scorable": reason,
    }


_REAL_RADII: dict[tuple[str, int], np.ndarray] = {}
"""The real rows' k-NN radii by (digest of the real features, k): the same for every model a process scores."""


def manifold_scores(features: np.ndarray, real_features: np.ndarray, k: int) -> dict:
    """``precision``, ``recall``, ``density``, ``coverage`` of ``features`` against at most as many real rows
    (:func:`reference_rows` of ``real_features`` where it has more), with ``prdc_k`` and ``prdc_n_real``."""
    if len(real_features) > len(features):  # a whole split: as many real rows as samples, as Naeem et al. compare
        real_features = real_features[reference_rows(len(real_features), len(features))]
    real_features = np.asarray(real_features, dtype=np.float64)
    if min(len(real_features), len(features)) <= k:  # too few for a k-th neighbour (the scenario refuses it)
        return {**dict.fromkeys(PRDC_FIELDS), "prdc_k": k, "prdc_n_real": int(len(real_features))}
    key = (hashlib.sha1(np.ascontiguousarray(real_features).tobytes()).hexdigest(), k)
    if key not in _REAL_RADII:
        _REAL_RADII.clear()  # one ruler's real side at a time
        _REAL_RADII[key] = nearest_neighbour_radii(real_features, k)
    return {**prdc(real_features, features, k, _REAL_RADII[key]), "prdc_k": k, "prdc_n_real": int(len(real_features))}


def _scores(
    features: np.ndarray, probs: np.ndarray | None, real: dict, net: FeatureNet, k: int = 5, manifold: bool = True
) -> dict:
    """IS (where the network predicts classes), FID (where sound), KID and (with ``manifold``) the k-NN manifold scores
    (:func:`manifold_scores`) of finite, varied samples' features."""
    scores: dict = {}
    if probs is not None:
        scores["is_mean"], scores["is_std"] = inception_score(probs, IS_SPLITS)
        scores["is_splits"], scores["is_split_n"], scores["is_note"] = IS_SPLITS, len(probs) // IS_SPLITS, None
    else:
        scores.update(is_mean=None, is_std=None, is_splits=None, is_split_n=None, is_note=net.is_unavailable)
    note = fid_withheld(len(features), int(real["n"]), features.shape[1])
    scores["fid"] = None if note else frechet_distance(*statistics(features), real["mu"], real["sigma"])
    if scores["fid"] is not None and not np.isfinite(scores["fid"]):
        raise ValueError(f"FID is {scores['fid']}")
    scores["fid_note"] = note
    drawn = real["features"]  # the real reference draw (or whole split)
    scores.update(_kid(features, drawn))
    if manifold:
        scores.update(manifold_scores(features, drawn, k))
    return scores


def check_shape(images: torch.Tensor, ref: Reference) -> None:
    """Raise ValueError unless ``images`` are (N, C, H, W) at ``ref``'s image size."""
    if images.ndim != 4 or images.shape[-1] != ref.image_size or images.shape[-2] != ref.image_size:
        raise ValueError(f"images must be (N, C, {ref.image_size}, {ref.image_size}) for this dataset, got {tuple(images.shape)}")


def sample_features(
    images: torch.Tensor, ref: Reference, net: FeatureNet, features: np.ndarray | None = None
) -> tuple[np.ndarray | None, np.ndarray | None, str | None]:
    """``(features, probabilities, None)`` of scorable ``images`` under ``ref``'s protocol, or ``(.., .., reason)``
    where they cannot be scored (:func:`unscorable_samples`, or features that are not finite); ``features``, where
    already computed (:func:`draw_features`), are taken as they are, without probabilities."""
    reason = unscorable_samples(images)
    if reason is not None:
        return None, None, reason
    probs = None
    if features is None:
        features, probs = net(protocol_images(images, ref.protocol))
    if not np.isfinite(features).all():
        return features, probs, f"the {net.name} features of the samples are not finite"
    return features, probs, None


def evaluate_images(
    images: torch.Tensor,
    labels: torch.Tensor | np.ndarray,
    ref: Reference,
    networks: tuple[FeatureNet, ClassifierNet] | None = None,
    curve: bool = False,
) -> dict:
    """Quality of ``images`` (N, C, H, W) in [-1, 1]; ``labels`` are -1 where unknown.

    With ``curve``, a curve snapshot's block: the identity, IS, FID and KID that a curve point keeps
    (:func:`suite.measure.metrics.curve.curve_point`), without the manifold, class and per-class scores (about half
    of a block's time on the digits ruler, for fields no curve point keeps)."""
    labels = np.asarray(labels, dtype=np.int64)
    check_shape(images, ref)
    net, classifier = networks or ref.networks()
    real = real_statistics(ref, net)
    every = real_class_features(ref, net)
    protocol = PROTOCOLS[ref.protocol]
    identity: dict = {  # what every quality block says, scored or not
        "ruler_sha256": net.sha256,
        "protocol": ref.protocol,
        "papers_comparable": net.literature and protocol.literature,
        "comparability": comparability(net.literature, ref.protocol),
        "device": str(net.device),
        "n": int(len(images)),
        "n_real": int(real["n"]),
        "classes": sorted(int(c) for c in np.unique(every["labels"])),
        "num_classes": int(every["num_classes"]),
    }
    scores: dict = {}
    features, probs, reason = sample_features(images, ref, net)
    if reason is None and features is not None:
        try:
            scores = _scores(features, probs, real, net, ref.prdc_k, manifold=not curve)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as error:  # a singular problem
            reason = f"the scores cannot be computed: {error}"
    if reason is not None:
        log.warning("samples not scorable: %s", reason)
        return {**not_scorable(net, real, reason), **identity}
    assert features is not None
    quality = {"features": net.name, "features_detail": net.detail, "feature_dim": int(features.shape[1]), **identity}
    quality.update(pixel_std=pixel_std(images), **scores)
    if curve:
        return quality
    _, class_probs = classifier(images) if classifier is not net else (None, probs)
    assert class_probs is not None, "the classifier predicts classes"
    predicted = class_probs.argmax(axis=1)
    known = labels >= 0
    quality["tvd"] = total_variation(predicted, class_prior(every["labels"]))
    quality["label_acc"] = float(np.mean(predicted[known] == labels[known])) if known.all() else None
    quality["classifier_accuracy"] = classifier.info["heldout_accuracy"]
    real_features = every["features"].astype(np.float64)
    try:
        by = per_class_scores(features, labels if known.all() else predicted, real_features, every["labels"])
    except (ValueError, np.linalg.LinAlgError, FloatingPointError) as error:  # a class's singular problem
        log.warning("samples not scorable: %s", error)
        return {**not_scorable(net, real, f"the per-class scores cannot be computed: {error}"), **identity}
    quality.update(zip(PER_CLASS_BASES, (by, None) if known.all() else (None, by)))
    return quality


def evaluate_estimand(
    images: torch.Tensor,
    ref: Reference,
    networks: tuple[FeatureNet, ClassifierNet] | None = None,
    features: np.ndarray | None = None,
) -> dict:
    """The end-of-budget estimand of ``images`` and nothing else: ``fid`` (where sound, else null with ``fid_note``)
    and ``kid_mean``, the unbiased MMD^2 of all ``n`` samples against the real draw (:func:`.scores.mmd2_unbiased_all`,
    the quantity KID's subset mean estimates), or ``not_scorable`` with both null.

    The EMA generator's record keeps these two (``quality.ema_fid``, ``ema_kid_mean``) from many samples; IS, KID's
    subsets, the manifold and per-class scores of :func:`evaluate_images` would cost several times its FID there
    (about 25 s of 30 at 5,000 samples on one CPU core) for fields no record keeps. ``features``: the ruler's
    features of ``images`` where the ranks computed them (:func:`draw_features`).
    """
    check_shape(images, ref)
    net, _ = networks or ref.networks()
    real = real_statistics(ref, net)
    n_real = int(real["n"])
    fid_value, kid_value, note = None, None, None
    features, _, reason = sample_features(images, ref, net, features)
    if reason is None and features is not None:
        note = fid_withheld(len(features), n_real, features.shape[1])
        try:
            fid_value = None if note else frechet_distance(*statistics(features), real["mu"], real["sigma"])
            kid_value = mmd2_unbiased_all(features, real["features"])
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as error:  # a singular problem
            reason = f"the scores cannot be computed: {error}"
    block = dict(features=net.name, n=int(len(images)), n_real=n_real, fid=fid_value, kid_mean=kid_value, fid_note=note)
    if reason is not None:
        log.warning("samples not scorable: %s", reason)
        return {**block, "fid": None, "kid_mean": None, "not_scorable": reason}
    return block


def draw_features(images: torch.Tensor, ref: Reference, net: FeatureNet, part: slice) -> np.ndarray:
    """The ruler's features of the rows of ``images`` in ``net``'s batches ``part`` (a share of one draw's feature
    batches), each batch as :func:`sample_features` of the whole draw computes it: concatenated in order, the shares
    are the whole draw's features to the bit."""
    lo, hi, _ = slice(part.start * net.batch_size, part.stop * net.batch_size).indices(len(images))
    return net(protocol_images(images[lo:hi], ref.protocol))[0]


COMMON_LATENTS_SEED = 0
"""The seed of the latent vectors and labels every model is scored on: common random numbers.

Every system, every training seed and every curve point draws its ``n`` samples from the same latent
vectors (and, for a labelled model, the same labels), against the same real reference rows, so that a
difference between two scores is a difference between the models, not between two draws of the noise.
The record names it (``quality.latent_seed``)."""


def evaluate_sampler(
    sampler: Sampler,
    ref: Reference,
    seed: int = COMMON_LATENTS_SEED,
    networks: tuple[FeatureNet, ClassifierNet] | None = None,
    curve: bool = False,
) -> dict:
    """Draw ``ref.n`` samples from ``sampler`` (a :class:`suite.gan.sampling.Sampler`) with the latents of ``seed``
    (by default the common ones, :data:`COMMON_LATENTS_SEED`) and score them; the quality block names the seed."""
    images, labels = sampler.sample(ref.n, seed=seed)
    return {**evaluate_images(images, labels, ref, networks, curve=curve), "latent_seed": seed}


def estimand_of_sampler(
    sampler: Sampler, ref: Reference, seed: int = COMMON_LATENTS_SEED, networks: tuple[FeatureNet, ClassifierNet] | None = None
) -> dict:
    """:func:`evaluate_estimand` of ``ref.n`` samples of ``sampler`` on the latents of ``seed`` (the common ones)."""
    images, _ = sampler.sample(ref.n, seed=seed)
    return {**evaluate_estimand(images, ref, networks), "latent_seed": seed}


def untrained_baseline(
    ref: Reference, networks: tuple[FeatureNet, ClassifierNet], latent_dim: int = 100, architecture: str = "dcgan"
) -> dict:
    """FID (and KID, when available) of the suite's untrained generator against ``ref``'s real data.

    The result is cached beside the real-data statistics.
    """
    net = networks[0]
    protocol = [ref.protocol] if prepares(ref) else []
    key = json.dumps(
        [ref.dataset, ref.split, ref.image_size, ref.classes, net.name, net.detail, ref.n, latent_dim, architecture, *protocol]
    )
    path = cache_dir() / "stats" / f"untrained-{ref.dataset}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.json"
    if (cached := cachefiles.read_cached_json(path)) is not None:  # checked against the digest beside it
        return cached
    generator, _ = build_pair(ref.image_size, CHANNELS[ref.dataset], latent_dim, seed=0, architecture=architecture)
    z = torch.randn(ref.n, latent_dim, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        images = generator.eval()(z)
    quality = evaluate_images(images, np.full(ref.n, -1), ref, networks)
    baseline = {"fid": quality["fid"], "kid_mean": quality.get("kid_mean"), "features": quality["features"], "n": quality["n"]}
    cachefiles.write_cached_json(path, baseline)
    return baseline
