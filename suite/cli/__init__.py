"""The ``suite`` command: run | report | tune | compare | score | sample | ruler | schema | env | gpu-check | jobscript | project | probe.

Exit codes are defined once, in :mod:`.exitcodes`. Bad input, and a file the command cannot write (a full,
read-only or vanished disk), is one clear line on stderr and exit code 2. The sub-commands live in :mod:`.running`,
:mod:`.analysis` and :mod:`.quality`, their arguments in :mod:`.parser`; :func:`main` is the console script.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn

from ..config.envsettings import check_environment
from ..config.escape import one_line, terminal
from ..running.processes import leave_now
from ..running.sweep import TIMESTAMP_FORMAT
from .common import TIMESTAMPED_FORMAT, UsageError, log
from .exitcodes import ExitCode
from .parser import build_parser


def _bad_input_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean bad input (exit 2, one line): a scenario, a file, a launcher, a dataset not on disk, a ruler
    missing or not the pinned file. Their modules import no torch (evaluated only once an error is raised)."""
    from ..config.scenario import ScenarioError
    from ..config.yamlfile import YamlError
    from ..gan.data import DataError
    from ..measure.metrics.rulers import RulerError
    from ..running.commands import LaunchError

    return (UsageError, ScenarioError, YamlError, LaunchError, DataError, RulerError, FileNotFoundError, ValueError)


class _Escaping(logging.Formatter):
    """Log lines as data on a terminal: a record's or file's words never carry a control or bidirectional character
    (:func:`suite.config.escape.terminal`), and the words quoted in a message (its arguments) never break its line
    (:func:`suite.config.escape.one_line`)."""

    def format(self, record: logging.LogRecord) -> str:
        if isinstance(record.args, tuple):  # a record's words quoted in a message stay on its line
            record.args = tuple(one_line(a) if isinstance(a, (str, os.PathLike, BaseException)) else a for a in record.args)
        return terminal(super().format(record))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    timestamped = getattr(args, "timestamped", False)
    handler = logging.StreamHandler()
    handler.setFormatter(_Escaping(TIMESTAMPED_FORMAT if timestamped else "%(message)s", TIMESTAMP_FORMAT))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, handlers=[handler])
    logging.captureWarnings(True)  # a library's warning (matplotlib's missing glyph) quotes a record's words: escaped too
    try:
        check_environment()  # every SUITE_* variable, before anything runs (exit 2 naming each wrong one)
        return args.func(args)
    except _bad_input_errors() as error:  # evaluated once an error is raised: by then its module is imported
        if args.verbose:
            log.exception("details")
        print(f"error: {one_line(error)}", file=sys.stderr)  # a record's or file's words: one line, no control character
        return ExitCode.BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted; finished runs keep their results (rerun with --resume)", file=sys.stderr)
        return ExitCode.INTERRUPTED_SIGINT
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:  # a full, read-only or vanished disk: one line naming the file
        from ..records.results import WriteFailed

        if args.verbose:
            log.exception("details")
        text = str(error) if isinstance(error, WriteFailed) or not error.filename else f"{error.filename}: {error.strerror}"
        print(f"error: {one_line(text)}", file=sys.stderr)
        return ExitCode.BAD_INPUT


def console() -> NoReturn:
    """The ``suite`` command: :func:`main`, then the process ends at once (:func:`suite.running.processes.leave_now`;
    a command that imported torch would otherwise spend a second finalizing the interpreter)."""
    leave_now(main())
