"""The cost model of :mod:`suite.analysis.projection`: fitted per-step costs, the problem a run solves, and the
predicted window time of a strategy at any process count on any network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ...measure.network import Network, allreduce_seconds


def exchange_plan(grid: Sequence[int], pgrid: tuple[int, int], kind: str) -> list[dict[int, int]]:
    """Per rank (Cartesian, row-major), the number of cells it sends to each other rank per iteration."""
    from ...config.plan import cells, neighbourhood, owner

    def rank(c: tuple[int, int]) -> int:
        i, j = owner(c, grid, pgrid)
        return i * pgrid[1] + j

    needed: list[dict[int, set[tuple[int, int]]]] = [dict() for _ in range(pgrid[0] * pgrid[1])]
    for c in cells(grid):
        for n in neighbourhood(c, grid, kind):
            if rank(n) != rank(c):
                needed[rank(n)].setdefault(rank(c), set()).add(n)
    return [{dest: len(sent) for dest, sent in sends.items()} for sends in needed]


def _square_split(procs: int) -> tuple[int, int]:
    """The most square rows x cols = ``procs`` with rows <= cols."""
    rows = max(d for d in range(1, math.isqrt(procs) + 1) if procs % d == 0)
    return rows, procs // rows


SAME_BATCH = 0.05
"""Batch sizes (images per step) within this share of each other count as one: the fit cannot tell c0 from c1."""


@dataclass
class StepCost:
    """Seconds of one step of one rank outside communication: ``per_step + per_image * x``."""

    per_step: float
    per_image: float
    note: str = ""
    images: float | None = None
    """The one batch size (images per step) of the fit points where the fixed cost could not be told from the cost per
    image (``per_step`` set to 0); None where the fit saw two or more."""

    def seconds(self, images: float) -> float:
        return self.per_step + self.per_image * images

    def unidentified_at(self, images: float) -> str | None:
        """Why ``images`` per step lies beyond what the fit identified (None where it does not): with one batch size
        among the fit points the fixed cost per step is unknown, so a step of another size is not extrapolated."""
        if self.images is None or abs(images / self.images - 1) <= SAME_BATCH:
            return None
        return (
            f"not extrapolated: the fit saw one batch size ({self.images:.0f} images per step), so the fixed cost per step "
            f"is not identified and a step of {images:.0f} images is not predicted (fit two batch sizes or process counts)"
        )

    @classmethod
    def fit(cls, points: list[tuple[float, float]]) -> "StepCost":
        """Least squares (both coefficients >= 0) of seconds per step ``y`` against images per step ``x``."""
        from scipy.optimize import nnls

        x, y = np.array(points, dtype=float).T
        if x.max() > (1 + SAME_BATCH) * x.min():
            (c0, c1), _ = nnls(np.column_stack([np.ones_like(x), x]), y)
            return cls(float(c0), float(c1))
        return cls(
            0.0,
            float(x @ y / (x @ x)),
            f"one batch size ({x.mean():.0f} images per step) among the fit points: the fixed cost per step is not "
            "identified, so no step of another size is predicted",
            float(x.mean()),
        )


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.3g} MiB"


@dataclass
class GanModel:
    """One GAN trained by all ranks (the :data:`suite.config.entries.ONE_GROUP` cost model): a step cost and the
    bytes of one allreduce (of the gradients every step, or of the model every ``allreduce_every`` steps)."""

    step: StepCost
    grad_bytes: float | None  # bytes one rank allreduces per step; None: never counted

    def step_seconds(self, images: float, group: int, net: Network, algorithm: str, every: int = 1) -> tuple[float, float] | str:
        """(compute, communication) seconds of one step in a group of ``group`` ranks that allreduces once every
        ``every`` steps, or why not."""
        if group > 1 and self.grad_bytes is None:
            return "no multi-rank run of these networks: their allreduce bytes were never counted (run one at P=2)"
        unidentified = self.step.unidentified_at(images)
        if unidentified:
            return unidentified
        return self.step.seconds(images), allreduce_seconds(self.grad_bytes or 0.0, group, net, algorithm) / every

    def traffic(self) -> str:
        """What one rank sends per step, as the report states it."""
        return f"{_mib(self.grad_bytes)} allreduced per step" if self.grad_bytes else "allreduce bytes not counted"

    def describe(self) -> str:
        """The fitted parameters and the traffic, one line."""
        return f"c0 {self.step.per_step:.4g} s/step, c1 {self.step.per_image:.4g} s/image; {self.traffic()}"

    def window(self, problem: Problem, procs: int, net: Network, algorithm: str, weak: bool, block: Any = None) -> ProjectedStep:
        """The training window of ``problem`` on ``procs`` ranks (:func:`predict`), or why it is not predicted."""
        if weak:
            local = problem.batch
        elif problem.batch % procs:
            return ProjectedStep(note=f"the global batch of {problem.batch} does not split over the ranks")
        else:
            local = problem.batch // procs
        cost = self.step_seconds(local * problem.factor, procs, net, algorithm, problem.allreduce_every)
        if isinstance(cost, str):
            return ProjectedStep(note=cost)
        compute, comm = cost
        return ProjectedStep(problem.steps * (compute + comm), problem.steps * compute, problem.steps * comm)


@dataclass
class ClassGroupsModel(GanModel):
    """One GAN per class (the :data:`suite.config.entries.CLASS_GROUPS` cost model): up to ``classes`` ranks, a rank
    trains its class GANs alone and moves nothing; above, each class group allreduces ``grad_bytes`` per step."""

    classes: int = 0

    def traffic(self) -> str:
        above = (
            f"{_mib(self.grad_bytes)} allreduced per step in each class group"
            if self.grad_bytes
            else "the class groups' allreduce bytes not counted"
        )
        return f"0 bytes at P <= {self.classes} (a rank trains its class GANs alone); above, {above}"

    def window(self, problem: Problem, procs: int, net: Network, algorithm: str, weak: bool, block: Any = None) -> ProjectedStep:
        from ...config.plan import class_plan

        labels = sorted(problem.class_steps)
        steps = problem.class_steps
        if weak:  # one class per rank: the first P classes, sizes repeating beyond the measured ones
            steps = {i: problem.class_steps[labels[i % len(labels)]] for i in range(procs)}
            labels = list(range(procs))
        n = len(labels)
        if procs > n and procs % n:
            return ProjectedStep(note=f"above the {n} classes, the ranks must be a multiple of the class count")
        group = max(1, procs // n)
        if problem.batch % group:
            return ProjectedStep(note=f"a class batch of {problem.batch} does not split over the ranks of a class group")
        cost = self.step_seconds(problem.batch // group * problem.factor, group, net, algorithm)
        if isinstance(cost, str):
            return ProjectedStep(note=cost)
        compute, comm = cost
        slowest = max(sum(steps[c] for c in classes) for _, classes in class_plan(labels, procs))
        return ProjectedStep(slowest * (compute + comm), slowest * compute, slowest * comm)


@dataclass
class CellularModel:
    """Per cell and iteration (the :data:`suite.config.entries.CELLS` cost model): ``rest`` + ``fitness`` x p(2h+1) +
    ``mixture`` x n(h); the genome bytes."""

    rest: float
    fitness: float
    mixture: float
    cell_bytes: float | None
    population: int
    kind: str

    def cell_seconds(self, h: int) -> float:
        return self.rest + self.fitness * self.population * (2 * h + 1) + self.mixture * (1 if h == 1 else 2)

    def describe(self) -> str:
        """The fitted parameters and the genome bytes a cell sends to each neighbour rank per iteration."""
        costs = f"tau {self.rest:.4g} s, phi {self.fitness:.4g} s, mu {self.mixture:.4g} s per cell-iteration"
        return costs + (f"; genome {_mib(self.cell_bytes)} per cell" if self.cell_bytes else "; genome bytes not counted")

    def window(self, problem: Problem, procs: int, net: Network, algorithm: str, weak: bool, block: Any = None) -> ProjectedStep:
        from ...config.plan import neighbourhood, process_grid

        grid = problem.grid
        if weak:
            assert block is not None, "weak scaling keeps a block of cells per rank"
            rows, cols = _square_split(procs)
            grid = (rows * block[0], cols * block[1])
        assert grid is not None, "a cellular problem has a grid"
        try:
            pgrid = process_grid(grid, procs)
        except ValueError:
            return ProjectedStep(note=f"the {grid[0]}x{grid[1]} grid's cells do not split into equal blocks over the ranks")
        plan = exchange_plan(grid, pgrid, self.kind)
        if any(plan) and self.cell_bytes is None:
            return ProjectedStep(note="no multi-rank cellular run: the genome bytes were never counted (run one at P=2)")
        cell_bytes = self.cell_bytes or 0
        k = grid[0] * grid[1] // procs
        compute = k * self.cell_seconds(len(neighbourhood((0, 0), grid, self.kind)))

        def exchange(rank: int) -> float:
            def same_node(dest: int) -> bool:
                return dest // net.ranks_per_node == rank // net.ranks_per_node

            return sum((net.intra if same_node(dest) else net.inter).seconds(n * cell_bytes) for dest, n in plan[rank].items())

        comm = max(exchange(r) for r in range(procs)) if any(plan) else 0.0
        note = f"grid {grid[0]}x{grid[1]}" if weak else ""
        return ProjectedStep(problem.steps * (compute + comm), problem.steps * compute, problem.steps * comm, note)


@dataclass
class Problem:
    """What a run computes, in the model's terms; built from a record (:func:`problem_of`).

    ``steps`` generator steps (cellular: iterations); ``batch`` the global batch of one GAN step;
    ``factor`` images through a discriminator per batch image (3 for bce: real, fake, fake);
    ``class_steps`` window steps of each class GAN (label_partitioned); ``grid`` the cells
    (cellular).
    """

    strategy: str
    steps: int
    batch: int = 0
    factor: float = 0.0
    class_steps: dict[int, int] = field(default_factory=dict)
    grid: tuple[int, int] | None = None
    allreduce_every: int = 1
    """Steps between two allreduces of the one group (its strategy's ``steps_per_allreduce`` trait, from the record's
    part: local SGD's period)."""


@dataclass
class ProjectedStep:
    """A predicted training window and its parts, or why it cannot be predicted."""

    time: float | None = None
    compute: float | None = None
    comm: float | None = None
    note: str = ""


def predict(
    model: GanModel | CellularModel,
    problem: Problem,
    procs: int,
    net: Network,
    algorithm: str = "best",
    weak: bool = False,
    block: tuple[int, int] | None = None,
) -> ProjectedStep:
    """The training window of ``problem`` on ``procs`` ranks of ``net`` (strong scaling unless ``weak``).

    Weak scaling keeps the per-rank work of ``problem``: the per-rank batch (``problem.batch``),
    one class per rank, or a ``block`` of cells per rank. The model's own cost model computes it.
    """
    return model.window(problem, procs, net, algorithm, weak, block)
