"""Sub-commands about models and rulers: ``suite sample``, ``suite score``, ``suite ruler`` and ``suite env``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .common import UsageError, log

if TYPE_CHECKING:
    import numpy as np
    import torch


def cmd_sample(args: argparse.Namespace) -> int:
    import numpy as np

    from ..gan.sampling import Sampler, load_model, samples_problem
    from ..records.results import GENERATOR_FILE, atomic_write

    bundle = load_model(args.run_dir)
    if args.n < 1:
        raise UsageError("--n: must be at least 1")
    images, labels = Sampler(bundle).sample(args.n, seed=args.seed)
    if (problem := samples_problem(images)) is not None:  # a broken generator: nothing written, no "in [-1, 1]"
        raise UsageError(f"{Path(args.run_dir) / GENERATOR_FILE}: {problem}; nothing written")
    out = Path(args.out)
    with atomic_write(out) as tmp, open(tmp, "wb") as handle:  # a file, not a path: numpy adds .npz to a path without it
        np.savez(handle, images=images.numpy().astype(np.float32), labels=labels.numpy().astype(np.int64))
    named = "" if out.suffix == ".npz" else ", named as given"
    print(
        f"{args.n} samples written to {out} (an .npz archive{named}: images {tuple(images.shape)} in [-1, 1], "
        f"labels {'-1: unconditional' if (labels < 0).all() else 'per sample'})"
    )
    return 0


SAMPLES_BYTES = 4 << 30
"""The most bytes ``suite score --samples`` reads (images and labels together): 50,000 images of 3 x 64 x 64 floats
are 2.5 GB."""
MAX_LABEL = 999
"""The largest class label of a sample (ImageNet's); -1 marks an unconditional sample."""


def _load_samples(path: Path) -> tuple[torch.Tensor, np.ndarray]:
    """``--samples``: images (N, C, H, W) in [-1, 1] and their labels, each array checked from its header before it
    is read (:func:`suite.records.arrays.read_arrays`); :class:`UsageError` naming the file and the array."""
    import numpy as np
    import torch

    from ..records.arrays import ArrayFileError, read_arrays

    if not path.is_file():
        raise UsageError(f"--samples: {path} does not exist")
    try:
        arrays = read_arrays(path, {"images": "f", "labels": "iu"}, SAMPLES_BYTES, optional=("labels",))
    except ArrayFileError as error:
        raise UsageError(f"--samples: {error}") from None
    images = arrays["images"]
    if images.ndim != 4 or images.shape[1] not in (1, 3) or images.shape[2] != images.shape[3] or images.shape[0] < 1:
        raise UsageError(
            f"--samples: {path}: images: expected (N, C, H, W) with N at least 1, C 1 or 3 and H = W, got shape {images.shape}"
        )
    if not 8 <= images.shape[-1] <= 256:
        raise UsageError(f"--samples: {path}: images: {images.shape[-1]} pixels a side; the rulers score 8 to 256")
    if not np.isfinite(images).all():
        raise UsageError(f"--samples: {path}: images: holds NaN or infinite values, not images")
    low, high = float(images.min()), float(images.max())
    if low < -1.001 or high > 1.001:
        raise UsageError(f"--samples: {path}: images: must be scaled to [-1, 1] (found {low:.3g}..{high:.3g})")
    labels = arrays["labels"].astype(np.int64) if "labels" in arrays else np.full(len(images), -1)
    if labels.shape != (len(images),):
        raise UsageError(f"--samples: {path}: labels: expected one label per image ({len(images)}), got shape {labels.shape}")
    if len(labels) and not (labels.min() >= -1 and labels.max() <= MAX_LABEL):
        raise UsageError(
            f"--samples: {path}: labels: expected class labels 0 to {MAX_LABEL} (-1: unconditional), "
            f"got {int(labels.min())}..{int(labels.max())}"
        )
    return torch.from_numpy(images.astype(np.float32, copy=False)), labels


def cmd_score(args: argparse.Namespace) -> int:
    from ..gan.sampling import Sampler, load_model, samples_problem
    from ..measure.metrics.evaluate import evaluate_images
    from ..measure.metrics.manifold import PRDC_FIELDS
    from ..measure.metrics.reference import Reference
    from ..records.results import GENERATOR_FILE, PER_CLASS_BASES, per_class_summary, read_record
    from ..records.scored import PerClassScore

    if args.run:
        bundle = load_model(args.run)
        record = read_record(args.run)
        n = args.n or 1000
        labels: torch.Tensor | np.ndarray
        images, labels = Sampler(bundle).sample(n, seed=args.seed)
        if (problem := samples_problem(images)) is not None:  # a broken generator is not scored
            raise UsageError(f"{Path(args.run) / GENERATOR_FILE}: {problem}; not scored")
        info = record.dataset if record is not None else None
        dataset = args.dataset or (info.name if info is not None else None)
        classes = info.classes if info is not None else None
        image_size = bundle.image_size
    else:
        images, labels = _load_samples(Path(args.samples))
        if args.n:
            images, labels = images[: args.n], labels[: args.n]
        dataset, classes, image_size = args.dataset, None, images.shape[-1]
    if not dataset:
        raise UsageError("--dataset: name the dataset to compare with (digits, mnist, cifar10, cifar100, imagenet)")
    ref = Reference(
        dataset=dataset,
        image_size=image_size,
        root=args.root,
        split=args.split,
        classes=classes,
        features=args.features,
        n=len(images),
        inception_weights=args.inception_weights,
        protocol=args.protocol,
    )
    q = evaluate_images(images, labels, ref)
    if args.json:
        print(json.dumps(q, indent=2))
    else:
        is_text = (
            f"{q['is_mean']:.3f} ± {q['is_std']:.3f}  ({q['is_splits']} splits of {q['is_split_n']})"
            if q["is_mean"] is not None
            else f"n/a ({q['is_note']})"
        )
        print(f"features   {q['features']}  ({q['features_detail']}; {q['feature_dim']} dimensions)")
        print(f"protocol   {q['protocol']}: {q['comparability']}")
        print(
            f"samples    {q['n']} generated, {q['n_real']} real ({dataset}/{args.split}, {len(q['classes'])} of {q['num_classes']} classes)"
        )
        print(f"IS         {is_text}")
        print(f"FID        {q['fid']:.3f}" if q["fid"] is not None else f"FID        n/a ({q['fid_note']})")
        if q.get("not_scorable"):  # constant or non-finite samples: every score is null
            print(f"scores     n/a: {q['not_scorable']}")
        if q["kid_mean"] is not None:
            print(f"KID        {q['kid_mean']:.3g} ± {q['kid_std']:.3g}  ({q['kid_subsets']} subsets of {q['kid_subset_size']})")
        if all(q.get(name) is not None for name in PRDC_FIELDS):
            scores_text = "  ".join(f"{name} {q[name]:.3f}" for name in PRDC_FIELDS)
            print(f"PRDC       {scores_text}  (k {q['prdc_k']}, {q['n']} generated, {q['prdc_n_real']} real)")
        for field, basis in PER_CLASS_BASES.items():
            scores = q[field]  # the evaluation's per-class entries, each the fields of a PerClassScore
            summary = per_class_summary({c: PerClassScore(**entry) for c, entry in scores.items()} if scores else None)
            if summary and summary.kid_mean is not None:
                print(
                    f"per class  by {basis}: mean KID {summary.kid_mean:.3g} over {summary.scored} of "
                    f"{summary.classes} classes, n {summary.n_min}-{summary.n_max} per class, "
                    f"FID sound for {summary.fid_classes} (--json for each class)"
                )
        if q["tvd"] is not None:
            print(f"TVD        {q['tvd']:.4f}")
        if q["label_acc"] is not None:
            print(f"label acc  {q['label_acc']:.4f}")
    return 0


def cmd_ruler_train(args: argparse.Namespace) -> int:
    from ..measure.metrics.classifier import ClassifierSpec, make_classifier_ruler
    from ..measure.metrics.rulers import PACKAGED_RULERS, RULER, STEERING, user_rulers

    folder = Path(args.out) if args.out else (PACKAGED_RULERS if args.packaged else user_rulers())
    if args.image_size < 8 or args.image_size % 4:
        raise UsageError(f"--image-size: {args.image_size} is not a multiple of 4 of at least 8")
    role = STEERING if args.steering else RULER
    log.info("training the %s %s at %dpx (seed %d) into %s", args.dataset, role, args.image_size, args.seed, folder)
    if args.steering:  # another architecture, on data the ruler never saw, its agreement with the ruler measured
        from ..measure.metrics.steering import SteeringSpec, make_steering_network

        ruler, agreement = make_steering_network(
            SteeringSpec(args.dataset, args.root, args.seed, args.half or "even"), folder, args.image_size
        )
    else:
        spec = ClassifierSpec(args.dataset, args.image_size, args.root, "train", args.seed, args.half, role)
        ruler = make_classifier_ruler(spec, folder)
    print(f"{ruler.name}  {folder / ruler.file}  ({ruler.role})")
    print(f"sha256 {ruler.sha256}  (pinned in {folder / 'rulers.json'})")
    print(f"held-out accuracy {ruler.heldout_accuracy:.4f} on {ruler.heldout_images} {ruler.heldout_split} images")
    if args.steering:
        print(
            f"agreement with the ruler: top-1 {ruler.agreement_top1:.4f}; FID rank correlation "
            f"{ruler.rank_correlation_logits:.4f} (logits), {ruler.rank_correlation_features:.4f} (features)"
        )
    return 0


def cmd_ruler_list(args: argparse.Namespace) -> int:
    from ..measure.metrics.rulers import RulerError, read_manifest, ruler_folders, verify

    broken = 0
    for folder in ruler_folders():
        for name, ruler in read_manifest(folder).items():
            try:
                verify(folder / ruler.file, ruler.sha256, name)
                state = "ok"
            except RulerError as error:
                state, broken = f"BROKEN: {error}", broken + 1
            print(
                f"{name:24s} {ruler.role:8s} {ruler.sha256}  {ruler.image_size}px  acc {ruler.heldout_accuracy:.3f}  "
                f"{folder / ruler.file}  {state}"
            )
    return 1 if broken else 0


def cmd_env(args: argparse.Namespace) -> int:
    from ..measure.env import capabilities, horovod_line

    caps = capabilities()
    print(json.dumps(caps, indent=2))
    print(horovod_line(caps["horovod"]), file=sys.stderr)  # stdout stays JSON
    return 0
