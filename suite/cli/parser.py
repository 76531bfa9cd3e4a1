"""The ``suite`` command's arguments: one sub-parser per sub-command, each calling its ``cmd_*`` function.

Every parser shows its options' defaults in ``--help`` (:class:`_HelpFormatter`) and takes ``-v/--verbose``
before or after the sub-command (:class:`_Parser`).
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..config.names import did_you_mean
from .args_analysis import add_compare, add_gate, add_gate_history, add_papers, add_probe, add_project, add_report, add_tune
from .args_jobscript import add_jobscript
from .args_quality import add_ruler, add_sample, add_score
from .args_running import add_gpu_check, add_run
from .quality import cmd_env
from .scenarios import cmd_scenarios, cmd_schema


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults in the help, where the help does not already say its default and there is one to say."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or isinstance(action.default, bool):
            return text
        return super()._get_help_string(action)


_VERBOSE = argparse.ArgumentParser(add_help=False)
# SUPPRESS: a sub-parser that does not see -v leaves the value the main parser set
_VERBOSE.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging")


class _Parser(argparse.ArgumentParser):
    """Every parser of the command: defaults in its help, ``-v`` among its options (sub-parsers are made alike)."""

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("parents", [_VERBOSE])
        super().__init__(**kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """A value outside an argument's choices (a sub-command, a site) is refused naming the close ones."""
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(str, action.choices))
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{did_you_mean(value, action.choices)}; choose from {choices}"
            )
        super()._check_value(action, value)


_PLAIN_COMMANDS = (
    (
        "schema",
        cmd_schema,
        "print the JSON Schema of a scenario file (editors validate scenarios with it)",
        "Print the JSON Schema of a scenario file: every section and field, its type, bounds, default and "
        "doc, the registered strategies, engines and losses as choices. docs/reference/scenario.schema.json is this output.",
    ),
    (
        "scenarios",
        cmd_scenarios,
        "list the built-in scenarios (suite run NAME runs one), each with its description",
        "List the scenarios that ship with the package, by name, each with its description: `suite run NAME` "
        "runs one (a path to a scenario file works too).",
    ),
    ("env", cmd_env, "print versions and capabilities as JSON (and the Horovod build in one line on stderr)", None),
)
"""The sub-commands without options of their own: name, handler, help and description."""


def _add_plain(sub: Any) -> None:
    """``suite schema``, ``suite scenarios`` and ``suite env``: each its help and handler."""
    for name, handler, help, description in _PLAIN_COMMANDS:
        sub.add_parser(name, help=help, description=description).set_defaults(func=handler)


_COMMANDS = (
    add_run,
    add_report,
    add_papers,
    add_tune,
    add_compare,
    add_sample,
    add_score,
    add_ruler,
    add_gate,
    add_gate_history,
    _add_plain,
    add_gpu_check,
    add_jobscript,
    add_project,
    add_probe,
)
"""Every sub-command's parser, in the order ``suite --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        parents=[],
        prog="suite",
        description="Reference benchmark suite for distributed GAN training.",
        epilog="Exit codes: docs/reference/cli.md, 'Exit codes' (0 ok, 1 failed, 2 bad input, 3 diverged, 4 no GPU, 5 inconclusive).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (also after the sub-command)")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in _COMMANDS:
        add(sub)
    return parser
