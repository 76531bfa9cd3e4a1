"""Cellular decides on signal (issue 59, item 5): a challenger wins only when lower by more than the margin in
standard errors of the paired difference; within it, and on equal scores, the incumbent stays, whatever the rounding."""

import random

import numpy as np
import pytest
from test_cellular import Draws, cellular_scenario

from suite.config.expansion import parse_scenario
from suite.config.scenario import ScenarioError
from suite.measure.metrics.scores import fid
from suite.strategies.cellular.decide import (
    bootstrap_fid_se,
    es_step,
    first_unless_displaced,
    paired_se,
    replacement,
    tournament,
)


def test_paired_standard_error_is_the_sd_of_the_differences_over_root_n():
    rows = np.array([[1.0, 2.0, 3.0, 4.0], [1.5, 2.0, 3.5, 4.0]])
    diff = rows[0] - rows[1]
    assert paired_se(rows)(0, 1) == pytest.approx(np.std(diff, ddof=1) / 2)
    other = np.array([[0.0, 0.0, 0.0, 1.0]])
    assert paired_se(rows, other)(1, 0) == pytest.approx(np.std(rows[1] - other[0], ddof=1) / 2)
    assert paired_se(rows)(0, 0) == 0.0  # a candidate against itself: no noise


def test_the_es_accepts_only_beyond_the_margin():
    w, proposal = np.array([0.5, 0.5]), np.array([0.6, 0.4])
    # 1.5 lower with a standard error of 1: within 2 SE, kept; beyond 1 SE, accepted
    assert es_step(w, 10.0, proposal, 8.5, se=1.0, margin=2.0) == (w, 10.0, False)
    assert es_step(w, 10.0, proposal, 8.5, se=1.0, margin=1.0) == (proposal, 8.5, True)
    assert es_step(w, 10.0, proposal, 7.9, se=1.0, margin=2.0)[2]
    # margin 0 is the papers' strict rule: any lower score, however small the difference
    assert es_step(w, 10.0, proposal, 10.0 - 1e-12, se=1.0, margin=0.0)[2]
    assert not es_step(w, 10.0, proposal, 10.0, se=0.0, margin=0.0)[2]


def test_replacement_needs_the_margin():
    # new 0.9 against old 1.0: an improvement of 0.1; with SE 0.1 that is 1 SE
    se = lambda old, new: 0.1  # noqa: E731
    assert replacement([1.0], [0.9], 1, se, margin=2.0)[0] == [("old", 0)]
    assert replacement([1.0], [0.7], 1, se, margin=2.0)[0] == [("new", 0)]
    slots, zs = replacement([1.0], [0.9], 1, se, margin=0.5)
    assert slots == [("new", 0)] and zs == [pytest.approx(1.0)]


def test_tournament_keeps_the_first_drawn_within_the_margin():
    fitness, se = [5.0, 4.0, 1.0], lambda i, j: 1.0
    # individual 1 is fitter by 1 SE: below a margin of 2, the first drawn (0) wins; above 0.5 it does not
    assert tournament(fitness, 2, Draws([[0, 1]]), se, margin=2.0)[0] == 0
    assert tournament(fitness, 2, Draws([[0, 1]]), se, margin=0.5)[0] == 1
    winner, drawn, z = tournament(fitness, 2, Draws([[0, 2]]), se, margin=2.0)
    assert (winner, drawn, z) == (2, [0, 2], pytest.approx(4.0))  # 4 SE: the fitter wins


@pytest.mark.parametrize("margin", [0.0, 2.0])
def test_equal_scores_are_decided_by_order_not_by_value(margin):
    se = lambda i, j: 0.0  # noqa: E731  (equal per-sample values: no noise either)
    # whichever is drawn first wins a tie, in any draw order: the order comes from the seed, never from a rounding
    assert tournament([3.0, 3.0], 2, Draws([[1, 0]]), se, margin)[0] == 1
    assert tournament([3.0, 3.0], 2, Draws([[0, 1]]), se, margin)[0] == 0
    assert replacement([2.0], [2.0], 1, se, margin)[0] == [("old", 0)]
    assert not es_step(np.ones(2) / 2, 2.0, np.array([0.4, 0.6]), 2.0, 0.0, margin)[2]
    cells = [(0, 1), (0, 0), (1, 0)]
    assert first_unless_displaced(sorted(cells), dict.fromkeys(cells, 7.0), lambda a, b: 0.0, margin)[0] == (0, 0)


def test_best_cell_is_the_first_in_grid_order_unless_clearly_better():
    scores = {(0, 0): 10.0, (0, 1): 9.0, (1, 0): 4.0}
    se = lambda a, b: 1.0  # noqa: E731
    assert first_unless_displaced(sorted(scores), scores, se, 2.0) == ((1, 0), pytest.approx(1.0))
    assert first_unless_displaced(sorted(scores), {**scores, (1, 0): 9.5}, se, 2.0)[0] == (0, 0)
    assert first_unless_displaced(sorted(scores), {**scores, (1, 0): 9.5}, se, 0.0)[0] == (0, 1)


def test_bootstrap_se_of_a_paired_fid_difference():
    rng = np.random.default_rng(0)
    real = rng.normal(size=(400, 3))
    a = rng.normal(size=(200, 3))

    def score(f):
        return fid(f, real)

    same_alone, same_diff = bootstrap_fid_se(a, a.copy(), score, 50, seed=1)
    assert same_alone > 0 and same_diff == 0.0  # identical samples: the paired difference has no noise
    shifted_alone, shifted_diff = bootstrap_fid_se(a, a + 0.5, score, 50, seed=1)
    assert 0 < shifted_diff and shifted_alone > 0
    assert bootstrap_fid_se(a, a + 0.5, score, 50, seed=1) == (shifted_alone, shifted_diff)  # seeded
    assert bootstrap_fid_se(a, None, score, 1, seed=1) == (0.0, 0.0)  # too few draws: no estimate


@pytest.mark.parametrize(
    "cellular, error",
    [
        ({"decision_margin": -0.5}, r"cellular\.decision_margin: "),
        ({"decision_margin": 11}, r"cellular\.decision_margin: "),
        ({"decision_margin": 2.0, "bootstrap_draws": 1}, r"cellular\.bootstrap_draws: 1 draws cannot estimate"),
        ({"bootstrap_draws": -3}, r"cellular\.bootstrap_draws: "),
    ],
)
def test_margin_settings_out_of_range_are_refused_naming_the_field(cellular, error):
    with pytest.raises(ScenarioError, match=error):
        parse_scenario(cellular_scenario(**cellular))


def test_margin_zero_and_no_bootstrap_is_accepted():
    parse_scenario(cellular_scenario(decision_margin=0, bootstrap_draws=0))


def test_the_incumbent_does_not_depend_on_a_rounding():
    # a perturbation of 1e-9 (a rounding) flips the strict rule's choice between near-equal scores, not the margin's
    rng = random.Random(0)
    flips = {0.0: 0, 2.0: 0}
    for _ in range(200):
        base = [rng.uniform(0, 1), rng.uniform(0, 1)]
        base[1] = base[0] + rng.uniform(-1e-9, 1e-9)
        nudged = [base[0], base[1] + 2e-9 * (1 if base[1] < base[0] else -1)]
        for margin in flips:
            picks = [tournament(f, 2, Draws([[0, 1]]), lambda i, j: 0.01, margin)[0] for f in (base, nudged)]
            flips[margin] += picks[0] != picks[1]
    assert flips[2.0] == 0 and flips[0.0] > 0


def test_margin_zero_is_the_papers_strictly_lower_rule():
    # the tournament's winner is the fittest drawn, ties to the first drawn; replacement and ES keep only a strictly
    # lower score: the rule before the margin, on random scores with ties
    rng = random.Random(3)
    for _ in range(300):
        fitness = [float(rng.randint(0, 4)) for _ in range(rng.randint(1, 6))]
        size = rng.randint(1, 5)
        seed = rng.random()
        winner, drawn, _ = tournament(fitness, size, random.Random(seed), lambda i, j: 1.0, 0.0)
        assert winner == min(drawn, key=lambda i: (fitness[i], drawn.index(i)))
        old, new = fitness[:1], [float(rng.randint(0, 4))]
        assert replacement(old, new, 1, lambda i, j: 1.0, 0.0)[0] == [("new", 0) if new[0] < old[0] else ("old", 0)]
