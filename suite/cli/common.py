"""What every sub-command shares: the command's logger, the bad-input error and the exit codes."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("suite")


DIVERGED_EXIT_CODE = 3
"""``suite run``'s exit code when no run failed but at least one diverged: the benchmark worked, a model did not."""


class UsageError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""


TIMESTAMPED_FORMAT = "%(asctime)s %(message)s"
"""The log lines of a command that runs runs (``suite run``): each begins with its local time."""

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
"""The time at the start of those lines, to the second."""


def stamped(text: str) -> str:
    """``text`` as a timestamped log line reads (for lines printed past the logger, above a progress bar)."""
    return f"{time.strftime(TIMESTAMP_FORMAT)} {text}"
