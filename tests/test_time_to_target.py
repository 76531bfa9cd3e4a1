"""Time to target read honestly: interpolated between the curve points that bracket the crossing, and the report's
interval carrying the points' spacing (``suite.measure.metrics.curve``, ``suite.analysis.targets``)."""

import math

import numpy as np
import pytest
from scipy import stats
from test_findings import learned, tables
from test_report import record

from suite.analysis.stats.summary import summarise
from suite.analysis.targets import SeedTarget, target_interval, target_text, targets_per_seed
from suite.config.sections import QualityTarget
from suite.measure.metrics.curve import crossing, time_to_target
from suite.records.codec import parse_record, record_data
from suite.records.results import new_record, write_record

RULER = "classifier:digits"


def point(clock, fid, step, features=RULER, kid=None):
    return {"clock_s": clock, "step": step, "images": None, "fid": fid, "kid_mean": kid, "features": features, "n": 500}


def test_the_crossing_is_linear_in_the_log_score_against_the_clock():
    # 200 -> 50 over 10 s: the score halves every 5 s, so it is at 100 half-way
    assert crossing((10.0, 200.0), (20.0, 50.0), 100.0) == pytest.approx(15.0)
    assert crossing((10.0, 200.0), (20.0, 50.0), 50.0) == pytest.approx(20.0)  # met at the later point exactly
    assert crossing((10.0, 400.0), (20.0, 100.0), 200.0) == pytest.approx(15.0)  # not linear in the score (it would say 16.7)
    # a score or target at or below zero (an unbiased KID can be): linear in the score
    assert crossing((0.0, 0.02), (10.0, -0.02), 0.0) == pytest.approx(5.0)
    # always inside the bracket
    for before, after, target in [((1.0, 9.0), (2.0, 1.0), 8.999), ((1.0, 9.0), (2.0, 1.0), 1.0), ((3.0, 5.0), (4.0, 5.0), 5.0)]:
        assert before[0] <= crossing(before, after, target) <= after[0]


def test_time_to_target_is_interpolated_between_the_bracketing_points_and_keeps_them():
    curve = [
        point(2.5, 900.0, 10),
        point(5.0, 300.0, 20),
        point(7.5, 120.0, 30),  # the first that meets FID <= 150
        point(10.0, 160.0, 40),  # later above again: the first crossing counts
        point(6.0, 1.0, 25, features="inception"),  # another network's points never count
    ]
    got = time_to_target(curve, QualityTarget(fid=150.0), RULER)
    expected = 5.0 + 2.5 * math.log(300 / 150) / math.log(300 / 120)
    assert got["reached"] and got["clock_s"] == pytest.approx(expected)
    assert (got["clock_lo"], got["clock_hi"], got["step"], got["best"], got["points"]) == (5.0, 7.5, 30, 120.0, 4)
    assert got["clock_lo"] < got["clock_s"] < got["clock_hi"]


def test_a_first_point_that_meets_it_bounds_the_time_from_above_and_a_curve_that_never_meets_it_has_no_bracket():
    first = time_to_target([point(3.0, 100.0, 5), point(6.0, 80.0, 10)], QualityTarget(fid=150.0), RULER)
    assert (first["clock_s"], first["clock_lo"], first["clock_hi"], first["step"]) == (3.0, 0.0, 3.0, 5)
    missed = time_to_target([point(3.0, 400.0, 5), point(6.0, 200.0, 10)], QualityTarget(fid=150.0), RULER)
    assert not missed["reached"] and (missed["clock_s"], missed["clock_lo"], missed["clock_hi"]) == (None, None, None)
    assert missed["best"] == 200.0
    kid = time_to_target(
        [point(0.5, None, 1, kid=0.03), point(1.5, None, 2, kid=-0.01)], QualityTarget(kid=0.01), RULER
    )  # linear in the score across zero
    assert kid["clock_s"] == pytest.approx(1.0) and (kid["clock_lo"], kid["clock_hi"]) == (0.5, 1.5)


def _timed(clock, lo=None, hi=None, **extra):
    target = {"metric": "fid", "target": 150.0, "features": RULER, "n": 500, "reached": True, "clock_s": clock}
    target.update({"step": 30, "best": 120.0, "points": 4, **extra})
    if lo is not None:
        target.update(clock_lo=lo, clock_hi=hi)
    return record("r", quality=learned(), time_to_target=target)


def test_records_load_with_and_without_the_bracket():
    old = parse_record(record_data(new_record(_timed(9.5))))  # written before brackets: loads, the bracket absent
    assert old.time_to_target.clock_s == 9.5 and old.time_to_target.clock_lo is None and old.time_to_target.clock_hi is None
    new = parse_record(record_data(new_record(_timed(9.5, 8.0, 10.0))))
    assert (new.time_to_target.clock_lo, new.time_to_target.clock_hi) == (8.0, 10.0)
    assert record_data(new)["time_to_target"]["clock_lo"] == 8.0  # and written back


def test_the_interval_carries_the_curve_spacing_as_the_union_of_the_seed_interval_and_the_brackets():
    # three seeds whose interpolated times agree closely, read off a coarse curve: points 2.5 s apart
    clocks, los, his = [9.4, 9.5, 9.6], [7.5, 7.5, 7.5], [10.0, 10.0, 10.0]
    targets = [SeedTarget(True, c, 120.0, lo, hi) for c, lo, hi in zip(clocks, los, his)]
    reached = summarise(clocks)
    seeds_only = reached.interval
    interval = target_interval(targets, reached)
    assert interval == (pytest.approx(7.5), pytest.approx(10.0))  # the bracket: the seeds' own interval is inside it
    assert interval[0] < seeds_only[0] and seeds_only[1] < interval[1]
    text = target_text(targets, reached)
    assert text == f"{stats.gmean(clocks):.3g} [7.5, 10] s (n=3; curve points at 7.5 and 10 s bracket it)"
    # brackets that differ by seed: each end is that end's seed interval (log scale), and the union holds the seeds'
    los, his = [6.0, 7.5, 7.0], [8.0, 10.0, 9.0]
    clocks = [7.0, 9.0, 8.0]
    targets = [SeedTarget(True, c, 120.0, lo, hi) for c, lo, hi in zip(clocks, los, his)]
    reached = summarise(clocks)
    interval = target_interval(targets, reached)
    low, high = summarise(los).interval[0], summarise(his).interval[1]
    assert interval == (pytest.approx(min(low, reached.interval[0])), pytest.approx(max(high, reached.interval[1])))
    # a bracket from the window's start (the first point met it): the interval reaches down to 0
    targets[0] = SeedTarget(True, 8.0, 120.0, 0.0, 8.0)
    assert target_interval(targets, summarise([8.0, 9.0, 8.0]))[0] == 0.0
    # one seed: the bracket itself
    one = target_interval([SeedTarget(True, 9.0, 120.0, 7.5, 10.0)], summarise([9.0]))
    assert one == (7.5, 10.0)
    # records written before brackets: the seeds' interval alone, as before
    old = [SeedTarget(True, c, 120.0) for c in clocks]
    assert target_interval(old, summarise(clocks)) is None
    assert target_text(old, summarise(clocks)) == f"{summarise(clocks).text()} s"


def test_the_headline_reads_the_brackets_per_seed(tmp_path):
    root = tmp_path / "results"
    for seed, (clock, lo, hi) in enumerate([(9.4, 7.5, 10.0), (9.5, 7.5, 10.0), (9.6, 7.5, 10.0)]):
        data = _timed(clock, lo, hi)
        write_record(root / f"r-s{seed}", new_record({**data, "run_id": f"r-s{seed}", "seed": seed}))
    records, _, table = tables(root)
    targets = targets_per_seed(records)
    assert [(t.clock_lo, t.clock_hi) for t in targets] == [(7.5, 10.0)] * 3
    row = table[0]
    assert row.time_to_target == f"{stats.gmean([9.4, 9.5, 9.6]):.3g} [7.5, 10] s (n=3; curve points at 7.5 and 10 s bracket it)"
    assert row.time_to_target_summary.center == pytest.approx(np.exp(np.mean(np.log([9.4, 9.5, 9.6]))))
