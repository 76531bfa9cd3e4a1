"""Intervals over draws, Welch's t and Holm's correction: the rules every verdict of the report follows."""

import numpy as np
import pytest
from scipy import stats

from suite.analysis.verdicts import Summary, holm, rank, summarise, verdict, welch_p


def test_summary_gives_the_student_t_interval_and_drops_missing_values():
    s = summarise([1.0, 2.0, None, float("nan"), 3.0])
    assert s.values == (1.0, 2.0, 3.0) and s.mean == 2.0 and s.std == pytest.approx(1.0)
    lo, hi = s.interval
    half = stats.t.ppf(0.975, 2) / np.sqrt(3)
    assert (lo, hi) == pytest.approx((2 - half, 2 + half))
    assert s.text() == f"2 [{2 - half:.3g}, {2 + half:.3g}] (n=3)"
    assert Summary((5.0,)).interval is None and Summary((5.0,)).text() == "5 (n=1)"
    assert summarise([None]) is None


def test_welch_matches_scipy_and_needs_two_draws_a_side():
    a, b = Summary((1.0, 2.0, 3.5)), Summary((4.0, 6.0, 5.5, 7.0))
    assert welch_p(a, b) == pytest.approx(stats.ttest_ind(a.values, b.values, equal_var=False).pvalue)
    assert welch_p(Summary((1.0,)), b) is None
    # no spread on either side (one seed, repeated): untestable, never "significant with p = 0"
    assert welch_p(Summary((2.0, 2.0)), Summary((2.0, 2.0))) is None
    assert welch_p(Summary((2.0, 2.0)), Summary((3.0, 3.0))) is None
    assert not rank({"a": Summary((2.0, 2.0)), "b": Summary((3.0, 3.0))}, True).decided


def test_holm_adjusts_step_down_and_keeps_untestable_comparisons_counted():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.01, None]) == [0.02, None]


def test_a_winner_only_where_every_difference_is_significant():
    clear = rank({"a": Summary((10.0, 11.0, 10.5)), "b": Summary((20.0, 21.0, 19.0)), "c": Summary((30.0, 31.0, 29.5))}, True)
    assert clear.best == "a" and clear.decided and clear.ties == []
    assert verdict(clear, "Best FID").startswith("Best FID: a, 10.5 [") and "significantly better than every other" in verdict(
        clear, "Best FID"
    )
    close = rank({"a": Summary((10.0, 14.0, 12.0)), "b": Summary((13.0, 11.0, 15.0))}, True)
    assert close.best == "a" and not close.decided and close.ties == ["b"]
    sentence = verdict(close, "Best FID")
    assert (
        sentence.startswith("Best FID: no significant difference between a 12 [")
        and " and b 13 [" in sentence
        and "(p = " in sentence
    )
    higher = rank({"fast": Summary((1.9, 2.0, 2.1)), "slow": Summary((1.2, 1.3, 1.25))}, False)
    assert higher.best == "fast" and higher.decided


def test_a_tie_at_the_top_still_says_whom_both_beat():
    ranking = rank({"a": Summary((10.0, 14.0, 12.0)), "b": Summary((13.0, 11.0, 15.0)), "c": Summary((50.0, 51.0, 49.0))}, True)
    assert ranking.ties == ["b"]
    assert verdict(ranking, "Best FID").endswith("; both significantly better than c.")
