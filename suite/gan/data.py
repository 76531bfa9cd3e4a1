"""Datasets: the embedded ``digits`` default, torchvision's MNIST/CIFAR, and ImageNet folders.

Every dataset is returned as an :class:`ImageData`: images scaled to [-1, 1] at the model's
image size, integer labels, and a way to fetch batches by index. Small datasets are held in
memory as one tensor; ImageNet is read lazily from its folder.

A missing dataset raises :class:`DataError` naming the path that was searched and how to
provide the files; nothing is downloaded unless ``download: true`` is set.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, cast

import numpy as np

if TYPE_CHECKING:  # torch is imported where tensors are made: `suite run` checks a scenario's data without it
    import torch

DATASETS = ("digits", "mnist", "cifar10", "cifar100", "imagenet")
CHANNELS = {"digits": 1, "mnist": 1, "cifar10": 3, "cifar100": 3, "imagenet": 3}
SPLITS = ("train", "test")
NATIVE_SIZE = {"digits": 8, "mnist": 28, "cifar10": 32, "cifar100": 32}
"""Each dataset's stored resolution (ImageNet's images have none: they are resized and cropped to the image size)."""
DIGITS_TEST_FRACTION = 0.2
DIGITS_SPLIT_SEED = 0


def native_size(name: str, image_size: int) -> int:
    """The resolution ``name``'s images are stored at; ``image_size`` for a dataset without one (ImageNet)."""
    return NATIVE_SIZE.get(name, image_size)


def class_prior(labels: np.ndarray) -> dict[int, float]:
    """Fraction of ``labels`` in each class present."""
    values, counts = np.unique(labels, return_counts=True)
    return {int(v): float(c) / len(labels) for v, c in zip(values, counts)}


class DataError(RuntimeError):
    """A dataset could not be loaded; the message says where we looked and what to do."""


@dataclass
class ImageData:
    """Images in [-1, 1] with their labels.

    Attributes
    ----------
    name, split:
        Which dataset and split this is.
    labels:
        int64 array, one label per image, in the dataset's original numbering.
    num_classes:
        Number of classes of the whole dataset (10 for digits even when a subset is selected),
        so that a conditional network's label input has the same meaning on every subset.
    images:
        float32 tensor (N, C, H, W) for in-memory datasets, else None.
    """

    name: str
    split: str
    labels: np.ndarray
    num_classes: int
    channels: int
    image_size: int
    images: torch.Tensor | None = None
    folder: Any = field(default=None, repr=False)  # torchvision ImageFolder for lazy sets
    indices: np.ndarray | None = None  # rows of ``folder`` that this object exposes

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def classes(self) -> list[int]:
        """The classes present, sorted."""
        return sorted(int(c) for c in np.unique(self.labels))

    def class_prior(self) -> dict[int, float]:
        """Fraction of images in each present class: the p(y) of paper 000's factorisation."""
        return class_prior(self.labels)

    def fetch(self, indices: Sequence[int] | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(images, labels)`` for the given row indices."""
        import torch

        idx = np.asarray(indices, dtype=np.int64)
        labels = torch.from_numpy(self.labels[idx])
        if self.images is not None:
            return self.images[torch.from_numpy(idx)], labels
        rows = self.indices[idx] if self.indices is not None else idx
        return torch.stack([self.folder[int(r)][0] for r in rows]), labels

    def batches(self, index_batches: Iterable[np.ndarray], workers: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Yield ``(images, labels)`` for each array of indices (loader processes for lazy sets)."""
        if self.images is not None or workers == 0:
            for idx in index_batches:
                yield self.fetch(idx)
            return
        import torch

        loader = torch.utils.data.DataLoader(
            cast("torch.utils.data.Dataset", _Rows(self)),
            batch_sampler=[list(map(int, b)) for b in index_batches],
            num_workers=workers,
        )
        yield from loader

    def subset(self, rows: np.ndarray) -> "ImageData":
        """A view restricted to ``rows`` (used for class selection and per-class data)."""
        import torch

        rows = np.asarray(rows, dtype=np.int64)
        return ImageData(
            name=self.name,
            split=self.split,
            labels=self.labels[rows],
            num_classes=self.num_classes,
            channels=self.channels,
            image_size=self.image_size,
            images=None if self.images is None else self.images[torch.from_numpy(rows)],
            folder=self.folder,
            indices=None if self.images is not None else (self.indices[rows] if self.indices is not None else rows),
        )

    def select_classes(self, classes: Sequence[int] | None) -> "ImageData":
        """Keep only the images of ``classes`` (all when None); labels keep their numbering."""
        if classes is None:
            return self
        unknown = sorted(set(classes) - set(range(self.num_classes)))
        if unknown:
            raise DataError(f"dataset.classes: {unknown} not in {self.name}, whose labels are 0..{self.num_classes - 1}")
        return self.subset(np.flatnonzero(np.isin(self.labels, list(classes))))

    def of_class(self, label: int) -> "ImageData":
        """The images of one class."""
        return self.subset(np.flatnonzero(self.labels == label))


class _Rows:
    """An :class:`ImageData` as a map-style dataset of single rows for a loader's worker processes (torch's loader
    reads a map-style dataset through ``__getitem__`` and ``__len__`` alone)."""

    def __init__(self, data: ImageData):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = self.data.fetch([i])
        return images[0], labels[0]


def _to_model_range(images_uint8_or_float: torch.Tensor, max_value: float, image_size: int) -> torch.Tensor:
    """(N, C, H, W) pixel values in [0, max_value] -> float32 in [-1, 1] at ``image_size``."""
    from torch.nn import functional as F

    x = images_uint8_or_float.float() / max_value
    if x.shape[-1] != image_size or x.shape[-2] != image_size:
        x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False, antialias=True)
    return (x.clamp(0, 1) * 2 - 1).contiguous()


def default_root() -> Path:
    """Where torchvision datasets are looked for when ``dataset.root`` is not set."""
    return Path(os.environ.get("SUITE_DATA", Path.home() / ".cache" / "suite" / "data"))


def _digits_file() -> Path:
    """The digits as scikit-learn's wheel ships them (found without importing scikit-learn, which takes seconds)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("dataset 'digits' comes with scikit-learn, which is not installed: pip install scikit-learn")
    return Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"


def cache_dir() -> Path:
    """Where the suite caches what it computes once: the digits split, classifiers, real-data statistics
    (``$SUITE_CACHE``, default ~/.cache/suite)."""
    return Path(os.environ.get("SUITE_CACHE", Path.home() / ".cache" / "suite"))


def _digits_split_rows(labels: np.ndarray) -> dict[str, np.ndarray]:
    """The fixed stratified train/test rows, computed once by scikit-learn and cached beside the other caches."""
    path = cache_dir() / f"digits-split-{DIGITS_SPLIT_SEED}-{DIGITS_TEST_FRACTION}-{len(labels)}.npz"
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {"train": stored["train"], "test": stored["test"]}
    except (OSError, ValueError, KeyError):  # not cached yet (or unreadable): compute and store it
        pass
    from sklearn.model_selection import train_test_split

    train_rows, test_rows = train_test_split(
        np.arange(len(labels)), test_size=DIGITS_TEST_FRACTION, random_state=DIGITS_SPLIT_SEED, stratify=labels
    )
    rows = {"train": np.sort(train_rows), "test": np.sort(test_rows)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
        np.savez(partial, train=rows["train"], test=rows["test"])
        os.replace(partial, path)  # atomic: ranks starting together may both write it
    except OSError:  # a read-only home: compute it each time
        pass
    return rows


def _load_digits(split: str, image_size: int) -> ImageData:
    import torch

    table = np.loadtxt(_digits_file(), delimiter=",")  # 64 pixels (0..16) and the label per row
    labels = table[:, -1].astype(np.int64)
    rows = _digits_split_rows(labels)[split]
    pixels = torch.from_numpy(table[rows, :-1].reshape(-1, 8, 8)).unsqueeze(1)
    return ImageData(
        name="digits",
        split=split,
        labels=labels[rows],
        num_classes=10,
        channels=1,
        image_size=image_size,
        images=_to_model_range(pixels, 16.0, image_size),
    )


_TORCHVISION_FILES = {
    "mnist": (
        "MNIST/raw",
        ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    ),
    "cifar10": ("cifar-10-batches-py", ("batches.meta", *(f"data_batch_{i}" for i in range(1, 6)), "test_batch")),
    "cifar100": ("cifar-100-python", ("meta", "train", "test")),
}
"""Where torchvision looks for each dataset under the root, and the files it reads there."""


def expected_files(name: str, root: Path, split: str = "train") -> tuple[Path, tuple[str, ...]]:
    """The folder a dataset is read from and the files (or, for ImageNet, the class folders) it needs there."""
    if name == "imagenet":
        return root / ("val" if split == "test" else "train"), ("one folder of images per class",)
    folder, files = _TORCHVISION_FILES[name]
    return root / folder, files


def missing_data(name: str, root: str | os.PathLike | None, split: str = "train") -> str | None:
    """One line naming the dataset, the folder looked in and the files expected, when they are not all there
    (None when they are, and for the embedded digits). Checks names only: nothing is read."""
    if name == "digits":
        return None
    root_path = Path(root).expanduser() if root else default_root()
    folder, files = expected_files(name, root_path, split)
    if name == "imagenet":
        present = folder.is_dir() and any(p.is_dir() for p in folder.iterdir())
    else:
        present = all((folder / f).is_file() for f in files)
    if present:
        return None
    below = folder.relative_to(root_path)
    fetch = "" if name == "imagenet" else ", or set dataset.download: true on a machine online"
    return (
        f"dataset '{name}' not found: looked in {folder} for {', '.join(files)}; put them there, or point "
        f"dataset.root (or $SUITE_DATA) at the folder that holds {below}/{fetch}"
    )


def _missing(name: str, root: Path, error: Exception) -> DataError:
    return DataError(missing_data(name, root) or f"dataset '{name}' under {root} could not be read: {error}")


def _load_torchvision(name: str, root: Path, split: str, image_size: int, download: bool) -> ImageData:
    import torch
    import torchvision

    cls = {
        "mnist": torchvision.datasets.MNIST,
        "cifar10": torchvision.datasets.CIFAR10,
        "cifar100": torchvision.datasets.CIFAR100,
    }[name]
    try:
        dataset = cls(str(root), train=split == "train", download=download)
    except RuntimeError as error:  # torchvision: "Dataset not found or corrupted..."
        raise _missing(name, root, error) from None
    pixels = torch.as_tensor(np.asarray(dataset.data))
    pixels = pixels.unsqueeze(1) if pixels.ndim == 3 else pixels.permute(0, 3, 1, 2)
    return ImageData(
        name=name,
        split=split,
        labels=np.asarray(dataset.targets, dtype=np.int64),
        num_classes=len(dataset.classes),
        channels=CHANNELS[name],
        image_size=image_size,
        images=_to_model_range(pixels, 255.0, image_size),
    )


def _load_imagenet(root: Path, split: str, image_size: int) -> ImageData:
    import torchvision
    from torchvision import transforms

    folder = root / ("val" if split == "test" else "train")
    if not folder.is_dir():
        raise DataError(
            f"dataset 'imagenet' was not found: expected an ImageFolder layout at {folder} "
            f"(one sub-folder per class). Set dataset.root to the directory holding train/ and val/."
        )
    transform = transforms.Compose(
        [
            transforms.Resize(image_size),
            transforms.CenterCrop(image_size),
            transforms.ToTensor(),
            transforms.Normalize([0.5] * 3, [0.5] * 3),
        ]
    )
    dataset = torchvision.datasets.ImageFolder(str(folder), transform=transform)
    return ImageData(
        name="imagenet",
        split=split,
        labels=np.asarray(dataset.targets, dtype=np.int64),
        num_classes=len(dataset.classes),
        channels=3,
        image_size=image_size,
        folder=dataset,
    )


def load_dataset(
    name: str,
    image_size: int = 32,
    split: str = "train",
    root: str | os.PathLike | None = None,
    classes: Sequence[int] | None = None,
    download: bool = False,
    limit: int | None = None,
) -> ImageData:
    """Load a dataset at ``image_size`` in [-1, 1], restricted to ``classes`` and ``limit`` images.

    Raises
    ------
    DataError
        The dataset is unknown, missing on disk, or the class selection is invalid.
    """
    if name not in DATASETS:
        raise DataError(f"dataset.name: unknown dataset '{name}'; choose one of {', '.join(DATASETS)}")
    if split not in SPLITS:
        raise DataError(f"dataset.split: '{split}' is not one of {', '.join(SPLITS)}")
    root_path = Path(root).expanduser() if root else default_root()
    if name == "digits":
        data = _load_digits(split, image_size)
    elif name == "imagenet":
        data = _load_imagenet(root_path, split, image_size)
    else:
        data = _load_torchvision(name, root_path, split, image_size, download)
    data = data.select_classes(classes)
    if limit is not None and limit < len(data):
        data = data.subset(np.arange(limit))
    if len(data) == 0:
        raise DataError(f"dataset '{name}' ({split}) has no images for classes {classes}")
    return data
