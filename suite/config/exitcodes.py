"""Every exit code of the ``suite`` command, defined once: one number per meaning (plain data, the lowest layer, so that
the modules that return a code, :mod:`suite.running.sweep`, :mod:`suite.running.gpucheck` and :mod:`suite.tools.gate`,
take it from here; :mod:`suite.cli.exitcodes` says which sub-commands end with which)."""

from __future__ import annotations

import enum
import signal


class ExitCode(enum.IntEnum):
    """What the ``suite`` command's exit status says (:data:`MEANINGS`)."""

    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    DIVERGED = 3
    NO_GPU = 4
    INCONCLUSIVE = 5
    INTERRUPTED_SIGHUP = 128 + signal.SIGHUP
    INTERRUPTED_SIGINT = 128 + signal.SIGINT
    INTERRUPTED_SIGTERM = 128 + signal.SIGTERM

    __str__ = int.__repr__  # the number, as Python 3.11 prints an IntEnum (3.10 printed its name)


MEANINGS = {
    ExitCode.OK: "done: every run ok, the gate passed, every check passed",
    ExitCode.FAILED: "what was measured or checked failed: a run failed, a regression (gate FAIL, the gate history's cumulative change, compare), a broken ruler "
    "or GPU check",
    ExitCode.BAD_INPUT: "bad input or a file that cannot be written, told in one line; nothing was measured",
    ExitCode.DIVERGED: "no run failed, but a model diverged: the benchmark worked, a model did not",
    ExitCode.NO_GPU: "skipped: no CUDA GPU is visible",
    ExitCode.INCONCLUSIVE: "too noisy to tell PASS from FAIL, or the host was busy: rerun on a quiet machine",
    ExitCode.INTERRUPTED_SIGHUP: "stopped by SIGHUP (its terminal or ssh session went away): as SIGINT",
    ExitCode.INTERRUPTED_SIGINT: "stopped by SIGINT (Ctrl-C): finished runs keep their results; --resume continues",
    ExitCode.INTERRUPTED_SIGTERM: "stopped by SIGTERM (a scheduler, kill): as SIGINT",
}
"""Each code's one meaning."""
