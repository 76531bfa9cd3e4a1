"""Which ok records a comparison (`suite compare`, the gate) can trust: a throughput that is a measurement, and spreads
in range of the values they qualify (:func:`record_problem`); a record that fails is ``INVALID``, a failure, never
"within noise"."""

from __future__ import annotations

import math
from typing import Any

from ..records.record import Record

MAX_INTERVAL_WIDTH = 0.75
"""The widest ``images_per_s_ci95`` (high end minus low end) over ``images_per_s`` a baseline may hold: 0.75, half
again the widest any committed record holds (0.48). Wider, a twice-slower run would pass as "within noise"."""
MAX_STEP_CI = 0.5
"""The largest ``telemetry.step_ci95`` (the half-width of the mean step time's 95 % interval) over ``step_mean``: twice
the largest of any committed record (0.23)."""
MAX_KID_STD = 2.0
"""The largest ``quality.kid_std`` (over KID's subsets) over ``|kid_mean|``, or over 1 % of ``untrained_kid`` where
that is larger (a KID near zero may spread more than its own size): twice the largest committed (0.86)."""
KID_STD_FLOOR = 0.01
"""The share of the untrained generator's KID below which a KID's spread is measured against it, not the KID."""
MIN_IMAGES_PER_S = 0.01
"""The least throughput an ok run can have measured: one image every 100 s (the slowest real run, a CPU rank on
ImageNet-sized images, trains several a second). Below it a record's ``images_per_s`` is not a measurement."""


def throughput_problem(record: Record) -> str | None:
    """Why an ok ``record`` has no throughput to compare, or None: ``images_per_s`` missing, not finite or below
    :data:`MIN_IMAGES_PER_S`, or its interval ``images_per_s_ci95`` not one of it (:func:`interval_problem`)."""
    value = record.images_per_s
    if value is None:
        return "images_per_s is missing"
    if finite_number(value) is None or value <= 0:
        return f"images_per_s is {value!r}, not a throughput"
    if value < MIN_IMAGES_PER_S:
        return f"images_per_s is {value:.3g}, below the floor of {MIN_IMAGES_PER_S:g} images/s of a measured run"
    return interval_problem(value, record.images_per_s_ci95)


def interval_problem(value: float, ci: list[float | None] | None) -> str | None:
    """Why ``ci`` is not a noise interval of the throughput ``value``, or None (no interval is none to check): each end
    finite (the suite writes null for an upper end it could not bound: the steps were too noisy to compare), low
    not above high, the value inside, and no wider than the value itself (an interval of [-1e18, 1e18] would make
    any change "within noise")."""
    if not ci:
        return None
    lo, hi = (finite_number(end) for end in ci)
    if lo is None or hi is None:
        return f"images_per_s_ci95 {ci!r} has an end that is not a finite number: its throughput cannot be compared"
    if lo > hi:
        return f"images_per_s_ci95 [{lo:.4g}, {hi:.4g}] is inverted (its low end above its high end)"
    if not lo <= value <= hi:
        return f"images_per_s_ci95 [{lo:.4g}, {hi:.4g}] does not hold images_per_s {value:.4g}"
    if hi - lo > MAX_INTERVAL_WIDTH * value:
        return (
            f"images_per_s_ci95 [{lo:.4g}, {hi:.4g}] is wider than {MAX_INTERVAL_WIDTH:g} times its estimate {value:.4g}: "
            "not a measurement to compare"
        )
    return None


def spread_problem(record: Record) -> str | None:
    """Why a spread field of an ok ``record`` that :func:`measure` reads is out of range for the value it qualifies,
    or None: ``telemetry.step_ci95`` negative, not finite or over :data:`MAX_STEP_CI` of ``step_mean``;
    ``quality.kid_std`` negative, not finite or over :data:`MAX_KID_STD` of ``|kid_mean|`` (or of
    :data:`KID_STD_FLOOR` of ``untrained_kid``). A field not recorded is none to check."""
    t, q = record.telemetry, record.quality
    if t is not None and t.step_ci95 is not None:
        half, mean = finite_number(t.step_ci95), finite_number(t.step_mean)
        if half is None or half < 0 or mean is None or mean <= 0:
            return f"telemetry.step_ci95 {t.step_ci95!r} (step_mean {t.step_mean!r}) is not a half-width of a mean step time"
        if half > MAX_STEP_CI * mean:
            return (
                f"telemetry.step_ci95 {half:.4g} is over {MAX_STEP_CI:g} times step_mean {mean:.4g}: not a measurement to compare"
            )
    if q is not None and q.kid_std is not None:
        std, kid = finite_number(q.kid_std), finite_number(q.kid_mean)
        if std is None or std < 0 or kid is None:
            return f"quality.kid_std {q.kid_std!r} (kid_mean {q.kid_mean!r}) is not a spread of a KID"
        scale = max(abs(kid), KID_STD_FLOOR * (finite_number(q.untrained_kid) or 0.0))
        if std > MAX_KID_STD * scale:
            return f"quality.kid_std {std:.4g} is over {MAX_KID_STD:g} times its KID's size {scale:.4g}: not a measurement to compare"
    return None


def record_problem(record: Record) -> str | None:
    """Why an ok ``record`` cannot be compared (:func:`throughput_problem`, then :func:`spread_problem`), or None."""
    return throughput_problem(record) or spread_problem(record)


def finite_number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None
