"""The registry entry of ``label_partitioned`` (torch-free: the suite reads it to validate scenarios and read
records), loaded by :mod:`suite.config.registry` as a plugin's entry point is."""

from __future__ import annotations

from typing import Any

from ...config.entries import CLASS_GROUPS, GPU_CHECK_DATASET, StrategyEntry
from ...config.plan import DATASET_CLASSES, per_class_step_images
from .record import LabelPartitionedRecord

CLASS_GAN_LOSSES = ("bce", "wgan-gp")
"""The losses it trains with; the GPU check runs each."""


def _one_per_class(procs: int, classes: int) -> bool:
    """One rank per class GAN: nothing is summed across ranks."""
    return procs <= classes


def _gpu_check(gpus: int) -> list[dict[str, Any]]:
    classes = DATASET_CLASSES[GPU_CHECK_DATASET] or 1
    procs = [p for p in sorted({1, gpus}) if p <= classes or p % classes == 0]
    return [{"loss": loss, "procs": procs} for loss in CLASS_GAN_LOSSES]


ENTRIES = (
    StrategyEntry(
        "label_partitioned",
        "suite.strategies.label_partitioned.strategy:LabelPartitioned",
        CLASS_GAN_LOSSES,
        engines=("horovod", "torch", "mpi"),
        splits=True,
        cost_model=CLASS_GROUPS,
        paper_models={"bce": "Distributed DC-CGAN", "wgan-gp": "W-CGAN"},
        step_images=per_class_step_images,
        partitions_classes=True,
        placement_invariant=_one_per_class,
        gpu_check=_gpu_check,
        record_part=LabelPartitionedRecord,
    ),
)
"""The strategy this package defines."""
