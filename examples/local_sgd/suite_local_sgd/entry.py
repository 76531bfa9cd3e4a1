"""The registry entry of ``local_sgd`` and its scenario section (no torch: the suite reads this to validate).

The suite finds :data:`ENTRY` through the entry point ``gan_scaling_suite.strategies`` of this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from suite.config.plan import one_model_step_images
from suite.config.registry import ONE_GROUP, StrategyEntry


@dataclass
class LocalSGDConfig:
    """Scenario section ``local_sgd``: how often the ranks average their models."""

    average_every: int = 4
    """Generator steps between two averagings of the ranks' models (1: every step, data-parallel averaging of models)."""


def check(section: LocalSGDConfig, path: str, fail: Callable[[str, str], Any]) -> None:
    """The section's rules beyond its types."""
    if section.average_every < 1:
        fail(f"{path}.average_every", f"must be at least 1, got {section.average_every}")


def _gpu_check(gpus: int) -> list[dict[str, Any]]:
    return [{"loss": "bce", "procs": sorted({1, gpus}), "local_sgd": {"average_every": 2}}]


ENTRY = StrategyEntry(
    "local_sgd",
    "suite_local_sgd.strategy:LocalSGD",
    ("bce", "wgan-gp"),
    data_parallel=True,  # the global batch is split over the ranks, as under data_parallel
    cost_model=ONE_GROUP,  # one group that allreduces the model every average_every steps (the record says k)
    settings="local_sgd",
    settings_class=LocalSGDConfig,
    check_settings=check,
    step_images=one_model_step_images,
    replicas_differ=True,  # between averagings every rank has a model of its own
    gpu_check=_gpu_check,
)
