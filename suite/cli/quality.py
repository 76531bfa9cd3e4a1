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

    from ..gan.sampling import Sampler, load_model
    from ..records.results import atomic_write

    bundle = load_model(args.run_dir)
    if args.n < 1:
        raise UsageError("--n: must be at least 1")
    images, labels = Sampler(bundle).sample(args.n, seed=args.seed)
    out = Path(args.out)
    with atomic_write(out) as tmp, open(tmp, "wb") as handle:  # a file, not a path: numpy adds .npz to a path without it
        np.savez(handle, images=images.numpy().astype(np.float32), labels=labels.numpy().astype(np.int64))
    named = "" if out.suffix == ".npz" else ", named as given"
    print(
        f"{args.n} samples written to {out} (an .npz archive{named}: images {tuple(images.shape)} in [-1, 1], "
        f"labels {'-1: unconditional' if (labels < 0).all() else 'per sample'})"
    )
    return 0


def _load_samples(path: Path) -> tuple[torch.Tensor, np.ndarray]:
    import numpy as np
    import torch

    if not path.is_file():
        raise UsageError(f"--samples: {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "images" not in npz.files:
                raise UsageError(
                    f"--samples: {path} has no 'images' array (found {', '.join(npz.files) or 'nothing'}); write it with `suite sample`"
                )
            images = torch.from_numpy(np.asarray(npz["images"], dtype=np.float32))
            labels = np.asarray(npz["labels"], dtype=np.int64) if "labels" in npz.files else np.full(len(images), -1)
    except ValueError as error:
        raise UsageError(f"--samples: {path} is not a readable .npz file ({error})") from None
    if images.ndim != 4:
        raise UsageError(f"--samples: images in {path} must be (N, C, H, W), got shape {tuple(images.shape)}")
    if images.min() < -1.001 or images.max() > 1.001:
        raise UsageError(
            f"--samples: images in {path} must be scaled to [-1, 1] (found {float(images.min()):.3g}..{float(images.max()):.3g})"
        )
    if len(labels) != len(images):
        raise UsageError(f"--samples: {len(labels)} labels for {len(images)} images in {path}")
    return images, labels


def cmd_score(args: argparse.Namespace) -> int:
    from ..gan.sampling import Sampler, load_model
    from ..measure.metrics import Reference, evaluate_images
    from ..records.results import PER_CLASS_BASES, per_class_summary, read_record

    if args.run:
        bundle = load_model(args.run)
        record = read_record(args.run) or {}
        n = args.n or 1000
        labels: torch.Tensor | np.ndarray
        images, labels = Sampler(bundle).sample(n, seed=args.seed)
        dataset = args.dataset or (record.get("dataset") or {}).get("name")
        classes = (record.get("dataset") or {}).get("classes")
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
        print(f"KID        {q['kid_mean']:.3g} ± {q['kid_std']:.3g}  ({q['kid_subsets']} subsets of {q['kid_subset_size']})")
        for field, basis in PER_CLASS_BASES.items():
            summary = per_class_summary(q[field])
            if summary and summary["kid_mean"] is not None:
                print(
                    f"per class  by {basis}: mean KID {summary['kid_mean']:.3g} over {summary['scored']} of "
                    f"{summary['classes']} classes, n {summary['n_min']}-{summary['n_max']} per class, "
                    f"FID sound for {summary['fid_classes']} (--json for each class)"
                )
        print(f"TVD        {q['tvd']:.4f}")
        if q["label_acc"] is not None:
            print(f"label acc  {q['label_acc']:.4f}")
    return 0


def cmd_ruler_train(args: argparse.Namespace) -> int:
    from ..measure.metrics.features import ClassifierSpec, make_classifier_ruler
    from ..measure.metrics.rulers import PACKAGED_RULERS, RULER, STEERING, user_rulers

    folder = Path(args.out) if args.out else (PACKAGED_RULERS if args.packaged else user_rulers())
    if args.image_size < 8 or args.image_size % 4:
        raise UsageError(f"--image-size: {args.image_size} is not a multiple of 4 of at least 8")
    role = STEERING if args.steering else RULER
    spec = ClassifierSpec(args.dataset, args.image_size, args.root, "train", args.seed, args.half, role)
    log.info("training the %s %s at %dpx (seed %d) into %s", args.dataset, role, args.image_size, args.seed, folder)
    ruler = make_classifier_ruler(spec, folder)
    print(f"{ruler.name}  {folder / ruler.file}  ({ruler.role})")
    print(f"sha256 {ruler.sha256}  (pinned in {folder / 'rulers.json'})")
    print(f"held-out accuracy {ruler.heldout_accuracy:.4f} on {ruler.heldout_images} {ruler.heldout_split} images")
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
