"""What every feature network is: images to FID features and (when it can) class probabilities, under a name and
the sha256 of its weights that travel with every score."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch.nn import functional as F

from .rulers import RulerError

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


def signed_range(images: torch.Tensor) -> torch.Tensor:
    """Images as float in [-1, 1]: uint8 pixels ``u`` become ``u / 127.5 - 1``, float images stay as they are."""
    return images.float() / 127.5 - 1 if images.dtype == torch.uint8 else images
