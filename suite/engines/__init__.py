"""Communication engines behind one small interface (see :mod:`suite.engines.base`)."""

from __future__ import annotations

from ..launchenv import LaunchInfo
from .base import CommStats, Engine, Group, Replica

ENGINE_NAMES = ("horovod", "torch", "mpi", "deepspeed")


def create_engine(name: str, launch: LaunchInfo, deepspeed=None) -> Engine:
    """The engine called ``name``; not started yet (call :meth:`Engine.start`).

    ``deepspeed`` is the run's :class:`suite.scenario.DeepSpeedConfig` (ZeRO stage, extra config).
    """
    if name == "horovod":
        from .horovod import HorovodEngine

        return HorovodEngine()
    if name == "torch":
        from .torch_dist import TorchEngine

        return TorchEngine(launch)
    if name == "mpi":
        from .mpi import MPIEngine

        return MPIEngine()
    if name == "deepspeed":
        from .deepspeed import DeepSpeedEngine

        return DeepSpeedEngine(launch, deepspeed.zero_stage if deepspeed else 0, deepspeed.config if deepspeed else None)
    raise ValueError(f"unknown engine '{name}'; choose one of {', '.join(ENGINE_NAMES)}")


__all__ = ["CommStats", "Engine", "Group", "Replica", "create_engine", "ENGINE_NAMES"]
