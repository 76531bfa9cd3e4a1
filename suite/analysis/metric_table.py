"""The speed and quality metrics runs are compared on: one table, read by ``suite compare`` and the regression gate.

Each :class:`Metric` says which way is better, the worsening ``suite compare`` accepts by default, what it is, and,
for a metric read straight from one record field, that field (``path``) and how the gate tests it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    """One compared quantity: which way is better, its default tolerance, and what it is (shown under the table)."""

    name: str
    higher_is_better: bool
    tolerance: float
    """Default: the worsening accepted, in % of the baseline (percentage points when ``absolute``)."""
    doc: str
    absolute: bool = False
    path: str = ""
    """The record field it is read from (dotted), where it is one field ("" where it is derived from several runs)."""
    count: bool = False
    """A count (bytes): compared as a relative change, not as a log ratio of times."""
    required: bool = False
    """Every ok run records it (the throughput): a run without it is a FAIL (B) or INCONCLUSIVE (A), never skipped."""

    def problem(self, value: Any) -> str | None:
        """Why ``value`` cannot be compared (missing where required, not finite, zero or negative where a ratio of
        it is taken, a negative count), or None; a value missing where not required is not compared at all."""
        if value is None:
            return f"{self.path} is missing" if self.required else None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return f"{self.path} is {value!r}, not a number"
        if value < 0 or (value == 0 and not self.count):
            return f"{self.path} is {value!r}, not a {'count' if self.count else 'rate or a time'}"
        return None


METRICS = {
    m.name: m
    for m in (
        Metric(
            "images_per_s",
            True,
            10.0,
            "training images per second of the window, all ranks (interval: images_per_s_ci95)",
            path="images_per_s",
            required=True,
        ),
        Metric(
            "step_p50",
            False,
            10.0,
            "median window step, seconds (interval: step_ci95 relative to step_mean)",
            path="telemetry.step_p50",
        ),
        Metric("speedup", True, 10.0, "strong scaling T(1)/T(P), P > 1; efficiency S/P changes by the same fraction"),
        Metric("efficiency", True, 10.0, "weak scaling T(1)/T(P), P > 1"),
        Metric("comm_share", False, 5.0, "share of a step blocked on communication (0 to 1), tolerance in points", absolute=True),
        Metric("comm_bytes", False, 1.0, "collective payload in the training window, all ranks", path="comm.bytes", count=True),
        Metric("fid", False, 10.0, "FID, same feature network and sample count only"),
        Metric("kid", False, 10.0, "KID mean, same feature network and sample count only (interval: ± kid_std)"),
    )
}
"""Every compared metric by name."""

GATED = ("images_per_s", "step_p50", "comm_bytes")
"""The metrics the regression gate tests, paired, on alternating runs (one record field each)."""
