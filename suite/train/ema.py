"""The EMA generator: an exponential moving average of a generator's weights, kept beside training.

Updated after every generator step (under ``no_grad``, on the rank that keeps the model), it never feeds back into
training: the trained networks, and their digests, are those of a run without it. Its parameters are the
bias-corrected average of the weights after steps 1..t, step i weighted by ``decay ** (t - i)`` (the initial
weights are not among them); its buffers (BatchNorm running statistics) are copied from the generator. The decay
comes from ``train.ema_half_life``, a share of the GAN's generator steps (:func:`decay_for`), so that every system
averages over the same share of its budget whatever the size of its steps.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def decay_for(half_life: float, steps: int) -> float:
    """The per-step decay whose half-life is ``half_life`` of ``steps`` generator steps.

    >>> round(decay_for(0.5, 2), 6)
    0.5
    """
    return 0.5 ** (1.0 / max(half_life * steps, 1e-9))


class EmaGenerator:
    """The moving average of one generator's weights (a state dict on the generator's device)."""

    def __init__(self, network: nn.Module, decay: float):
        self.decay = decay
        self.updates = 0
        self.state = {key: value.detach().clone() for key, value in network.state_dict().items()}

    @torch.no_grad()
    def update(self, network: nn.Module) -> None:
        """Average in ``network``'s weights after one more generator step; copy its buffers."""
        self.updates += 1
        t, d = self.updates, self.decay
        keep = d * (1.0 - d ** (t - 1)) / (1.0 - d**t)  # 0 at the first update: the average starts at step 1
        parameters = {key for key, _ in network.named_parameters()}
        for key, value in network.state_dict().items():
            mine = self.state[key]
            if key in parameters:
                mine.mul_(keep).add_(value.detach().to(mine.dtype), alpha=1.0 - keep)
            else:
                mine.copy_(value)

    def state_dict(self) -> dict[str, Any]:
        """For a checkpoint: the update count and the averaged state (CPU tensors)."""
        return {
            "updates": self.updates,
            "decay": self.decay,
            "state": {k: v.detach().cpu().clone() for k, v in self.state.items()},
        }

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`."""
        self.updates, self.decay = int(saved["updates"]), float(saved["decay"])
        for key, value in saved["state"].items():
            self.state[key].copy_(value)


def ema_for(network: nn.Module, half_life: float | None, steps: int) -> EmaGenerator | None:
    """The EMA generator of ``network`` trained for ``steps`` generator steps (None where ``half_life`` is None)."""
    return None if half_life is None else EmaGenerator(network, decay_for(half_life, steps))
