"""The steering network: what a strategy uses inside training, made so that it is not the judge's twin.

The ruler ``classifier:<dataset>`` is a CNN trained on the whole training split; the steering network
``steering:<dataset>`` is a perceptron on raw pixels (``pixel-mlp``) trained on the even rows of the
*test* split (:data:`STEERING_SPLIT`, :data:`STEERING_HALF`), so it differs in both what it is and what it
saw. Its agreement with the ruler (top-1 agreement, and the rank correlation of the FIDs the two give
:func:`candidate_sets`) is measured once, when it is made, and pinned in its manifest entry
(docs/image-quality.md). ``ci/train_steering.py`` and ``suite ruler train --steering`` make one with
:func:`make_steering_network`.
"""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

from ...gan.data import ImageData, load_dataset, native_size
from ...records.integrity import sha256_file
from .classifier import PIXEL_MLP, ClassifierNet, ClassLogits, PixelMLP, evaluate_accuracy, save_weights
from .rulers import STEERING, Ruler, enter_in_manifest, steering_name, weights_path
from .scores import frechet_distance, statistics

STEERING_SPLIT = "test"
"""The split the steering network trains on: the ruler trains on ``train`` and never sees it."""
STEERING_HALF = "even"
"""Its rows of that split; the other half is held out from both networks and measures their agreement."""
IMAGES_SHOWN = 30_000
"""Images shown in training (epochs = this over the training rows, at most 400): seconds on a CPU."""
DEFAULT_INPUT = 16
"""The input size of a dataset without a native one (ImageNet folders)."""


@dataclass(frozen=True)
class SteeringSpec:
    """What :func:`make_steering_network` trains."""

    dataset: str
    root: str | None = None
    seed: int = 1
    half: str = STEERING_HALF

    @property
    def input_size(self) -> int:
        """The perceptron's input: the dataset's native size (8 for the digits)."""
        return native_size(self.dataset, DEFAULT_INPUT)

    @property
    def load_size(self) -> int:
        """The size images are loaded and jittered at before they are resized to the input (the ruler's 20 for the
        digits), so that training sees images resized the way scored ones are."""
        return max(20, 2 * self.input_size)


def _rows(data: ImageData, half: str) -> np.ndarray:
    return np.arange(0 if half == "even" else 1, len(data), 2)


def _resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """As :class:`~suite.measure.metrics.features.ClassifierNet` resizes images to a network's input."""
    if images.shape[-1] == size:
        return images
    return F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False, antialias=images.shape[-1] > size)


def _jitter(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Random affine jitter: rotation up to 12 degrees, scale 0.9 to 1.1, shifts up to 8 % of the side."""
    n = len(images)
    angle = (torch.rand(n, generator=generator) * 2 - 1) * math.radians(12)
    scale = 0.9 + 0.2 * torch.rand(n, generator=generator)
    shift = (torch.rand(n, 2, generator=generator) * 2 - 1) * 0.16
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    # the background is -1 (black): sample in [0, 2] so that zero padding is the background
    return F.grid_sample(images + 1, grid, mode="bilinear", padding_mode="zeros", align_corners=False) - 1


def train_steering(spec: SteeringSpec) -> tuple[PixelMLP, dict]:
    """Train the perceptron of ``spec`` on its half of :data:`STEERING_SPLIT` (deterministic for a given seed, on
    one CPU kernel set); its held-out accuracy on the other half."""
    split = load_dataset(spec.dataset, spec.load_size, STEERING_SPLIT, spec.root)
    train, heldout = split.subset(_rows(split, spec.half)), split.subset(_rows(split, "odd" if spec.half == "even" else "even"))
    size, batch = spec.input_size, 32
    epochs = max(2, min(400, IMAGES_SHOWN // len(train)))
    generator = torch.Generator().manual_seed(spec.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        net = PixelMLP(train.channels, train.num_classes, size)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4)
        net.train()
        for _ in range(epochs):
            order = torch.randperm(len(train), generator=generator).numpy()
            for lo in range(0, len(order) - batch + 1, batch):
                images, labels = train.fetch(order[lo : lo + batch])
                loss = F.cross_entropy(net(_resize(_jitter(images, generator), size))[1], labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    net.eval()
    resized = ImageData(
        name=heldout.name,
        split=heldout.split,
        labels=heldout.labels,
        num_classes=heldout.num_classes,
        channels=heldout.channels,
        image_size=size,
        images=_resize(heldout.fetch(np.arange(len(heldout)))[0], size),
    )
    info: dict[str, float] = {"epochs": epochs, "train_images": len(train), "heldout_images": len(heldout)}
    info.update(channels=train.channels, num_classes=train.num_classes)
    info["heldout_accuracy"] = evaluate_accuracy(net, resized)
    return net, info


# --- agreement with the ruler ---------------------------------------------------------------------------------------


def candidate_sets(data: ImageData, seed: int = 0) -> list[tuple[str, torch.Tensor]]:
    """A fixed set of image sets of graded quality, named: ``data``'s images degraded, and class mixtures.

    Degradations at three to four strengths each (Gaussian noise, blur, shifts, lower contrast, occluded
    squares), mixtures that keep fewer classes or weigh them unevenly (a generator mixture's failure), and
    both together. Every set has as many images as ``data``; images in [-1, 1].
    """
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    images, labels = data.fetch(np.arange(len(data)))
    n, side = len(images), images.shape[-1]
    out: list[tuple[str, torch.Tensor]] = [("as they are", images)]

    def clamp(x: torch.Tensor) -> torch.Tensor:
        return x.clamp(-1, 1)

    for sigma in (0.1, 0.25, 0.5, 1.0):
        out.append((f"noise {sigma}", clamp(images + sigma * torch.randn(images.shape, generator=generator))))
    for k in (3, 5, 7):
        blurred = F.avg_pool2d(F.pad(images, [k // 2] * 4, mode="replicate"), k, stride=1)
        out.append((f"blur {k}x{k}", blurred))
    for pixels in (1, 2, 4):
        out.append((f"shift {pixels} px", torch.roll(images, shifts=(pixels, pixels), dims=(2, 3))))
    for factor in (0.7, 0.4, 0.2):
        out.append((f"contrast {factor}", (images + 1) * factor - 1))
    for fraction in (0.25, 0.5):
        box = int(side * fraction)
        occluded = images.clone()
        top = torch.randint(0, side - box + 1, (n, 2), generator=generator)
        for i, (y, x) in enumerate(top.tolist()):
            occluded[i, :, y : y + box, x : x + box] = -1
        out.append((f"occluded {fraction:.0%}", occluded))
    classes = np.unique(labels.numpy())

    def mixture(weights: np.ndarray) -> torch.Tensor:
        by_class = {c: np.flatnonzero(labels.numpy() == c) for c in classes}
        counts = rng.multinomial(n, weights / weights.sum())
        rows = np.concatenate([rng.choice(by_class[c], k, replace=True) for c, k in zip(classes, counts) if k])
        return images[torch.from_numpy(rows)]

    for kept in (8, 5, 3, 2, 1):
        weights = np.zeros(len(classes))
        weights[rng.choice(len(classes), kept, replace=False)] = 1
        out.append((f"{kept} classes", mixture(weights)))
    for alpha in (3.0, 1.0, 0.3, 0.1):
        out.append((f"class weights Dirichlet({alpha})", mixture(rng.dirichlet(np.full(len(classes), alpha)))))
    weights = np.zeros(len(classes))
    weights[rng.choice(len(classes), 5, replace=False)] = 1
    for sigma in (0.1, 0.25):
        out.append(
            (f"5 classes, noise {sigma}", clamp(mixture(weights) + sigma * torch.randn(images.shape, generator=generator)))
        )
    return out


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (ties at their mean rank)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


@dataclass
class Agreement:
    """How far the steering network agrees with the ruler (:func:`measure_agreement`)."""

    top1: float
    """Share of held-out images whose top-1 class both networks give alike."""
    heldout_images: int
    ruler_accuracy: float
    steering_accuracy: float
    rank_correlation_logits: float
    rank_correlation_features: float
    fids: list[tuple[str, float, float, float]]
    """Each candidate set: its name, the ruler's FID, the steering network's in its logits and in its features."""


def _fid(net: Callable[[torch.Tensor], tuple[np.ndarray, np.ndarray | None]], reference: tuple, images: torch.Tensor) -> float:
    return frechet_distance(*statistics(net(images)[0]), *reference)


def measure_agreement(
    ruler: ClassifierNet, steering: ClassifierNet, dataset: str, image_size: int, root: str | None = None, half: str = "odd"
) -> Agreement:
    """Top-1 agreement on ``half`` of :data:`STEERING_SPLIT` (held out from both), and the rank correlation of the
    FIDs both give :func:`candidate_sets` of the training split's odd rows against its even rows (both at
    ``image_size``, the scenarios' size, the way generated images reach them)."""
    test = load_dataset(dataset, image_size, STEERING_SPLIT, root)
    heldout = test.subset(_rows(test, half))
    images, labels = heldout.fetch(np.arange(len(heldout)))
    judged, steered = ruler.logits(images).argmax(1), steering.logits(images).argmax(1)
    train = load_dataset(dataset, image_size, "train", root)
    reference, candidates = train.subset(_rows(train, "even")), train.subset(_rows(train, "odd"))
    real = reference.fetch(np.arange(len(reference)))[0]
    spaces: dict[str, Callable[[torch.Tensor], tuple[np.ndarray, np.ndarray | None]]] = {
        "ruler": ruler,
        "logits": ClassLogits(steering),
        "features": steering,
    }
    refs = {name: statistics(net(real)[0]) for name, net in spaces.items()}
    fids: list[tuple[str, float, float, float]] = []
    for name, imgs in candidate_sets(candidates):
        scored = [_fid(spaces[space], refs[space], imgs) for space in ("ruler", "logits", "features")]
        fids.append((name, scored[0], scored[1], scored[2]))
    return Agreement(
        top1=float((judged == steered).double().mean()),
        heldout_images=len(heldout),
        ruler_accuracy=float((judged == labels).double().mean()),
        steering_accuracy=float((steered == labels).double().mean()),
        rank_correlation_logits=spearman([f[1] for f in fids], [f[2] for f in fids]),
        rank_correlation_features=spearman([f[1] for f in fids], [f[3] for f in fids]),
        fids=fids,
    )


def trained_on(spec: SteeringSpec, images: int) -> str:
    """In words: the data the steering network of ``spec`` was trained on."""
    return (
        f"the {spec.half} rows of the {spec.dataset} {STEERING_SPLIT} split ({images} images, random affine jitter), "
        "which the ruler was not trained on"
    )


def make_steering_network(spec: SteeringSpec, folder: Path, image_size: int = 20) -> tuple[Ruler, Agreement]:
    """Train the steering network of ``spec``, measure its agreement with the dataset's pinned ruler (at
    ``image_size``), and pin it in the ruler folder ``folder`` as ``steering:<dataset>`` (replacing an earlier
    entry of that name). The weights are a file of tensors (float32), read back with ``weights_only``."""
    name = steering_name(spec.dataset)
    net, info = train_steering(spec)
    path = weights_path(folder, name)
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(net, path)  # the same weights, the same bytes and sha256
    entry = Ruler(
        name=name,
        file=path.name,
        sha256=sha256_file(path),
        dataset=spec.dataset,
        image_size=spec.input_size,
        channels=int(info["channels"]),
        num_classes=int(info["num_classes"]),
        train_split=STEERING_SPLIT,
        train_images=int(info["train_images"]),
        heldout_split=STEERING_SPLIT,
        heldout_images=int(info["heldout_images"]),
        heldout_accuracy=info["heldout_accuracy"],
        epochs=int(info["epochs"]),
        seed=spec.seed,
        made_with=f"suite ruler train --dataset {spec.dataset} --steering --half {spec.half} --seed {spec.seed} "
        f"(ci/train_steering.py for the shipped digits); torch {torch.__version__}, python {platform.python_version()}",
        role=STEERING,
        train_rows=spec.half,
        architecture=PIXEL_MLP,
        trained_on=trained_on(spec, int(info["train_images"])),
    )
    enter_in_manifest(folder, entry)
    # measured with both networks as scoring loads them (from their pinned files, in float64)
    ruler = ClassifierNet(spec.dataset)
    steering = ClassifierNet(spec.dataset, role=STEERING, pinned=(entry, path))
    agreement = measure_agreement(ruler, steering, spec.dataset, image_size, spec.root, _other(spec.half))
    entry.agreement_top1 = round(agreement.top1, 4)
    entry.rank_correlation_logits = round(agreement.rank_correlation_logits, 4)
    entry.rank_correlation_features = round(agreement.rank_correlation_features, 4)
    entry.measured_against = ruler.sha256
    enter_in_manifest(folder, entry)
    return entry, agreement


def _other(half: str) -> str:
    return "odd" if half == "even" else "even"
