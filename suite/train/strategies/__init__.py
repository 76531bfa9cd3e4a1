"""Training strategies: each turns (run, engine, data) into a trained model and record fields.

Every strategy is a :class:`Strategy` with four phases, called by the worker on every rank:
``setup`` (groups, networks, engine wrappers, feature networks), ``warm_up`` (the first
``train.warmup_steps`` steps of every GAN, before the training window), ``train`` (the rest,
inside the window) and ``finalize`` (gathers, hand-offs and packaging, after the window).
Each strategy registers its name and what it accepts in :mod:`suite.config.registry`.
"""

from __future__ import annotations

from pathlib import Path

from ...config.registry import STRATEGIES
from ...config.scenario import Run
from ...gan.data import ImageData
from ...measure.telemetry import Telemetry
from ..engines.base import Engine
from .base import Outcome, Strategy


def create(run: Run, engine: Engine, data: ImageData, telemetry: Telemetry, scratch: Path) -> Strategy:
    """The strategy of ``run`` on this rank (not set up yet).

    ``scratch`` is a folder inside the run folder where strategies may exchange large results
    through the file system (see label_partitioned).
    """
    strategy_class: type[Strategy] = STRATEGIES[run.strategy].load()
    return strategy_class(run, engine, data, telemetry, scratch)


__all__ = ["Outcome", "Strategy", "create"]
