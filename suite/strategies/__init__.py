"""Training strategies: each turns (run, engine, data) into a trained model and record fields.

Every strategy is a :class:`Strategy` with four phases, called by the worker on every rank:
``setup`` (groups, networks, engine wrappers, feature networks), ``warm_up`` (the first
``train.warmup_steps`` steps of every GAN, before the training window), ``train`` (the rest,
inside the window) and ``finalize`` (gathers, hand-offs and packaging, after the window).
"""

from __future__ import annotations

from pathlib import Path

from .base import Outcome, Strategy


def create(run, engine, data, telemetry, scratch: Path) -> Strategy:
    """The strategy of ``run`` on this rank (not set up yet).

    ``scratch`` is a folder inside the run folder where strategies may exchange large results
    through the file system (see label_partitioned).
    """
    if run.strategy in ("data_parallel", "conditional"):
        from .data_parallel import DataParallel as cls
    elif run.strategy == "label_partitioned":
        from .label_partitioned import LabelPartitioned as cls
    elif run.strategy == "cellular":
        from .cellular import CellularStrategy as cls
    else:
        raise ValueError(f"unknown strategy {run.strategy!r}")
    return cls(run, engine, data, telemetry, scratch)


__all__ = ["Outcome", "Strategy", "create"]
