"""The "learns faster" family: the area under log FID over one grid of budget fractions, tested apart from quality."""

from __future__ import annotations

import math

import numpy as np
import pytest

from suite.analysis import findings
from suite.analysis.estimand import SPEED_FRACTIONS, curve_area, speed_fractions
from suite.analysis.findings import verdicts
from suite.analysis.findings_csv import findings_table
from suite.analysis.headline import headline_rows
from suite.records.results import new_record


def _record(strategy: str, seed: int, curve: list[tuple[int, float]]):
    return new_record(
        {
            "status": "ok",
            "run_id": f"{strategy}-s{seed}",
            "scenario": "s",
            "strategy": strategy,
            "loss": "bce",
            "engine": "torch",
            "procs": 2,
            "scaling": "strong",
            "seed": seed,
            "train_s": 10.0,
            "budget_images": 4000,
            "quality": {
                "features": "classifier:digits",
                "n": 500,
                "fid": curve[-1][1],
                "ema_fid": curve[-1][1],
                "ema_n": 500,
                "is_mean": 3.0,
                "pixel_std": 0.3,
            },
            "curve": [{"images": x, "clock_s": x / 100, "fid": v} for x, v in curve],
        }
    )


def test_the_area_is_the_trapezoid_mean_of_log_fid_over_the_grid():
    points = [(int(4000 * f), 100.0 * 2 ** (-i)) for i, f in enumerate(SPEED_FRACTIONS)]
    logs = np.log([v for _, v in points])
    widths = np.diff(SPEED_FRACTIONS)
    expected = math.exp(float(np.sum(widths * (logs[:-1] + logs[1:]) / 2) / (SPEED_FRACTIONS[-1] - SPEED_FRACTIONS[0])))
    assert curve_area(_record("a", 0, points)) == pytest.approx(expected)


def test_log_fid_is_interpolated_between_points_and_never_extrapolated():
    # points at a quarter, three quarters and the end: the grid's 0.5 lies halfway in log between 400 and 100
    sparse = _record("a", 0, [(1000, 400.0), (3000, 100.0), (4000, 100.0)])
    dense = _record("a", 0, [(int(4000 * f), 400.0 * (0.25 ** min((f - 0.25) / 0.5, 1.0))) for f in SPEED_FRACTIONS])
    assert curve_area(sparse) == pytest.approx(curve_area(dense))
    assert curve_area(_record("a", 0, [(1500, 400.0), (4000, 100.0)])) is None  # starts after a quarter of the budget
    assert curve_area(_record("a", 0, [(1000, 400.0), (4000, 0.0)])) is None  # a score that is not positive


def _family_records():
    fast = [[(1000, 120.0 + s), (2000, 105.0), (3000, 101.0), (4000, 100.0 + s)] for s in range(3)]
    slow = [[(1000, 900.0 + 10 * s), (2000, 500.0), (3000, 250.0), (4000, 101.0 + s)] for s in range(3)]
    return [_record("conditional", s, c) for s, c in enumerate(fast)] + [
        _record("label_partitioned", s, c) for s, c in enumerate(slow)
    ]


def test_a_system_that_gets_there_first_learns_faster_without_being_better_at_the_end():
    records = _family_records()
    table = headline_rows(records, {})
    found = findings.tested_findings(table, records, {})
    quality = next(f for f in found if f.quantity == findings.END_FID)
    speed = next(f for f in found if f.quantity == findings.LEARNS_FASTER)
    assert not quality.family.claims  # the same FID at the end of the budget
    assert speed.family.better("conditional / bce / torch", "label_partitioned / bce / torch")
    assert speed.text.startswith("Learns faster (area under the FID curve") and "lower learns faster" in speed.text
    said = verdicts(found, [row.config for row in table])
    assert "best learns faster" in said["conditional / bce / torch"]
    assert "worst learns faster" in said["label_partitioned / bce / torch"]
    frame = findings_table(found)
    rows = frame[frame.family == findings.LEARNS_FASTER]
    assert len(rows) == 1 and rows.verdict.iloc[0] == "a better" and rows.ratio.iloc[0] < 0.5
    assert rows.margin.isna().all() and set(frame.family) >= {findings.END_FID, findings.LEARNS_FASTER}


def test_the_grid_is_common_to_every_system_and_starts_where_every_curve_has_begun():
    eighths = [_record("a", 0, [(480 * k, 100.0) for k in range(1, 9)])]
    assert speed_fractions(eighths) == SPEED_FRACTIONS and SPEED_FRACTIONS[0] == 0.25
    thirds = eighths + [_record("b", 0, [(1280, 300.0), (2560, 200.0), (3840, 100.0)])]
    assert speed_fractions(thirds) == (0.375, 0.5, 0.625, 0.75, 0.875, 1.0)  # the first eighth both curves reach
    assert curve_area(thirds[1], speed_fractions(thirds)) is not None
    single = _record("c", 0, [(3840, 100.0)])
    assert curve_area(single, speed_fractions([single])) is None  # one point: no curve to compare
    late = [_record("d", 0, [(3840, 300.0), (4000, 100.0)])]  # a curve that begins at the end: no grid of two points
    assert speed_fractions(late) == () and curve_area(late[0], ()) is None
