"""Training strategies: each turns (run, engine, data) into a trained model and record fields."""

from __future__ import annotations

from .base import Outcome


def train(run, engine, data, telemetry, scratch) -> Outcome:
    """Train ``run`` with its strategy on ``engine``; every rank calls this.

    ``scratch`` is a folder inside the run folder where strategies may exchange large results
    through the file system (see label_partitioned).
    """
    if run.strategy in ("data_parallel", "conditional"):
        from .data_parallel import train as strategy
    elif run.strategy == "label_partitioned":
        from .label_partitioned import train as strategy
    elif run.strategy == "cellular":
        from .cellular import train as strategy
    else:
        raise ValueError(f"unknown strategy {run.strategy!r}")
    if run.strategy == "label_partitioned":
        return strategy(run, engine, data, telemetry, scratch)
    return strategy(run, engine, data, telemetry)


__all__ = ["Outcome", "train"]
