"""Communication engines behind one small interface (see :mod:`suite.train.engines.base`).

Each engine registers its name, launchers and capabilities in :mod:`suite.config.registry`.
"""

from __future__ import annotations

from pathlib import Path

from ...config.registry import ENGINES
from ...config.scenario import Run
from ..launchenv import LaunchInfo
from .base import Engine


def create_engine(run: Run, launch: LaunchInfo, run_dir: Path) -> Engine:
    """The engine of ``run`` with its settings; not started yet (call :meth:`Engine.start`).

    ``run_dir`` receives what the engine writes itself: Horovod's timeline and autotune log,
    DeepSpeed's communication log.
    """
    engine_class: type[Engine] = ENGINES[run.engine].load()
    return engine_class.from_run(run, launch, run_dir)
