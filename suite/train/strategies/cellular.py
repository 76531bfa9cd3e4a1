"""``cellular``: Lipizzaner / Mustangs coevolution on a toroidal grid, over MPI (seeds 001, 003).

Each cell of an R x C torus holds ``population`` generators and discriminators. Each is an
*individual*: network weights, its own Adam state and its own learning rate, which travel
together. One iteration (``cellular.iterations``, default ``train.epochs``) does for every cell,
synchronously, what one iteration of Lipizzaner's ``LipizzanerGANTrainer.train`` does:

1. **exchange**: receive the neighbourhood's individuals as they were at the end of the last
   iteration (the cell plus 4 von Neumann or 8 Moore neighbours);
2. **fitness**: every generator against every discriminator of the neighbourhood on
   ``fitness_samples`` real images (and as many generated), in batches; a generator's fitness
   is its mean generator loss, a discriminator's its mean discriminator loss (lower is better);
3. **selection**: tournaments (``tournament_size``) pick the cell's generators and
   discriminators from the neighbourhood, each with its Adam state and learning rate;
4. **training**: ``batches_per_iteration`` batches of a fresh shuffle of the data (0: a full
   pass). On each batch the generators take one step against a discriminator drawn from the
   cell's, then (on every ``discriminator_skip + 1``-th batch) the discriminators against a
   drawn generator. Before every step the learning rates mutate (``mutation_rate``,
   ``mutation_probability``). The loss is the run's (``mustangs``: minimax, mse or heuristic,
   drawn per batch or per cell);
5. **replacement**: trained individuals replace the cell's worst previous ones where fitter on
   the same fitness sample (``n_replacements``); a cell keeps its individuals best first;
6. **mixture**: the cell's weights over its neighbourhood's best generators take one (1+1)-ES
   step, kept only when the mixture's FID improves (``mixture_samples`` samples, by default in
   the suite classifier's class-logit space, as Lipizzaner scores MNIST in its CNN's 10 outputs).

Distribution: ranks form a periodic Cartesian communicator; each owns an equal rectangular
block of cells. Once per iteration every rank sends the states of its boundary cells to the
neighbouring ranks that need them, as flat float32 arrays with non-blocking point-to-point
messages (no servers, no pickles). Every random draw is seeded by the scenario seed, the
cell's coordinates and the iteration, and a cell reads even its own individuals back from its
flat vector, so a grid gives the same generators on any number of ranks (with one thread per
rank, so that floating-point reductions agree). The README lists where this differs from the
papers and from Lipizzaner's code.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from ...config.plan import process_grid
from ...config.registry import CARTESIAN, engines_for
from ...config.scenario import Run
from ...gan.divergence import Divergence, check_values, loss_bound
from ...gan.losses import Loss, get_loss, mustangs_draw
from ...gan.models import build_pair
from ...gan.seeding import derive_seed, torch_generator
from ...records.record import CellularFields
from ..engines.base import frozen
from ..flat import cpu_state, flatten, unflatten_
from ..training import UNLIMITED, evenly_spaced_steps
from .base import Outcome, Strategy, make_bundle
from .grid import (
    Cell,
    cells,
    discriminator_trains,
    es_step,
    mixture_assignment,
    mutate_learning_rates,
    neighbourhood,
    owner,
    propose_weights,
    replacement,
    tournament,
)

if TYPE_CHECKING:
    from ...gan.data import ImageData
    from ...measure.metrics.evaluate import Reference
    from ...measure.metrics.features import ClassifierNet, Features
    from ...measure.telemetry import Telemetry
    from ..engines.base import Engine


log = logging.getLogger(__name__)
PHASES = ("exchange", "fitness", "train", "mixture")


# --- flat state vectors (what travels between ranks) --------------------------------------------------


def module_vector(module: nn.Module) -> torch.Tensor:
    """Parameters and buffers of ``module`` as one float32 vector (BatchNorm counters included)."""
    return flatten(module.state_dict().values(), torch.float32)


def load_module_vector(module: nn.Module, vector: torch.Tensor) -> None:
    """Inverse of :func:`module_vector` (same architecture)."""
    unflatten_(module.state_dict().values(), vector)


class Layout:
    """Where the parts of one individual lie in its flat float32 vector.

    In order: the network's parameters and buffers (:func:`module_vector`), Adam's ``exp_avg``
    and ``exp_avg_sq`` of every parameter, Adam's step count of every parameter, the learning
    rate. float32 holds all of them exactly: Adam keeps its moments and step in float32, and
    counters stay far below 2**24.
    """

    def __init__(self, module: nn.Module):
        self.module_size = module_vector(module).numel()
        self.param_sizes = [p.numel() for p in module.parameters()]
        self.moments_size = sum(self.param_sizes)
        self.size = self.module_size + 2 * self.moments_size + len(self.param_sizes) + 1

    def pack(self, module: nn.Module, optimizer: torch.optim.Optimizer, lr: float) -> torch.Tensor:
        """The individual: ``module``, the state of the Adam optimiser that trains it, and ``lr``."""
        params = optimizer.param_groups[0]["params"]
        states = [optimizer.state.get(p) or {} for p in params]

        def moments(name: str) -> list[torch.Tensor]:
            return [(s[name] if s else torch.zeros_like(p)).detach().reshape(-1).float().cpu() for p, s in zip(params, states)]

        steps = torch.tensor([float(s["step"]) if s else 0.0 for s in states], dtype=torch.float32)
        return torch.cat(
            [module_vector(module), *moments("exp_avg"), *moments("exp_avg_sq"), steps, torch.tensor([lr], dtype=torch.float32)]
        )

    def load_network(self, vector: torch.Tensor, module: nn.Module) -> None:
        """Load only the network of a packed individual (to evaluate it)."""
        load_module_vector(module, vector[: self.module_size])

    def load(self, vector: torch.Tensor, module: nn.Module, optimizer: torch.optim.Optimizer) -> float:
        """Load a packed individual into ``module`` and its ``optimizer``; return its learning rate."""
        self.load_network(vector, module)
        avg_at, sq_at = self.module_size, self.module_size + self.moments_size
        steps = vector[sq_at + self.moments_size : -1].tolist()
        for p, n, step in zip(optimizer.param_groups[0]["params"], self.param_sizes, steps):
            if step == 0:  # never trained: a fresh Adam state
                optimizer.state.pop(p, None)
            else:
                optimizer.state[p] = {
                    "step": torch.tensor(step, dtype=torch.float32),
                    "exp_avg": vector[avg_at : avg_at + n].view_as(p).to(p.device, copy=True),
                    "exp_avg_sq": vector[sq_at : sq_at + n].view_as(p).to(p.device, copy=True),
                }
            avg_at, sq_at = avg_at + n, sq_at + n
        lr = float(vector[-1])
        optimizer.param_groups[0]["lr"] = lr
        return lr


@contextlib.contextmanager
def eval_mode(modules: Sequence[nn.Module]) -> Iterator[None]:
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
def batchnorm_stats_kept(modules: Sequence[nn.Module]) -> Iterator[None]:
    """Run forward passes in training mode without changing BatchNorm running statistics."""
    saved = [
        (m, [b.clone() for b in m.buffers(recurse=False)])  # running mean, variance and count
        for module in modules
        for m in module.modules()
        if isinstance(m, nn.BatchNorm2d)
    ]
    try:
        yield
    finally:
        for m, copies in saved:
            for buffer, copy in zip(m.buffers(recurse=False), copies):
                buffer.copy_(copy)


# --- one cell -------------------------------------------------------------------------------------------------


@dataclass
class CellState:
    """The individuals of one cell (best first), their optimisers and learning rates, and its mixture."""

    coords: tuple[int, int]
    generators: list[nn.Module]
    discriminators: list[nn.Module]
    opt_g: list[torch.optim.Optimizer]
    opt_d: list[torch.optim.Optimizer]
    lr_g: list[float]
    lr_d: list[float]
    mixture: np.ndarray  # weights over the neighbourhood's cells
    mixture_score: float = float("inf")
    fixed_loss: Loss | None = None  # Mustangs per cell: drawn once
    history: list[dict] = field(default_factory=list)

    def side(self, kind: str) -> tuple[list[nn.Module], list[torch.optim.Optimizer], list[float]]:
        """(networks, optimisers, learning rates) of the generators (``"g"``) or discriminators (``"d"``)."""
        return (self.generators, self.opt_g, self.lr_g) if kind == "g" else (self.discriminators, self.opt_d, self.lr_d)


class Genomes:
    """The layout of a cell's vector, and template networks to evaluate received individuals.

    A cell vector holds ``population`` slots, each a generator individual then a discriminator
    individual (see :class:`Layout`).
    """

    def __init__(self, make_pair: Callable[[int], tuple[nn.Module, nn.Module]], population: int):
        g, d = make_pair(0)
        self.make_pair, self.population = make_pair, population
        self.layouts = {"g": Layout(g), "d": Layout(d)}
        self.slot_size = self.layouts["g"].size + self.layouts["d"].size
        self.pool: list[tuple[nn.Module, nn.Module]] = []

    @property
    def cell_size(self) -> int:
        return self.population * self.slot_size

    def part(self, vector: torch.Tensor, slot: int, kind: str) -> torch.Tensor:
        """The generator (``kind`` ``"g"``) or discriminator (``"d"``) individual of ``slot`` in a cell vector."""
        start = slot * self.slot_size + (0 if kind == "g" else self.layouts["g"].size)
        return vector[start : start + self.layouts[kind].size]

    def pack(self, cell: CellState) -> torch.Tensor:
        """A cell's individuals, Adam states and learning rates as one flat float32 vector."""
        parts = []
        for s in range(self.population):
            for kind in ("g", "d"):
                nets, opts, lrs = cell.side(kind)
                parts.append(self.layouts[kind].pack(nets[s], opts[s], lrs[s]))
        return torch.cat(parts)

    def unpack(self, vector: torch.Tensor, cell: CellState) -> None:
        """Load a cell vector (:meth:`pack`) into the cell's networks, optimisers and learning rates."""
        for s in range(self.population):
            for kind in ("g", "d"):
                nets, opts, lrs = cell.side(kind)
                lrs[s] = self.layouts[kind].load(self.part(vector, s, kind), nets[s], opts[s])

    def networks(self, index: int, vector: torch.Tensor, slot: int) -> tuple[nn.Module, nn.Module]:
        """Load the networks of ``slot`` of a cell vector into pool entry ``index``; return (G, D)."""
        while len(self.pool) <= index:
            self.pool.append(self.make_pair(0))
        g, d = self.pool[index]
        self.layouts["g"].load_network(self.part(vector, slot, "g"), g)
        self.layouts["d"].load_network(self.part(vector, slot, "d"), d)
        return g, d


def cell_key(cell: Cell) -> str:
    """The name of a cell's generator in a mixture."""
    return f"cell{cell[0]}_{cell[1]}"


# --- the exchange ---------------------------------------------------------------------------------------------


class Exchange:
    """Who sends which cells to whom, fixed for the run; one call moves one iteration's states."""

    def __init__(self, engine: Engine, grid: tuple[int, int], kind: str):
        from mpi4py import MPI

        self.MPI, self.engine, self.grid = MPI, engine, grid
        self.pgrid = process_grid(grid, engine.size)
        self.cart = engine.cartesian(self.pgrid)
        self.rank = self.cart.Get_rank()
        me = tuple(self.cart.Get_coords(self.rank))
        self.owner_rank = {c: self.cart.Get_cart_rank(list(owner(c, grid, self.pgrid))) for c in cells(grid)}
        self.mine = [c for c in cells(grid) if self.owner_rank[c] == self.rank]
        assert all(tuple(owner(c, grid, self.pgrid)) == me for c in self.mine)
        needed = {c for cell in self.mine for c in neighbourhood(cell, grid, kind)}
        self.recv: dict[int, list[Cell]] = {}  # rank -> cells it sends me
        for c in sorted(needed - set(self.mine)):
            self.recv.setdefault(self.owner_rank[c], []).append(c)
        self.send: dict[int, list[Cell]] = {}  # rank -> my cells it needs
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
        requests, sent = [], 0
        buffers: dict[Any, np.ndarray] = {}  # received per rank, and what is sent (kept alive until Waitall)
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

    def __init__(self, run: Run, engine: Engine, data: ImageData, telemetry: Telemetry, scorer: MixtureScorer):
        self.run, self.engine, self.data, self.telemetry, self.scorer = run, engine, data, telemetry, scorer
        assert run.grid is not None, "a cellular run has a grid"
        rows, cols = run.grid
        self.cfg, self.seed, self.grid = run.cellular, run.train.seed, (rows, cols)
        self.device = engine.device
        self.exchange = Exchange(engine, self.grid, self.cfg.neighbourhood)
        self.genomes = Genomes(self._pair, self.cfg.population)
        self.batch = run.train.batch_size
        if len(data) < self.batch:
            raise ValueError(f"train.batch_size {self.batch} is larger than the {len(data)} training images")
        if len(data) < self.cfg.fitness_samples:
            raise ValueError(
                f"cellular.fitness_samples {self.cfg.fitness_samples} is larger than the {len(data)} training images"
            )
        per_pass = len(data) // self.batch
        self.batches = min(self.cfg.batches_per_iteration, per_pass) if self.cfg.batches_per_iteration else per_pass
        self.iterations = self.cfg.iterations or run.train.epochs
        self.cells = {c: self._new_cell(c) for c in self.exchange.mine}
        self.phase_s = dict.fromkeys(PHASES, 0.0)
        self.images = 0
        self.bound = loss_bound(run.loss)
        self.diverged: Divergence | None = None  # the first divergence this rank saw (see suite.gan.divergence)

    def _pair(self, seed: int) -> tuple[nn.Module, nn.Module]:
        g, d = build_pair(
            self.run.dataset.image_size, self.data.channels, self.run.model.latent_dim, dropout=self.run.model.dropout, seed=seed
        )
        return g.to(self.device), d.to(self.device)

    def _new_cell(self, c: Cell) -> CellState:
        gs, ds = [], []
        og: list[torch.optim.Optimizer] = []
        od: list[torch.optim.Optimizer] = []
        lr, (beta1, beta2) = self.run.train.lr, self.run.train.betas
        betas = (beta1, beta2)
        for s in range(self.cfg.population):
            g, d = self._pair(derive_seed(self.seed, "init", "cell", c, s))
            gs.append(g)
            ds.append(d)
            og.append(torch.optim.Adam(g.parameters(), lr=lr, betas=betas))
            od.append(torch.optim.Adam(d.parameters(), lr=lr, betas=betas))
        width = len(neighbourhood(c, self.grid, self.cfg.neighbourhood))
        cell = CellState(c, gs, ds, og, od, [lr] * self.cfg.population, [lr] * self.cfg.population, np.full(width, 1.0 / width))
        if self.run.loss == "mustangs" and self.cfg.mustangs_choice == "cell":
            cell.fixed_loss = mustangs_draw(random.Random(derive_seed(self.seed, "mustangs", c)))
        return cell

    # --- helpers ---------------------------------------------------------------------------------------------
    def _loss(self, cell: CellState, rng: random.Random) -> Loss:
        if self.run.loss != "mustangs":
            return get_loss(self.run.loss)
        return cell.fixed_loss or mustangs_draw(rng)

    def _fetch(self, rows: np.ndarray) -> torch.Tensor:
        with self.telemetry.data():
            images, _ = self.data.fetch(rows)
            return images.to(self.device)

    def _noise(self, n: int, *name: object) -> torch.Tensor:
        return torch.randn(n, self.run.model.latent_dim, generator=torch_generator(self.seed, "z", *name)).to(self.device)

    def _training_batches(self, coords: Cell, it: int) -> Iterator[torch.Tensor]:
        """This iteration's batches: a fresh shuffle of the data cut into batches (no image twice)."""
        order = np.random.default_rng(derive_seed(self.seed, "order", coords, it)).permutation(len(self.data))
        for b in range(self.batches):
            yield self._fetch(order[b * self.batch : (b + 1) * self.batch])

    def _fitness_sample(self, coords: Cell, it: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The iteration's fitness images (``fitness_samples`` distinct real ones) and generator noise."""
        rng = np.random.default_rng(derive_seed(self.seed, "fitness", coords, it))
        real = self._fetch(rng.choice(len(self.data), size=self.cfg.fitness_samples, replace=False))
        return real, self._noise(len(real), "fitness", coords, it)

    @torch.no_grad()
    def _fakes(self, gens: list[nn.Module], z: torch.Tensor) -> list[list[torch.Tensor]]:
        """Each generator's images for the fitness noise, in batches of ``train.batch_size``.

        Made once per generator and iteration: the neighbourhood's generators meet the cell's
        discriminators before and after training on the same noise, and do not change in between.
        """
        with batchnorm_stats_kept(gens):
            return [[g(z[lo : lo + self.batch]) for lo in range(0, len(z), self.batch)] for g in gens]

    @torch.no_grad()
    def _fitness(
        self, fakes: list[list[torch.Tensor]], discs: list[nn.Module], real: torch.Tensor, loss: Loss
    ) -> tuple[list[float], list[float]]:
        """Mean generator loss of each G against all Ds, and mean D loss of each D against all Gs.

        ``fakes`` holds each G's images (:meth:`_fakes`); over the whole sample, in batches of
        ``train.batch_size``, every pairing sees the same images and noise.
        """
        g_fit, d_fit = [0.0] * len(fakes), [0.0] * len(discs)
        with batchnorm_stats_kept(discs):
            for b, lo in enumerate(range(0, len(real), self.batch)):
                images = real[lo : lo + self.batch]
                share = len(images) / len(real)
                for j, d in enumerate(discs):
                    real_scores = d(images)
                    for k, fake in enumerate(fakes):
                        fake_scores = d(fake[b])
                        g_fit[k] += share * float(loss.generator(fake_scores)) / len(discs)
                        d_fit[j] += share * float(loss.discriminator(real_scores, fake_scores)) / len(fakes)
                self.images += len(images) * len(discs) * (1 + len(fakes))
        return g_fit, d_fit

    # --- one iteration ---------------------------------------------------------------------------------------
    def iteration(self, it: int) -> None:
        t = time.perf_counter()
        own = {c: self.genomes.pack(cell) for c, cell in self.cells.items()}
        states = self.exchange.run(own, self.genomes.cell_size, tag=it)
        self.phase_s["exchange"] += time.perf_counter() - t
        for c in sorted(self.cells):
            self._evolve(self.cells[c], states, it)
            if self.diverged is not None:  # the run is over: no more training, no scoring of non-finite samples
                return

    def _diverged(self, cell: CellState, it: int, generator: list[float], discriminator: list[float]) -> bool:
        """Whether fitness values (mean losses) are out of bounds; the first such is this rank's divergence."""
        values = {"generator loss": generator, "discriminator loss": discriminator}
        where = f"cell {cell.coords[0]},{cell.coords[1]}"
        seen = check_values(values, self.bound, step=it + 1, rank=self.engine.rank, where=where, unit="iteration")
        if seen is not None and self.diverged is None:
            self.diverged = seen
            log.warning("%s; training stops", seen.line())
        return seen is not None

    def _evolve(self, cell: CellState, states: dict, it: int) -> None:
        p = self.cfg.population
        rng = random.Random(derive_seed(self.seed, "cell", cell.coords, it))
        torch.manual_seed(derive_seed(self.seed, "dropout", cell.coords, it))
        hood = neighbourhood(cell.coords, self.grid, self.cfg.neighbourhood)

        t = time.perf_counter()
        pool = [self.genomes.networks(k * p + s, states[n], s) for k, n in enumerate(hood) for s in range(p)]
        gens, discs = [x[0] for x in pool], [x[1] for x in pool]
        loss = self._loss(cell, rng)
        real, z = self._fitness_sample(cell.coords, it)
        pool_fakes = self._fakes(gens, z)
        g_fit, d_fit = self._fitness(pool_fakes, discs, real, loss)
        if self._diverged(cell, it, g_fit, d_fit):
            return
        self._select(cell, states, hood, {"g": g_fit, "d": d_fit}, rng)
        self.phase_s["fitness"] += time.perf_counter() - t

        t = time.perf_counter()
        self._train(cell, it, rng)
        self.phase_s["train"] += time.perf_counter() - t

        t = time.perf_counter()
        # Trained individuals meet the same opponents on the same sample as the cell's previous
        # ones, which are the neighbourhood's first p (hood[0] is the cell).
        new_g, _ = self._fitness(self._fakes(cell.generators, z), discs, real, loss)
        _, new_d = self._fitness(pool_fakes, cell.discriminators, real, loss)
        if self._diverged(cell, it, new_g, new_d):
            return
        self._replace(cell, states[cell.coords], {"g": (g_fit[:p], new_g), "d": (d_fit[:p], new_d)})
        self.phase_s["fitness"] += time.perf_counter() - t

        t = time.perf_counter()
        self._mixture_step(cell, hood, states, it)
        self.phase_s["mixture"] += time.perf_counter() - t

    def _select(self, cell: CellState, states: dict, hood: list[Cell], fitness: dict, rng: random.Random) -> None:
        """Tournaments copy neighbourhood individuals (weights, Adam state, learning rate) into the cell."""
        p = self.cfg.population
        for kind in ("g", "d"):  # all generators first, as Lipizzaner
            nets, opts, lrs = cell.side(kind)
            for s in range(p):
                k, slot = divmod(tournament(fitness[kind], self.cfg.tournament_size, rng), p)
                lrs[s] = self.genomes.layouts[kind].load(self.genomes.part(states[hood[k]], slot, kind), nets[s], opts[s])

    def _train(self, cell: CellState, it: int, rng: random.Random) -> None:
        mutation = np.random.default_rng(derive_seed(self.seed, "mutation", cell.coords, it))
        for b, real in enumerate(self._training_batches(cell.coords, it)):
            loss = self._loss(cell, rng)
            self._step(cell, "g", real, loss, rng, mutation, (cell.coords, it, b))
            if discriminator_trains(b, self.cfg.discriminator_skip):
                self._step(cell, "d", real, loss, rng, mutation, (cell.coords, it, b))

    def _step(
        self,
        cell: CellState,
        kind: str,
        real: torch.Tensor,
        loss: Loss,
        rng: random.Random,
        mutation: np.random.Generator,
        name: tuple,
    ) -> None:
        """One step of the cell's generators (``kind`` "g") or discriminators ("d").

        As Lipizzaner's ``step``: the learning rates mutate, then every individual trains against
        one opponent drawn from the cell's other side.
        """
        nets, opts, lrs = cell.side(kind)
        lrs[:] = mutate_learning_rates(lrs, self.run.train.lr, self.cfg.mutation_rate, self.cfg.mutation_probability, mutation)
        opponents = cell.side("d" if kind == "g" else "g")[0]
        opponent = opponents[rng.randrange(len(opponents))]
        for s, (net, opt) in enumerate(zip(nets, opts)):
            z = self._noise(len(real), kind, *name, s)
            opt.param_groups[0]["lr"] = lrs[s]
            opt.zero_grad(set_to_none=True)
            if kind == "g":
                with frozen(opponent):
                    loss.generator(opponent(net(z))).backward()
                self.images += len(real)
            else:
                with torch.no_grad():
                    fake = opponent(z)
                loss.discriminator(net(real), net(fake)).backward()
                self.images += 2 * len(real)
            opt.step()

    def _replace(self, cell: CellState, previous: torch.Tensor, fitness: dict) -> None:
        """Lipizzaner's replacement (:func:`replacement`) of the cell's previous individuals by trained ones."""
        for kind, (old, new) in fitness.items():
            nets, opts, lrs = cell.side(kind)
            layout = self.genomes.layouts[kind]
            # pack first: a trained individual may move to a slot that is about to be overwritten
            parts = [
                self.genomes.part(previous, i, kind) if source == "old" else layout.pack(nets[i], opts[i], lrs[i])
                for source, i in replacement(old, new, self.cfg.n_replacements)
            ]
            for s, part in enumerate(parts):
                lrs[s] = layout.load(part, nets[s], opts[s])

    def mixture_members(self, cell: CellState, hood: list[Cell], states: dict) -> list[tuple[str, nn.Module]]:
        """(key, generator) of the cell's mixture: the best generator of each neighbourhood cell, its own included."""
        members = []
        for k, n in enumerate(hood):
            g = cell.generators[0] if n == cell.coords else self.genomes.networks(k * self.cfg.population, states[n], 0)[0]
            members.append((cell_key(n), g))
        return members

    def _mixture_step(self, cell: CellState, hood: list[Cell], states: dict, it: int) -> None:
        nets = [g for _, g in self.mixture_members(cell, hood, states)]
        # before and after the proposal the same noise and draws: only the weights differ
        sample_seed = derive_seed(self.seed, "mixture-samples", cell.coords, it)
        score, accepted = self.scorer(nets, cell.mixture, sample_seed), False
        if len(nets) > 1:  # a one-cell mixture has nothing to evolve (Lipizzaner on a 1x1 grid)
            proposal = propose_weights(
                cell.mixture, self.cfg.mixture_scale, np.random.default_rng(derive_seed(self.seed, "es", cell.coords, it))
            )
            cell.mixture, score, accepted = es_step(cell.mixture, score, proposal, self.scorer(nets, proposal, sample_seed))
        cell.mixture_score = score
        cell.history.append(
            {
                "iteration": it,
                "clock_s": self.telemetry.clock(),
                "mixture_fid": score,
                "accepted": accepted,
                "lr_g": list(cell.lr_g),
                "lr_d": list(cell.lr_d),
            }
        )


# --- mixture scoring during training -------------------------------------------------------------------------------


class ClassLogits:
    """The suite classifier's class logits as FID features (Lipizzaner's MNIST CNN gives it 10 outputs)."""

    def __init__(self, classifier: ClassifierNet):
        self.classifier = classifier
        self.name = f"{classifier.name}/logits"
        self.sha256 = classifier.sha256
        self.detail = f"class logits of the {classifier.detail}"

    @torch.no_grad()
    def __call__(self, images: torch.Tensor) -> tuple[np.ndarray, None]:
        """``(logits (N, classes) float64, None)``, as a feature network returns ``(features, probabilities)``."""
        step, device = self.classifier.batch_size, self.classifier.device
        logits = [self.classifier.logits(images[lo : lo + step].to(device)).cpu() for lo in range(0, len(images), step)]
        return torch.cat(logits).numpy(), None


class MixtureScorer:
    """FID of a weighted mixture of generators: Lipizzaner's ``FIDCalculator`` on a ``MixedGeneratorDataset``.

    ``cellular.mixture_samples`` generated images, each generator's share drawn as
    ``cellular.mixture_sampling`` says, against as many real training images, in the space of
    ``cellular.mixture_features``: the suite classifier's class logits, or the run's metrics network.
    """

    def __init__(self, run: Run, device: torch.device, reference: Reference):
        from ...measure.metrics.evaluate import real_statistics
        from ...measure.metrics.features import ClassifierNet

        cfg = run.cellular
        self.n, self.sampling, self.device, self.latent = cfg.mixture_samples, cfg.mixture_sampling, device, run.model.latent_dim
        self.net: Features
        if cfg.mixture_features == "logits":
            self.net = ClassLogits(ClassifierNet(reference.dataset, reference.device))
        else:
            self.net = reference.networks()[0]
        self.name = self.net.name
        self.real = real_statistics(dataclasses.replace(reference, n=self.n), self.net)
        self.dim = len(self.real["mu"])
        if self.n <= self.dim:
            raise ValueError(
                f"cellular.mixture_samples: {self.n} samples give a rank-deficient covariance in the "
                f"{self.dim}-d space of {self.name}; use more than {self.dim}"
            )

    def record(self) -> dict:
        """What the record says about the mixture scores: network, dimension, sample counts, sampling."""
        return {"features": self.name, "dim": self.dim, "n": self.n, "n_real": int(self.real["n"]), "sampling": self.sampling}

    @torch.no_grad()
    def __call__(self, generators: list[nn.Module], weights: np.ndarray, seed: int) -> float:
        from ...measure.metrics.scores import frechet_distance, statistics

        members = mixture_assignment(weights, self.n, self.sampling, np.random.default_rng(seed))
        z = torch.randn(self.n, self.latent, generator=torch.Generator().manual_seed(seed))
        with eval_mode(generators):
            images = [g(z[members == k].to(self.device)).cpu() for k, g in enumerate(generators) if (members == k).any()]
        features, _ = self.net(torch.cat(images))
        return frechet_distance(*statistics(features), self.real["mu"], self.real["sigma"])


class CellularStrategy(Strategy):
    """The cellular strategy's phases on one rank; one telemetry step per coevolution iteration."""

    def setup(self) -> None:
        from ...measure.metrics import Reference

        run, engine = self.run, self.engine
        if CARTESIAN not in engine.capabilities():
            raise ValueError(
                f"the cellular strategy needs an engine with a Cartesian communicator ({', '.join(engines_for('cellular'))}), not {engine.name}"
            )
        reference = Reference.for_run(run, engine.device)
        # Rank 0 prepares (and caches) the feature network and real statistics first; the others
        # then read them from the cache instead of all computing them at once.
        scorer = MixtureScorer(run, engine.device, reference) if engine.rank == 0 else None
        engine.barrier()
        self.scorer = scorer or MixtureScorer(run, engine.device, reference)
        self.cellular = Cellular(run, engine, self.data, self.telemetry, self.scorer)
        self.next_iteration = 0
        self.stopped = False  # a rank diverged: every rank stopped after the same iteration
        self.snapshots: list[dict] = []
        self.window: dict | None = None  # the window's first iteration and the snapshot times still to come

    def _iterate(self) -> None:
        """One coevolution iteration as one telemetry step."""
        strategy, telemetry, it = self.cellular, self.telemetry, self.next_iteration
        with telemetry.counting_flops():
            telemetry.begin_step()
            before = strategy.images
            strategy.iteration(it)
            telemetry.end_step(images=strategy.images - before)
        self.next_iteration += 1
        if self.engine.rank == 0:
            log.info("iteration %d, %.0fs in the training window", it + 1, telemetry.clock())

    def warm_up(self) -> None:
        while not self.stopped and self.next_iteration < min(self.run.train.warmup_steps, self.cellular.iterations):
            self._iterate()
            self.stopped = self.engine.any_rank([self.cellular.diverged is not None], self.engine.world())[0]

    def divergence(self) -> Divergence | None:
        return self.cellular.diverged

    def halted(self) -> bool:
        return self.stopped

    def history_so_far(self) -> dict[str, list[dict]]:
        return {f"{c[0]},{c[1]}": cell.history for c, cell in sorted(self.cellular.cells.items())}

    def train(self) -> None:
        """Iterations to ``cellular.iterations`` or, with ``train.budget_s``, until the budget is spent.

        Snapshots of every cell (its best generator and its mixture) are kept at evenly spaced
        iterations (or times), so that the best mixture can be scored afterwards like any other
        strategy's model.
        """
        run, strategy, telemetry = self.run, self.cellular, self.telemetry
        budget, points = run.train.budget_s, run.metrics.curve_points
        if self.window is None:  # the window opens (a resumed run continues the saved one)
            strategy.phase_s = dict.fromkeys(PHASES, 0.0)  # the phases of the window's iterations
            times = [budget * (k + 1) / max(1, points) for k in range(points)] if budget else []
            self.window = {"first": self.next_iteration, "times": times, "finished": False}
        if self.window["finished"] or self.stopped:  # resumed after training was over, or diverged in warm-up
            return
        first, times = self.window["first"], self.window["times"]
        if budget is None:
            due = {first + k for k in evenly_spaced_steps(strategy.iterations - first, points)}
            last = strategy.iterations
        else:
            last = run.cellular.iterations or UNLIMITED
        while self.next_iteration < last:
            self._iterate()
            diverged = strategy.diverged is not None
            if budget is None:
                snapshot, stop = self.next_iteration in due, self.next_iteration >= last
                self.stopped = self.engine.any_rank([diverged], self.engine.world())[0]  # once per iteration
            else:
                clock = telemetry.clock()
                snapshot, stop, self.stopped = self.engine.any_rank(
                    [bool(times) and clock >= times[0], clock >= budget, diverged], self.engine.world()
                )
                while times and clock >= times[0]:
                    times.pop(0)
                snapshot = snapshot or stop
            if self.stopped:
                break
            if snapshot and points:
                self._take_snapshot()
            if stop:
                break
            if self.checkpointer is not None:
                self.checkpointer.at_boundary(self.next_iteration)
        self.window["finished"] = True

    def _take_snapshot(self) -> None:
        self.snapshots.append(
            {
                "iteration": self.next_iteration,
                "clock_s": self.telemetry.clock(),
                "cells": {
                    c: {"generator": cpu_state(cell.generators[0]), "mixture": cell.mixture.tolist(), "score": cell.mixture_score}
                    for c, cell in self.cellular.cells.items()
                },
            }
        )

    def checkpoint(self) -> dict:
        """This rank's cells (individuals with Adam states and learning rates, mixtures, histories),
        the iteration to come, the window's schedule, phase times and snapshots. Every draw of an
        iteration is named by (seed, cell, iteration): no random state needs keeping."""
        strategy = self.cellular
        return {
            "steps": self.next_iteration,
            "next_iteration": self.next_iteration,
            "window": copy.deepcopy(self.window),
            "phase_s": dict(strategy.phase_s),
            "snapshots": self.snapshots,
            "cells": {
                c: {
                    "vector": strategy.genomes.pack(cell),
                    "mixture": cell.mixture.copy(),
                    "mixture_score": cell.mixture_score,
                    "history": copy.deepcopy(cell.history),
                }
                for c, cell in strategy.cells.items()
            },
        }

    def restore(self, load: Callable[[int], dict[str, Any]]) -> None:
        state, strategy = load(self.engine.rank), self.cellular
        for c, saved in state["cells"].items():
            cell = strategy.cells[c]
            strategy.genomes.unpack(saved["vector"], cell)
            cell.mixture, cell.mixture_score, cell.history = (
                saved["mixture"].copy(),
                saved["mixture_score"],
                copy.deepcopy(saved["history"]),
            )
        self.next_iteration, self.window = state["next_iteration"], copy.deepcopy(state["window"])
        strategy.phase_s, self.snapshots = dict(state["phase_s"]), state["snapshots"]

    def finalize(self) -> Outcome:
        run, engine, strategy = self.run, self.engine, self.cellular
        # After training (not counted): every cell's generators and mixture go to rank 0.
        mine = {
            c: {
                "generators": [cpu_state(g) for g in cell.generators],
                "mixture": cell.mixture.tolist(),
                "score": cell.mixture_score,
                "history": cell.history,
                "lr_g": cell.lr_g,
                "lr_d": cell.lr_d,
            }
            for c, cell in strategy.cells.items()
        }
        gathered = engine.gather_object({"cells": mine, "phases": strategy.phase_s, "snapshots": self.snapshots})
        iterations = self.next_iteration
        fields = CellularFields(
            grid=list(strategy.grid),
            process_grid=list(strategy.exchange.pgrid),
            cells_per_rank=len(strategy.cells),
            neighbourhood=run.cellular.neighbourhood,
            neighbourhood_size=max(
                len(neighbourhood(c, strategy.grid, run.cellular.neighbourhood)) for c in cells(strategy.grid)
            ),
            population=run.cellular.population,
            iterations=iterations,
            batches_per_iteration=strategy.batches,
            global_batch=strategy.batch,
            # generator updates of the whole grid
            generator_steps=iterations * strategy.batches * run.cellular.population * len(cells(strategy.grid)),
        )
        if gathered is None:  # not rank 0
            return Outcome(None, fields=dataclasses.asdict(fields))
        all_cells = {c: v for part in gathered for c, v in part["cells"].items()}
        fields.phases_s = {name: [part["phases"][name] for part in gathered] for name in PHASES}
        outcome = _results(run, self.data, strategy, self.scorer, all_cells, fields)
        outcome.curve = _snapshot_curve(run, self.data, strategy, [part["snapshots"] for part in gathered])
        return outcome


def _snapshot_curve(run: Run, data: ImageData, strategy: Cellular, per_rank: list[list[dict]]) -> list:
    """(clock, generator steps, bundle) of the best mixture at each snapshot, for scoring after training.

    The best mixture of a snapshot is the one whose own score during training was lowest then,
    as the final model is chosen at the end.
    """
    grid, kind, steps_per_iteration = (
        strategy.grid,
        run.cellular.neighbourhood,
        strategy.batches * run.cellular.population * len(cells(strategy.grid)),
    )
    curve = []
    for snaps in zip(*per_rank):  # the i-th snapshot of every rank
        states = {c: v for snap in snaps for c, v in snap["cells"].items()}
        best = min(states, key=lambda c: (states[c]["score"], c))
        hood = neighbourhood(best, grid, kind)
        bundle = make_bundle(
            run,
            data,
            "mixture",
            {cell_key(n): states[n]["generator"] for n in hood},
            weights=dict(zip([cell_key(n) for n in hood], states[best]["mixture"])),
        )
        curve.append((max(snap["clock_s"] for snap in snaps), snaps[0]["iteration"] * steps_per_iteration, bundle))
    return curve


def _results(
    run: Run, data: ImageData, strategy: Cellular, scorer: MixtureScorer, all_cells: dict, fields: CellularFields
) -> Outcome:
    """Rank 0: rank the cells and the mixtures, and package the best mixture as the model."""
    grid, kind, iterations = strategy.grid, run.cellular.neighbourhood, fields.iterations or 0

    def best_generator(c: Cell) -> nn.Module:  # a cell keeps its individuals best first
        g = build_pair(run.dataset.image_size, data.channels, run.model.latent_dim, seed=0)[0]
        g.load_state_dict(all_cells[c]["generators"][0])
        return g.to(strategy.device)

    final_seed = derive_seed(run.train.seed, "final-ranking")
    cell_scores = {c: scorer([best_generator(c)], np.ones(1), final_seed) for c in sorted(all_cells)}
    mixture_scores = {}
    for c in sorted(all_cells):
        nets = [best_generator(n) for n in neighbourhood(c, grid, kind)]
        mixture_scores[c] = scorer(nets, np.asarray(all_cells[c]["mixture"]), final_seed)
    best_cell = min(cell_scores, key=lambda c: (cell_scores[c], c))
    best_mix = min(mixture_scores, key=lambda c: (mixture_scores[c], c))
    hood = neighbourhood(best_mix, grid, kind)
    weights = dict(zip([cell_key(n) for n in hood], all_cells[best_mix]["mixture"]))
    generators = {cell_key(n): all_cells[n]["generators"][0] for n in hood}
    bundle = make_bundle(run, data, "mixture", generators, weights=weights)
    best_cell_bundle = make_bundle(run, data, "single", {"all": all_cells[best_cell]["generators"][0]})
    fields.best_cell, fields.best_mixture_cell = list(best_cell), list(best_mix)
    fields.mixture_weights, fields.mixture_score = weights, scorer.record()
    fields.ranking = {
        "features": scorer.name,
        "n": scorer.n,
        "cell_fid": {f"{c[0]},{c[1]}": v for c, v in cell_scores.items()},
        "mixture_fid": {f"{c[0]},{c[1]}": v for c, v in mixture_scores.items()},
    }
    fields.history = {f"{c[0]},{c[1]}": v["history"] for c, v in sorted(all_cells.items())}
    # what the (1+1)-ES saw: the best mixture score of each iteration, in the scorer's own space
    mixture_curve = []
    for it in range(iterations):
        points = [h for v in all_cells.values() for h in v["history"] if h["iteration"] == it]
        mixture_curve.append(
            {
                "iteration": it,
                "clock_s": max(h["clock_s"] for h in points),
                "fid": min(h["mixture_fid"] for h in points),
                "features": scorer.name,
                "n": scorer.n,
            }
        )
    fields.mixture_curve = mixture_curve
    return Outcome(bundle, [], dataclasses.asdict(fields), extra_bundles={"best_cell": best_cell_bundle})
