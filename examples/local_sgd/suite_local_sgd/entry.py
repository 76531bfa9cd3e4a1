"""The registry entry of ``local_sgd``, its scenario section and its record part (no torch: the suite reads this to
validate scenarios and read records).

The suite finds :data:`ENTRY` through the entry point ``gan_scaling_suite.strategies`` of this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from suite.config.entries import ONE_GROUP, StrategyEntry
from suite.config.plan import one_model_step_images
from suite.records.fields import Positive, column


@dataclass(frozen=True)
class LocalSGDConfig:
    """Scenario section ``local_sgd``: how often the ranks average their models."""

    average_every: int = 4
    """Generator steps between two averagings of the ranks' models (1: every step, data-parallel averaging of models)."""


def check(section: LocalSGDConfig, path: str, fail: Callable[[str, str], Any]) -> None:
    """The section's rules beyond its types."""
    if section.average_every < 1:
        fail(f"{path}.average_every", f"must be at least 1, got {section.average_every}")


@dataclass(frozen=True)
class LocalSGDRecord:
    """The fields ``local_sgd`` adds at the top level of its runs' records (its entry's ``record_part``): checked as
    a record is read, held as ``Record.strategy_part``, and a column of the report's flat table where marked."""

    allreduce_every: Positive | None = column()
    """Generator steps between two averagings of the replicas' models (its ``local_sgd.average_every``): one
    allreduce of the model every so many steps, which the projection's one-group cost model reads."""


def steps_per_allreduce(part: LocalSGDRecord | None) -> int:
    """Steps between two allreduces of a run's one group, from its record part (1 where the record has none)."""
    return (part.allreduce_every or 1) if part is not None else 1


def _gpu_check(gpus: int) -> list[dict[str, Any]]:
    return [{"loss": "bce", "procs": sorted({1, gpus}), "local_sgd": {"average_every": 2}}]


ENTRY = StrategyEntry(
    "local_sgd",
    "suite_local_sgd.strategy:LocalSGD",
    ("bce", "wgan-gp"),
    data_parallel=True,  # the global batch is split over the ranks, as under data_parallel
    cost_model=ONE_GROUP,  # one group that allreduces the model every average_every steps (the record says k)
    record_part=LocalSGDRecord,
    steps_per_allreduce=steps_per_allreduce,
    settings="local_sgd",
    settings_class=LocalSGDConfig,
    check_settings=check,
    step_images=one_model_step_images,
    replicas_differ=True,  # between averagings every rank has a model of its own
    gpu_check=_gpu_check,
)
