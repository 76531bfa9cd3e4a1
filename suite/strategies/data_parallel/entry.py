"""The registry entries of ``data_parallel`` and ``conditional`` (torch-free: the suite reads them to validate
scenarios and read records), loaded by :mod:`suite.config.registry` as a plugin's entry point is."""

from __future__ import annotations

from typing import Any

from ...config.entries import ONE_GROUP, StrategyEntry
from ...config.plan import one_model_step_images

_GAN_LOSSES = ("bce", "wgan-gp")
"""The losses a model of the papers' GAN trains with."""


def _gpu_check(gpus: int) -> list[dict[str, Any]]:
    return [{"loss": "bce", "procs": sorted({1, gpus})}]


def _one_model(name: str, conditional: bool, paper_model: str) -> StrategyEntry:
    """One class training one model on every rank, conditional or not."""
    return StrategyEntry(
        name,
        "suite.strategies.data_parallel.strategy:DataParallel",
        _GAN_LOSSES,
        data_parallel=True,
        conditional=conditional,
        cost_model=ONE_GROUP,
        paper_models={"bce": paper_model},
        step_images=one_model_step_images,
        gpu_check=_gpu_check,
    )


ENTRIES = (_one_model("data_parallel", False, "DC-GAN"), _one_model("conditional", True, "DC-CGAN"))
"""The strategies this package defines, in the order the suite lists them."""
