"""Communication engines behind one small interface (see :mod:`suite.engines.base`)."""

from __future__ import annotations

from pathlib import Path

from ..launchenv import LaunchInfo
from ..scenario import Run
from .base import CommStats, Engine, Group, Replica

ENGINE_NAMES = ("horovod", "torch", "mpi", "deepspeed")


def create_engine(run: Run, launch: LaunchInfo, run_dir: Path) -> Engine:
    """The engine of ``run`` with its settings; not started yet (call :meth:`Engine.start`).

    ``run_dir`` receives what the engine writes itself: Horovod's timeline and autotune log,
    DeepSpeed's communication log.
    """
    name = run.engine
    if name == "horovod":
        from .horovod import HorovodEngine

        return HorovodEngine(run.horovod, run_dir, run.trace, groups=run.strategy == "label_partitioned")  # the one that splits
    if name == "torch":
        from .torch_dist import TorchEngine

        return TorchEngine(launch, run.ddp)
    if name == "mpi":
        from .mpi import MPIEngine

        return MPIEngine()
    if name == "deepspeed":
        from .deepspeed import DeepSpeedEngine

        return DeepSpeedEngine(launch, run.deepspeed.zero_stage, run.deepspeed.config, run_dir if run.trace else None)
    raise ValueError(f"unknown engine '{name}'; choose one of {', '.join(ENGINE_NAMES)}")


__all__ = ["CommStats", "Engine", "Group", "Replica", "create_engine", "ENGINE_NAMES"]
