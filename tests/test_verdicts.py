"""Estimates over draws, tests of every pair, Holm's correction: the rules every verdict of the report follows."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from suite.analysis.stats.pair_tests import TEST, TESTS, mann_whitney_p, permutation_p, welch_p
from suite.analysis.stats.summary import ALPHA, ratio, summarise
from suite.analysis.stats.verdicts import compare_all, holm, sentence

ROOT = Path(__file__).resolve().parent.parent


def log_interval(values, df=None):
    """The 95 % Student-t interval of the mean log, exponentiated (the reference the summaries must match)."""
    logs = np.log(values)
    lo, hi = stats.t.interval(0.95, df or len(logs) - 1, loc=logs.mean(), scale=stats.sem(logs))
    return np.exp(lo), np.exp(hi)


def test_a_positive_quantity_gives_its_geometric_mean_and_the_log_scale_interval():
    s = summarise([40.0, 50.0, None, float("nan"), 62.5])
    assert s.values == (40.0, 50.0, 62.5) and s.n == 3 and s.log
    assert s.center == pytest.approx(50.0)  # (40 * 50 * 62.5) ** (1/3)
    lo, hi = log_interval([40.0, 50.0, 62.5])
    assert s.interval == pytest.approx((lo, hi))
    assert s.text() == f"50 [{lo:.3g}, {hi:.3g}] (n=3)"
    assert summarise([5.0]).interval is None and summarise([5.0]).text() == "5 (n=1)"
    assert summarise([None]) is None
    assert summarise([7.0, 7.0]).interval == pytest.approx((7.0, 7.0))  # no spread: the value itself


def test_fid_intervals_never_go_below_zero():
    # the DC-GAN's per-seed FIDs at equal time in reports/digits: a Student-t interval of the raw values is [-292, 1140]
    assert summarise([749.6, 327.2, 197.7]).interval[0] > 0
    rng = np.random.default_rng(1)
    for _ in range(200):
        draws = rng.lognormal(np.log(100), rng.uniform(0.05, 2.0), size=rng.integers(2, 6))
        lo, hi = summarise(draws).interval
        assert 0 < lo <= hi


def test_fractions_keep_the_arithmetic_mean_inside_zero_and_one():
    s = summarise([0.9, 0.99, 1.0], fraction=True)
    assert not s.log and s.center == pytest.approx(0.963333, rel=1e-5)
    lo, hi = s.interval
    half = stats.t.ppf(0.975, 2) * np.std([0.9, 0.99, 1.0], ddof=1) / np.sqrt(3)
    assert lo == pytest.approx(s.center - half) and hi == 1.0  # clipped at the range's end
    assert s.text(2) == f"0.96 [{lo:.2g}, 1] (n=3)"


def test_a_kid_with_a_draw_at_or_below_zero_falls_back_to_the_arithmetic_mean_and_says_so():
    s = summarise([-0.001, 0.002, 0.01])
    assert not s.log and s.center == pytest.approx(0.011 / 3)
    half = stats.t.ppf(0.975, 2) * np.std(s.values, ddof=1) / np.sqrt(3)
    assert s.interval == pytest.approx((s.center - half, s.center + half))  # unclipped: the estimate itself may be negative
    assert s.text().endswith("(n=3, arithmetic mean)")
    negative = summarise([-5e-4, -3e-4, -4e-4])  # every draw below zero: the interval still holds its estimate
    assert negative.interval[0] < negative.center < negative.interval[1] < 0


def test_welch_runs_on_the_log_values_and_needs_spread_and_two_draws_a_side():
    a, b = summarise([1.0, 2.0, 3.5]), summarise([4.0, 6.0, 5.5, 7.0])
    assert welch_p(a, b) == pytest.approx(stats.ttest_ind(np.log(a.values), np.log(b.values), equal_var=False).pvalue)
    assert welch_p(summarise([1.0]), b) is None
    # no spread on either side (one seed, repeated): untestable, never "significant with p = 0"
    assert welch_p(summarise([2.0, 2.0]), summarise([3.0, 3.0])) is None
    family = compare_all({"a": summarise([2.0, 2.0]), "b": summarise([3.0, 3.0])}, True)
    assert family.claims == [] and len(family.untestable) == 1


def test_the_candidate_tests_match_scipy():
    a, b = summarise([1.0, 2.0, 3.5]), summarise([4.0, 6.0, 5.5])
    assert mann_whitney_p(a, b) == pytest.approx(0.1)  # U's smallest two-sided p with three draws a side
    assert permutation_p(a, b) == pytest.approx(0.1)  # exact: 2 of the 20 splits are as extreme
    assert set(TESTS) == {"welch", "welch-fewest", "welch-linear", "mann-whitney", "permutation", "bootstrap"}


def test_holm_adjusts_step_down_over_the_tested_pairs_only():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.01, None]) == [0.01, None]


def test_every_pair_is_tested_in_one_family_and_every_claim_is_a_pair_that_was_found_different():
    family = compare_all(
        {"c": summarise([30.0, 31.0, 29.5]), "a": summarise([10.0, 11.0, 10.5]), "b": summarise([20.0, 21.0, 19.0])}, True
    )
    assert family.order == ["a", "b", "c"] and len(family.pairs) == 3
    raw = [TESTS[TEST].p_value(family.summaries[p.first], family.summaries[p.second]) for p in family.pairs]
    assert [p.p_adjusted for p in family.pairs] == pytest.approx(holm(raw))
    assert [(p.first, p.second) for p in family.claims] == [("a", "b"), ("a", "c"), ("b", "c")]
    text = sentence(family, "Final FID")
    assert text.startswith("Final FID: a 10.5 [") and "(best estimate first)" in text
    assert "a is significantly better than b (p = " in text and "; b is significantly better than c (p = " in text
    assert (
        f"Tested: all 3 pairs of the 3 candidates as one family, {TESTS[TEST].words} on log values, Holm-corrected at 5 %" in text
    )
    higher = compare_all({"fast": summarise([1.9, 2.0, 2.1]), "slow": summarise([1.2, 1.3, 1.25])}, False)
    assert higher.order == ["fast", "slow"] and higher.better("fast", "slow")


def test_a_tie_with_both_ends_is_never_turned_into_a_claim_by_transitivity():
    # A clearly below C; B between them with a wide spread: B ties with both, and no sentence says B beats C
    family = compare_all(
        {"A": summarise([10.0, 10.5, 9.5]), "B": summarise([9.0, 20.0, 40.0]), "C": summarise([40.0, 42.0, 38.0])}, True
    )
    assert [(p.first, p.second) for p in family.claims] == [("A", "C")]
    assert not family.better("B", "C") and not family.better("A", "B")
    text = sentence(family, "Final FID")
    assert "A is significantly better than C (p = " in text and "B is significantly" not in text
    assert "The other 2 tested pairs are not distinguishable." in text


def test_one_draw_makes_no_test_and_the_sentence_says_so():
    family = compare_all({"a": summarise([30.0]), "b": summarise([60.0])}, True)
    assert sentence(family, "Final FID") == (
        "Final FID: a 30 (n=1), b 60 (n=1) (best estimate first). No pair can be tested (one draw at an end, or no spread)."
    )
    assert sentence(compare_all({"a": summarise([30.0, 31.0])}, True), "Final FID") == (
        "Final FID: only a was measured, 30.5 [" + summarise([30.0, 31.0]).text().split("[")[1] + "."
    )


def test_a_ratio_carries_both_ends_spread_and_is_wider_than_the_p2_spread_alone():
    t1, t2 = [100.0, 110.0, 95.0], [52.0, 55.0, 50.0]
    s = ratio(t1, t2, ("P=1", "P=2"))
    assert s.center == pytest.approx(stats.gmean(t1) / stats.gmean(t2))
    v1, v2 = np.var(np.log(t1), ddof=1) / 3, np.var(np.log(t2), ddof=1) / 3
    # at the fewest degrees of freedom of either end (2), not Welch-Satterthwaite's (about 3.6 here)
    assert (v1 + v2) ** 2 / (v1**2 / 2 + v2**2 / 2) > 3
    half = stats.t.ppf(0.975, 2) * np.sqrt(v1 + v2)
    assert s.interval == pytest.approx((s.center * np.exp(-half), s.center * np.exp(half)))
    p2_alone = summarise([stats.gmean(t1) / t for t in t2]).interval  # T(1) taken as exact
    assert s.interval[0] < p2_alone[0] and s.interval[1] > p2_alone[1]
    assert s.text() == f"{s.center:.3g} [{s.interval[0]:.3g}, {s.interval[1]:.3g}] (n=3 at P=1, 3 at P=2)"
    efficiency = s.scaled(0.5)
    assert efficiency.center == pytest.approx(s.center / 2) and efficiency.interval == pytest.approx(
        tuple(v / 2 for v in s.interval)
    )


def test_a_ratio_with_one_run_at_an_end_has_no_interval_and_no_test():
    s = ratio([100.0], [52.0, 55.0, 50.0], ("P=1", "P=2"))
    assert s.interval is None and s.text().endswith("(n=1 at P=1, 3 at P=2: no interval)")
    assert welch_p(s, ratio([100.0, 101.0], [60.0, 61.0])) is None


def test_two_speedups_are_compared_with_the_spread_of_all_four_ends():
    a, b = ratio([100.0, 110.0, 95.0], [52.0, 55.0, 50.0]), ratio([100.0, 104.0, 97.0], [60.0, 63.0, 59.0])
    parts = [
        np.var(np.log(x), ddof=1) / 3
        for x in ([100.0, 110.0, 95.0], [52.0, 55.0, 50.0], [100.0, 104.0, 97.0], [60.0, 63.0, 59.0])
    ]
    t = (np.log(a.center) - np.log(b.center)) / np.sqrt(sum(parts))
    df = sum(parts) ** 2 / sum(v**2 / 2 for v in parts)
    assert welch_p(a, b) == pytest.approx(2 * stats.t.sf(abs(t), df))
    # ignoring T(1)'s spread would make the difference look surer than it is
    only_p = stats.ttest_ind(np.log([52.0, 55.0, 50.0]), np.log([60.0, 63.0, 59.0]), equal_var=False).pvalue
    assert welch_p(a, b) > only_p


def test_the_test_in_use_is_welchs_t_at_the_fewest_draws_degrees_of_freedom_and_agrees_with_the_interval():
    x, y = [100.0, 130.0, 90.0, 120.0], [60.0, 75.0, 58.0, 66.0, 80.0, 71.0]
    a, b = summarise(x), summarise(y)
    lx, ly = np.log(x), np.log(y)
    se = np.sqrt(lx.var(ddof=1) / 4 + ly.var(ddof=1) / 6)
    t = (lx.mean() - ly.mean()) / se
    assert TEST == "welch-fewest"
    assert TESTS[TEST].p_value(a, b) == pytest.approx(2 * stats.t.sf(abs(t), 3))  # df = 4 - 1, not Welch's ~6.5
    assert TESTS[TEST].p_value(a, b) > welch_p(a, b)
    margin = 2.0
    tost = max(
        stats.t.sf((lx.mean() - ly.mean() + np.log(margin)) / se, 3),
        stats.t.cdf((lx.mean() - ly.mean() - np.log(margin)) / se, 3),
    )
    assert TESTS[TEST].equivalence(a, b, margin) == pytest.approx(tost)
    from suite.analysis.stats.summary import ratio_interval

    _, lo, hi = ratio_interval(a, b)  # findings.csv and the equivalence sentence: at the test df, 1 out iff p < 5 %
    assert (lo > 1 or hi < 1) == (TESTS[TEST].p_value(a, b) < 0.05)
    assert lo == pytest.approx(np.exp(lx.mean() - ly.mean() - stats.t.ppf(0.975, 3) * se))


def _resampled_rates():
    import sys

    sys.path.insert(0, str(ROOT / "ci"))
    import resampled_rates

    return resampled_rates


def test_the_test_in_use_holds_its_level_on_a_fixed_resampled_world_where_welch_satterthwaite_does_not():
    """Skewed real residuals (the main job's final FIDs), all five systems equal, the job's policy: the calibrated
    test's share of reports with a false claim stays within 5 % and below plain Welch's on the same reports."""
    rr = _resampled_rates()
    finals = [
        [254, 359, 1143, 301, 170, 400],
        [48, 41, 51, 46],
        [421, 237, 263, 343, 418, 420],
        [193, 162, 218, 189, 172, 175],
        [168, 141, 120, 146],
    ]
    logs = [np.log(v) for v in finals]
    res = rr.Residuals(tuple("ABCDE"), tuple(v - v.mean() for v in logs), tuple(float(v.mean()) for v in logs))
    plan = rr.Plan(4, 2, 6)
    rates = {
        test: rr.simulate(res, rr.Cell(test, plan, "naive", "equal"), 1.5, 300, 7)["any_false"] / 300 for test in ("welch", TEST)
    }
    assert rates[TEST] <= ALPHA and rates[TEST] < rates["welch"]


def _one_collapsed_seed(rr):
    """Three systems' residuals; A's hold one collapsed seed (a log residual far beyond its others')."""
    logs = [np.log(v) for v in ([190, 1270, 160, 200, 240, 240], [48, 41, 51, 46, 60, 44], [120, 118, 126, 122, 117, 124])]
    return rr.Residuals(tuple("ABC"), tuple(v - v.mean() for v in logs), tuple(float(v.mean()) for v in logs))


def test_a_cell_above_the_level_is_rerun_with_each_system_left_out_and_the_page_names_the_one_that_carries_it():
    """ci/resampled_rates.py's diagnosis: a system whose residuals hold one collapsed seed (a log residual far beyond
    the others) makes false claims when its resamples miss that seed; left out, the reports of the same seed come back
    within 5 %."""
    import pandas as pd

    rr = _resampled_rates()
    res = _one_collapsed_seed(rr)
    assert rr.without(res, 0).names == ("B", "C") and rr.without(res, 0).centres == res.centres[1:]
    plan = rr.Plan(4, 2, 6)
    above = pd.DataFrame(
        [{"test": TEST, "policy": "4, 2, 6", "resampling": "naive", "world": "equal", "reports": 10, "any_false": 5}]
    )
    diagnosis = rr.left_out(res, above, [plan], 1.5, 200, 3)
    assert list(diagnosis.left_out) == ["A", "B", "C"] and set(diagnosis.world) == {"equal"}
    rates = dict(zip(diagnosis.left_out, diagnosis.any_false / diagnosis.reports))
    assert rates["A"] <= ALPHA < min(rates["B"], rates["C"])
    assert "- seeds (4, 2, 6), naive, equal: within 5 % with A left out." in rr.excess(diagnosis)
    within = above.assign(any_false=0)  # no cell above the level: nothing rerun, no section
    nothing = rr.left_out(res, within, [plan], 1.5, 200, 3)
    assert nothing.empty and rr.excess(nothing) == []


def test_the_false_claims_are_counted_by_the_system_they_call_better():
    """ci/resampled_rates.py's "whom the false claims favour": with one system's residuals holding a collapsed seed,
    the false claims in a world of equal systems call that system better (its resamples that miss the seed), and the
    page's row says so per system."""
    rr = _resampled_rates()
    res = _one_collapsed_seed(rr)
    counts = rr.simulate(res, rr.Cell(TEST, rr.Plan(4, 2, 6), "naive", "equal"), 1.5, 200, 3)
    assert counts["favoured"]["A"] == counts["any_false"] > 10 * ALPHA  # every false report calls A better
    assert (
        counts["favoured"]["B"] == counts["favoured"]["C"] == counts["false_equivalent"] == 0
    )  # equal: no false equivalence is possible
    table, favoured = rr.measure(res, [TEST], [rr.Plan(4, 2, 6)], 1.5, 200, 3)
    assert set(favoured.system) == {"A", "B", "C"} and len(favoured) == 3 * len(table)
    row = next(line for line in rr.whom(table, favoured, res) if line.startswith("| 4, 2, 6 | naive | equal |"))
    assert row == f"| 4, 2, 6 | naive | equal | {100 * counts['any_false'] / 200:.1f} % | 0.0 % | 0.0 % | 0.0 % |"
