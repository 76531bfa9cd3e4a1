"""What every sub-command shares: the command's logger, the bad-input error and the exit codes."""

from __future__ import annotations

import logging

log = logging.getLogger("suite")


DIVERGED_EXIT_CODE = 3
"""``suite run``'s exit code when no run failed but at least one diverged: the benchmark worked, a model did not."""


class UsageError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""
