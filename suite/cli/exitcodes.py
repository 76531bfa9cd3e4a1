"""Every exit code of the ``suite`` command, defined once: one number per meaning, and which sub-commands use it.

A code means the same thing wherever it appears, and two meanings never share a code: ``suite run``'s
"a run diverged" (3) and ``suite gate``'s "too noisy to tell" (5) are different numbers. The CLI docs
(docs/index.md, "Exit codes") show :data:`EXIT_CODES` as a table; a test checks that the lower layers
that record or return a code (:mod:`suite.analysis.gate`, :mod:`suite.running.gpucheck`, :mod:`suite.running.sweep`) agree with it.
"""

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
    INTERRUPTED_SIGINT = 128 + signal.SIGINT
    INTERRUPTED_SIGTERM = 128 + signal.SIGTERM


MEANINGS = {
    ExitCode.OK: "done: every run ok, the gate passed, every check passed",
    ExitCode.FAILED: "what was measured or checked failed: a run failed, a regression (gate FAIL, compare), a broken ruler "
    "or GPU check",
    ExitCode.BAD_INPUT: "bad input or a file that cannot be written, told in one line; nothing was measured",
    ExitCode.DIVERGED: "no run failed, but a model diverged: the benchmark worked, a model did not",
    ExitCode.NO_GPU: "skipped: no CUDA GPU is visible",
    ExitCode.INCONCLUSIVE: "too noisy to tell PASS from FAIL, or the host was busy: rerun on a quiet machine",
    ExitCode.INTERRUPTED_SIGINT: "stopped by SIGINT (Ctrl-C): finished runs keep their results; --resume continues",
    ExitCode.INTERRUPTED_SIGTERM: "stopped by SIGTERM (a scheduler, kill): as SIGINT",
}
"""Each code's one meaning."""

EVERY = "every sub-command"

EXIT_CODES: dict[str, tuple[ExitCode, ...]] = {
    "run": (ExitCode.FAILED, ExitCode.DIVERGED, ExitCode.INTERRUPTED_SIGINT, ExitCode.INTERRUPTED_SIGTERM),
    "gate": (ExitCode.FAILED, ExitCode.INCONCLUSIVE),
    "compare": (ExitCode.FAILED,),
    "gpu-check": (ExitCode.FAILED, ExitCode.NO_GPU),
    "ruler list": (ExitCode.FAILED,),
}
"""The codes each sub-command can end with besides OK and BAD_INPUT, which every sub-command can."""

GATE_VERDICTS = {"PASS": ExitCode.OK, "FAIL": ExitCode.FAILED, "INCONCLUSIVE": ExitCode.INCONCLUSIVE}
"""``suite gate``'s verdict -> its exit code (:mod:`suite.analysis.paired`'s verdicts)."""


def users(code: ExitCode) -> list[str]:
    """The sub-commands that can end with ``code`` (``[EVERY]`` for OK and BAD_INPUT)."""
    if code in (ExitCode.OK, ExitCode.BAD_INPUT):
        return [EVERY]
    return [name for name, codes in EXIT_CODES.items() if code in codes]


def markdown_table() -> str:
    """The codes as a markdown table: code, name, meaning, the sub-commands that end with it."""
    lines = ["| code | name | meaning | sub-commands |", "|---|---|---|---|"]
    for code in ExitCode:
        who = ", ".join(name if name == EVERY else f"`suite {name}`" for name in users(code))
        lines.append(f"| {int(code)} | `{code.name}` | {MEANINGS[code]} | {who} |")
    return "\n".join(lines)
