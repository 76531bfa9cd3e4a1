"""The cellular :class:`Strategy`: set-up, the training window's iterations, checkpoints, and the run's
model (the best cell's mixture) and record fields.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch
from torch import nn

from ...config.entries import CARTESIAN
from ...config.plan import SystemSize, discriminator_batches
from ...config.registry import engines_for
from ...config.scenario import Run
from ...gan.divergence import Divergence
from ...gan.models import build_pair
from ...gan.sampling import MIXTURE, SINGLE
from ...gan.seeding import derive_seed
from ...records.scored import CurvePoint
from ...train.flat import cpu_state
from ...train.gan_plan import UNLIMITED, evenly_spaced_steps
from ...train.strategies.base import Outcome, Strategy, images_budget, make_bundle
from .algorithm import PHASES, Cellular, MixtureScorer
from .decide import bootstrap_fid_se, first_unless_displaced
from .grid import Cell, cells, neighbourhood
from .record import CellularFields
from .rules import cellular_settings
from .settings import CellularConfig
from .state import cell_key

if TYPE_CHECKING:
    from ...gan.data import ImageData

log = logging.getLogger(__name__)


class CellularStrategy(Strategy):
    """The cellular strategy's phases on one rank; one telemetry step per coevolution iteration."""

    def setup(self) -> None:
        from ...measure.metrics.reference import Reference

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
        rows, cols = self.cellular.grid
        size = SystemSize(
            run.train.batch_size,
            engine.size,
            run.scaling == "weak",
            1,
            cells=rows * cols,
            batches_per_iteration=self.cellular.batches,
            discriminator_skip=cellular_settings(run).discriminator_skip,
        )
        self.budget = images_budget(run, size)
        if self.events is not None:
            self.events.count_steps(size)
            self.told: dict[Cell, int] = {}  # history points of each cell written as events
        if self.budget is not None:  # the iterations the budget buys, warm-up included
            self.cellular.iterations = self.budget.steps
        if run.train.ema_half_life is not None:
            self.cellular.keep_ema(run.train.ema_half_life)
        self.warmup_images = 0  # real images of this rank's warm-up iterations
        self.next_iteration = 0
        self.stopped = False  # a rank diverged: every rank stopped after the same iteration
        self.snapshots: list[dict] = []
        self.window: dict | None = None  # the window's first iteration and the snapshot times still to come

    def _iterate(self) -> None:
        """One coevolution iteration as one telemetry step."""
        strategy, telemetry, it = self.cellular, self.telemetry, self.next_iteration
        with telemetry.counting_flops():
            telemetry.begin_step()
            before = (strategy.images, strategy.real_images, strategy.eval_images)
            strategy.iteration(it)
            telemetry.end_step(
                images=strategy.images - before[0],
                train_images=strategy.real_images - before[1],
                eval_images=strategy.eval_images - before[2],
            )
        self.next_iteration += 1
        if self.events is not None:
            self._tell_events()
        if self.engine.rank == 0:
            log.info("iteration %d, %.0fs in the training window", it + 1, telemetry.clock())

    def _tell_events(self) -> None:
        """After an iteration (outside its timed step): this rank's cells' new history points and its step times so far,
        at the system's training images after that iteration; then a flush (every rank writes its own cells)."""
        events, strategy = self.events, self.cellular
        assert events is not None, "only a writing rank tells"
        self.telemetry.flush()  # the iteration's scoring already waited for the device
        own = strategy.real_images // max(1, self.next_iteration)  # this rank's images an iteration
        for c, cell in sorted(strategy.cells.items()):
            for point in cell.history[self.told.get(c, 0) :]:
                events.scalars(
                    events.images(point["iteration"] + 1, own), {f"train/mixture_fid/cell{c[0]},{c[1]}": point["mixture_fid"]}
                )
            self.told[c] = len(cell.history)
        events.step_times(events.images(self.next_iteration, own), self.telemetry.step_times)
        events.flush()

    def warm_up(self) -> None:
        """The first ``train.warmup_steps`` iterations; snapshots that an images budget places in them are taken here."""
        points = self.run.metrics.curve_points
        while not self.stopped and self.next_iteration < min(self.run.train.warmup_steps, self.cellular.iterations):
            self._iterate()
            self.warmup_images = self.cellular.real_images
            self.stopped = self.engine.any_rank([self.cellular.diverged is not None], self.engine.world())[0]
            if not self.stopped and points and self.budget is not None and self.next_iteration in self.budget.snapshot_steps:
                self._take_snapshot()

    def divergence(self) -> Divergence | None:
        return self.cellular.diverged

    def halted(self) -> bool:
        return self.stopped

    def history_so_far(self) -> dict[str, list[dict]]:
        return {f"{c[0]},{c[1]}": cell.history for c, cell in sorted(self.cellular.cells.items())}

    def train(self) -> None:
        """Iterations to ``cellular.iterations`` (or those an images budget buys) or, with ``train.budget_s``, until
        the window is over.

        Snapshots of every cell (its best generator and its mixture) are kept at evenly spaced
        iterations (or times; under an images budget at its equal fractions), so that the best
        mixture can be scored afterwards like any other strategy's model.
        """
        run, strategy, telemetry = self.run, self.cellular, self.telemetry
        budget, points = self.window_s, run.metrics.curve_points
        if self.window is None:  # the window opens (a resumed run continues the saved one)
            strategy.phase_s = dict.fromkeys(PHASES, 0.0)  # the phases of the window's iterations
            times = [self.deadline((k + 1) / max(1, points)) for k in range(points)] if budget is not None else []
            self.window = {"first": self.next_iteration, "times": times, "finished": False}
        if self.window["finished"] or self.stopped:  # resumed after training was over, or diverged in warm-up
            return
        first, times = self.window["first"], self.window["times"]
        if budget is None:
            due = {first + k for k in evenly_spaced_steps(strategy.iterations - first, points)}
            if self.budget is not None:
                due = set(self.budget.snapshot_steps)
            last = strategy.iterations
        else:
            last = cellular_settings(run).iterations or UNLIMITED
        while self.next_iteration < last:
            self._iterate()
            diverged = strategy.diverged is not None
            if budget is None:
                snapshot, stop = self.next_iteration in due, self.next_iteration >= last
                self.stopped = self.engine.any_rank([diverged], self.engine.world())[0]  # once per iteration
            else:
                clock, end = telemetry.clock(), self.deadline()
                assert end is not None, "a time budget has a deadline"
                snapshot, stop, self.stopped = self.engine.any_rank(
                    [bool(times) and clock >= times[0], clock >= end, diverged], self.engine.world()
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
                "images": self.cellular.real_images,  # this rank's cells'
                "clock_s": self.telemetry.clock(),
                "cells": {
                    c: {
                        "generator": cpu_state(cell.generators[0]),
                        "mixture": cell.mixture.tolist(),
                        "score": cell.mixture_score,
                        "score_se": cell.mixture_se,
                    }
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
            "real_images": strategy.real_images,
            "warmup_images": self.warmup_images,
            "next_iteration": self.next_iteration,
            "window": copy.deepcopy(self.window),
            "phase_s": dict(strategy.phase_s),
            "snapshots": self.snapshots,
            "cells": {
                c: {
                    "vector": strategy.genomes.pack(cell),
                    "mixture": torch.from_numpy(cell.mixture.copy()),  # a tensor: checkpoints hold no numpy arrays
                    "mixture_score": cell.mixture_score,
                    "mixture_se": cell.mixture_se,
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
                saved["mixture"].numpy().copy(),
                saved["mixture_score"],
                copy.deepcopy(saved["history"]),
            )
            cell.mixture_se = saved.get("mixture_se", 0.0)
        self.next_iteration, self.window = state["next_iteration"], copy.deepcopy(state["window"])
        strategy.real_images, self.warmup_images = state["real_images"], state["warmup_images"]
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
                "ema": [cpu_state(e.state) for e in cell.ema_g] if cell.ema_g is not None else None,
            }
            for c, cell in strategy.cells.items()
        }
        gathered = engine.gather_object(
            {
                "cells": mine,
                "phases": strategy.phase_s,
                "snapshots": self.snapshots,
                "images": strategy.real_images,
                "warmup_images": self.warmup_images,
            }
        )
        cellular = cellular_settings(run)
        iterations, skip = self.next_iteration, cellular.discriminator_skip
        fields = CellularFields(
            grid=list(strategy.grid),
            process_grid=list(strategy.exchange.pgrid),
            cells_per_rank=len(strategy.cells),
            neighbourhood=cellular.neighbourhood,
            neighbourhood_size=max(len(neighbourhood(c, strategy.grid, cellular.neighbourhood)) for c in cells(strategy.grid)),
            population=cellular.population,
            iterations=iterations,
            batches_per_iteration=strategy.batches,
            global_batch=strategy.batch,
            # generator updates of the whole grid
            generator_steps=iterations * strategy.batches * cellular.population * len(cells(strategy.grid)),
            budget_steps=self.budget.steps if self.budget is not None else None,
            # each generator of a cell steps on every batch; the discriminators skip some (discriminator_skip)
            steps_per_gan=iterations * strategy.batches,
            generator_only_steps=iterations * (strategy.batches - discriminator_batches(strategy.batches, skip)),
        )
        if gathered is None:  # not rank 0
            return Outcome(None, fields=dataclasses.asdict(fields))
        all_cells = {c: v for part in gathered for c, v in part["cells"].items()}
        fields.phases_s = {name: [part["phases"][name] for part in gathered] for name in PHASES}
        fields.images_consumed = sum(part["images"] for part in gathered)
        fields.warmup_images_consumed = sum(part["warmup_images"] for part in gathered)
        outcome = _results(run, self.data, strategy, self.scorer, all_cells, fields)
        outcome.curve = _snapshot_curve(run, self.data, strategy, [part["snapshots"] for part in gathered])
        return outcome


def _snapshot_curve(run: Run, data: ImageData, strategy: Cellular, per_rank: list[list[dict]]) -> list:
    """(clock, generator steps, bundle) of the best mixture at each snapshot, for scoring after training.

    The best mixture of a snapshot is the one whose own score during training was lowest then (by more than
    ``cellular.decision_margin`` standard errors, else the first cell in grid order: :mod:`.decide`), as the final
    model is chosen at the end.
    """
    grid, kind, steps_per_iteration = (
        strategy.grid,
        cellular_settings(run).neighbourhood,
        strategy.batches * cellular_settings(run).population * len(cells(strategy.grid)),
    )
    curve = []
    for snaps in zip(*per_rank):  # the i-th snapshot of every rank
        states = {c: v for snap in snaps for c, v in snap["cells"].items()}
        scores = {c: states[c]["score"] for c in states}
        noise: dict[Cell, float] = {c: states[c].get("score_se", 0.0) for c in states}
        best, _ = first_unless_displaced(sorted(states), scores, _independent_se(noise), cellular_settings(run).decision_margin)
        hood = neighbourhood(best, grid, kind)
        bundle = make_bundle(
            run,
            data,
            MIXTURE,
            {cell_key(n): states[n]["generator"] for n in hood},
            weights=dict(zip([cell_key(n) for n in hood], states[best]["mixture"])),
        )
        clock, images = max(snap["clock_s"] for snap in snaps), sum(snap["images"] for snap in snaps)
        curve.append((clock, snaps[0]["iteration"] * steps_per_iteration, images, bundle))
    return curve


def _results(
    run: Run, data: ImageData, strategy: Cellular, scorer: MixtureScorer, all_cells: dict, fields: CellularFields
) -> Outcome:
    """Rank 0: rank the cells and the mixtures, and package the best mixture as the model."""
    grid, kind, iterations = strategy.grid, cellular_settings(run).neighbourhood, fields.iterations or 0

    def best_generator(c: Cell) -> nn.Module:  # a cell keeps its individuals best first
        g = build_pair(run.dataset.image_size, data.channels, run.model.latent_dim, seed=0, architecture=run.model.architecture)[
            0
        ]
        g.load_state_dict(all_cells[c]["generators"][0])
        return g.to(strategy.device)

    final_seed = derive_seed(run.train.seed, "final-ranking")
    cell_scored = {c: scorer.scored([best_generator(c)], np.ones(1), final_seed) for c in sorted(all_cells)}
    mixture_scored = {}
    for c in sorted(all_cells):
        nets = [best_generator(n) for n in neighbourhood(c, grid, kind)]
        mixture_scored[c] = scorer.scored(nets, np.asarray(all_cells[c]["mixture"]), final_seed)
    best_cell, cell_z = _best(cell_scored, scorer, cellular_settings(run), derive_seed(run.train.seed, "best-cell"))
    best_mix, mixture_z = _best(mixture_scored, scorer, cellular_settings(run), derive_seed(run.train.seed, "best-mixture"))
    cell_scores = {c: v[0] for c, v in cell_scored.items()}
    mixture_scores = {c: v[0] for c, v in mixture_scored.items()}
    hood = neighbourhood(best_mix, grid, kind)
    weights = dict(zip([cell_key(n) for n in hood], all_cells[best_mix]["mixture"]))
    generators = {cell_key(n): all_cells[n]["generators"][0] for n in hood}
    bundle = make_bundle(run, data, MIXTURE, generators, weights=weights)
    # the EMA generator: the same mixture of the neighbourhood's best generators' averages (train.ema_half_life)
    averaged = {cell_key(n): all_cells[n]["ema"][0] for n in hood if all_cells[n]["ema"] is not None}
    ema = make_bundle(run, data, MIXTURE, averaged, weights=weights) if len(averaged) == len(hood) else None
    best_cell_bundle = make_bundle(run, data, SINGLE, {"all": all_cells[best_cell]["generators"][0]})
    fields.best_cell, fields.best_mixture_cell = list(best_cell), list(best_mix)
    fields.mixture_weights, fields.mixture_score = weights, scorer.record()
    fields.steering = scorer.steering  # the network the mixture weights evolved under: never the ruler
    fields.ranking = {
        "features": scorer.name,
        "n": scorer.n,
        "cell_fid": {f"{c[0]},{c[1]}": v for c, v in cell_scores.items()},
        "mixture_fid": {f"{c[0]},{c[1]}": v for c, v in mixture_scores.items()},
        "decision_margin": cellular_settings(run).decision_margin,
        "best_cell_z": cell_z,
        "best_mixture_z": mixture_z,
    }
    fields.history = {f"{c[0]},{c[1]}": v["history"] for c, v in sorted(all_cells.items())}
    # what the (1+1)-ES saw: the best mixture score of each iteration, in the scorer's own space
    mixture_curve = []
    for it in range(iterations):
        points = [h for v in all_cells.values() for h in v["history"] if h["iteration"] == it]
        mixture_curve.append(
            CurvePoint(
                iteration=it,
                clock_s=max(h["clock_s"] for h in points),
                fid=min(h["mixture_fid"] for h in points),
                features=scorer.name,
                n=scorer.n,
            )
        )
    fields.mixture_curve = mixture_curve
    return Outcome(bundle, [], dataclasses.asdict(fields), extra_bundles={"best_cell": best_cell_bundle}, ema=ema)


def _independent_se(noise: dict[Cell, float]) -> Callable[[Cell, Cell], float]:
    """The standard error of the difference of two cells' scores made from their own samples (independent)."""
    return lambda a, b: math.hypot(noise[a], noise[b])


def _best(
    scored: dict[Cell, tuple[float, np.ndarray]], scorer: MixtureScorer, cellular: CellularConfig, seed: int
) -> tuple[Cell, float | None]:
    """The cell whose score is lowest by more than ``cellular.decision_margin`` standard errors, else the first in
    grid order (:func:`.decide.first_unless_displaced`), and the z value of its closest call. Every cell was scored on
    the same latent vectors, so two cells' differences are paired (:func:`.decide.bootstrap_fid_se`)."""

    def se(a: Cell, b: Cell) -> float:
        return bootstrap_fid_se(scored[a][1], scored[b][1], scorer.fid, cellular.bootstrap_draws, seed)[1]

    return first_unless_displaced(sorted(scored), {c: v[0] for c, v in scored.items()}, se, cellular.decision_margin)
