"""Quality over training time, and the time at which a target was first met.

A *curve point* is the quality of a generator snapshot with the training-window time, the
generator step and the real training images consumed (``images``, see :mod:`suite.config.plan`) at
which it was taken; every point of a run is scored with the same feature
network and sample count, so a curve (and the report's plot) never mixes them. The *time to
target* (MLPerf's time to train) is read between the two curve points that bracket the first
crossing of ``metrics.target``: interpolated linearly in the log of the score against the clock
(:func:`crossing`), with the bracket's clocks kept beside it (``clock_lo``, ``clock_hi``), since a
curve of a few points knows the time no better than their spacing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...config.sections import QualityTarget


METRIC_FIELDS = {"fid": "fid", "kid": "kid_mean"}
"""Target metric name -> field of a quality block / curve point."""


def curve_point(quality: dict[str, Any], clock_s: float, step: int, images: int | None = None) -> dict[str, Any]:
    """One point of a quality curve from a quality block (see :mod:`suite.measure.metrics.evaluate`)."""
    return {
        "clock_s": clock_s,
        "step": step,
        "images": images,
        "fid": quality.get("fid"),
        "kid_mean": quality.get("kid_mean"),
        "kid_std": quality.get("kid_std"),
        "is_mean": quality.get("is_mean"),
        "features": quality["features"],
        "n": quality["n"],
    }


def meets(point: dict[str, Any], target: QualityTarget) -> bool:
    """Whether a curve point meets ``target`` (a :class:`suite.config.scenario.QualityTarget`)."""
    value = point.get(METRIC_FIELDS[target.metric])
    return value is not None and value <= target.value


def crossing(before: tuple[float, float], after: tuple[float, float], target: float) -> float:
    """The clock at which the score falls to ``target`` between two curve points ``(clock, score)``, ``before``
    above the target and ``after`` at or below it.

    Linear in the log of the score against the clock (a score that falls by a constant factor per second is a
    straight line; FID and KID fall roughly so while a GAN learns), and linear in the score itself where a score or
    the target is not positive (an unbiased KID can be). Always within ``[before clock, after clock]``.
    """
    (t0, s0), (t1, s1) = before, after
    if min(s0, s1, target) > 0:
        s0, s1, target = math.log(s0), math.log(s1), math.log(target)
    if s0 <= s1:  # not a fall (cannot happen with before above and after at or below the target): the later clock
        return t1
    fraction = min(max((s0 - target) / (s0 - s1), 0.0), 1.0)
    return t0 + fraction * (t1 - t0)


def time_to_target(curve: list[dict[str, Any]], target: QualityTarget, features: str) -> dict[str, Any]:
    """When ``curve`` first met ``target``, or that it did not, with the best value reached.

    Only points scored with ``features`` count (a target holds under one network). ``clock_s`` is interpolated
    (:func:`crossing`) between the last point above the target and the first point that meets it, whose clocks are
    ``clock_lo`` and ``clock_hi``: the crossing lies in that bracket, and the report's interval carries it. Where
    the first point already meets the target nothing is known before it: ``clock_s`` is its clock (an upper
    bound) and the bracket starts at 0, the window's start. ``step`` is the step of the first point that meets it.
    """
    field = METRIC_FIELDS[target.metric]
    points = sorted((p for p in curve if p.get("features") == features and p.get(field) is not None), key=lambda p: p["clock_s"])
    index = next((i for i, p in enumerate(points) if meets(p, target)), None)
    first = points[index] if index is not None else None
    best = min((p[field] for p in points), default=None)
    clock = lo = hi = None
    if index is not None:
        hi = points[index]["clock_s"]
        if index == 0:
            clock, lo = hi, 0.0
        else:
            before = points[index - 1]
            lo = before["clock_s"]
            clock = crossing((lo, before[field]), (hi, points[index][field]), target.value)
    return {
        "metric": target.metric,
        "target": target.value,
        "features": features,
        "n": points[0]["n"] if points else None,
        "reached": first is not None,
        "clock_s": clock,
        "clock_lo": lo,
        "clock_hi": hi,
        "step": first["step"] if first else None,
        "best": best,
        "points": len(points),
    }
