"""Cellular coevolution: torus neighbourhoods, placement, evolutionary operators, and placement invariance."""

import random

import numpy as np
import pytest
import torch

from conftest import run_scenario, tiny_scenario
from suite.strategies.grid import (
    cells, es_step, mutate_learning_rate, neighbourhood, owner, process_grid, propose_weights, tournament,
)

GRIDS = [(1, 1), (1, 3), (2, 2), (3, 3), (3, 4)]


def torus_distance(a: int, b: int, n: int) -> int:
    d = abs(a - b) % n
    return min(d, n - d)


def brute_force(cell, grid, kind):
    rows, cols = grid
    out = set()
    for i in range(rows):
        for j in range(cols):
            di, dj = torus_distance(i, cell[0], rows), torus_distance(j, cell[1], cols)
            if (kind == "von_neumann" and di + dj <= 1) or (kind == "moore" and max(di, dj) <= 1):
                out.add((i, j))
    return out


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("kind", ["von_neumann", "moore"])
def test_neighbourhoods_match_torus_arithmetic(grid, kind):
    for cell in cells(grid):
        hood = neighbourhood(cell, grid, kind)
        assert hood[0] == cell
        assert len(hood) == len(set(hood))
        assert set(hood) == brute_force(cell, grid, kind)


def test_neighbourhood_sizes_on_a_large_grid():
    assert len(neighbourhood((0, 0), (5, 5), "von_neumann")) == 5
    assert len(neighbourhood((0, 0), (5, 5), "moore")) == 9
    # wrap-around in both directions, rows then columns (no transposed index)
    assert neighbourhood((0, 0), (3, 4)) == [(0, 0), (2, 0), (1, 0), (0, 3), (0, 1)]


@pytest.mark.parametrize(
    "grid, procs, expected",
    [((2, 2), 1, (1, 1)), ((2, 2), 2, (1, 2)), ((2, 2), 4, (2, 2)), ((3, 4), 2, (1, 2)), ((3, 4), 4, (1, 4)),
     ((3, 4), 6, (3, 2)), ((4, 4), 8, (2, 4))],
)
def test_process_grid_cuts_equal_blocks(grid, procs, expected):
    pgrid = process_grid(grid, procs)
    assert pgrid == expected
    owners = [owner(c, grid, pgrid) for c in cells(grid)]
    counts = {o: owners.count(o) for o in set(owners)}
    assert len(counts) == procs and set(counts.values()) == {grid[0] * grid[1] // procs}


def test_process_grid_errors_are_clear():
    with pytest.raises(ValueError, match="3 processes cannot share a 2x2 grid evenly"):
        process_grid((2, 2), 3)


def test_every_divisor_of_the_cell_count_gives_a_block_split():
    for rows in range(1, 7):
        for cols in range(1, 7):
            for procs in (p for p in range(1, rows * cols + 1) if rows * cols % p == 0):
                pr, pc = process_grid((rows, cols), procs)
                assert pr * pc == procs and rows % pr == 0 and cols % pc == 0


class Draws(random.Random):
    """A random source whose `sample` returns prepared draws."""

    def __init__(self, draws):
        super().__init__(0)
        self.draws = list(draws)

    def sample(self, population, k):
        return self.draws.pop(0)


def test_tournament_picks_the_fittest_of_the_drawn():
    fitness = [5.0, 1.0, 3.0, 4.0]
    assert tournament(fitness, 2, Draws([[0, 3]])) == 3
    assert tournament(fitness, 2, Draws([[2, 1]])) == 1
    assert tournament([2.0, 2.0, 9.0], 2, Draws([[1, 0]])) == 1  # tie: the first drawn wins
    assert tournament(fitness, 4, random.Random(0)) == 1  # everyone drawn: the global best
    assert tournament([7.0], 2, random.Random(0)) == 0  # fewer individuals than the tournament


def test_learning_rate_mutation():
    rng = random.Random(0)
    assert mutate_learning_rate(0.0002, 0.0, 1.0, rng) == 0.0002
    mutated = [mutate_learning_rate(0.0002, 1.0, 0.0001, random.Random(s)) for s in range(200)]
    assert all(m != 0.0002 for m in mutated) and min(mutated) >= 1e-8
    # steps below zero are held at the floor (a learning rate stays positive): about 2% at 2 sigma
    assert 0 < sum(m == 1e-8 for m in mutated) < 15
    assert np.std(mutated) == pytest.approx(0.0001, rel=0.3)


def test_one_plus_one_es():
    w = np.array([0.5, 0.25, 0.25])
    better, worse = np.array([0.2, 0.4, 0.4]), np.array([0.9, 0.05, 0.05])
    assert es_step(w, 10.0, better, 9.0) == (better, 9.0, True)
    kept, score, accepted = es_step(w, 10.0, worse, 11.0)
    assert kept is w and score == 10.0 and not accepted
    assert not es_step(w, 10.0, better, 10.0)[2]  # equal is not an improvement
    p = propose_weights(w, 0.5, np.random.default_rng(0))
    assert (p >= 0).all() and p.sum() == pytest.approx(1.0) and not np.allclose(p, w)
    assert np.allclose(propose_weights(w, 0.0, np.random.default_rng(0)), w)


# --- real runs: one grid, three placements -------------------------------------------------------------------


@pytest.fixture(scope="module")
def placements(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cellular")
    scenario = tiny_scenario(
        "cellular",
        [{"strategy": "cellular", "engine": "mpi", "grid": [2, 2], "procs": [1, 2, 4]}],
        train={"batch_size": 16, "threads": 1},
        cellular={"iterations": 2, "batches_per_iteration": 1, "mixture_samples": 40},
        metrics={"enabled": True, "samples": 100, "features": "classifier"},
    )
    code, records = run_scenario(tmp, scenario)
    return code, records, tmp / "results"


@pytest.mark.multiproc
def test_placement_does_not_change_the_result(placements, tmp_path):
    from suite.cli import main

    code, records, results = placements
    samples = {}
    for procs in (1, 2, 4):
        run_id = f"cellular-mustangs-mpi-p{procs}-g2x2-r0"
        assert records[run_id]["status"] == "ok", records[run_id].get("error")
        out = tmp_path / f"p{procs}.npz"
        assert main(["sample", str(results / run_id), "--n", "64", "--seed", "0", "--out", str(out)]) == 0
        with np.load(out) as npz:
            samples[procs] = npz["images"]
    assert np.array_equal(samples[1], samples[2]) and np.array_equal(samples[1], samples[4])
    weights = [records[f"cellular-mustangs-mpi-p{p}-g2x2-r0"]["mixture_weights"] for p in (1, 2, 4)]
    assert weights[0] == weights[1] == weights[2]
    assert code == 0


@pytest.mark.multiproc
def test_cellular_record(placements):
    _, records, results = placements
    one, two, four = (records[f"cellular-mustangs-mpi-p{p}-g2x2-r0"] for p in (1, 2, 4))
    assert one["grid"] == [2, 2] and [r["cells_per_rank"] for r in (one, two, four)] == [4, 2, 1]
    assert one["comm"]["bytes"] == 0  # one rank holds every cell: nothing to exchange
    assert two["comm"]["bytes"] > 0 and four["comm"]["bytes"] > two["comm"]["bytes"]
    assert set(one["phases_s"]) == {"exchange", "fitness", "train", "mixture"}
    assert all(len(v) == 4 for v in four["phases_s"].values())
    assert one["quality"]["features"] == "classifier:digits"
    best = one["quality_best_cell"]  # 100 samples in 128 dimensions: FID withheld, KID given
    assert best["fid"] is None and "128 feature dimensions" in best["fid_note"] and best["kid_mean"] > 0
    assert len(one["curve"]) == 2 and one["curve"][0]["n"] == 40
    bundle = torch.load(results / one["run_id"] / "generator.pt", weights_only=False)
    assert bundle["kind"] == "mixture" and len(bundle["generators"]) == 3  # a 2x2 torus: self + 2 distinct neighbours
    assert sum(bundle["weights"].values()) == pytest.approx(1.0)
