"""``suite project RESULTS``: a cost model per strategy, fitted on measured runs, checked against
the runs it did not see, and projected to process counts no machine here reaches.

Everything is read from the run records. Per rank r of a run, ``busy_r`` is its window time to
its last step and ``comm_r`` the time it was blocked on communication; the model fits the
rest, ``busy_r - comm_r``, and adds communication from the network model
(:mod:`suite.measure.network`: alpha-beta links, allreduce algorithms, presets). T is the training
window (``train_s``, the slowest rank); S steps; x images through a discriminator per step and
rank; m bytes one rank hands to collectives per step (counted by the engines); AR(m, p) an
allreduce over p ranks.

* ``data_parallel``, ``conditional``: T(P) = S (c0 + c1 x + AR(m, P)); strong scaling splits
  the global batch, x = x(1) / P; weak scaling keeps x.
* ``label_partitioned`` over C classes with s_c window steps each: P <= C, no communication,
  T(P) = max over ranks of sum over its classes of s_c (c0 + c1 x); P > C (a multiple of C),
  groups of g = P/C ranks, T(P) = max_c s_c (c0 + c1 x/g + AR(m, g)). Weak scaling, one class
  per rank: T(P) = max over the first P classes of s_c (c0 + c1 x): the load imbalance of
  unequal classes. Beyond the measured classes, class sizes repeat.
* ``cellular`` with k cells per rank, neighbourhood h, population p, I iterations:
  T(P) = I (k (tau + phi p (2h + 1) + mu n(h)) + X(P)), where tau is the per-cell work that does
  not depend on h (training, packing genomes), phi the cost of one generator pass over the
  fitness sample (a cell makes p (2h + 1) of them: every neighbourhood generator against every
  discriminator, then the trained individuals; discriminator passes are about 1 % of a
  generator's at these sizes and left out), mu one mixture score (n(h) = 1 on a 1-cell
  neighbourhood, else 2: before and after the ES proposal), and X(P) the neighbour exchange:
  the most loaded rank's sum over its neighbour ranks of alpha + cells sent x genome bytes x beta.

c0 and c1 come from a least-squares fit (both >= 0) of (busy_r - comm_r) / S_r against x_r;
with one batch size among the fit points c0 cannot be told from c1 and is set to 0 (time
proportional to the images), which the model's note says. Bytes are counted, not timed, and do
not depend on P, so they come from every multi-rank record of the same networks, held-out ones
included; a label-partitioned group exchanges the gradients of data_parallel's pair.

Runs whose ranks x threads exceed the node's cores (oversubscribed) measure contention: they are
never fitted nor validated, only listed. Projections assume one rank per core set (or GPU) with
the measured threads, computing as fast as the measured ranks, unless ``compute_scale`` says
otherwise.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from ..measure.network import PRESETS, Network, allreduce_seconds

DEFAULT_RANKS = [2**i for i in range(13)]
"""``suite project --ranks`` by default: 1, 2, 4, ..., 4096."""
REPORT_RANKS = [2**i for i in range(11)]
"""The report's projection: 1 to 1,024 ranks."""
PROBE_FILE = "probe.json"
"""The measured network of a results folder (``suite probe --out RESULTS/probe.json``); ``suite report`` copies it."""
PAPER_POINTS = "scaling_points.csv"
SEED001_SPEEDUPS = "seed001_cellular_speedups.csv"
BUSY_SHARE = 0.8
"""A validated CPU run whose ranks got less than this share of their cores ran on a busy machine."""
PAPER_MARKERS = ["*", "P", "X", "D", "v", "^", "<", ">", "h", "8"] * 3


# --- what the records say --------------------------------------------------------------------------------


def config_key(record: dict) -> tuple:
    """Runs sharing a key share one cost model: strategy, engine, loss, data, threads, device."""
    return (
        record["strategy"],
        record["engine"],
        record["loss"],
        (record.get("dataset") or {}).get("name"),
        (record.get("dataset") or {}).get("image_size"),
        record.get("threads_per_rank"),
        record.get("device"),
    )


def config_name(key: tuple) -> str:
    """``strategy / loss / engine (dataset NNpx, T threads, device)``."""
    strategy, engine, loss, dataset, size, threads, device = key
    return f"{strategy} / {loss} / {engine} ({dataset} {size}px, {threads} thread{'s' if threads != 1 else ''}, {device})"


def _pair_key(record: dict) -> tuple:
    """Which networks a run's collectives carry: label_partitioned groups train data_parallel's pair."""
    pair = "conditional" if record["strategy"] == "conditional" else "unconditional"
    return (pair, record["loss"], (record.get("dataset") or {}).get("name"), (record.get("dataset") or {}).get("image_size"))


def usable(record: dict) -> bool:
    """An ok run with per-rank window times, not oversubscribed: one the model may be fitted on."""
    telemetry = record.get("telemetry") or {}
    return (
        record.get("status") == "ok"
        and not record.get("oversubscribed")
        and bool(telemetry.get("busy_s_per_rank"))
        and bool(telemetry.get("timed_steps"))
    )


def _ranks(record: dict) -> Iterator[tuple[int, int, float, float]]:
    """(window steps, images, busy seconds, blocked seconds) of each rank."""
    t = record["telemetry"]
    return zip(t["work_steps_per_rank"], t["work_images_per_rank"], t["busy_s_per_rank"], record["comm"]["per_rank_seconds"])


def _counted(record: dict) -> bool:
    """An ok run whose engines counted its window traffic per rank (bytes are counts: any P will do)."""
    return (
        record.get("status") == "ok"
        and "per_rank_bytes" in (record.get("comm") or {})
        and "work_steps_per_rank" in (record.get("telemetry") or {})
    )


def _class_steps(record: dict) -> dict[int, int]:
    """Window steps of each class GAN of a label-partitioned run (its steps minus its warm-up)."""
    warmup = record["telemetry"]["warmup_steps_per_rank"]
    steps = {}
    for group in record["groups"]:
        per_gan = warmup[group["ranks"][0]] / len(group["classes"])
        for c in group["classes"]:
            steps[int(c)] = int(record["generator_steps"][str(c)] - per_gan)
    return steps


# --- cellular geometry -------------------------------------------------------------------------------------


def exchange_plan(grid: Sequence[int], pgrid: tuple[int, int], kind: str) -> list[dict[int, int]]:
    """Per rank (Cartesian, row-major), the number of cells it sends to each other rank per iteration."""
    from ..train.strategies.grid import cells, neighbourhood, owner

    def rank(c: tuple[int, int]) -> int:
        i, j = owner(c, grid, pgrid)
        return i * pgrid[1] + j

    needed: list[dict[int, set]] = [dict() for _ in range(pgrid[0] * pgrid[1])]
    for c in cells(grid):
        for n in neighbourhood(c, grid, kind):
            if rank(n) != rank(c):
                needed[rank(n)].setdefault(rank(c), set()).add(n)
    return [{dest: len(sent) for dest, sent in sends.items()} for sends in needed]


def _square_split(procs: int) -> tuple[int, int]:
    """The most square rows x cols = ``procs`` with rows <= cols."""
    rows = max(d for d in range(1, math.isqrt(procs) + 1) if procs % d == 0)
    return rows, procs // rows


# --- cost models ---------------------------------------------------------------------------------------------


@dataclass
class StepCost:
    """Seconds of one step of one rank outside communication: ``per_step + per_image * x``."""

    per_step: float
    per_image: float
    note: str = ""

    def seconds(self, images: float) -> float:
        return self.per_step + self.per_image * images

    @classmethod
    def fit(cls, points: list[tuple[float, float]]) -> "StepCost":
        """Least squares (both coefficients >= 0) of seconds per step ``y`` against images per step ``x``."""
        from scipy.optimize import nnls

        x, y = np.array(points, dtype=float).T
        if x.max() > 1.05 * x.min():
            (c0, c1), _ = nnls(np.column_stack([np.ones_like(x), x]), y)
            return cls(float(c0), float(c1))
        return cls(
            0.0,
            float(x @ y / (x @ x)),
            f"one batch size ({x.mean():.0f} images per step) among the fit points: time taken proportional to the images",
        )


@dataclass
class GanModel:
    """``data_parallel``, ``conditional`` and ``label_partitioned``: a step cost and the gradients' bytes."""

    step: StepCost
    grad_bytes: float | None  # bytes one rank allreduces per step; None: never counted

    def step_seconds(self, images: float, group: int, net: Network, algorithm: str) -> tuple[float, float] | str:
        """(compute, communication) seconds of one step in a group of ``group`` ranks, or why not."""
        if group > 1 and self.grad_bytes is None:
            return "no multi-rank run of these networks: their allreduce bytes were never counted (run one at P=2)"
        return self.step.seconds(images), allreduce_seconds(self.grad_bytes or 0.0, group, net, algorithm)


@dataclass
class CellularModel:
    """Per cell and iteration: ``rest`` + ``fitness`` x p(2h+1) + ``mixture`` x n(h); the genome bytes."""

    rest: float
    fitness: float
    mixture: float
    cell_bytes: float | None
    population: int
    kind: str

    def cell_seconds(self, h: int) -> float:
        return self.rest + self.fitness * self.population * (2 * h + 1) + self.mixture * (1 if h == 1 else 2)


def _fit_gan(records: list[dict], all_records: list[dict]) -> GanModel:
    points = [(images / steps, (busy - blocked) / steps) for r in records for steps, images, busy, blocked in _ranks(r) if steps]
    pair = _pair_key(records[0])
    per_step = [
        nbytes / steps
        for r in all_records
        if _counted(r) and _pair_key(r) == pair
        for steps, nbytes in zip(r["telemetry"]["work_steps_per_rank"], r["comm"]["per_rank_bytes"])
        if steps and nbytes
    ]
    return GanModel(StepCost.fit(points), float(np.mean(per_step)) if per_step else None)


def _fit_cellular(records: list[dict], all_records: list[dict]) -> CellularModel:
    fitness, mixture, rest = [], [], []
    for r in records:
        k, h, p = r["cells_per_rank"], r["neighbourhood_size"], r["population"]
        for i, (steps, _, busy, blocked) in enumerate(_ranks(r)):
            units = steps * k
            f, m = r["phases_s"]["fitness"][i] / units, r["phases_s"]["mixture"][i] / units
            fitness.append((p * (2 * h + 1), f))
            mixture.append((1 if h == 1 else 2, m))
            rest.append((busy - blocked) / units - f - m)
    per_cell = []
    for r in all_records:
        if _counted(r) and r["strategy"] == "cellular" and config_key(r)[:5] == config_key(records[0])[:5] and r["procs"] > 1:
            sent = exchange_plan(r["grid"], r["process_grid"], r["neighbourhood"])
            steps, nbytes = r["telemetry"]["work_steps_per_rank"], r["comm"]["per_rank_bytes"]
            per_cell += [
                nbytes[i] / steps[i] / sum(sent[i].values()) for i in range(r["procs"]) if steps[i] and nbytes[i] and sent[i]
            ]

    def through_origin(pairs: Sequence[tuple[float, float]]) -> float:
        u, v = np.array(pairs, dtype=float).T
        return float(u @ v / (u @ u))

    first = records[0]
    return CellularModel(
        float(np.mean(rest)),
        through_origin(fitness),
        through_origin(mixture),
        float(np.mean(per_cell)) if per_cell else None,
        first["population"],
        first["neighbourhood"],
    )


def fit(records: list[dict], all_records: list[dict]) -> GanModel | CellularModel:
    """The cost model of one configuration from its fit ``records`` (bytes from ``all_records``)."""
    if records[0]["strategy"] == "cellular":
        return _fit_cellular(records, all_records)
    return _fit_gan(records, all_records)


# --- problems and their predicted times ---------------------------------------------------------------------


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


def problem_of(record: dict) -> Problem:
    """The problem a record solved (at its own process count)."""
    t = record["telemetry"]
    if record["strategy"] == "cellular":
        return Problem("cellular", t["timed_steps"], grid=tuple(record["grid"]))
    steps, images = t["work_steps_per_rank"], t["work_images_per_rank"]
    group = len(record["groups"][0]["ranks"]) if record["strategy"] == "label_partitioned" else record["procs"]
    factor = images[0] / steps[0] / (record["global_batch"] / group)
    if record["strategy"] == "label_partitioned":
        return Problem("label_partitioned", t["timed_steps"], record["global_batch"], factor, _class_steps(record))
    return Problem(record["strategy"], t["timed_steps"], record["global_batch"], factor)


@dataclass
class Outcome:
    """A predicted training window and its parts, or why it cannot be predicted."""

    time: float | None = None
    compute: float | None = None
    comm: float | None = None
    note: str = ""


def _gan_time(model: GanModel, problem: Problem, procs: int, net: Network, algorithm: str, weak: bool) -> Outcome:
    if weak:
        local = problem.batch
    elif problem.batch % procs:
        return Outcome(note=f"the global batch of {problem.batch} does not split over the ranks")
    else:
        local = problem.batch // procs
    cost = model.step_seconds(local * problem.factor, procs, net, algorithm)
    if isinstance(cost, str):
        return Outcome(note=cost)
    compute, comm = cost
    return Outcome(problem.steps * (compute + comm), problem.steps * compute, problem.steps * comm)


def _classes_time(model: GanModel, problem: Problem, procs: int, net: Network, algorithm: str, weak: bool) -> Outcome:
    from ..config.plan import class_plan

    labels = sorted(problem.class_steps)
    steps = problem.class_steps
    if weak:  # one class per rank: the first P classes, sizes repeating beyond the measured ones
        steps = {i: problem.class_steps[labels[i % len(labels)]] for i in range(procs)}
        labels = list(range(procs))
    n = len(labels)
    if procs > n and procs % n:
        return Outcome(note=f"above the {n} classes, the ranks must be a multiple of the class count")
    group = max(1, procs // n)
    if problem.batch % group:
        return Outcome(note=f"a class batch of {problem.batch} does not split over the ranks of a class group")
    cost = model.step_seconds(problem.batch // group * problem.factor, group, net, algorithm)
    if isinstance(cost, str):
        return Outcome(note=cost)
    compute, comm = cost
    slowest = max(sum(steps[c] for c in classes) for _, classes in class_plan(labels, procs))
    return Outcome(slowest * (compute + comm), slowest * compute, slowest * comm)


def _cellular_time(
    model: CellularModel, problem: Problem, procs: int, net: Network, weak: bool, block: tuple[int, int] | None = None
) -> Outcome:
    from ..config.plan import process_grid
    from ..train.strategies.grid import neighbourhood

    grid = problem.grid
    if weak:
        assert block is not None, "weak scaling keeps a block of cells per rank"
        rows, cols = _square_split(procs)
        grid = (rows * block[0], cols * block[1])
    assert grid is not None, "a cellular problem has a grid"
    try:
        pgrid = process_grid(grid, procs)
    except ValueError:
        return Outcome(note=f"the {grid[0]}x{grid[1]} grid's cells do not split into equal blocks over the ranks")
    plan = exchange_plan(grid, pgrid, model.kind)
    if any(plan) and model.cell_bytes is None:
        return Outcome(note="no multi-rank cellular run: the genome bytes were never counted (run one at P=2)")
    cell_bytes = model.cell_bytes or 0
    k = grid[0] * grid[1] // procs
    compute = k * model.cell_seconds(len(neighbourhood((0, 0), grid, model.kind)))

    def exchange(rank: int) -> float:
        same_node = lambda dest: dest // net.ranks_per_node == rank // net.ranks_per_node  # noqa: E731
        return sum((net.intra if same_node(dest) else net.inter).seconds(n * cell_bytes) for dest, n in plan[rank].items())

    comm = max(exchange(r) for r in range(procs)) if any(plan) else 0.0
    note = f"grid {grid[0]}x{grid[1]}" if weak else ""
    return Outcome(problem.steps * (compute + comm), problem.steps * compute, problem.steps * comm, note)


def predict(
    model: Any,
    problem: Problem,
    procs: int,
    net: Network,
    algorithm: str = "best",
    weak: bool = False,
    block: tuple[int, int] | None = None,
) -> Outcome:
    """The training window of ``problem`` on ``procs`` ranks of ``net`` (strong scaling unless ``weak``).

    Weak scaling keeps the per-rank work of ``problem``: the per-rank batch (``problem.batch``),
    one class per rank, or a ``block`` of cells per rank.
    """
    if problem.strategy == "cellular":
        return _cellular_time(model, problem, procs, net, weak, block)
    if problem.strategy == "label_partitioned":
        return _classes_time(model, problem, procs, net, algorithm, weak)
    return _gan_time(model, problem, procs, net, algorithm, weak)


# --- validation --------------------------------------------------------------------------------------------


def _local(net: Network, record: dict) -> Network:
    """``net`` with the record's own ranks per node (where its ranks really sat)."""
    return dataclasses.replace(net, ranks_per_node=record.get("ranks_per_node") or net.ranks_per_node)


def _oversubscribed(record: dict) -> str:
    threads = record["threads_per_rank"]
    return (
        f"oversubscribed ({record['ranks_per_node']} ranks x {threads} thread{'s' if threads != 1 else ''} on "
        f"{record['cores_per_node']} cores): measures contention; not fitted, not validated"
    )


def cpu_share(record: dict) -> float | None:
    """Of the cores its threads could use, the share a CPU run's ranks got (mean over ranks); None on GPUs.

    Well below 1 outside oversubscription, other processes were using the machine: the run's time
    measures them too, which no model of the strategy predicts.
    """
    util = (record.get("telemetry") or {}).get("cpu_util_mean")
    if record.get("device") != "cpu" or util is None or not record.get("threads_per_rank"):
        return None
    return util / 100 / record["threads_per_rank"]


def validate(records: list[dict], net: Network, fit_procs: list[int] | None = None, algorithm: str = "best") -> pd.DataFrame:
    """Predicted against measured training windows, one row per ok run.

    Without ``fit_procs`` each process count is held out in turn: its runs are predicted by a
    model fitted on the configuration's other process counts. With ``fit_procs`` the model is
    fitted on those and predicts the rest. ``net`` is the network the runs were measured on.
    """
    rows = []
    ok = [r for r in records if r.get("status") == "ok" and r.get("telemetry")]
    for key in sorted({config_key(r) for r in ok}, key=str):
        runs = sorted((r for r in ok if config_key(r) == key), key=lambda r: (r["procs"], r["run_id"]))
        fittable = [r for r in runs if usable(r)]
        models: dict[tuple, Any] = {}

        def model_without(
            procs: int | None, fittable: list[dict] = fittable, models: dict[tuple, Any] = models
        ) -> tuple[tuple, Any]:
            chosen = tuple(
                sorted({r["procs"] for r in fittable if (r["procs"] in fit_procs if fit_procs else r["procs"] != procs)})
            )
            if chosen and chosen not in models:
                models[chosen] = fit([r for r in fittable if r["procs"] in chosen], records)
            return chosen, models.get(chosen)

        for r in runs:
            row = {
                "config": config_name(key),
                "run_id": r["run_id"],
                "procs": r["procs"],
                "scaling": r["scaling"],
                "measured_s": r["train_s"],
                "predicted_s": None,
                "error": None,
                "cpu_share": cpu_share(r),
                "role": "",
                "fitted_on": "",
            }
            if not usable(r):
                chosen, model = model_without(None)
                row["role"] = _oversubscribed(r) if r.get("oversubscribed") else "not fitted: no per-rank window times"
            else:
                chosen, model = model_without(r["procs"])
                in_fit = r["procs"] in (fit_procs or [])
                row["role"] = "fitted (in-sample)" if in_fit else "held out"
            if model is None:
                row["role"] = (row["role"] + "; " if not usable(r) else "") + "not validated: no other process count to fit on"
            else:
                outcome = predict(model, problem_of(r), r["procs"], _local(net, r), algorithm, weak=False)
                row["predicted_s"] = outcome.time
                row["fitted_on"] = "P=" + ",".join(map(str, chosen))
                if usable(r) and outcome.time is not None:
                    row["error"] = outcome.time / r["train_s"] - 1
                elif outcome.note:
                    row["role"] += f"; {outcome.note}"
            rows.append(row)
    return pd.DataFrame(
        rows,
        columns=["config", "run_id", "procs", "scaling", "measured_s", "predicted_s", "error", "cpu_share", "role", "fitted_on"],
    )


# --- projection ----------------------------------------------------------------------------------------------


@dataclass
class Fitted:
    """One configuration's model with the problems it is projected on."""

    key: tuple
    model: GanModel | CellularModel
    strong: Problem
    weak: Problem
    block: tuple[int, int] | None = None  # cellular weak scaling: cells per rank as rows x cols


def fit_all(records: list[dict], fit_procs: list[int] | None = None) -> list[Fitted]:
    """A model per configuration with a usable run, and its strong and weak problems.

    The strong problem is the smallest run's whole problem (label_partitioned: the largest class
    set measured; cellular: a strong-scaling grid if one was run); the weak one is its per-rank
    share (cellular: its block of cells per rank).
    """
    fitted = []
    for key in sorted({config_key(r) for r in records if usable(r)}, key=str):
        runs = sorted(
            (r for r in records if usable(r) and config_key(r) == key and (not fit_procs or r["procs"] in fit_procs)),
            key=lambda r: (r["procs"], r["scaling"] != "strong"),
        )
        if not runs:
            continue
        base = runs[0]
        problem = problem_of(base)
        if key[0] == "cellular":
            strong_runs = [r for r in runs if r["scaling"] == "strong"]
            grid = (
                tuple(strong_runs[0]["grid"]) if strong_runs else max((tuple(r["grid"]) for r in runs), key=lambda g: g[0] * g[1])
            )
            block = (base["grid"][0] // base["process_grid"][0], base["grid"][1] // base["process_grid"][1])
            fitted.append(Fitted(key, fit(runs, records), dataclasses.replace(problem, grid=grid), problem, block))
        elif key[0] == "label_partitioned":
            steps: dict[int, int] = {}
            for r in runs:
                steps = {**_class_steps(r), **steps}
            whole = dataclasses.replace(problem, class_steps=dict(sorted(steps.items())))
            fitted.append(Fitted(key, fit(runs, records), whole, whole))
        else:
            per_rank = dataclasses.replace(problem, batch=problem.batch // base["procs"])
            fitted.append(Fitted(key, fit(runs, records), problem, per_rank))
    return fitted


def _scaled(model: Any, compute_scale: float) -> Any:
    """``model`` with its computation times multiplied by ``compute_scale`` (a faster or slower device)."""
    if compute_scale == 1:
        return model
    if isinstance(model, CellularModel):
        return dataclasses.replace(
            model, rest=model.rest * compute_scale, fitness=model.fitness * compute_scale, mixture=model.mixture * compute_scale
        )
    step = StepCost(model.step.per_step * compute_scale, model.step.per_image * compute_scale, model.step.note)
    return dataclasses.replace(model, step=step)


def project(
    fitted: list[Fitted], net: Network, ranks: list[int], algorithm: str = "best", compute_scale: float = 1.0
) -> pd.DataFrame:
    """Strong- and weak-scaling time, speedup and efficiency of every configuration at ``ranks``.

    Speedup and efficiency are against the model's own P = 1 time of the same problem.
    """
    rows = []
    for f in fitted:
        model = _scaled(f.model, compute_scale)
        for scaling, problem in (("strong", f.strong), ("weak", f.weak)):
            weak = scaling == "weak"
            one = predict(model, problem, 1, net, algorithm, weak, f.block)
            for p in ranks:
                out = predict(model, problem, p, net, algorithm, weak, f.block)
                row = {
                    "config": config_name(f.key),
                    "strategy": f.key[0],
                    "scaling": scaling,
                    "procs": p,
                    "nodes": net.nodes(p),
                    "time_s": out.time,
                    "compute_s": out.compute,
                    "comm_s": out.comm,
                    "speedup": None,
                    "efficiency": None,
                    "note": out.note,
                }
                if out.time and one.time:
                    ratio = one.time / out.time
                    row.update(speedup=ratio if not weak else None, efficiency=ratio / p if not weak else ratio)
                rows.append(row)
    return pd.DataFrame(
        rows,
        columns=[
            "config",
            "strategy",
            "scaling",
            "procs",
            "nodes",
            "time_s",
            "compute_s",
            "comm_s",
            "speedup",
            "efficiency",
            "note",
        ],
    )


def model_table(fitted: list[Fitted]) -> pd.DataFrame:
    """The fitted parameters of every configuration."""
    rows = []
    for f in fitted:
        m = f.model
        row = {"config": config_name(f.key)}
        if isinstance(m, CellularModel):
            row.update(
                parameters=(
                    f"tau {m.rest:.4g} s, phi {m.fitness:.4g} s, mu {m.mixture:.4g} s per cell-iteration; "
                    f"genome {m.cell_bytes / 2**20:.3g} MiB per cell"
                    if m.cell_bytes
                    else f"tau {m.rest:.4g} s, phi {m.fitness:.4g} s, mu {m.mixture:.4g} s; genome bytes not counted"
                ),
                note="",
            )
        else:
            mib = f"{m.grad_bytes / 2**20:.3g} MiB allreduced per step" if m.grad_bytes else "allreduce bytes not counted"
            row.update(parameters=f"c0 {m.step.per_step:.4g} s/step, c1 {m.step.per_image:.4g} s/image; {mib}", note=m.step.note)
        rows.append(row)
    return pd.DataFrame(rows, columns=["config", "parameters", "note"])


# --- the papers' points ----------------------------------------------------------------------------------------


def paper_points(baselines: Path) -> pd.DataFrame:
    """Published scaling points: ``scaling_points.csv`` and seed 001's cellular speedups (P = cells)."""
    frames = []
    points = baselines / PAPER_POINTS
    if points.is_file():
        frames.append(pd.read_csv(points))
    speedups = baselines / SEED001_SPEEDUPS
    if speedups.is_file():
        s = pd.read_csv(speedups)
        cells = s["grid"].map(lambda g: math.prod(int(v) for v in g.split("x")))
        frames.append(
            pd.DataFrame(
                {
                    "source": "seed 001 (Perez et al.), MNIST, grid " + s["grid"],
                    "strategy": "cellular",
                    "scaling": "strong",
                    "procs": cells,
                    "metric": "speedup",
                    "value": s["speedup"],
                    "kind": "reported",
                    "grid": s["grid"],
                    "note": "one process per cell; single core vs distributed wall time",
                }
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def compare_papers(
    fitted: list[Fitted], papers: pd.DataFrame, net: Network, algorithm: str = "best", compute_scale: float = 1.0
) -> pd.DataFrame:
    """Each published point beside the model's projection of the same strategy, scaling and P."""
    rows = []
    for _, point in papers.iterrows():
        for f in (f for f in fitted if f.key[0] == point["strategy"]):
            model, weak = _scaled(f.model, compute_scale), point["scaling"] == "weak"
            problem = f.weak if weak else f.strong
            if point["strategy"] == "cellular" and not weak and isinstance(point.get("grid"), str):
                grid_rows, grid_cols = (int(v) for v in point["grid"].split("x"))
                problem = dataclasses.replace(problem, grid=(grid_rows, grid_cols))
            p = int(point["procs"])
            one, at = (predict(model, problem, n, net, algorithm, weak, f.block) for n in (1, p))
            value = None
            if one.time and at.time:
                value = one.time / at.time if (weak or point["metric"] == "speedup") else one.time / at.time / p
            rows.append(
                {
                    "source": point["source"],
                    "strategy": point["strategy"],
                    "scaling": point["scaling"],
                    "procs": p,
                    "metric": point["metric"],
                    "paper": point["value"],
                    "kind": point["kind"],
                    "config": config_name(f.key),
                    "projected": value,
                    "note": at.note or "",
                }
            )
    return pd.DataFrame(
        rows, columns=["source", "strategy", "scaling", "procs", "metric", "paper", "kind", "config", "projected", "note"]
    )


# --- output ----------------------------------------------------------------------------------------------------


def plot_projection(table: pd.DataFrame, papers: pd.DataFrame, out: Path, title: str) -> str:
    """Strong-scaling speedup and weak-scaling efficiency against ranks, the papers' points on the same axes."""
    from .plots import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 7))
    for ax, scaling, column in ((axes[0], "strong", "speedup"), (axes[1], "weak", "efficiency")):
        data = table[(table["scaling"] == scaling)].dropna(subset=[column])
        for config, part in data.groupby("config"):
            ax.plot(part["procs"], part[column], label=config, markersize=3)
        if not papers.empty:
            shown = papers[papers["scaling"] == scaling]
            for marker, ((source, kind), part) in zip(PAPER_MARKERS, shown.groupby(["source", "kind"])):
                ax.plot(
                    part["procs"],
                    part["value"],
                    linestyle="none",
                    marker=marker,
                    markersize=9,
                    color="black" if kind == "reported" else "grey",
                    label=f"{source} ({kind})",
                )
        if scaling == "strong" and not data.empty:
            top = int(data["procs"].max())
            ax.plot([1, top], [1, top], color="lightgrey", linestyle="--", marker="", label="ideal")
        ax.set_xscale("log", base=2)
        if scaling == "strong":
            ax.set_yscale("log", base=2)
        ax.set_xlabel("ranks")
        ax.set_ylabel(column)
        ax.set_title(f"{scaling} scaling, projected")
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    name = "projection.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def percent(value: float | None) -> str | None:
    """A relative error as a signed percentage (None for n/a)."""
    return f"{value:+.1%}" if pd.notna(value) else None


def _pivot(table: pd.DataFrame, scaling: str, column: str) -> pd.DataFrame:
    """Rows: ranks; columns: configurations; cells: ``column`` to 4 significant digits (n/a where not defined)."""
    part = table[table["scaling"] == scaling]
    pivot = part.pivot_table(index="procs", columns="config", values=column, aggfunc="first", dropna=False)
    pivot = pivot.reindex(sorted(part["procs"].unique()))
    return pivot.map(lambda v: f"{v:.4g}" if pd.notna(v) else None).reset_index()


def _notes(table: pd.DataFrame) -> list[str]:
    """Why projected cells are n/a, once per configuration, scaling and reason."""
    missing = table[table["time_s"].isna() & (table["note"] != "")]
    lines = []
    for (config, scaling, note), part in missing.groupby(["config", "scaling", "note"], sort=False):
        lines.append(f"- {config}, {scaling}, P = {', '.join(map(str, part['procs']))}: n/a, {note}.")
    return lines


ASSUMPTIONS = """Assumptions: each rank computes as fast as the measured ones (times x `compute_scale`), one rank per
core set or GPU, no contention; communication is the alpha-beta model of the network named above, with no
overlap with computation and no stragglers; label-partitioned groups and cellular blocks are placed on
consecutive ranks. Oversubscribed runs are listed but never fitted or validated. Equations: README, Projection."""


@dataclass
class Projection:
    """Everything ``suite project`` and the report's section show."""

    fitted: list[Fitted]
    validation: pd.DataFrame
    table: pd.DataFrame
    papers: pd.DataFrame
    comparison: pd.DataFrame
    net: Network
    local: Network
    compute_scale: float = 1.0


def run_projection(
    records: list[dict],
    net: Network,
    local: Network,
    ranks: list[int],
    baselines: Path,
    fit_procs: list[int] | None = None,
    algorithm: str = "best",
    compute_scale: float = 1.0,
) -> Projection | None:
    """Fit, validate and project; None when no run can be fitted."""
    fitted = fit_all(records, fit_procs)
    if not fitted:
        return None
    papers = paper_points(baselines)
    return Projection(
        fitted,
        validate(records, local, fit_procs, algorithm),
        project(fitted, net, ranks, algorithm, compute_scale),
        papers,
        compare_papers(fitted, papers, net, algorithm, compute_scale) if not papers.empty else pd.DataFrame(),
        net,
        local,
        compute_scale,
    )


def write_projection(result: Projection, out: Path, heading: str = "#") -> list[str]:
    """Write the CSVs and the plot into ``out``; return the markdown (headings at ``heading`` level)."""
    from .markdown import markdown_table

    out.mkdir(parents=True, exist_ok=True)
    result.validation.to_csv(out / "projection_validation.csv", index=False)
    result.table.to_csv(out / "projection.csv", index=False)
    result.comparison.to_csv(out / "projection_papers.csv", index=False)
    sub = heading + "#"
    lines = [
        f"{heading} Projection\n",
        "A cost model per strategy fitted on these runs (README, Projection), checked against the runs it was not "
        "fitted on, then projected to more ranks. A model, not a measurement.\n",
        f"- Projected on {result.net.describe()}.",
        f"- Validated on {result.local.describe('each run on its own ranks per node')}.",
        *([f"- Computation times x {result.compute_scale:g} (`--compute-scale`)."] if result.compute_scale != 1 else []),
        "",
        f"{sub} Fitted model\n",
        markdown_table(model_table(result.fitted)),
        f"{sub} Predicted against measured\n",
    ]
    v = result.validation
    held = v[v["role"] == "held out"].dropna(subset=["error"])
    lines.append(markdown_table(v.assign(error=v["error"].map(percent))))
    if not held.empty:
        worst = held.loc[held["error"].abs().idxmax()]
        lines.append(
            f"Held-out runs: {len(held)}, median |error| {held['error'].abs().median():.1%}, largest "
            f"{worst['error']:+.1%} ({worst['run_id']}).\n"
        )
    starved = v[v["error"].notna() & (pd.to_numeric(v["cpu_share"]) < BUSY_SHARE)]
    if not starved.empty:
        lines.append(
            f"{len(starved)} runs got less than {BUSY_SHARE:.0%} of their cores (`cpu_share`, down to "
            f"{starved['cpu_share'].min():.0%}) without being oversubscribed: other processes were using the "
            "machine, and their errors measure that too. Re-run them on a quiet machine.\n"
        )
    for scaling, column in (("strong", "speedup"), ("weak", "efficiency")):
        lines.append(f"{sub} {scaling.capitalize()} scaling, projected {column}\n")
        lines.append(markdown_table(_pivot(result.table, scaling, column)))
    lines += _notes(result.table)
    lines.append("")
    if not result.comparison.empty:
        lines.append(f"{sub} Papers' points beside the projection\n")
        lines.append(
            "The papers ran other hardware, networks and budgets; a `claimed` point is a statement of the "
            "text without a printed number (`baselines/scaling_points.csv` says which).\n"
        )
        lines.append(markdown_table(result.comparison))
    title = f"projected on {result.net.name}" + (f", compute x {result.compute_scale:g}" if result.compute_scale != 1 else "")
    lines.append(f"![projection]({plot_projection(result.table, result.papers, out, title)})\n")
    lines.append(ASSUMPTIONS + "\n")
    return lines


def local_network(results_dir: Path, probe: str | None = None) -> Network:
    """The network the results were measured on: ``probe`` or ``RESULTS/probe.json``, else the ``shm`` preset."""
    from ..measure.network import probe_network

    path = Path(probe) if probe else results_dir / PROBE_FILE
    if probe or path.is_file():
        return probe_network(path)
    return PRESETS["shm"]


def report_section(records: list[dict], results_dir: Path, out_dir: Path, baselines: Path) -> list[str]:
    """The report's "Projection" section (on ``summit``, to 1,024 ranks), or nothing when no run can be fitted."""
    result = run_projection(records, PRESETS["summit"], local_network(results_dir), REPORT_RANKS, baselines)
    return write_projection(result, out_dir, "##") if result else []
