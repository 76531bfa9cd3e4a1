"""``python -m suite.worker RUN_DIR``: the short name of the per-rank entry point, for users' own launchers.

The suite's launchers start :mod:`suite.running.worker` itself; this module only forwards to it.
"""

from .running.worker import run_and_exit

if __name__ == "__main__":
    run_and_exit()
