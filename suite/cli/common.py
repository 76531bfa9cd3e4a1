"""What every sub-command shares: the command's logger, the bad-input error and the exit codes."""

from __future__ import annotations

import logging

from ..running.sweep import DIVERGED_EXIT_CODE, TIMESTAMP_FORMAT  # noqa: F401  (the exit codes of every sub-command, in one place)

log = logging.getLogger("suite")


class UsageError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""


TIMESTAMPED_FORMAT = "%(asctime)s %(message)s"
"""The log lines of a command that runs runs (``suite run``): each begins with its local time."""
