"""Quality over training time, and the time at which a target was first met.

A *curve point* is the quality of a generator snapshot with the training-window time, the
generator step and the real training images consumed (``images``, see :mod:`suite.config.plan`) at
which it was taken; every point of a run is scored with the same feature
network and sample count, so a curve (and the report's plot) never mixes them. The *time to
target* is the window time of the first point that meets ``metrics.target`` (MLPerf's time to
train, at the resolution of the curve's spacing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...config.scenario import QualityTarget


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


def time_to_target(curve: list[dict[str, Any]], target: QualityTarget, features: str) -> dict[str, Any]:
    """When ``curve`` first met ``target``, or that it did not, with the best value reached.

    Only points scored with ``features`` count (a target holds under one network).
    """
    field = METRIC_FIELDS[target.metric]
    points = sorted((p for p in curve if p.get("features") == features and p.get(field) is not None), key=lambda p: p["clock_s"])
    first = next((p for p in points if meets(p, target)), None)
    best = min((p[field] for p in points), default=None)
    return {
        "metric": target.metric,
        "target": target.value,
        "features": features,
        "n": points[0]["n"] if points else None,
        "reached": first is not None,
        "clock_s": first["clock_s"] if first else None,
        "step": first["step"] if first else None,
        "best": best,
        "points": len(points),
    }
