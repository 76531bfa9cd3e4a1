"""Cellular coevolution: torus neighbourhoods, placement, Lipizzaner's operators, the state exchange,
Mustangs' losses, and placement invariance."""

import itertools
import json
import random

import numpy as np
import pytest
import torch
from torch import nn

from conftest import run_scenario, tiny_scenario
from suite.config.expansion import parse_scenario
from suite.config.plan import process_grid
from suite.config.scenario import ScenarioError, scenario_section
from suite.gan.losses import MUSTANGS_CHOICES, get_loss
from suite.gan.models import build_pair
from suite.measure.metrics.rulers import PACKAGED_RULERS
from suite.strategies.cellular.decide import es_step, replacement, tournament
from suite.strategies.cellular.grid import (
    cells,
    discriminator_trains,
    mixture_assignment,
    mutate_learning_rates,
    neighbourhood,
    owner,
    propose_weights,
)
from suite.strategies.cellular.state import CellState, Genomes, Layout, module_vector

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
    [
        ((2, 2), 1, (1, 1)),
        ((2, 2), 2, (1, 2)),
        ((2, 2), 4, (2, 2)),
        ((3, 4), 2, (1, 2)),
        ((3, 4), 4, (1, 4)),
        ((3, 4), 6, (3, 2)),
        ((4, 4), 8, (2, 4)),
    ],
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

    def __new__(cls, draws):  # Python 3.10's Random seeds from the constructor's arguments
        return super().__new__(cls, 0)

    def __init__(self, draws):
        super().__init__(0)
        self.draws = list(draws)

    def sample(self, population, k):
        return self.draws.pop(0)


def test_tournament_picks_the_fittest_of_the_drawn():
    fitness = [5.0, 1.0, 3.0, 4.0]
    assert tournament(fitness, 2, Draws([[0, 3]]))[0] == 3
    assert tournament(fitness, 2, Draws([[2, 1]]))[0] == 1
    assert tournament([2.0, 2.0, 9.0], 2, Draws([[1, 0]]))[0] == 1  # tie: the first drawn wins
    assert tournament(fitness, 4, random.Random(0))[0] == 1  # everyone drawn: the global best
    assert tournament([7.0], 2, random.Random(0))[0] == 0  # fewer individuals than the tournament


def test_learning_rate_mutation_is_lipizzaners():
    lr0, alpha, p = 2e-4, 1e-4, 0.5
    # the reference formula (mutate_hyperparams), on the same random stream
    rng = np.random.default_rng(1)
    deltas = rng.normal(loc=-(lr0 / 10), scale=lr0, size=5)
    deltas[rng.random(5) < 1 - p] = 0
    expected = [max(0, lr + d * alpha) for lr, d in zip([lr0, 1e-4, 3e-4, lr0, 0.0], deltas)]
    assert mutate_learning_rates([lr0, 1e-4, 3e-4, lr0, 0.0], lr0, alpha, p, np.random.default_rng(1)) == expected

    # the distribution of a step: alpha * N(-lr0/10, lr0) with probability p, else 0
    steps = np.array(mutate_learning_rates([lr0] * 400_000, lr0, alpha, p, np.random.default_rng(0))) - lr0
    moved = steps[steps != 0]
    assert len(moved) / len(steps) == pytest.approx(p, abs=0.005)
    assert moved.mean() == pytest.approx(-alpha * lr0 / 10, rel=0.1)  # a slow downward drift
    assert moved.std() == pytest.approx(alpha * lr0, rel=0.02)  # 2e-8: 5,000 times below N(0, 1e-4)

    # clipped at 0, not at a positive floor
    tiny = np.array(mutate_learning_rates([1e-12] * 10_000, lr0, alpha, 1.0, np.random.default_rng(0)))
    assert tiny.min() == 0.0 and 0.45 < np.mean(tiny == 0.0) < 0.6  # P(delta < 0) = Phi(0.1) = 0.54
    assert mutate_learning_rates([lr0], lr0, alpha, 0.0, np.random.default_rng(0)) == [lr0]


def test_discriminator_skip_is_lipizzaners():
    # lipizzaner_gan_trainer.py: D trains when skip == 0 or batch % (skip + 1) == 0
    assert [discriminator_trains(b, 1) for b in range(5)] == [True, False, True, False, True]
    assert [discriminator_trains(b, 2) for b in range(4)] == [True, False, False, True]
    assert all(discriminator_trains(b, 0) for b in range(4))


def test_replacement_is_lipizzaners():
    # the best new individual replaces the worst old one where strictly fitter; best first
    assert replacement([3.0, 1.0], [0.5, 4.0], 1)[0] == [("new", 0), ("old", 1)]
    assert replacement([3.0, 1.0], [3.5, 0.5], 1)[0] == [("new", 1), ("old", 1)]
    assert replacement([1.0], [1.0], 1)[0] == [("old", 0)]  # a tie keeps the old one
    assert replacement([1.0], [0.9], 1)[0] == [("new", 0)]
    # n = 2, pairwise: the best new against the 2nd worst old (here the best), the 2nd best new
    # against the worst; keeping the best 2 of all 4 would keep old 0 instead of old 1
    assert replacement([1.0, 2.0], [0.5, 2.5], 2)[0] == [("new", 0), ("old", 1)]


def test_mixture_assignment():
    w = np.array([0.5, 0.25, 0.25])
    exact = mixture_assignment(w, 8, "exact_proportion", np.random.default_rng(0))
    assert sorted(exact.tolist()) == [0, 0, 0, 0, 1, 1, 2, 2]
    # ceil(n * w) copies, shuffled, cut to n: never more than ceil(n * w) of a member
    odd = mixture_assignment(np.array([0.5, 0.3, 0.2]), 7, "exact_proportion", np.random.default_rng(3))
    assert len(odd) == 7 and all(np.sum(odd == k) <= np.ceil(7 * wk) for k, wk in enumerate([0.5, 0.3, 0.2]))
    draws = mixture_assignment(w, 20_000, "independent_probability", np.random.default_rng(0))
    assert np.bincount(draws) / len(draws) == pytest.approx(w, abs=0.02)
    assert not np.any(mixture_assignment(np.array([0.0, 1.0]), 50, "exact_proportion", np.random.default_rng(0)) == 0)


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


# --- individuals travel with their Adam state ---------------------------------------------------------------


def make_pair(seed):
    return build_pair(20, 1, 8, dropout=0.0, seed=seed)


def new_cell(seed: int, population: int = 2) -> CellState:
    pairs = [make_pair(seed + 10 * s) for s in range(population)]
    gs, ds = [g for g, _ in pairs], [d for _, d in pairs]
    adam = [torch.optim.Adam(m.parameters(), lr=2e-4, betas=(0.5, 0.999)) for m in gs + ds]
    return CellState((0, 0), gs, ds, adam[:population], adam[population:], [2e-4] * population, [2e-4] * population, np.ones(1))


def train_steps(g, d, opt_g, opt_d, steps: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    loss = get_loss("bce")
    for _ in range(steps):
        z, real = torch.randn(8, 8, generator=gen), torch.rand(8, 1, 20, 20, generator=gen) * 2 - 1
        if opt_d is not None:
            opt_d.zero_grad()
            loss.discriminator(d(real), d(g(z).detach())).backward()
            opt_d.step()
        opt_g.zero_grad()
        loss.generator(d(g(z))).backward()
        opt_g.step()


def assert_same_individual(a_net, a_opt, b_net, b_opt):
    for (name, x), y in zip(a_net.state_dict().items(), b_net.state_dict().values()):
        assert torch.equal(x, y), name  # weights and buffers (BatchNorm statistics and counters)
    for p, q in zip(a_opt.param_groups[0]["params"], b_opt.param_groups[0]["params"]):
        sa, sb = a_opt.state.get(p, {}), b_opt.state.get(q, {})
        assert sa.keys() == sb.keys()
        for key in sa:
            assert torch.equal(sa[key], sb[key]), key  # exp_avg, exp_avg_sq, step


@pytest.mark.slow
def test_an_individual_round_trips_with_its_adam_state():
    g, d = make_pair(0)
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    train_steps(g, d, opt_g, opt_d, 3, seed=0)
    layout = Layout(g)
    vector = layout.pack(g, opt_g, 1.2345e-4)
    assert vector.dtype == torch.float32 and vector.numel() == layout.size

    g2, _ = make_pair(99)
    opt_g2 = torch.optim.Adam(g2.parameters(), lr=2e-4, betas=(0.5, 0.999))
    assert layout.load(vector, g2, opt_g2) == float(np.float32(1.2345e-4))
    assert opt_g2.param_groups[0]["lr"] == float(np.float32(1.2345e-4))
    assert_same_individual(g, opt_g, g2, opt_g2)
    assert float(opt_g2.state[next(g2.parameters())]["step"]) == 3
    # and training goes on identically: the moments were not reset
    opt_g.param_groups[0]["lr"] = opt_g2.param_groups[0]["lr"]
    train_steps(g, d, opt_g, None, 2, seed=1)
    train_steps(g2, d, opt_g2, None, 2, seed=1)
    assert_same_individual(g, opt_g, g2, opt_g2)


@pytest.mark.slow
def test_a_cell_vector_restores_every_individual_exactly():
    cell = new_cell(0)
    train_steps(cell.generators[0], cell.discriminators[0], cell.opt_g[0], cell.opt_d[0], 2, seed=0)
    train_steps(cell.generators[1], cell.discriminators[0], cell.opt_g[1], None, 1, seed=1)  # slot 1's D never trained
    cell.lr_g, cell.lr_d = [1.5e-4, 2.5e-4], [3.5e-4, 0.0]
    genomes = Genomes(make_pair, 2)
    vector = genomes.pack(cell)
    assert vector.numel() == genomes.cell_size

    other = new_cell(7)
    for kind in ("g", "d"):
        nets, opts, lrs = other.side(kind)
        for s in range(2):
            lrs[s] = genomes.layouts[kind].load(genomes.part(vector, s, kind), nets[s], opts[s])
    for kind in ("g", "d"):
        for s in range(2):
            assert_same_individual(cell.side(kind)[0][s], cell.side(kind)[1][s], other.side(kind)[0][s], other.side(kind)[1][s])
    assert other.lr_g == [float(np.float32(v)) for v in cell.lr_g] and other.lr_d == [float(np.float32(v)) for v in cell.lr_d]
    assert not other.opt_d[1].state  # an untrained individual arrives with a fresh Adam state
    assert torch.equal(genomes.pack(other), vector)
    g, _ = genomes.networks(0, vector, 1)  # evaluation copies: the networks only
    assert torch.equal(module_vector(g), module_vector(cell.generators[1]))


# --- Mustangs' losses -------------------------------------------------------------------------------------------


def test_mustangs_draws_three_different_generator_updates():
    """minimax, mse and heuristic move a generator in three directions; bce is heuristic doubled.

    Adam ignores a constant factor (its first step is lr * sign(gradient)), so losses count as
    different only when their normalised gradients differ. They do where D is confident on some
    samples and not on others, so the toy discriminator here spreads its scores over [-7, 7].
    """
    gen = torch.Generator().manual_seed(0)
    g, d = nn.Linear(4, 16), nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
    with torch.no_grad():
        for p in [*g.parameters(), *d.parameters()]:
            p.copy_(torch.randn(p.shape, generator=gen))
    z = torch.randn(256, 4, generator=gen)
    assert d(g(z)).std() > 1

    def direction(name):
        g.zero_grad()
        get_loss(name).generator(d(g(z)).squeeze(1)).backward()
        grad = torch.cat([p.grad.reshape(-1) for p in g.parameters()])
        return grad / grad.norm()

    directions = {name: direction(name) for name in ("bce", *MUSTANGS_CHOICES)}
    assert set(MUSTANGS_CHOICES) == {"minimax", "mse", "heuristic"}
    assert float(directions["bce"] @ directions["heuristic"]) == pytest.approx(1.0, abs=1e-6)
    assert torch.equal(torch.sign(directions["bce"]), torch.sign(directions["heuristic"]))
    for a, b in itertools.combinations(MUSTANGS_CHOICES, 2):
        assert float(directions[a] @ directions[b]) < 0.95, (a, b)
        assert (torch.sign(directions[a]) != torch.sign(directions[b])).float().mean() > 0.1, (a, b)


def test_minimax_is_the_original_objective():
    scores = torch.tensor([-3.0, 0.0, 2.0])
    d_of_g = torch.sigmoid(scores)
    assert float(get_loss("minimax").generator(scores)) == pytest.approx(float(0.5 * torch.log(1 - d_of_g).mean()), rel=1e-6)
    assert float(get_loss("heuristic").generator(scores)) == pytest.approx(float(-0.5 * torch.log(d_of_g).mean()), rel=1e-6)
    assert float(get_loss("mse").generator(scores)) == pytest.approx(float(((d_of_g - 1) ** 2).mean()), rel=1e-6)


# --- settings ------------------------------------------------------------------------------------------------


def cellular_scenario(**cellular) -> dict:
    return tiny_scenario("cellular", [{"strategy": "cellular", "engine": "mpi", "grid": [2, 2]}], cellular=cellular)


@pytest.mark.parametrize(
    "cellular, metrics, error",
    [
        (
            {"mixture_samples": 10},
            {},
            r"cellular\.mixture_samples: 10 samples give a rank-deficient covariance in the 10-d class-logit",
        ),
        (
            {"mixture_samples": 100, "mixture_features": "features"},
            {"features": "auto"},
            r"cellular\.mixture_samples: .* 128-d feature space of the steering network steering:digits",
        ),
        (  # the run's metrics network is the ruler that judges the comparison: it never steers training
            {"mixture_features": "metrics"},
            {"features": "classifier"},
            r"cellular\.mixture_features: metrics would steer the mixture weights with the run's ruler "
            r"\(metrics\.features: classifier\), the network that judges the comparison; .* steering:digits",
        ),
        ({"n_replacements": 2}, {}, r"cellular\.n_replacements: 2 is more than the population \(1\)"),
        ({"mutation_probability": 1.5}, {}, r"cellular\.mutation_probability: must be at most 1.0, got 1.5"),
        ({"discriminator_skip": -1}, {}, r"cellular\.discriminator_skip: must not be negative"),
        ({"mutation_scale": 0.1}, {}, r"cellular\.mutation_scale: unknown field"),
    ],
)
def test_cellular_settings_are_validated(cellular, metrics, error):
    scenario = cellular_scenario(**cellular)
    scenario["metrics"].update(metrics)
    with pytest.raises(ScenarioError, match=error):
        parse_scenario(scenario)


def test_cellular_defaults_are_lipizzaners_mnist_settings():
    cfg = scenario_section(parse_scenario(cellular_scenario()), "cellular")
    # lipizzaner-gan/mnist.yml: population_size, tournament_size, n_replacements, alpha, mutation_probability,
    # discriminator_skip_each_nth_step, mixture_sigma, score_sample_size, fitness_sample_size, n_batches,
    # mixture_generator_samples_mode
    assert (
        cfg.population,
        cfg.tournament_size,
        cfg.n_replacements,
        cfg.mutation_rate,
        cfg.mutation_probability,
        cfg.discriminator_skip,
        cfg.mixture_scale,
        cfg.mixture_samples,
        cfg.fitness_samples,
        cfg.batches_per_iteration,
        cfg.mixture_sampling,
    ) == (1, 2, 1, 0.0001, 0.5, 1, 0.01, 1000, 1000, 0, "exact_proportion")
    assert cfg.mixture_features == "logits"


# --- real runs: one grid, three placements -------------------------------------------------------------------


def placement_runs(tmp_path_factory, procs: list[int]):
    """The 2x2 grid's runs on ``procs`` ranks: (exit code, records, results folder)."""
    tmp = tmp_path_factory.mktemp("cellular")
    scenario = tiny_scenario(
        "cellular",
        [{"strategy": "cellular", "engine": "mpi", "grid": [2, 2], "procs": procs}],
        train={"batch_size": 16, "threads": 1},
        cellular={
            "iterations": 2,
            "batches_per_iteration": 1,
            "mixture_samples": 40,
            "fitness_samples": 40,
        },  # fitness in batches of 16, 16, 8
        metrics={"enabled": True, "samples": 100, "features": "classifier"},
    )
    code, records = run_scenario(tmp, scenario)
    return code, records, tmp / "results"


@pytest.fixture(scope="module")
def placements(tmp_path_factory):
    """One rank holding every cell, and two ranks holding two each."""
    return placement_runs(tmp_path_factory, [1, 2])


@pytest.fixture(scope="module")
def placements_matrix(tmp_path_factory):
    """A rank per cell (4 ranks on this 2-core host: oversubscribed, so `make test-matrix`)."""
    return placement_runs(tmp_path_factory, [4])


def placement(request, procs: int):
    """(exit code, record, results folder) of the 2x2 grid's run on ``procs`` ranks."""
    code, records, results = request.getfixturevalue("placements_matrix" if procs == 4 else "placements")
    run_id = f"cellular-mustangs-mpi-p{procs}-g2x2-r0"
    assert records[run_id]["status"] == "ok", records[run_id].get("error")
    return code, records[run_id], results


@pytest.mark.multiproc
@pytest.mark.parametrize("procs", [2, pytest.param(4, marks=pytest.mark.matrix)])
def test_placement_does_not_change_the_result(request, tmp_path, procs):
    from suite.cli import main

    samples, weights = {}, {}
    for p in (1, procs):
        code, record, results = placement(request, p)
        out = tmp_path / f"p{p}.npz"
        assert main(["sample", str(results / record["run_id"]), "--n", "64", "--seed", "0", "--out", str(out)]) == 0
        with np.load(out) as npz:
            samples[p] = npz["images"]
        weights[p] = record["mixture_weights"]
        assert code == 0
    assert np.array_equal(samples[1], samples[procs]) and weights[1] == weights[procs]


@pytest.mark.multiproc
@pytest.mark.matrix
def test_a_rank_per_cell_exchanges_more_than_two_cells_per_rank(request):
    _, two, _ = placement(request, 2)
    _, four, _ = placement(request, 4)
    assert four["cells_per_rank"] == 1 and four["comm"]["bytes"] > two["comm"]["bytes"]
    assert all(len(v) == 4 for v in four["phases_s"].values())
    assert four["model_digest"] == two["model_digest"]


@pytest.mark.multiproc
def test_cellular_record(placements):
    _, records, results = placements
    one, two = (records[f"cellular-mustangs-mpi-p{p}-g2x2-r0"] for p in (1, 2))
    assert one["grid"] == [2, 2] and [r["cells_per_rank"] for r in (one, two)] == [4, 2]
    assert one["comm"]["bytes"] == 0  # one rank holds every cell: nothing to exchange
    assert two["comm"]["bytes"] > 0
    assert set(one["phases_s"]) == {"exchange", "fitness", "train", "mixture"}
    assert all(len(v) == 2 for v in two["phases_s"].values())
    assert one["quality"]["features"] == "classifier:digits"
    best = one["quality_best_cell"]  # 100 samples in 128 dimensions: FID withheld, KID given
    assert best["fid"] is None and "128 feature dimensions" in best["fid_note"] and best["kid_mean"] > 0
    # at P = 2 rank 1 scores a share of the models (snapshots, the best cell): the same scores as one rank's
    assert two["quality_best_cell"] == best and two["quality"] == one["quality"]
    scores = ("step", "fid", "kid_mean", "kid_std", "is_mean", "n")
    assert [[p[k] for k in scores] for p in two["curve"]] == [[p[k] for k in scores] for p in one["curve"]]
    # what the ES saw, each iteration: mixture scores on 40 samples; the quality curve: the best mixture of each
    # snapshot scored like the final model (100 samples), ending with the model at the end of the window
    assert len(one["mixture_curve"]) == 2 and one["mixture_curve"][0]["n"] == 40
    assert one["curve"][-1]["n"] == 100 and one["curve"][-1]["step"] == 8 and one["curve"][-1]["kid_mean"] is not None
    assert one["model_digest"] == two["model_digest"]  # the same model on 1 and 2 ranks (4: test-matrix)
    # the mixtures were scored in the steering network's 10 class logits, on 40 generated and 40 real images
    assert one["mixture_score"] == {
        "features": "steering:digits/logits",
        "dim": 10,
        "n": 40,
        "n_real": 40,
        "sampling": "exact_proportion",
    }
    assert one["ranking"]["features"] == "steering:digits/logits" and one["ranking"]["n"] == 40
    # the record names both networks: the one that steered the mixture weights and the ruler that scored the run
    steering = json.loads((PACKAGED_RULERS / "rulers.json").read_text())["steering:digits"]
    named = {
        "name": "steering:digits",
        "sha256": steering["sha256"],
        "use": "cellular mixture weights (logits)",
        "architecture": "pixel-mlp",  # its provenance: not the ruler's architecture, nor its data
        "trained_on": steering["trained_on"],
        "agreement_top1": steering["agreement_top1"],
        "rank_correlation": steering["rank_correlation_logits"],
        "measured_against": steering["measured_against"],
    }
    assert one["steering"] == two["steering"] == named
    assert one["quality"]["ruler_sha256"] != steering["sha256"]
    # learning rates mutate by alpha * N(-lr/10, lr) per step: they move, by about 1e-8 a step
    lrs = [lr for r in (one, two) for h in r["history"].values() for e in h for lr in e["lr_g"] + e["lr_d"]]
    assert len(set(lrs)) > 1 and all(abs(lr - 2e-4) < 1e-6 for lr in lrs)
    # every decision is logged (tournament and replacement of both sides, the ES step) with its closest call in
    # standard errors; the same decisions on 1 and 2 ranks
    ops = [[(d["op"], d.get("side")) for d in e["decisions"]] for h in one["history"].values() for e in h]
    assert all(
        o == [("tournament", "g"), ("tournament", "d"), ("replace", "g"), ("replace", "d"), ("mixture", None)] for o in ops
    )
    assert [e["decisions"] for h in one["history"].values() for e in h] == [
        e["decisions"] for h in two["history"].values() for e in h
    ]
    assert one["ranking"]["decision_margin"] == 2.0 and "best_mixture_z" in one["ranking"]
    bundle = torch.load(results / one["run_id"] / "generator.pt", weights_only=False)
    assert bundle["kind"] == "mixture" and len(bundle["generators"]) == 3  # a 2x2 torus: self + 2 distinct neighbours
    assert sum(bundle["weights"].values()) == pytest.approx(1.0)
