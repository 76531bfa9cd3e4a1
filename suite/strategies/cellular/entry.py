"""The registry entry of ``cellular`` (torch-free: the suite reads it to validate scenarios and read records), loaded
by :mod:`suite.config.registry` as a plugin's entry point is. Its traits in :mod:`.rules` and its section's class in
:mod:`.settings` are named as ``lazy("module:function")`` and ``"module:Class"``: those modules read the scenario's
sections, which read the registry."""

from __future__ import annotations

from typing import Any

from ...config.entries import CARTESIAN, CELLS, StrategyEntry, lazy
from .record import CellularRecord

_RULES = "suite.strategies.cellular.rules"
"""The module of its section's rules, its grids', its step's size and its checkpoints' footprint."""


def _always(procs: int, classes: int) -> bool:
    return True


def _gpu_check(gpus: int) -> list[dict[str, Any]]:
    return [
        {
            "loss": "mustangs",
            "procs": sorted({1, gpus}),
            "grid": [1, max(2, gpus)],
            "cellular": {"batches_per_iteration": 1, "fitness_samples": 64, "mixture_samples": 64},
        }
    ]


ENTRIES = (
    StrategyEntry(
        "cellular",
        "suite.strategies.cellular.strategy:CellularStrategy",
        ("bce", "minimax", "mse", "heuristic", "mustangs"),
        default_loss="mustangs",
        requires=frozenset({CARTESIAN}),
        settings="cellular",
        settings_class="suite.strategies.cellular.settings:CellularConfig",
        check_settings=lazy(f"{_RULES}:check_cellular"),
        scenario_rules=lazy(f"{_RULES}:check_mixture_space"),
        scenario_reads=frozenset({"metrics", "dataset"}),
        check_entry=lazy(f"{_RULES}:check_cellular_spec"),
        step_settings=lazy(f"{_RULES}:step_settings"),
        footprint=lazy(f"{_RULES}:cellular_footprint"),
        record_part=CellularRecord,
        cost_model=CELLS,
        performance=False,  # populations of networks swapped every iteration: a compiled graph per genome
        step_images=lazy(f"{_RULES}:cellular_step_images"),
        grid=True,
        placement_invariant=_always,  # every cell trains alone, on its own seeds
        critic_norms=("auto", "batch"),  # it keeps the tables' BatchNorm discriminator
        steering="cellular.mixture_features",  # its mixture weights evolve under the steering network's FID
        speedups_baseline="paper001_cellular_speedups.csv",
        gpu_check=_gpu_check,
    ),
)
"""The strategy this package defines."""
