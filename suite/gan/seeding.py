"""Seeds derived from the scenario seed, so that every random draw has a stable name.

A network, a batch order or a noise batch is seeded by ``derive_seed(seed, *what)`` where
``what`` names it (class, cell coordinates, epoch, batch). Nothing depends on which rank does
the work or in what order, which is what makes results independent of process placement.
"""

from __future__ import annotations

import hashlib

import torch


def derive_seed(seed: int, *parts: object) -> int:
    """A 63-bit seed determined by ``seed`` and the names in ``parts``."""
    text = repr((int(seed),) + tuple(parts)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def torch_generator(seed: int, *parts: object) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded by :func:`derive_seed`."""
    return torch.Generator().manual_seed(derive_seed(seed, *parts))
