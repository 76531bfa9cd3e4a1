"""``cellular``: Lipizzaner / Mustangs coevolution on a toroidal grid, over MPI (seeds 001, 003).

Each cell of an R x C torus holds ``population`` generators and discriminators. One iteration
(``cellular.iterations`` iterations, default ``train.epochs``) does, for every cell, synchronously:

1. **exchange**: receive the neighbourhood's individuals as they were at the end of the last
   iteration (the cell plus 4 von Neumann or 8 Moore neighbours);
2. **fitness**: every generator against every discriminator of the neighbourhood on one batch;
   a generator's fitness is its mean generator loss, a discriminator's its mean discriminator
   loss (lower is better);
3. **selection**: tournaments (``tournament_size``) pick the cell's generators and
   discriminators from the neighbourhood; they are copied into the cell's networks, whose Adam
   optimisers the cell keeps;
4. **mutation**: each selected learning rate takes a Gaussian step with ``mutation_probability``;
5. **training**: the selected pairs train on ``batches_per_iteration`` batches of the data (0:
   a full pass) with the loss (``mustangs``: bce, mse or heuristic drawn per batch or per cell);
6. **replacement**: the trained individuals and the cell's previous ones are scored against the
   neighbourhood again and the best ``population`` of each kind stay;
7. **mixture**: the cell's mixture weights over its neighbourhood's generators take a (1+1)-ES
   step, kept only when the mixture's FID (``mixture_samples`` samples, the run's feature
   network) improves.

Distribution: ranks form a periodic Cartesian communicator; each owns an equal rectangular
block of cells. Once per iteration every rank sends the states of its boundary cells to the
neighbouring ranks that need them, as flat float32 arrays with non-blocking point-to-point
messages (no servers, no pickles). Every random draw is seeded by the scenario seed, the
cell's coordinates and the iteration, so a grid gives the same generators on any number of
ranks (with one thread per rank, so that floating-point reductions agree).
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..losses import Loss, get_loss, mustangs_draw
from ..models import build_pair
from ..scenario import Run
from ..seeding import derive_seed, torch_generator
from .base import Outcome, Strategy, cpu_state, make_bundle
from .grid import OFFSETS, cells, es_step, mutate_learning_rate, neighbourhood, owner, process_grid, propose_weights, tournament

log = logging.getLogger(__name__)
PHASES = ("exchange", "fitness", "train", "mixture")


# --- flat state vectors (what travels between ranks) --------------------------------------------------


def module_vector(module: nn.Module) -> torch.Tensor:
    """Parameters and buffers of ``module`` as one float32 vector (BatchNorm counters included)."""
    return torch.cat([t.detach().reshape(-1).float().cpu() for t in module.state_dict().values()])


def load_module_vector(module: nn.Module, vector: torch.Tensor) -> None:
    """Inverse of :func:`module_vector` (same architecture)."""
    offset = 0
    with torch.no_grad():
        for tensor in module.state_dict().values():
            n = tensor.numel()
            tensor.copy_(vector[offset : offset + n].view_as(tensor).to(tensor.dtype))
            offset += n


@contextlib.contextmanager
def eval_mode(modules):
    """Evaluate ``modules`` as the final sampler does (BatchNorm running statistics, no dropout)."""
    modes = [m.training for m in modules]
    for m in modules:
        m.eval()
    try:
        yield
    finally:
        for m, mode in zip(modules, modes):
            m.train(mode)


@contextlib.contextmanager
def batchnorm_stats_kept(modules):
    """Run forward passes in training mode without changing BatchNorm running statistics."""
    saved = [(m, m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
             for module in modules for m in module.modules() if isinstance(m, nn.BatchNorm2d)]
    try:
        yield
    finally:
        for m, mean, var, count in saved:
            m.running_mean.copy_(mean)
            m.running_var.copy_(var)
            m.num_batches_tracked.copy_(count)


# --- one cell -------------------------------------------------------------------------------------------------


@dataclass
class CellState:
    """The individuals of one cell, their optimisers and learning rates, and its mixture."""

    coords: tuple[int, int]
    generators: list[nn.Module]
    discriminators: list[nn.Module]
    opt_g: list[torch.optim.Optimizer]
    opt_d: list[torch.optim.Optimizer]
    lr_g: list[float]
    lr_d: list[float]
    mixture: np.ndarray  # weights over the neighbourhood's generators
    mixture_score: float = float("inf")
    fixed_loss: Loss | None = None  # Mustangs per cell: drawn once
    history: list[dict] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"cell{self.coords[0]}_{self.coords[1]}"

    def vector(self) -> torch.Tensor:
        parts = []
        for s in range(len(self.generators)):
            parts += [module_vector(self.generators[s]), module_vector(self.discriminators[s]),
                      torch.tensor([self.lr_g[s], self.lr_d[s]], dtype=torch.float32)]
        return torch.cat(parts)


class Individuals:
    """Template networks into which received state vectors are loaded for evaluation."""

    def __init__(self, make_pair, population: int):
        g, d = make_pair(0)
        self.make_pair, self.population = make_pair, population
        self.g_size, self.d_size = module_vector(g).numel(), module_vector(d).numel()
        self.slot_size = self.g_size + self.d_size + 2
        self.pool: list[tuple[nn.Module, nn.Module]] = []

    @property
    def cell_size(self) -> int:
        return self.population * self.slot_size

    def load(self, index: int, vector: torch.Tensor, slot: int) -> tuple[nn.Module, nn.Module, float, float]:
        """Load slot ``slot`` of a cell vector into pool entry ``index``; return (G, D, lr_g, lr_d)."""
        while len(self.pool) <= index:
            self.pool.append(self.make_pair(0))
        g, d = self.pool[index]
        base = slot * self.slot_size
        load_module_vector(g, vector[base : base + self.g_size])
        load_module_vector(d, vector[base + self.g_size : base + self.g_size + self.d_size])
        lr_g, lr_d = vector[base + self.g_size + self.d_size : base + self.slot_size].tolist()
        return g, d, lr_g, lr_d


# --- the exchange ---------------------------------------------------------------------------------------------


class Exchange:
    """Who sends which cells to whom, fixed for the run; one call moves one iteration's states."""

    def __init__(self, engine, grid, kind: str):
        from mpi4py import MPI

        self.MPI, self.engine, self.grid = MPI, engine, grid
        self.pgrid = process_grid(grid, engine.size)
        self.cart = engine.world_comm.Create_cart(dims=list(self.pgrid), periods=[True, True], reorder=False)
        self.rank = self.cart.Get_rank()
        me = tuple(self.cart.Get_coords(self.rank))
        self.owner_rank = {c: self.cart.Get_cart_rank(list(owner(c, grid, self.pgrid))) for c in cells(grid)}
        self.mine = [c for c in cells(grid) if self.owner_rank[c] == self.rank]
        assert all(tuple(owner(c, grid, self.pgrid)) == me for c in self.mine)
        needed = {c for cell in self.mine for c in neighbourhood(cell, grid, kind)}
        self.recv = {}  # rank -> cells it sends me
        for c in sorted(needed - set(self.mine)):
            self.recv.setdefault(self.owner_rank[c], []).append(c)
        self.send = {}  # rank -> my cells it needs
        for c in cells(grid):
            if self.owner_rank[c] == self.rank:
                continue
            for n in neighbourhood(c, grid, kind):
                if self.owner_rank[n] == self.rank and n not in self.send.setdefault(self.owner_rank[c], []):
                    self.send[self.owner_rank[c]].append(n)
        for ranks in self.send.values():
            ranks.sort()

    def run(self, states: dict, cell_size: int, tag: int) -> dict:
        """Send my boundary cells, receive my neighbours' cells; returns all needed cell vectors."""
        if not self.send and not self.recv:  # every neighbour lives on this rank
            return dict(states)
        start = self.engine.timeline.mark()
        requests, buffers, sent = [], {}, 0
        for rank, cs in self.recv.items():
            buffers[rank] = np.empty(len(cs) * cell_size, dtype=np.float32)
            requests.append(self.cart.Irecv(buffers[rank], source=rank, tag=tag))
        for rank, cs in self.send.items():
            payload = np.concatenate([states[c].numpy() for c in cs]).astype(np.float32, copy=False)
            requests.append(self.cart.Isend(payload, dest=rank, tag=tag))
            sent += payload.nbytes
            buffers.setdefault(("out", rank), payload)  # keep alive until Waitall
        self.MPI.Request.Waitall(requests)
        received = dict(states)
        for rank, cs in self.recv.items():
            for k, c in enumerate(cs):
                received[c] = torch.from_numpy(buffers[rank][k * cell_size : (k + 1) * cell_size].copy())
        partners = len(set(self.recv) | set(self.send)) + 1
        self.engine.comm.add(sent, partners, (start, self.engine.timeline.mark()))
        return received


# --- the strategy -----------------------------------------------------------------------------------------------


class Cellular:
    """State and steps of the cellular strategy on one rank."""

    def __init__(self, run: Run, engine, data, telemetry, scorer):
        self.run, self.engine, self.data, self.telemetry, self.scorer = run, engine, data, telemetry, scorer
        self.cfg, self.seed, self.grid = run.cellular, run.train.seed, tuple(run.grid)
        self.device = engine.device
        self.exchange = Exchange(engine, self.grid, self.cfg.neighbourhood)
        self.individuals = Individuals(self._pair, self.cfg.population)
        self.batch = run.train.batch_size
        if len(data) < self.batch:
            raise ValueError(f"train.batch_size {self.batch} is larger than the {len(data)} training images")
        self.batches = self.cfg.batches_per_iteration or len(data) // self.batch
        self.iterations = self.cfg.iterations or run.train.epochs
        self.cells = {c: self._new_cell(c) for c in self.exchange.mine}
        self.phase_s = dict.fromkeys(PHASES, 0.0)
        self.images = 0

    def _pair(self, seed: int):
        g, d = build_pair(self.run.dataset.image_size, self.data.channels, self.run.model.latent_dim,
                          dropout=self.run.model.dropout, seed=seed)
        return g.to(self.device), d.to(self.device)

    def _new_cell(self, c) -> CellState:
        gs, ds, og, od = [], [], [], []
        lr, betas = self.run.train.lr, tuple(self.run.train.betas)
        for s in range(self.cfg.population):
            g, d = self._pair(derive_seed(self.seed, "init", "cell", c, s))
            gs.append(g)
            ds.append(d)
            og.append(torch.optim.Adam(g.parameters(), lr=lr, betas=betas))
            od.append(torch.optim.Adam(d.parameters(), lr=lr, betas=betas))
        width = len(neighbourhood(c, self.grid, self.cfg.neighbourhood)) * self.cfg.population
        cell = CellState(c, gs, ds, og, od, [lr] * self.cfg.population, [lr] * self.cfg.population, np.full(width, 1.0 / width))
        if self.run.loss == "mustangs" and self.cfg.mustangs_choice == "cell":
            cell.fixed_loss = mustangs_draw(random.Random(derive_seed(self.seed, "mustangs", c)))
        return cell

    # --- helpers ---------------------------------------------------------------------------------------------
    def _loss(self, cell: CellState, rng: random.Random) -> Loss:
        if self.run.loss != "mustangs":
            return get_loss(self.run.loss)
        return cell.fixed_loss or mustangs_draw(rng)

    def _batch(self, *name) -> torch.Tensor:
        rng = np.random.default_rng(derive_seed(self.seed, "batch", *name))
        with self.telemetry.data():
            images, _ = self.data.fetch(rng.choice(len(self.data), size=self.batch, replace=False))
            return images.to(self.device)

    def _noise(self, *name) -> torch.Tensor:
        return torch.randn(self.batch, self.run.model.latent_dim, generator=torch_generator(self.seed, "z", *name)).to(self.device)

    @torch.no_grad()
    def _fitness(self, gens, discs, real, z, loss) -> tuple[list[float], list[float]]:
        """Mean generator loss of each G against all Ds, and mean D loss of each D against all Gs."""
        with batchnorm_stats_kept(gens + discs):
            fakes = [g(z) for g in gens]
            g_fit = [0.0] * len(gens)
            d_fit = [0.0] * len(discs)
            for j, d in enumerate(discs):
                real_scores = d(real)
                for k, fake in enumerate(fakes):
                    fake_scores = d(fake)
                    g_fit[k] += float(loss.generator(fake_scores)) / len(discs)
                    d_fit[j] += float(loss.discriminator(real_scores, fake_scores)) / len(gens)
        self.images += len(real) * len(discs) * (1 + len(gens))
        return g_fit, d_fit

    def _train(self, cell: CellState, it: int, rng: random.Random) -> None:
        for b in range(self.batches):
            loss = self._loss(cell, rng)
            real = self._batch("train", cell.coords, it, b)
            for s, (g, d) in enumerate(zip(cell.generators, cell.discriminators)):
                with torch.no_grad():
                    fake = g(self._noise("d", cell.coords, it, b, s))
                d_loss = loss.discriminator(d(real), d(fake))
                cell.opt_d[s].zero_grad(set_to_none=True)
                d_loss.backward()
                cell.opt_d[s].step()
                for p in d.parameters():
                    p.requires_grad_(False)
                g_loss = loss.generator(d(g(self._noise("g", cell.coords, it, b, s))))
                cell.opt_g[s].zero_grad(set_to_none=True)
                g_loss.backward()
                cell.opt_g[s].step()
                for p in d.parameters():
                    p.requires_grad_(True)
                self.images += 3 * len(real)

    # --- one iteration ---------------------------------------------------------------------------------------
    def iteration(self, it: int) -> None:
        t = time.perf_counter()
        own = {c: cell.vector() for c, cell in self.cells.items()}
        states = self.exchange.run(own, self.individuals.cell_size, tag=it)
        self.phase_s["exchange"] += time.perf_counter() - t
        for c in sorted(self.cells):
            self._evolve(self.cells[c], states, it)

    def _evolve(self, cell: CellState, states: dict, it: int) -> None:
        cfg, p = self.cfg, self.cfg.population
        rng = random.Random(derive_seed(self.seed, "cell", cell.coords, it))
        torch.manual_seed(derive_seed(self.seed, "dropout", cell.coords, it))
        hood = neighbourhood(cell.coords, self.grid, cfg.neighbourhood)

        t = time.perf_counter()
        loaded = [self.individuals.load(k * p + s, states[n], s) for k, n in enumerate(hood) for s in range(p)]
        gens, discs = [x[0] for x in loaded], [x[1] for x in loaded]
        loss = self._loss(cell, rng)
        g_fit, d_fit = self._fitness(gens, discs, self._batch("fitness", cell.coords, it), self._noise("fit", cell.coords, it), loss)
        previous = states[cell.coords].clone()
        for s in range(p):  # selection and mutation into the cell's own networks (its Adam stays)
            gi, di = tournament(g_fit, cfg.tournament_size, rng), tournament(d_fit, cfg.tournament_size, rng)
            cell.generators[s].load_state_dict(gens[gi].state_dict())
            cell.discriminators[s].load_state_dict(discs[di].state_dict())
            cell.lr_g[s] = mutate_learning_rate(loaded[gi][2], cfg.mutation_probability, cfg.mutation_scale, rng)
            cell.lr_d[s] = mutate_learning_rate(loaded[di][3], cfg.mutation_probability, cfg.mutation_scale, rng)
            for group in cell.opt_g[s].param_groups:
                group["lr"] = cell.lr_g[s]
            for group in cell.opt_d[s].param_groups:
                group["lr"] = cell.lr_d[s]
        self.phase_s["fitness"] += time.perf_counter() - t

        t = time.perf_counter()
        self._train(cell, it, rng)
        self.phase_s["train"] += time.perf_counter() - t

        t = time.perf_counter()
        self._replace(cell, previous, gens, discs, loss, it)
        self.phase_s["fitness"] += time.perf_counter() - t

        t = time.perf_counter()
        self._mixture_step(cell, hood, states, it)
        self.phase_s["mixture"] += time.perf_counter() - t

    def _replace(self, cell: CellState, previous: torch.Tensor, gens, discs, loss, it: int) -> None:
        """Keep the best ``population`` of the trained and the previous individuals of the cell."""
        p = self.cfg.population
        spare = len(OFFSETS[self.cfg.neighbourhood]) * p  # pool entries past any neighbourhood's
        old = [self.individuals.load(spare + s, previous, s) for s in range(p)]
        cand_g = list(cell.generators) + [o[0] for o in old]
        cand_d = list(cell.discriminators) + [o[1] for o in old]
        real, z = self._batch("replace", cell.coords, it), self._noise("replace", cell.coords, it)
        g_fit, _ = self._fitness(cand_g, discs, real, z, loss)
        _, d_fit = self._fitness(gens, cand_d, real, z, loss)
        cand_lr_g = list(cell.lr_g) + [o[2] for o in old]
        cand_lr_d = list(cell.lr_d) + [o[3] for o in old]
        keep_g = sorted(range(2 * p), key=lambda i: (g_fit[i], i))[:p]
        keep_d = sorted(range(2 * p), key=lambda i: (d_fit[i], i))[:p]
        # copies first: a kept network may be one of the cell's own, about to be overwritten
        new_g = [{k: v.clone() for k, v in cand_g[i].state_dict().items()} for i in keep_g]
        new_d = [{k: v.clone() for k, v in cand_d[i].state_dict().items()} for i in keep_d]
        for s in range(p):
            cell.generators[s].load_state_dict(new_g[s])
            cell.discriminators[s].load_state_dict(new_d[s])
        cell.lr_g, cell.lr_d = [cand_lr_g[i] for i in keep_g], [cand_lr_d[i] for i in keep_d]

    def mixture_members(self, cell: CellState, hood, states) -> list[tuple[str, nn.Module]]:
        """(key, generator) of the cell's mixture: its own current generators and its neighbours'."""
        members = []
        for k, n in enumerate(hood):
            for s in range(self.cfg.population):
                if n == cell.coords:
                    g = cell.generators[s]
                else:
                    g = self.individuals.load(k * self.cfg.population + s, states[n], s)[0]
                members.append((f"cell{n[0]}_{n[1]}_s{s}", g))
        return members

    def _mixture_step(self, cell: CellState, hood, states, it: int) -> None:
        members = self.mixture_members(cell, hood, states)
        nets = [g for _, g in members]
        sample_seed = derive_seed(self.seed, "mixture-samples", cell.coords, it)
        score = self.scorer(nets, cell.mixture, sample_seed)
        proposal = propose_weights(cell.mixture, self.cfg.mixture_scale, np.random.default_rng(derive_seed(self.seed, "es", cell.coords, it)))
        proposal_score = self.scorer(nets, proposal, sample_seed)
        cell.mixture, cell.mixture_score, accepted = es_step(cell.mixture, score, proposal, proposal_score)
        cell.history.append({"iteration": it, "clock_s": self.telemetry.clock(), "mixture_fid": cell.mixture_score, "accepted": accepted,
                             "lr_g": list(cell.lr_g), "lr_d": list(cell.lr_d)})


# --- mixture scoring during training -------------------------------------------------------------------------------


class MixtureScorer:
    """FID of a weighted mixture of generators on ``n`` samples, with the run's feature network."""

    def __init__(self, run: Run, device, networks, reference):
        from ..metrics.evaluate import real_statistics

        self.n, self.device, self.latent = run.cellular.mixture_samples, device, run.model.latent_dim
        self.net = networks[0]
        self.real = real_statistics(reference, self.net)
        self.name = self.net.name

    @torch.no_grad()
    def __call__(self, generators, weights, seed: int) -> float:
        from ..metrics.scores import frechet_distance, statistics

        rng = np.random.default_rng(seed)
        counts = rng.multinomial(self.n, np.asarray(weights, dtype=np.float64) / np.sum(weights))
        z = torch.randn(self.n, self.latent, generator=torch.Generator().manual_seed(seed))
        images, offset = [], 0
        with eval_mode(generators):
            for g, count in zip(generators, counts):
                if count:
                    images.append(g(z[offset : offset + count].to(self.device)).cpu())
                    offset += count
        features, _ = self.net(torch.cat(images))
        return frechet_distance(*statistics(features), self.real["mu"], self.real["sigma"])


class CellularStrategy(Strategy):
    """The cellular strategy's phases on one rank; one telemetry step per coevolution iteration."""

    def setup(self) -> None:
        from ..metrics import Reference

        run, engine = self.run, self.engine
        if not hasattr(engine, "world_comm"):
            raise ValueError(f"the cellular strategy runs on the mpi engine, not {engine.name}")
        reference = Reference.for_run(run, engine.device)
        # Rank 0 prepares (and caches) the feature network and real statistics first; the others
        # then read them from the cache instead of all computing them at once.
        scorer = MixtureScorer(run, engine.device, reference.networks(), reference) if engine.rank == 0 else None
        engine.barrier()
        self.scorer = scorer or MixtureScorer(run, engine.device, reference.networks(), reference)
        self.cellular = Cellular(run, engine, self.data, self.telemetry, self.scorer)
        self.next_iteration = 0

    def _iterate(self, until: int) -> None:
        strategy, telemetry = self.cellular, self.telemetry
        while self.next_iteration < until:
            it = self.next_iteration
            with telemetry.counting_flops():
                telemetry.begin_step()
                before = strategy.images
                strategy.iteration(it)
                telemetry.end_step(images=strategy.images - before)
            self.next_iteration += 1
            if self.engine.rank == 0:
                log.info("iteration %d/%d, %.0fs in the training window", it + 1, strategy.iterations, telemetry.clock())

    def warm_up(self) -> None:
        self._iterate(min(self.run.train.warmup_steps, self.cellular.iterations))

    def train(self) -> None:
        self.cellular.phase_s = dict.fromkeys(PHASES, 0.0)  # the phases of the window's iterations
        self._iterate(self.cellular.iterations)

    def finalize(self) -> Outcome:
        run, engine, strategy = self.run, self.engine, self.cellular
        # After training (not counted): every cell's generators and mixture go to rank 0.
        mine = {c: {"generators": [cpu_state(g) for g in cell.generators],
                    "mixture": cell.mixture.tolist(), "score": cell.mixture_score, "history": cell.history,
                    "lr_g": cell.lr_g, "lr_d": cell.lr_d}
                for c, cell in strategy.cells.items()}
        gathered = engine.gather_object({"cells": mine, "phases": strategy.phase_s})
        fields = {"grid": list(strategy.grid), "process_grid": list(strategy.exchange.pgrid),
                  "cells_per_rank": len(strategy.cells), "neighbourhood": run.cellular.neighbourhood,
                  "neighbourhood_size": max(len(neighbourhood(c, strategy.grid, run.cellular.neighbourhood)) for c in cells(strategy.grid)),
                  "population": run.cellular.population, "iterations": strategy.iterations,
                  "batches_per_iteration": strategy.batches, "global_batch": strategy.batch,
                  # generator updates of the whole grid
                  "generator_steps": strategy.iterations * strategy.batches * run.cellular.population * len(cells(strategy.grid))}
        if engine.rank != 0:
            return Outcome(None, fields=fields)
        all_cells = {c: v for part in gathered for c, v in part["cells"].items()}
        fields["phases_s"] = {name: [part["phases"][name] for part in gathered] for name in PHASES}
        return _results(run, self.data, strategy, self.scorer, all_cells, fields)


def _results(run: Run, data, strategy: Cellular, scorer: MixtureScorer, all_cells: dict, fields: dict) -> Outcome:
    """Rank 0: rank the cells and the mixtures, and package the best mixture as the model."""
    p, grid, kind = run.cellular.population, strategy.grid, run.cellular.neighbourhood

    def generator(c, s):
        g = build_pair(run.dataset.image_size, data.channels, run.model.latent_dim, seed=0)[0]
        g.load_state_dict(all_cells[c]["generators"][s])
        return g.to(strategy.device)

    final_seed = derive_seed(run.train.seed, "final-ranking")
    cell_scores = {c: scorer([generator(c, 0)], np.ones(1), final_seed) for c in sorted(all_cells)}
    mixture_scores = {}
    for c in sorted(all_cells):
        hood = neighbourhood(c, grid, kind)
        nets = [generator(n, s) for n in hood for s in range(p)]
        mixture_scores[c] = scorer(nets, np.asarray(all_cells[c]["mixture"]), final_seed)
    best_cell = min(cell_scores, key=lambda c: (cell_scores[c], c))
    best_mix = min(mixture_scores, key=lambda c: (mixture_scores[c], c))
    hood = neighbourhood(best_mix, grid, kind)
    keys = [f"cell{n[0]}_{n[1]}_s{s}" for n in hood for s in range(p)]
    weights = dict(zip(keys, all_cells[best_mix]["mixture"]))
    generators = {f"cell{n[0]}_{n[1]}_s{s}": all_cells[n]["generators"][s] for n in hood for s in range(p)}
    bundle = make_bundle(run, data, "mixture", generators, weights=weights)
    best_cell_bundle = make_bundle(run, data, "single", {"all": all_cells[best_cell]["generators"][0]})
    fields.update({
        "best_cell": list(best_cell), "best_mixture_cell": list(best_mix),
        "mixture_weights": weights,
        "ranking": {"features": scorer.name, "n": scorer.n,
                    "cell_fid": {f"{c[0]},{c[1]}": v for c, v in cell_scores.items()},
                    "mixture_fid": {f"{c[0]},{c[1]}": v for c, v in mixture_scores.items()}},
        "history": {f"{c[0]},{c[1]}": v["history"] for c, v in sorted(all_cells.items())},
    })
    # quality over time: the best mixture score of each iteration (scored during training)
    curve = []
    for it in range(strategy.iterations):
        points = [h for v in all_cells.values() for h in v["history"] if h["iteration"] == it]
        curve.append({"clock_s": max(h["clock_s"] for h in points), "fid": min(h["mixture_fid"] for h in points),
                      "is_mean": None, "features": scorer.name, "n": scorer.n})
    fields["curve"] = curve
    return Outcome(bundle, [], fields, extra_bundles={"best_cell": best_cell_bundle})
