"""Every exit code of the ``suite`` command, defined once: one number per meaning, and which sub-commands use it.

A code means the same thing wherever it appears, and two meanings never share a code: ``suite run``'s
"a run diverged" (3) and ``suite gate``'s "too noisy to tell" (5) are different numbers. The CLI docs
(docs/reference/cli.md, "Exit codes", generated) show :data:`EXIT_CODES` as a table. The codes themselves are
:class:`suite.config.exitcodes.ExitCode`, which the lower layers that return a code use too.
"""

from __future__ import annotations

from ..config.exitcodes import MEANINGS, ExitCode

EVERY = "every sub-command"

EXIT_CODES: dict[str, tuple[ExitCode, ...]] = {
    "run": (
        ExitCode.FAILED,
        ExitCode.DIVERGED,
        ExitCode.INTERRUPTED_SIGHUP,
        ExitCode.INTERRUPTED_SIGINT,
        ExitCode.INTERRUPTED_SIGTERM,
    ),
    "gate": (ExitCode.FAILED, ExitCode.INCONCLUSIVE),
    "gate-history show": (ExitCode.FAILED, ExitCode.INCONCLUSIVE),
    "compare": (ExitCode.FAILED,),
    "gpu-check": (ExitCode.FAILED, ExitCode.NO_GPU),
    "ruler list": (ExitCode.FAILED,),
}
"""The codes each sub-command can end with besides OK and BAD_INPUT, which every sub-command can."""


def users(code: ExitCode) -> list[str]:
    """The sub-commands that can end with ``code`` (``[EVERY]`` for OK and BAD_INPUT)."""
    if code in (ExitCode.OK, ExitCode.BAD_INPUT):
        return [EVERY]
    return [name for name, codes in EXIT_CODES.items() if code in codes]


def exit_code_table() -> str:
    """The codes as a markdown table: code, name, meaning, the sub-commands that end with it."""
    lines = ["| code | name | meaning | sub-commands |", "|---|---|---|---|"]
    for code in ExitCode:
        who = ", ".join(name if name == EVERY else f"`suite {name}`" for name in users(code))
        lines.append(f"| {int(code)} | `{code.name}` | {MEANINGS[code]} | {who} |")
    return "\n".join(lines)
