"""The settings of ``suite gate`` and its one-line error: light (no numpy, no YAML), so that ``suite --help`` shows the
gate's defaults from here without loading the gate (:mod:`suite.tools.gate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config.safe_text import SAFE_NAME


class GateError(Exception):
    """Bad input or a failed side: one line, exit 2."""


@dataclass
class Settings:
    """The gate's options (see ``suite gate --help``)."""

    scenario: Path
    out: Path
    baseline: str | None = None
    threshold: float = 10.0
    """Percent: a change worse than this is a regression."""
    alpha: float = 0.05
    min_pairs: int = 5
    max_pairs: int = 12
    max_minutes: float = 15.0
    timeout: float = 300.0
    """Seconds per workload run."""
    allow_dirty: bool = False
    inject_slowdown: float = 0.0
    score_samples: int = 256
    max_foreign_cores: float = 0.05
    """A pair during which other processes kept more than this many cores busy is discarded and run again. In the
    error-rate measurement (reports/gate) quiet runs saw at most 0.016 cores of others' work, and runs with 0.16 to
    0.25 cores were 20 to 35 % slower on a 2-core host."""
    history: Path | None = None
    """The asv results folder each run's paired changes are appended to (:mod:`suite.tools.gate_history`); None: none.
    ``suite gate`` appends to ``.asv/results`` unless told ``--no-history``."""
    machine: str | None = None
    """The machine's name in the history (asv's ``--machine``); None: this host's name."""

    def check(self) -> None:
        """Refuse settings that cannot give a verdict: one line naming the option."""
        if not self.scenario.is_file():
            raise GateError(f"--scenario: no file {self.scenario}")
        if not 0 < self.threshold < 100:
            raise GateError(f"--threshold: a percentage between 0 and 100, got {self.threshold}")
        if not 0 < self.alpha < 0.5:
            raise GateError(f"--alpha: between 0 and 0.5, got {self.alpha}")
        if self.min_pairs < 5:
            raise GateError(
                f"--min-pairs: at least 5 (below 5 pairs Wilcoxon's test cannot reach p < 0.05), got {self.min_pairs}"
            )
        if self.max_pairs < self.min_pairs:
            raise GateError(f"--max-pairs ({self.max_pairs}) is below --min-pairs ({self.min_pairs})")
        if self.max_minutes <= 0 or self.timeout <= 0:
            raise GateError("--max-minutes and --timeout must be positive")
        if self.max_foreign_cores < 0:
            raise GateError(f"--max-foreign-cores: zero or more, got {self.max_foreign_cores}")
        if self.machine is not None and not SAFE_NAME.fullmatch(self.machine):
            raise GateError(
                f"--machine: {self.machine[:100]!r} is not a safe name (ASCII letters, digits, '.', '_', '-', starting "
                "with a letter or digit, at most 100 characters)"
            )
        if not 0 <= self.inject_slowdown < 10:
            raise GateError(f"--inject-slowdown: a fraction of step time in [0, 10), got {self.inject_slowdown}")
