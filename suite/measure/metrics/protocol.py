"""The scoring protocols (``metrics.protocol``): how samples and real images reach the ruler.

* ``suite``: samples as generated (float), against the reference draw of ``metrics.samples`` real
  images at ``dataset.image_size``.
* ``standard``: the protocol papers report FID and IS with (pytorch-fid, TTUR, Heusel et al.):
  samples rounded to 8 bits per channel as a PNG stores them, the real statistics over every
  image of the split at the dataset's native resolution, 10,000 or 50,000 samples, IS over 10
  splits. With pytorch-fid's Inception, its FID is pytorch-fid's to 1e-6 (``tests/test_fid_parity.py``).

A protocol's traits are on its :data:`suite.config.registry.PROTOCOLS` entry; this module applies them.
"""

from __future__ import annotations

import torch

from ...config.registry import PROTOCOLS


def quantise_8bit(images: torch.Tensor) -> torch.Tensor:
    """Images in [-1, 1] as a PNG stores them: uint8 ``round((x + 1) / 2 * 255)``, clamped to [0, 255].

    The rounding of :func:`torchvision.utils.save_image`: ``x * 255 + 0.5``, clamped, truncated.
    """
    return ((images.float() + 1) / 2).mul(255).add(0.5).clamp(0, 255).to(torch.uint8)


def protocol_images(images: torch.Tensor, protocol: str) -> torch.Tensor:
    """``images`` (float in [-1, 1]) as ``protocol`` scores them: 8-bit for a quantised protocol, else unchanged."""
    return quantise_8bit(images) if PROTOCOLS[protocol].quantised else images


def comparability(literature_network: bool, protocol: str) -> str:
    """One line: whether scores of this network and protocol are comparable with the papers' numbers."""
    if literature_network and PROTOCOLS[protocol].literature:
        return "comparable with the papers' numbers (their network, their protocol)"
    why = [] if literature_network else ["not the papers' network (they score with pytorch-fid's Inception)"]
    why += [] if PROTOCOLS[protocol].literature else [f"protocol {protocol}, not the papers' (metrics.protocol: standard)"]
    return "not comparable with the papers' numbers: " + "; ".join(why)
