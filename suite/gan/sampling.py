"""The trained model of a run, whatever the strategy, and how to sample it.

A run saves a *generator bundle* (``generator.pt``): the generators' weights plus what is needed to
rebuild and sample them, as tensors and plain data (:mod:`suite.gan.tensorfiles`); its record keeps
the file's sha256 and size, which :func:`load_model` checks. Three kinds cover the strategies:
``single`` (one generator, conditional ones fed labels drawn from the class prior), ``per_class``
(paper 000's p(x) = sum_y p(x|y) p(y)) and ``mixture`` (cellular's weighted generators; labels -1).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..config.shown import shown, shown_name
from ..records.record import FileDigest
from ..records.results import GENERATOR_FILE, RECORD_FILE, atomic_write, read_record
from .models import build_pair
from .seeding import derive_seed, torch_generator
from .tensorfiles import load_tensors, save_tensors
from .upsampling import for_sampling

log = logging.getLogger(__name__)

BUNDLE_FORMAT = 1
MAX_CLASSES = 1000
"""The most classes a bundle's dataset has (ImageNet's)."""
MAX_GENERATORS = 10_000
"""The most generators of one bundle (a cellular grid's cells, a label-partitioned run's classes)."""
UNCONDITIONAL_LABEL = -1
SAMPLE_BATCH = 100
"""Samples generated at a time: on a CPU, 500 samples in batches of 100 take two thirds of the time of one batch
of 500 (the activations stay in cache)."""


@dataclass
class GeneratorBundle:
    """Everything needed to rebuild and sample a run's trained model."""

    kind: str  # one of BUNDLE_KINDS
    image_size: int
    channels: int
    latent_dim: int
    num_classes: int  # classes of the dataset (label input size of a conditional generator)
    conditional: bool
    generators: dict[str, dict[str, torch.Tensor]]  # key -> state_dict
    class_prior: dict[int, float]  # p(y) over the trained classes
    weights: dict[str, float] | None = None  # mixture weights per key (cellular)
    architecture: str = "dcgan"  # model.architecture (suite.config.registry.ARCHITECTURES)
    classes: dict[str, int] | None = None  # per_class: key -> class label

    def to_dict(self) -> dict[str, Any]:
        return {"format": BUNDLE_FORMAT, **self.__dict__}

    @property
    def labelled(self) -> bool:
        """Whether every sample is generated for a known class (conditional and per-class models)."""
        return self.kind == PER_CLASS or (self.kind == SINGLE and self.conditional)

    def digest(self) -> str:
        """SHA-256 of the generators' tensors and the mixture weights: equal digests, identical models."""
        h = hashlib.sha256()
        for key in sorted(self.generators):
            h.update(key.encode())
            for name, tensor in self.generators[key].items():
                h.update(name.encode())
                h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        h.update(repr(sorted((self.weights or {}).items())).encode())
        return h.hexdigest()

    def save(self, path: str | Path) -> FileDigest:
        """Write the bundle to ``path``; return the digest its run record keeps (``model_files``)."""
        return save_tensors(self.to_dict(), path)

    @classmethod
    def load(cls, path: str | Path, written: FileDigest | None = None) -> "GeneratorBundle":
        """The bundle in ``path``, checked against ``written`` when given; only tensors and plain data are read, and
        every field is checked before any network is built (:func:`bundle_problem`): :class:`ValueError` naming the
        file and the field."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no generator saved here; is this a finished run folder?")
        data = load_tensors(path, "generator bundle", written)
        if not isinstance(data, dict) or data.pop("format", None) != BUNDLE_FORMAT:
            raise ValueError(f"{path}: not a generator bundle of format {BUNDLE_FORMAT}")
        fields = dataclasses.fields(cls)
        required = {f.name for f in fields if f.default is dataclasses.MISSING}
        if not required <= set(data) <= {f.name for f in fields}:
            held = ", ".join(sorted(shown_name(k) for k in data)[:20]) or "nothing"
            raise ValueError(f"{path}: not a generator bundle (it holds {held})")
        problem = bundle_problem(data)
        if problem is not None:
            raise ValueError(f"{path}: {problem}; not a generator the suite wrote")
        return cls(**data)


SINGLE = "single"
"""A bundle of one generator (data-parallel, conditional or not; a cellular run's best cell)."""
PER_CLASS = "per_class"
"""A bundle of one generator per class (label-partitioned)."""
MIXTURE = "mixture"
"""A bundle of weighted generators (a cellular run's neighbourhood mixture)."""
BUNDLE_KINDS = (SINGLE, PER_CLASS, MIXTURE)
"""A bundle's ``kind`` (see the module)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _sizes_problem(data: dict[str, Any]) -> str | None:
    """The sizes of a bundle's networks, checked by the scenario's own fields (their bounds and reasons)."""
    from ..config.registry import ARCHITECTURES
    from ..config.schema import SchemaError, convert_field
    from ..config.sections import DatasetConfig, ModelConfig

    try:
        convert_field(DatasetConfig, "image_size", data["image_size"], "image_size")
        convert_field(ModelConfig, "latent_dim", data["latent_dim"], "latent_dim")
        convert_field(ModelConfig, "architecture", data.get("architecture", "dcgan"), "architecture")
        ARCHITECTURES[data.get("architecture", "dcgan")].check_image_size(data["image_size"])
    except SchemaError as error:
        return str(error)
    except ValueError as error:
        return f"image_size: {error}"
    if not _is_int(data["channels"]) or data["channels"] not in (1, 3):
        return f"channels: expected 1 or 3, got {shown(data['channels'])}"
    if not _is_int(data["num_classes"]) or not 0 <= data["num_classes"] <= MAX_CLASSES:
        return f"num_classes: expected a whole number from 0 to {MAX_CLASSES}, got {shown(data['num_classes'])}"
    if not isinstance(data["conditional"], bool) or (data["conditional"] and data["num_classes"] < 1):
        return f"conditional: expected true or false (true with num_classes at least 1), got {shown(data['conditional'])}"
    return None


def _parts_problem(data: dict[str, Any]) -> str | None:
    """The generators' tensors and the prior, weights and classes that pick among them."""
    generators = data["generators"]
    if not isinstance(generators, dict) or not generators or len(generators) > MAX_GENERATORS:
        return f"generators: expected 1 to {MAX_GENERATORS} generators by name, got {shown(generators)}"
    for key, state in generators.items():
        if not isinstance(key, str) or not isinstance(state, dict) or not state:
            return f"generators.{shown_name(key)}: expected a generator's weights by name"
        for name, tensor in state.items():
            where = f"generators.{shown_name(key)}.{shown_name(name)}"
            if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
                return f"{where}: expected a tensor, got {type(tensor).__name__}"
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                return f"{where}: holds NaN or infinite weights"
            if name.endswith("running_var") and tensor.is_floating_point() and bool((tensor < 0).any()):
                return f"{where}: holds negative batch-norm variances (a variance is never below 0; they give NaN images)"
    prior = data["class_prior"]
    if (
        not isinstance(prior, dict)
        or not 1 <= len(prior) <= MAX_CLASSES
        or not all(_is_int(c) and 0 <= c < MAX_CLASSES and _is_number(p) and p >= 0 for c, p in prior.items())
        or not sum(prior.values()) > 0
    ):
        return f"class_prior: expected finite non-negative probabilities by class, not all 0, got {shown(prior)}"
    return KIND_RULES[data["kind"]](data)


def _single_problem(data: dict[str, Any]) -> str | None:
    """A single conditional generator: the prior's classes are among its labels."""
    prior = data["class_prior"]
    if data["conditional"] and not all(c < data["num_classes"] for c in prior):
        return f"class_prior: a class past num_classes {data['num_classes']}: {shown(sorted(prior))}"
    return None


def _per_class_problem(data: dict[str, Any]) -> str | None:
    """One generator per class: each names its class, and they cover the prior's."""
    classes, generators = data.get("classes"), data["generators"]
    if (
        not isinstance(classes, dict)
        or set(classes) != set(generators)
        or not all(_is_int(c) for c in classes.values())
        or not set(data["class_prior"]) <= set(classes.values())
    ):
        return f"classes: expected the class of each generator, covering class_prior's classes, got {shown(classes)}"
    return None


def _mixture_problem(data: dict[str, Any]) -> str | None:
    """Weighted generators: a finite weight for each."""
    weights, generators = data.get("weights"), data["generators"]
    if not isinstance(weights, dict) or set(weights) != set(generators) or not all(_is_number(w) for w in weights.values()):
        return f"weights: expected a finite weight for each of the generators {', '.join(map(shown_name, generators))}, got {shown(weights)}"
    return None


KIND_RULES: dict[str, Callable[[dict[str, Any]], str | None]] = {
    SINGLE: _single_problem,
    PER_CLASS: _per_class_problem,
    MIXTURE: _mixture_problem,
}
"""Each bundle kind's own rule on how its generators pick among the classes (:func:`bundle_problem` runs its kind's),
so that no check compares a kind: the kind a strategy's bundle has is the strategy's (its ``make_bundle``)."""


def _shapes_problem(data: dict[str, Any]) -> str | None:
    """Whether each generator's weights are those of the network the sizes describe (built without storage)."""
    with torch.device("meta"):
        net, _ = build_pair(
            data["image_size"],
            data["channels"],
            data["latent_dim"],
            data["num_classes"] if data["conditional"] else 0,
            architecture=data.get("architecture", "dcgan"),
        )
    expected = {name: tuple(t.shape) for name, t in net.state_dict().items()}
    for key, state in data["generators"].items():
        given = {name: tuple(t.shape) for name, t in state.items()}
        if given != expected:
            wrong = sorted(set(given) ^ set(expected)) or sorted(n for n in given if given[n] != expected[n])
            name = shown_name(wrong[0])
            return (
                f"generators.{shown_name(key)}: not the weights of the {data.get('architecture', 'dcgan')} generator its "
                f"image_size, latent_dim and classes describe ({name}: {given.get(wrong[0], 'missing')} where "
                f"{expected.get(wrong[0], 'none')} belongs)"
            )
    return None


def bundle_problem(data: dict[str, Any]) -> str | None:
    """Why ``data`` (a bundle file's fields) is not a generator bundle the suite samples, naming the field, or None.

    Sizes are checked by the scenario's own bounds (``dataset.image_size``, ``model.latent_dim``) before any
    network is built, every weight must be finite (a NaN generator would give NaN "images"), and each generator's
    weights must have the shapes of the network its sizes describe.
    """
    if not isinstance(data["kind"], str) or data["kind"] not in BUNDLE_KINDS:
        return f"kind: expected one of {', '.join(BUNDLE_KINDS)}, got {shown(data['kind'])}"
    return _sizes_problem(data) or _parts_problem(data) or _shapes_problem(data)


def samples_problem(images: torch.Tensor) -> str | None:
    """Why generated ``images`` are not images in [-1, 1] (NaN or infinite pixels, counted), or None."""
    bad = int((~torch.isfinite(images)).sum())
    if bad:
        return f"{bad:,} of its {images.numel():,} sampled pixels are NaN or infinite: not images"
    return None


def load_model(run_dir: str | Path, name: str = GENERATOR_FILE) -> GeneratorBundle:
    """The model file ``name`` of a finished run folder, checked against the sha256 its record keeps.

    A run folder of a suite before ``model_files`` loads unchecked, with a warning (its file is
    still read as tensors and plain data only).
    """
    run_dir = Path(run_dir)
    if not (run_dir / name).is_file():
        raise FileNotFoundError(f"{run_dir / name}: no generator saved here; is this a finished run folder?")
    record = read_record(run_dir)
    written = (record.model_files or {}).get(name) if record is not None else None
    if written is None:
        log.warning(
            "%s: %s names no sha256 for it (a run of an older suite, or no record): loaded without checking it",
            run_dir / name,
            RECORD_FILE,
        )
    return GeneratorBundle.load(run_dir / name, written)  # the record's check made it a FileDigest: sha256 and bytes


_SKELETONS: dict[tuple[Any, ...], torch.nn.Module] = {}
"""Generators without storage, by shape and architecture: built once in a process, copied for each network sampled."""


def _storageless_generator(bundle: GeneratorBundle) -> torch.nn.Module:
    """A generator of ``bundle``'s shape on the meta device (no storage, no initialisation to overwrite), to be given
    the bundle's own tensors, which sampling only reads. Built once per shape and copied: building one initialises its
    pair's weights (5 ms a network, and a label-partitioned bundle has one per class), copying takes a tenth of that."""
    shape = (bundle.image_size, bundle.channels, bundle.latent_dim, bundle.num_classes if bundle.conditional else 0)
    key = (*shape, bundle.architecture)
    if key not in _SKELETONS:
        with torch.device("meta"):
            _SKELETONS[key], _ = build_pair(*shape, architecture=bundle.architecture)
    return copy.deepcopy(_SKELETONS[key])


class Sampler:
    """Draws ``(images, labels)`` from a :class:`GeneratorBundle`, reproducibly from a seed."""

    def __init__(self, bundle: GeneratorBundle, device: torch.device | str = "cpu"):
        self.bundle, self.device = bundle, torch.device(device)
        self.networks: dict[str, torch.nn.Module] = {}
        for key, state in bundle.generators.items():
            net = _storageless_generator(bundle)
            net.load_state_dict({name: t.contiguous() for name, t in state.items()}, assign=True)  # the usual layout
            for_sampling(net)  # its upsampling steps in fewer multiplications (suite.gan.upsampling)
            # on a CPU, convolutions in channels-last layout take about two thirds of the time (oneDNN's layout): the
            # same images up to rounding (2e-6 of [-1, 1] measured); training keeps torch's default layout
            layout = torch.channels_last if self.device.type == "cpu" else torch.preserve_format
            self.networks[key] = net.to(self.device, memory_format=layout).eval()  # type: ignore[call-overload]  # torch accepts it
        self.prior_labels = np.array(sorted(bundle.class_prior), dtype=np.int64)
        self.prior_probs = np.array([bundle.class_prior[c] for c in self.prior_labels], dtype=np.float64)
        self.prior_probs /= self.prior_probs.sum()

    def _components(self, n: int, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
        """Which generator makes each sample, and the label each sample is generated for."""
        b = self.bundle
        if b.kind == SINGLE:
            labels = (
                rng.choice(self.prior_labels, size=n, p=self.prior_probs) if b.conditional else np.full(n, UNCONDITIONAL_LABEL)
            )
            return ["all" if "all" in self.networks else next(iter(self.networks))] * n, labels
        if b.kind == PER_CLASS:
            assert b.classes is not None, "a per-class bundle names the class of each generator"
            labels = rng.choice(self.prior_labels, size=n, p=self.prior_probs)
            by_class = {c: k for k, c in b.classes.items()}
            return [by_class[int(y)] for y in labels], labels
        if b.kind == MIXTURE:
            assert b.weights is not None, "a mixture bundle has weights"
            keys = sorted(b.weights)
            w = np.array([max(b.weights[k], 0.0) for k in keys], dtype=np.float64)
            w = w / w.sum() if w.sum() > 0 else np.full(len(keys), 1.0 / len(keys))
            chosen = rng.choice(len(keys), size=n, p=w)
            return [keys[i] for i in chosen], np.full(n, UNCONDITIONAL_LABEL)
        raise ValueError(f"unknown bundle kind {b.kind!r}")

    @torch.no_grad()
    def sample_by_class(self, per_class: int, seed: int = 0) -> torch.Tensor:
        """``per_class`` images of every class, in class order (a labelled model only)."""
        if not self.bundle.labelled:
            raise ValueError("only conditional and per-class models generate for a given class")
        labels = np.repeat(self.prior_labels, per_class)
        z = torch.randn(len(labels), self.bundle.latent_dim, generator=torch_generator(seed, "sample-by-class"))
        by_class = {c: k for k, c in (self.bundle.classes or {}).items()}
        images = torch.empty(len(labels), self.bundle.channels, self.bundle.image_size, self.bundle.image_size)
        for c in self.prior_labels:
            rows = torch.from_numpy(np.flatnonzero(labels == c))
            y = torch.full((len(rows),), int(c), dtype=torch.int64, device=self.device)
            if self.bundle.kind == PER_CLASS:
                images[rows] = self.networks[by_class[int(c)]](z[rows].to(self.device)).float().cpu()
            else:
                images[rows] = self.networks["all"](z[rows].to(self.device), y).float().cpu()
        return images

    def batches(self, n: int, seed: int = 0, batch_size: int = SAMPLE_BATCH) -> list[tuple[str, np.ndarray]]:
        """The batches :meth:`sample` generates ``n`` samples of ``seed`` in: ``(generator key, rows)``, in order."""
        keys, _ = self._components(n, np.random.default_rng(derive_seed(seed, "sample-components")))
        return _batches_of(keys, batch_size)

    @torch.no_grad()
    def sample(
        self, n: int, seed: int = 0, batch_size: int = SAMPLE_BATCH, part: slice | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` images (float32, (N, C, H, W), [-1, 1]) and their labels (int64; -1 unconditional).

        ``part``: only those of the draw's :meth:`batches` (the rows of the others stay zero), each generated as the
        whole draw generates it: the ranks that share a draw out make the images one rank would, to the bit."""
        rng = np.random.default_rng(derive_seed(seed, "sample-components"))
        keys, labels = self._components(n, rng)
        z = torch.randn(n, self.bundle.latent_dim, generator=torch_generator(seed, "sample-noise"))
        images = torch.zeros(n, self.bundle.channels, self.bundle.image_size, self.bundle.image_size)
        label_tensor = torch.from_numpy(np.asarray(labels, dtype=np.int64))
        for key, rows in _batches_of(keys, batch_size)[part or slice(None)]:
            chunk = torch.from_numpy(rows)
            zz = z[chunk].to(self.device)
            yy = label_tensor[chunk].to(self.device) if self.bundle.conditional else None
            images[chunk] = self.networks[key](zz, yy).float().cpu()
        return images, label_tensor


def _batches_of(keys: list[str], batch_size: int) -> list[tuple[str, np.ndarray]]:
    """The rows of each generator key (keys in sorted order), in batches of at most ``batch_size``."""
    keys_array = np.array(keys)
    return [
        (key, rows[lo : lo + batch_size])
        for key in sorted(set(keys))
        for rows in [np.flatnonzero(keys_array == key)]
        for lo in range(0, len(rows), batch_size)
    ]


def save_image_grid(
    images: torch.Tensor,
    path: str | Path,
    scale: int | None = None,
    columns: int | None = None,
    text: dict[str, str] | None = None,
) -> None:
    """Save ``images`` ((N, C, H, W) in [-1, 1]) as one PNG: a grid ``columns`` wide (default about
    square) with 2 white pixels around each image, upscaled (default: to about 64 pixels per image);
    ``text`` goes into the PNG's text chunks."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo
    from torchvision.utils import make_grid

    columns = columns or math.ceil(math.sqrt(len(images)))
    pixels = ((images.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    grid = make_grid(pixels, nrow=columns, padding=2, pad_value=255)[: images.shape[1]]  # make_grid makes grey RGB
    picture = Image.fromarray(grid.permute(1, 2, 0).squeeze(-1).numpy())
    scale = scale or max(1, 64 // images.shape[-1])
    if scale > 1:
        picture = picture.resize((picture.width * scale, picture.height * scale), Image.Resampling.NEAREST)
    info = PngInfo()
    for key, value in (text or {}).items():
        info.add_text(key, value)
    with atomic_write(path) as tmp:
        picture.save(tmp, format="PNG", pnginfo=info)
