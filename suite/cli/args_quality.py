"""The sub-commands of image quality: ``suite sample``, ``score`` and ``ruler``: their options and handlers."""

from __future__ import annotations

from typing import Any

from ..config.registry import FEATURES, PROTOCOLS
from .quality import cmd_ruler_list, cmd_ruler_train, cmd_sample, cmd_score


def add_sample(sub: Any) -> None:
    """``suite sample``: its options and handler."""
    p = sub.add_parser("sample", help="draw samples from a trained run into an .npz file")
    p.add_argument("run_dir", help="a run folder (holding generator.pt)")
    p.add_argument("--n", type=int, default=1000, help="samples to draw")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise and labels")
    p.add_argument("--out", required=True, help="output .npz (arrays: images, labels)")
    p.set_defaults(func=cmd_sample)


def add_score(sub: Any) -> None:
    """``suite score``: its options and handler."""
    p = sub.add_parser("score", help="IS / FID / KID / per-class FID or KID / TVD of a run or of samples")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", help="a run folder: sample its model and score it")
    src.add_argument("--samples", help=".npz with images (N, C, H, W) in [-1, 1] and optional labels")
    p.add_argument("--dataset", help="real data to compare with (default: the run's)")
    p.add_argument("--root", help="dataset folder (torchvision files / ImageNet)")
    p.add_argument("--split", default="train", choices=("train", "test"), help="split of the real data")
    p.add_argument("--features", default="auto", choices=FEATURES.names(), help="feature network (docs/image-quality.md)")
    p.add_argument(
        "--protocol",
        default="suite",
        choices=PROTOCOLS.names(),
        help="suite: samples as given, against as many real images; standard: the papers' (8-bit samples, the whole "
        "split at native size)",
    )
    p.add_argument("--inception-weights", help="path to pytorch-fid's pt_inception-2015-12-05 weights")
    p.add_argument("--n", type=int, help="number of samples to score (default: all / 1000 for --run)")
    p.add_argument("--seed", type=int, default=0, help="seed of the samples and of the score's subsets")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=cmd_score)


def add_ruler(sub: Any) -> None:
    """``suite ruler``: its options and handler."""
    p = sub.add_parser("ruler", help="make or list the pinned feature networks (rulers) that IS / FID / KID use")
    ruler = p.add_subparsers(dest="ruler_command", required=True)
    q = ruler.add_parser("train", help="train the suite classifier of a dataset once and pin its sha256")
    q.add_argument("--dataset", required=True, help="digits, mnist, cifar10, cifar100 or imagenet")
    q.add_argument("--image-size", type=int, default=20, help="the ruler's input size; images are resized to it (default 20)")
    q.add_argument("--root", help="dataset folder (default $SUITE_DATA)")
    q.add_argument("--seed", type=int, default=0, help="seed of the classifier's training")
    q.add_argument(
        "--steering",
        action="store_true",
        help="make the dataset's steering network (steering:DATASET), which strategies use inside training, "
        "instead of its ruler (classifier:DATASET): a perceptron on raw pixels trained on half the test split, which "
        "the ruler never sees, its agreement with the ruler measured; it never scores (needs the ruler)",
    )
    q.add_argument(
        "--half",
        choices=("even", "odd"),
        help="train on one half of the split: its even or odd rows (the training split's; --steering: the test split's, "
        "default even)",
    )
    where = q.add_mutually_exclusive_group()
    where.add_argument("--out", help="ruler folder to write (default $SUITE_RULERS, else the cache's rulers/)")
    where.add_argument("--packaged", action="store_true", help="write into the package's own folder (maintainers)")
    q.set_defaults(func=cmd_ruler_train)
    q = ruler.add_parser("list", help="list the pinned rulers and check every file against its hash (exit 1 if one fails)")
    q.set_defaults(func=cmd_ruler_list)
