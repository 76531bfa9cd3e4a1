"""The step's ``performance`` settings: compile, CUDA graphs, channels-last, bf16 autocast.

What each changes in the trained model (docs/gpu.md, "Engine settings that keep a GPU busy"):

- ``compile``: Inductor generates fused kernels for the forward and backward passes. Fusion
  may reorder float32 sums, so the model is identical to eager's only up to rounding; on the
  CPU the test suite checks the digest after a few steps (``tests/test_performance.py``).
- ``cuda_graphs``: compile with mode ``reduce-overhead``, which captures each graph once per
  input shape and replays it; the kernels are compile's, so the same claim holds.
- ``channels_last``: the same convolutions on a different memory layout; cuDNN and oneDNN
  pick other algorithms, so equal up to rounding.
- ``bf16``: forward passes and losses in bfloat16 (8 bits of mantissa); the model differs from
  float32's. Runs compared with each other must share it (the record states it).

The gradient penalty of WGAN-GP takes a double backward, which compiled graphs do not support:
it stays eager (it calls the plain network, never the compiled one).
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, TypeVar

import torch
from torch import nn

from ..config.scenario import PerformanceConfig

M = TypeVar("M", bound=nn.Module)

COMPILE_MODES = {False: "default", True: "reduce-overhead"}
"""torch.compile's mode without and with ``cuda_graphs`` (``reduce-overhead`` captures CUDA graphs)."""


def record(settings: PerformanceConfig) -> dict[str, Any]:
    """The settings in effect, for the run's ``engine_settings`` (with compile's mode where it compiles)."""
    active = settings.active()
    compiles = active["compile"] or active["cuda_graphs"]
    return {**active, "compile_mode": COMPILE_MODES[active["cuda_graphs"]] if compiles else None}


def place(network: M, settings: PerformanceConfig) -> M:
    """``network`` in the memory format the settings ask for (in place, returned)."""
    if settings.channels_last:
        network.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's stubs omit it
    return network


def images(batch: torch.Tensor, settings: PerformanceConfig) -> torch.Tensor:
    """A batch of images in the memory format the settings ask for."""
    return batch.contiguous(memory_format=torch.channels_last) if settings.channels_last else batch


def compiled(module: nn.Module, settings: PerformanceConfig) -> nn.Module:
    """``module`` compiled as the settings ask (itself when they do not); its parameters stay the module's own."""
    if not (settings.compile or settings.cuda_graphs):
        return module
    return torch.compile(module, mode=COMPILE_MODES[bool(settings.cuda_graphs)])  # type: ignore[return-value]


def autocast(settings: PerformanceConfig, device: torch.device) -> ContextManager[Any]:
    """bfloat16 autocast on ``device`` when the settings ask for it, else nothing."""
    if not settings.bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
