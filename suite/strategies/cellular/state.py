"""What a cell is and what travels between ranks: individuals as flat vectors (network, Adam state,
learning rate), a cell's population, the genomes of a cell as one vector, and the neighbour exchange.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from ...config.plan import process_grid
from ...gan.losses import Loss
from ...train.ema import EmaGenerator
from ...train.flat import flatten, unflatten_
from .grid import Cell, cells, neighbourhood, owner

if TYPE_CHECKING:
    from ...train.engines.base import Engine


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
    rate; with ``ema`` (a generator's, ``train.ema_half_life``) then its EMA generator's state and update count, so
    that the average travels with its individual through tournaments and replacement. float32 holds all of them
    exactly: Adam keeps its moments and step in float32, and counters stay far below 2**24.
    """

    def __init__(self, module: nn.Module, ema: bool = False):
        self.module_size = module_vector(module).numel()
        self.param_sizes = [p.numel() for p in module.parameters()]
        self.moments_size = sum(self.param_sizes)
        self.lr_at = self.module_size + 2 * self.moments_size + len(self.param_sizes)
        self.ema = ema
        self.size = self.lr_at + 1 + (self.module_size + 1 if ema else 0)

    def pack(
        self, module: nn.Module, optimizer: torch.optim.Optimizer, lr: float, ema: EmaGenerator | None = None
    ) -> torch.Tensor:
        """The individual: ``module``, the state of the Adam optimiser that trains it, ``lr`` (and its ``ema``)."""
        params = optimizer.param_groups[0]["params"]
        states = [optimizer.state.get(p) or {} for p in params]

        def moments(name: str) -> list[torch.Tensor]:
            return [(s[name] if s else torch.zeros_like(p)).detach().reshape(-1).float().cpu() for p, s in zip(params, states)]

        steps = torch.tensor([float(s["step"]) if s else 0.0 for s in states], dtype=torch.float32)
        averaged = []
        if self.ema:
            assert ema is not None, "a layout with an EMA packs its individual's"
            averaged = [flatten(ema.state.values(), torch.float32), torch.tensor([float(ema.updates)], dtype=torch.float32)]
        return torch.cat(
            [module_vector(module), *moments("exp_avg"), *moments("exp_avg_sq"), steps, torch.tensor([lr], dtype=torch.float32)]
            + averaged
        )

    def load_network(self, vector: torch.Tensor, module: nn.Module) -> None:
        """Load only the network of a packed individual (to evaluate it)."""
        load_module_vector(module, vector[: self.module_size])

    def load(
        self, vector: torch.Tensor, module: nn.Module, optimizer: torch.optim.Optimizer, ema: EmaGenerator | None = None
    ) -> float:
        """Load a packed individual into ``module``, its ``optimizer`` (and its ``ema``); return its learning rate."""
        self.load_network(vector, module)
        if self.ema:
            assert ema is not None, "a layout with an EMA loads its individual's"
            at = self.lr_at + 1
            unflatten_(ema.state.values(), vector[at : at + self.module_size])
            ema.updates = int(vector[at + self.module_size])
        avg_at, sq_at = self.module_size, self.module_size + self.moments_size
        steps = vector[sq_at + self.moments_size : self.lr_at].tolist()
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
        lr = float(vector[self.lr_at])
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
    mixture_se: float = 0.0  # the bootstrap standard error of mixture_score (:mod:`.decide`)
    decisions: list[dict] = field(default_factory=list)  # this iteration's decisions, for its history point
    fixed_loss: Loss | None = None  # Mustangs per cell: drawn once
    history: list[dict] = field(default_factory=list)
    ema_g: list[EmaGenerator] | None = None  # the generators' EMA generators (train.ema_half_life), slot by slot

    def emas(self, kind: str) -> list[EmaGenerator | None]:
        """The EMA generator of each individual of a side (None for discriminators, or without EMA)."""
        return list(self.ema_g) if kind == "g" and self.ema_g is not None else [None] * len(self.side(kind)[0])

    def side(self, kind: str) -> tuple[list[nn.Module], list[torch.optim.Optimizer], list[float]]:
        """(networks, optimisers, learning rates) of the generators (``"g"``) or discriminators (``"d"``)."""
        return (self.generators, self.opt_g, self.lr_g) if kind == "g" else (self.discriminators, self.opt_d, self.lr_d)


class Genomes:
    """The layout of a cell's vector, and template networks to evaluate received individuals.

    A cell vector holds ``population`` slots, each a generator individual then a discriminator
    individual (see :class:`Layout`).
    """

    def __init__(self, make_pair: Callable[[int], tuple[nn.Module, nn.Module]], population: int, ema: bool = False):
        g, d = make_pair(0)
        self.make_pair, self.population = make_pair, population
        self.layouts = {"g": Layout(g, ema), "d": Layout(d)}
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
                parts.append(self.layouts[kind].pack(nets[s], opts[s], lrs[s], cell.emas(kind)[s]))
        return torch.cat(parts)

    def unpack(self, vector: torch.Tensor, cell: CellState) -> None:
        """Load a cell vector (:meth:`pack`) into the cell's networks, optimisers and learning rates."""
        for s in range(self.population):
            for kind in ("g", "d"):
                nets, opts, lrs = cell.side(kind)
                lrs[s] = self.layouts[kind].load(self.part(vector, s, kind), nets[s], opts[s], cell.emas(kind)[s])

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
