"""The quality estimand the verdicts compare: a system's late-training FID, not one moment of an oscillating GAN.

A GAN trained for a fixed budget still oscillates at its end: the final model's FID swings with the step the
budget happens to stop at (the data-parallel DC-GAN of the main job went 243, 339, 438, 306 over its last
points), so its spread over seeds hides the systems' differences. The verdicts therefore compare each run's
**late FID**: the geometric mean of the FID at the curve points in the last half of its budget (the mean of
log FID over them), scored on the common latents (:data:`suite.measure.metrics.evaluate.COMMON_LATENTS_SEED`).
It measures the system over the late part of training; the final model's FID stays beside it as what a user
gets. Measured against the candidates in ``reports/verdicts/estimand.md`` (``ci/estimand.py``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from ..records.record import Record, run_setting

LATE_SHARE = 0.5
"""The late-training stretch: curve points at or after this share of the run's last point."""
LATE_POINTS = 2
"""The fewest curve points in the stretch for a late score (fewer: none)."""
DEFINITION = (
    "late FID: the geometric mean of a run's FID at its curve points in the last half of the budget (the mean of "
    "log FID over them), every model scored on the same latent vectors and labels"
)
"""The estimand in words, as the first page states it."""


END_DEFINITION = (
    "end FID: the FID of the run's EMA generator (an exponential moving average of its generator's weights over the "
    "late budget) at the end of the budget, on more samples of the common latent vectors and labels than the curve's"
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
