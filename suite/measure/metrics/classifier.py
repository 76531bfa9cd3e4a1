"""The suite's own feature networks: the classifier ruler (a small CNN) and the steering network (a perceptron on
the pixels), trained once by ``suite ruler train``, pinned by their sha256 and loaded in float64."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...config.plan import CLASSIFIER_FEATURE_DIM
from ...gan.data import ImageData, load_dataset
from ...records.integrity import sha256_file
from ...records.record import Steering
from ...records.results import atomic_write
from .featurenet import FeatureNet
from .rulers import (
    RULER,
    STEERING,
    Ruler,
    RulerError,
    classifier_name,
    enter_in_manifest,
    find_classifier,
    find_steering,
    steering_name,
    verify,
    weights_path,
)


class SmallCNN(nn.Module):
    """Three conv blocks and a 128-d penultimate layer: the ``classifier`` feature network.

    No BatchNorm: its running statistics made held-out accuracy swing between epochs on small
    datasets, and features must not depend on batch composition. A 4x4 pooled map (not a global
    average) keeps the spatial layout that tells digits apart.
    """

    feature_dim = CLASSIFIER_FEATURE_DIM

    def __init__(self, channels: int, num_classes: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
            nn.Linear(128 * 16, self.feature_dim),
            nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(self.feature_dim, num_classes))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.body(x)
        return features, self.head(features)


class PairMax(nn.Module):
    """``nn.MaxPool2d(2)`` for inference: each 2x2 window's maximum from four strided views, the same values (a maximum
    is exact; where a window ties +0 with -0 the zero's sign may differ, which no later layer of the ruler tells apart) in
    about a seventh of the time on float64 CPU tensors, where torch's pooling kernel is slow (the ruler's
    two poolings were a fifth of its time). Training keeps torch's pooling and its gradient."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2  # an odd row or column is left out, as the pooling does
        top = torch.maximum(x[..., 0:h:2, 0:w:2], x[..., 0:h:2, 1:w:2])
        return torch.maximum(top, torch.maximum(x[..., 1:h:2, 0:w:2], x[..., 1:h:2, 1:w:2]))


def _pools_pairs(layer: nn.Module) -> bool:
    """Whether ``layer`` is the pooling :class:`PairMax` computes: torch's 2x2 max pooling of stride 2, no padding."""
    return (
        type(layer) is nn.MaxPool2d
        and layer.kernel_size in (2, (2, 2))
        and layer.stride in (2, (2, 2))
        and layer.padding in (0, (0, 0))
        and layer.dilation in (1, (1, 1))
        and not layer.ceil_mode
    )


class PixelMLP(nn.Module):
    """A perceptron on the raw pixels: the steering network's architecture, not the ruler's twin.

    Images are resized to its (small) input size, flattened, and passed through two hidden layers; the second,
    of :data:`CLASSIFIER_FEATURE_DIM` units, is its feature space (as the CNN's penultimate layer is the ruler's),
    so a mixture FID has the same dimension in either space. No convolution, no pooling: it sees pixels, not
    the CNN's shift-tolerant filters.
    """

    feature_dim = CLASSIFIER_FEATURE_DIM
    hidden = 256

    def __init__(self, channels: int, num_classes: int, image_size: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Flatten(),
            nn.Linear(channels * image_size * image_size, self.hidden),
            nn.ReLU(),
            nn.Linear(self.hidden, self.feature_dim),
            nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.feature_dim, num_classes))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.body(x)
        return features, self.head(features)


SMALL_CNN = "small-cnn"
"""The rulers' architecture (:class:`SmallCNN`); a manifest entry without ``architecture`` is one."""
PIXEL_MLP = "pixel-mlp"
"""The steering networks' architecture (:class:`PixelMLP`)."""


def build_network(architecture: str, channels: int, num_classes: int, image_size: int) -> nn.Module:
    """The untrained network of a manifest entry's ``architecture``; a :class:`RulerError` for an unknown one."""
    if architecture == SMALL_CNN:
        return SmallCNN(channels, num_classes)
    if architecture == PIXEL_MLP:
        return PixelMLP(channels, num_classes, image_size)
    raise RulerError(f"architecture {architecture!r} is not one of {SMALL_CNN}, {PIXEL_MLP}")


HALVES = ("even", "odd")
"""The halves of a split a network can be trained on: its even or its odd rows."""


@dataclass
class ClassifierSpec:
    """What ``suite ruler train`` trains: the data, the seed and the role of the network."""

    dataset: str
    image_size: int
    root: str | None = None
    split: str = "train"
    seed: int = 0
    half: str | None = None
    """Train on one half of ``split`` only: its ``even`` or ``odd`` rows (None: all of them)."""
    role: str = RULER
    """:data:`RULER` (``classifier:<dataset>``) or :data:`STEERING` (``steering:<dataset>``)."""

    @property
    def key(self) -> str:
        rows = f"-{self.half}" if self.half else ""
        return f"{self.dataset}-{self.split}{rows}-{self.image_size}px-seed{self.seed}"


def _heldout_split(split: str) -> str:
    return "test" if split == "train" else "train"


def train_classifier(spec: ClassifierSpec, device: torch.device | str = "cpu") -> tuple[SmallCNN, dict]:
    """Train the classifier of ``spec`` on the real data (deterministic for a given seed)."""
    train = load_dataset(spec.dataset, spec.image_size, spec.split, spec.root)
    if spec.half is not None:
        train = train.subset(np.arange(HALVES.index(spec.half), len(train), 2))
    heldout = load_dataset(spec.dataset, spec.image_size, _heldout_split(spec.split), spec.root)
    generator = torch.Generator().manual_seed(spec.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        net = SmallCNN(train.channels, train.num_classes).to(device)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        # about 18,000 images shown, 2 to 24 epochs: 12 for the digits' 1,437 training images, 2 for MNIST or
        # CIFAR, 24 for half the digits (the cap was 12 before halves: no ruler of 1,385 images or more changes)
        epochs = max(2, min(24, 18000 // len(train)))
        batch = 64
        net.train()
        for _ in range(epochs):
            order = torch.randperm(len(train), generator=generator).numpy()
            for lo in range(0, len(order) - batch + 1, batch):
                images, labels = train.fetch(order[lo : lo + batch])
                # light augmentation: random shifts of up to 2 pixels
                shift = torch.randint(-2, 3, (2,), generator=generator).tolist()
                images = torch.roll(images, shifts=shift, dims=(2, 3))
                loss = F.cross_entropy(net(images.to(device))[1], labels.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    net.eval()
    accuracy = evaluate_accuracy(net, heldout, device)
    info = {
        "key": spec.key,
        "epochs": epochs,
        "train_images": len(train),
        "heldout_split": heldout.split,
        "heldout_images": len(heldout),
        "heldout_accuracy": accuracy,
    }
    return net, info


@torch.no_grad()
def evaluate_accuracy(net: nn.Module, data: ImageData, device: torch.device | str = "cpu") -> float:
    correct = 0
    for lo in range(0, len(data), 500):
        images, labels = data.fetch(np.arange(lo, min(lo + 500, len(data))))
        correct += int((net(images.to(device))[1].argmax(1).cpu() == labels).sum())
    return correct / len(data)


def make_classifier_ruler(spec: ClassifierSpec, folder: Path, device: torch.device | str = "cpu") -> Ruler:
    """Train the classifier of ``spec`` and pin it in the ruler folder ``folder`` (``suite ruler train``).

    Writes ``classifier-<dataset>.pt`` (a ruler) or ``steering-<dataset>.pt`` (a steering network; float32
    weights) and its entry in ``folder/rulers.json`` with the file's sha256 and role, replacing an earlier
    entry of that name; returns the entry.
    """
    import platform

    name = steering_name(spec.dataset) if spec.role == STEERING else classifier_name(spec.dataset)
    net, info = train_classifier(spec, device)
    path = weights_path(folder, name)
    save_weights(net, path)
    probe = load_dataset(spec.dataset, spec.image_size, spec.split, spec.root, limit=1)
    ruler = Ruler(
        name=name,
        file=path.name,
        sha256=sha256_file(path),
        dataset=spec.dataset,
        image_size=spec.image_size,
        channels=probe.channels,
        num_classes=probe.num_classes,
        train_split=spec.split,
        train_images=info["train_images"],
        heldout_split=info["heldout_split"],
        heldout_images=info["heldout_images"],
        heldout_accuracy=info["heldout_accuracy"],
        epochs=info["epochs"],
        seed=spec.seed,
        made_with=f"suite ruler train --dataset {spec.dataset} --image-size {spec.image_size} --seed {spec.seed}"
        + (" --steering" if spec.role == STEERING else "")
        + (f" --half {spec.half}" if spec.half else "")
        + f"; torch {torch.__version__}, python {platform.python_version()}",
        role=spec.role,
        train_rows=spec.half or "all",
    )
    enter_in_manifest(folder, ruler)
    return ruler


def load_classifier(
    dataset: str,
    device: torch.device | str = "cpu",
    role: str = RULER,
    field: str = "steering",
    pinned: tuple[Ruler, Path] | None = None,
) -> tuple[nn.Module, Ruler]:
    """The pinned classifier ruler of ``dataset`` (verified against its sha256), in float64 and eval mode, its
    poolings as :class:`PairMax`.

    ``role`` :data:`STEERING`: the dataset's steering network instead (never a ruler; ``field`` names what
    asked for it in the error line); ``pinned``: this entry and its file instead of the one looked up (a network
    just made, checked against its hash all the same). Float64 makes its features independent of the CPU's kernel set to far
    below the scores' precision: float32 convolutions differ in their last bits between instruction sets.
    """
    if pinned is not None:
        ruler, path = pinned[0], verify(pinned[1], pinned[0].sha256, pinned[0].name)
    else:
        ruler, path = find_steering(dataset, field) if role == STEERING else find_classifier(dataset)
    net = build_network(ruler.architecture, ruler.channels, ruler.num_classes, ruler.image_size)
    try:
        net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    except Exception as error:  # a file of the pinned hash always loads; anything else is a broken pin
        raise RulerError(f"ruler {ruler.name}: {path} does not load as its network ({error})") from None
    if isinstance(net, SmallCNN):
        net.body = nn.Sequential(*(PairMax() if _pools_pairs(layer) else layer for layer in net.body))
    return net.double().to(device).eval(), ruler


class ClassifierNet(FeatureNet):
    """The suite's classifier ruler as a feature network (also predicts classes for TVD and accuracy).

    Images of another size than the ruler's are resized to it (bilinear), the same way for real
    and generated images, so one ruler serves every image size of its dataset.
    """

    def __init__(
        self,
        dataset: str,
        device: torch.device | str = "cpu",
        batch_size: int = 500,
        role: str = RULER,
        field: str = "steering",
        pinned: tuple[Ruler, Path] | None = None,
    ):
        super().__init__(device, batch_size)
        self.net, self.ruler = load_classifier(dataset, self.device, role, field, pinned)
        self.role = role
        self.name = self.ruler.name
        self.sha256 = self.ruler.sha256
        self.info = {"heldout_accuracy": self.ruler.heldout_accuracy, "heldout_split": self.ruler.heldout_split}
        kind = "PixelMLP" if self.ruler.architecture == PIXEL_MLP else "SmallCNN"
        self.detail = (
            f"suite {kind} trained on {dataset}/{self.ruler.train_split}{_rows(self.ruler)} at {self.ruler.image_size}px "
            f"(held-out accuracy {self.ruler.heldout_accuracy:.3f} on {self.ruler.heldout_split}; sha256 {self.ruler.short})"
        )

    def _input(self, images: torch.Tensor) -> torch.Tensor:
        x = images.double() / 127.5 - 1 if images.dtype == torch.uint8 else images.double()
        size = self.ruler.image_size
        if x.shape[-1] != size or x.shape[-2] != size:
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=x.shape[-1] > size)
        return x

    def _forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.net(self._input(images))

    @torch.no_grad()
    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits (float64) of one batch of images in [-1, 1]."""
        return self.net(self._input(images))[1]


class ClassLogits:
    """A classifier's class logits as FID features (Lipizzaner's MNIST CNN gives it 10 outputs): the steering network's."""

    def __init__(self, classifier: ClassifierNet):
        self.classifier = classifier
        self.name = f"{classifier.name}/logits"
        self.sha256 = classifier.sha256
        self.detail = f"class logits of the {classifier.detail}"

    @torch.no_grad()
    def __call__(self, images: torch.Tensor) -> tuple[np.ndarray, None]:
        """``(logits (N, classes) float64, None)``, as a feature network returns ``(features, probabilities)``."""
        step, device = self.classifier.batch_size, self.classifier.device
        logits = [self.classifier.logits(images[lo : lo + step].to(device)).cpu() for lo in range(0, len(images), step)]
        return torch.cat(logits).numpy(), None


def _rows(ruler: Ruler) -> str:
    return "" if ruler.train_rows == "all" else f" ({ruler.train_rows} rows)"


def steering_net(dataset: str, device: torch.device | str = "cpu", field: str = "steering") -> ClassifierNet:
    """The pinned steering network of ``dataset``: what a strategy may use inside training (never the ruler).

    A :class:`ClassifierNet` (``name`` ``steering:<dataset>``, ``sha256``, ``logits``, features); a
    :class:`RulerError` naming ``field`` where none is pinned or its file is a ruler's. A strategy that
    uses it sets ``steering=True`` on its registry entry and names it in its record
    (:func:`steering_record`).
    """
    return ClassifierNet(dataset, device, role=STEERING, field=field)


def steering_record(net: ClassifierNet, use: str, space: str = "logits") -> Steering:
    """The record's ``steering`` part (a strategy's ``Outcome.fields["steering"]``): which network steered what.

    With its provenance from the manifest: its architecture, the data it was trained on, and its measured
    agreement with the ruler (top-1 on held-out images; the rank correlation of the FIDs it gives a set of
    degraded and mode-dropped image sets with the ruler's, in ``space``: ``logits`` or ``features``, the space
    it steers in). A network pinned before these were measured leaves them out.
    """
    entry = net.ruler
    correlation = entry.rank_correlation_features if space == "features" else entry.rank_correlation_logits
    return Steering(
        name=net.name,
        sha256=net.sha256,
        use=use,
        architecture=entry.architecture,
        trained_on=entry.trained_on,
        agreement_top1=entry.agreement_top1,
        rank_correlation=correlation,
        measured_against=entry.measured_against,
    )


def save_weights(net: nn.Module, path: Path) -> None:
    """Write ``net``'s weights (float32 tensors on the CPU, nothing that runs code) to ``path`` atomically, through a
    buffer: torch names the archive inside the file after the file it writes to, and a temporary file's name
    changes from run to run, so writing the buffer makes the same weights the same bytes and sha256."""
    buffer = io.BytesIO()
    torch.save({k: v.detach().float().cpu() for k, v in net.state_dict().items()}, buffer)
    with atomic_write(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
