"""The step's ``performance`` settings: compile, CUDA graphs, channels-last, bf16 autocast.

What each changes in the trained model, and within which tolerance, is in docs/gpu.md ("Steps that
keep a GPU busy"). The gradient penalty of WGAN-GP takes a double backward, which
compiled graphs do not support: it stays eager (it calls the plain network, never the compiled one).
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, TypeVar

import torch
from torch import nn

from ..config.scenario import PerformanceConfig

M = TypeVar("M", bound=nn.Module)

COMPILE_MODE = "default"
"""torch.compile's mode under ``compile`` (CUDA graphs are the captured step's own, not ``reduce-overhead``'s)."""


def record(settings: PerformanceConfig) -> dict[str, Any]:
    """The settings in effect, for the run's ``engine_settings`` (with compile's mode where it compiles)."""
    active = settings.active()
    return {**active, "compile_mode": COMPILE_MODE if active["compile"] else None}


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
    if not settings.compile:
        return module
    return torch.compile(module, mode=COMPILE_MODE)  # type: ignore[return-value]


def autocast(settings: PerformanceConfig, device: torch.device, cache: bool = True) -> ContextManager[Any]:
    """bfloat16 autocast on ``device`` when the settings ask for it, else nothing.

    ``cache=False`` keeps no casts of the weights between operations (a captured step asks it, as CUDA graphs need).
    """
    if not settings.bf16:
        return contextlib.nullcontext()
    if not cache:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, cache_enabled=False)
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
