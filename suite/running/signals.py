"""The signals that stop ``suite run`` (:data:`STOPPING_SIGNALS`), raised as :class:`Stop` inside a
:class:`SignalGuard`, which later signals only hurry."""

from __future__ import annotations

import signal
from typing import Any

from ..records.failures import signal_name

STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals that stop ``suite run`` as :class:`Stop` (SIGHUP: the terminal or ssh session it ran in is gone)."""


class Stop(BaseException):
    """``suite run`` received a signal that stops it (:data:`STOPPING_SIGNALS`)."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = signum


class SignalGuard:
    """Within it, the first SIGTERM, SIGINT or SIGHUP raises :class:`Stop` in the main thread; later ones only
    cut a checkpoint's grace short (``hurry``), so that stopping the ranks is never interrupted."""

    def __init__(self) -> None:
        self.hurry = False
        self._received: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if self._received is None:
            self._received = signum
            raise Stop(signum)
        self.hurry = True

    def __enter__(self) -> "SignalGuard":
        for signum in STOPPING_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
