"""What crosses processes and goes to disk: one flat vector from many tensors and back, and CPU copies of state."""

from __future__ import annotations

from typing import Iterable

import torch


def flatten(tensors: Iterable[torch.Tensor], dtype: torch.dtype | None = None) -> torch.Tensor:
    """The tensors, in order, as one new flat CPU vector (cast to ``dtype`` when given)."""
    return torch.cat([t.detach().reshape(-1).to("cpu", dtype) for t in tensors])


def unflatten_(tensors: Iterable[torch.Tensor], flat: torch.Tensor) -> None:
    """Inverse of :func:`flatten`: copy consecutive slices of ``flat`` into ``tensors``, in place, in their own dtype."""
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset : offset + n].view_as(t).to(t.dtype))
            offset += n


def cpu_state(module_or_state: torch.nn.Module | dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A CPU copy of a state dict (what crosses processes and goes to disk)."""
    state = module_or_state.state_dict() if hasattr(module_or_state, "state_dict") else module_or_state
    return {k: v.detach().cpu().clone() for k, v in state.items()}
