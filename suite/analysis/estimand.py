"""The quantities the quality and speed verdicts compare: what a run ends with, and how fast it got there.

**End-of-budget quality** (:func:`end_fid`): the FID of the model a run ends with, the quality a user gets at the end
of the budget; the quality family compares it. It was fixed in advance, chosen on pilot runs with other seeds than
the ones the verdicts test (``reports/verdicts/estimand.md``), never by how many pairs it decides.

**Learning speed** (:func:`curve_area`): how fast a run learns, the area under its log FID curve over one common grid
of budget fractions (:func:`speed_fractions`), as a geometric-mean FID over the budget: lower learns faster. It is a
family of its own, never a quality verdict: a system still falling steeply at the end is slow, not worse.

The late FID (:func:`late_score`, the geometric mean of the FID over the last half of the budget) is what the quality
verdicts compared before; it stays for the tuning ranks and the kernel-set check that read it.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from ..records.record import Record, run_setting

LATE_SHARE = 0.5
"""The late-training stretch: curve points at or after this share of the run's last point."""
LATE_POINTS = 2
"""The fewest curve points in the stretch for a late score (fewer: none)."""
END_DEFINITION = (
    "end FID: the FID of the run's EMA generator (an exponential moving average of its generator's weights over the "
    "late budget) at the end of the budget, on more samples of the common latent vectors and labels than the curve's; fixed in advance, on pilot runs with other seeds (reports/verdicts/estimand.md)"
)
"""The end-of-budget estimand in words (:func:`end_fid`), as the first page states it."""


def end_fid(record: Record) -> float | None:
    """The end-of-budget quality estimand of one run: its EMA generator's FID at the end of the budget
    (``quality.ema_fid``, on ``quality.ema_n`` samples of the common latents); None where the run kept no EMA
    generator or its FID was withheld. The one definition the verdicts read (reports/verdicts/estimand.md chose it
    on pilot runs with the tuning seeds, before the main job's)."""
    q = record.quality
    value = q.ema_fid if q is not None else None
    return float(value) if value is not None and math.isfinite(value) and value > 0 else None


SPEED_START = 0.25
"""The earliest budget fraction the speed family reads (the first steps of every GAN are noise)."""
SPEED_STEP = 1 / 8
"""The spacing of the common grid of budget fractions."""
SPEED_FRACTIONS = tuple(k * SPEED_STEP for k in range(round(SPEED_START / SPEED_STEP), round(1 / SPEED_STEP) + 1))
"""The grid where every curve has a point at or before a quarter of its budget (the main job's)."""


def speed_fractions(records: Iterable[Record]) -> tuple[float, ...]:
    """The common grid of budget fractions for ``records``: every :data:`SPEED_STEP` from :data:`SPEED_START`, or from
    the first step every curve reaches (its first point), to the end of the budget; empty with fewer than two."""
    starts = []
    for r in records:
        images = [p.images for p in r.curve or [] if p.images is not None]
        if len(images) > 1 and max(images) > 0:
            starts.append(min(images) / max(images))
    first = max([SPEED_START, *starts])
    grid = tuple(k * SPEED_STEP for k in range(math.ceil(first / SPEED_STEP - 1e-9), round(1 / SPEED_STEP) + 1))
    return grid if len(grid) > 1 else ()


def speed_definition(fractions: tuple[float, ...]) -> str:
    """The speed estimand in words, with the grid it was read on, as the first page states it."""
    return (
        "learning speed: the area under a run's log FID curve over the budget fractions "
        + ", ".join(f"{f:g}" for f in fractions)
        + ", the same for every system (log FID interpolated linearly in images between curve points), as a "
        "geometric-mean FID; lower learns faster"
    )


def curve_area(record: Record, fractions: tuple[float, ...] = SPEED_FRACTIONS) -> float | None:
    """``exp`` of the mean of log FID over ``fractions`` of the run's images budget (trapezoids between them; log FID
    interpolated linearly in images between curve points): None where the curve has no images axis, a score that is
    not positive, or does not span the grid (nothing is extrapolated), or the grid is empty."""
    if not fractions:
        return None
    points = [(p.images, p.fid) for p in record.curve or [] if p.images is not None]
    if len(points) < 2 or any(v is None or not math.isfinite(v) or v <= 0 for _, v in points):
        return None
    points.sort()
    end = float(points[-1][0])
    xs = [float(x) / end for x, _ in points]
    logs = [math.log(float(v)) for _, v in points]  # type: ignore[arg-type]
    if xs[0] > fractions[0] + 1e-9:
        return None
    at = [_interpolate(xs, logs, f) for f in fractions]
    if len(at) == 1:
        return math.exp(at[0])
    area = sum((fractions[i + 1] - fractions[i]) * (at[i] + at[i + 1]) / 2 for i in range(len(at) - 1))
    return math.exp(area / (fractions[-1] - fractions[0]))


def _interpolate(xs: list[float], ys: list[float], x: float) -> float:
    """``ys`` at ``x`` by straight lines between the points (``xs`` ascending, ``x`` within them)."""
    for i in range(len(xs) - 1):
        if xs[i] <= x <= xs[i + 1]:
            share = (x - xs[i]) / (xs[i + 1] - xs[i]) if xs[i + 1] > xs[i] else 0.0
            return ys[i] + share * (ys[i + 1] - ys[i])
    return ys[-1]


def late_score(record: Record, metric: str = "fid") -> float | None:
    """The geometric mean of ``metric`` over ``record``'s curve points at or after :data:`LATE_SHARE` of its last
    (by real training images where every point has them, else by the clock); None with fewer than :data:`LATE_POINTS`
    such points or a score that is not positive."""
    points = record.curve or []
    axis = "images" if points and all(p.images is not None for p in points) else "clock_s"
    at = [(getattr(p, axis), getattr(p, metric, None)) for p in points]
    at = [(float(x), v) for x, v in at if x is not None]
    if not at:
        return None
    end = max(x for x, _ in at)
    late = [v for x, v in at if x >= LATE_SHARE * end]
    scores = [float(v) for v in late if v is not None and math.isfinite(v) and v > 0]
    if len(late) < LATE_POINTS or len(scores) < len(late):
        return None
    return math.exp(sum(math.log(v) for v in scores) / len(scores))


def in_seed_order(runs: Iterable[Record], value: Callable[[Record], Any]) -> list[float | None]:
    """One value per seed in ascending seed order (the order sequential seeds train them), averaged over the seed's
    repeats; a seed whose runs have no value is None."""
    by_seed: dict[int, list[float]] = {}
    for r in runs:
        seed = r.seed if r.seed is not None else 0
        v = value(r)
        by_seed.setdefault(seed, [])
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            by_seed[seed].append(float(v))
    return [sum(vs) / len(vs) if vs else None for _, vs in sorted(by_seed.items())]


def seed_policy(records: Iterable[Record]) -> tuple[int, int, int] | None:
    """``(initial, step, max)`` of the runs' sequential seeds (``train.seeds`` as a policy), None where none has one."""
    for r in records:
        seeds = run_setting(r, "train", "seeds")
        if isinstance(seeds, dict) and {"initial", "step", "max"} <= set(seeds):
            return int(seeds["initial"]), int(seeds["step"]), int(seeds["max"])
    return None


def equivalence_margin(records: Iterable[Record]) -> float | None:
    """The runs' ``metrics.equivalence_margin`` (the largest where they differ), None in records written before it."""
    margins = [float(m) for r in records if isinstance(m := run_setting(r, "metrics", "equivalence_margin"), (int, float))]
    return max(margins) if margins else None
