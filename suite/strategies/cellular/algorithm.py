"""One cellular iteration on this rank's cells (:class:`Cellular`): exchange, fitness, selection, training,
replacement and the mixture's (1+1)-ES step, with the mixture scored during training (:class:`MixtureScorer`).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np
import torch
from torch import nn

from ...config.registry import LOSSES
from ...config.scenario import Run
from ...gan.divergence import Divergence, check_values, loss_bound
from ...gan.losses import Loss, get_loss, mustangs_draw
from ...gan.models import build_pair
from ...gan.seeding import derive_seed, torch_generator
from ...train.ema import EmaGenerator, decay_for
from ...train.engines.base import frozen
from .decide import bootstrap_fid_se, es_step, paired_se, replacement, tournament
from .grid import (
    Cell,
    discriminator_trains,
    mixture_assignment,
    mutate_learning_rates,
    neighbourhood,
    propose_weights,
)
from .rules import cellular_settings
from .state import CellState, Exchange, Genomes, batchnorm_stats_kept, cell_key, eval_mode

if TYPE_CHECKING:
    from ...gan.data import ImageData
    from ...measure.metrics.evaluate import Reference
    from ...measure.metrics.features import Features
    from ...measure.telemetry import Telemetry
    from ...train.engines.base import Engine

log = logging.getLogger(__name__)
PHASES = ("exchange", "fitness", "train", "mixture")


class Cellular:
    """State and steps of the cellular strategy on one rank."""

    def __init__(self, run: Run, engine: Engine, data: ImageData, telemetry: Telemetry, scorer: MixtureScorer):
        self.run, self.engine, self.data, self.telemetry, self.scorer = run, engine, data, telemetry, scorer
        assert run.grid is not None, "a cellular run has a grid"
        rows, cols = run.grid
        self.cfg, self.seed, self.grid = cellular_settings(run), run.train.seed, (rows, cols)
        self.device = engine.device
        self.exchange = Exchange(engine, self.grid, self.cfg.neighbourhood)
        self.genomes = Genomes(self._pair, self.cfg.population, ema=run.train.ema_half_life is not None)
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
        self.images = 0  # images through a discriminator: real and generated, training and fitness
        self.real_images = 0  # training images: real images of this rank's cells' discriminator steps (suite.config.plan)
        self.eval_images = 0  # evaluation images: scored without an update (fitness and mixture), this rank's cells
        self.bound = loss_bound(run.loss)
        self.diverged: Divergence | None = None  # the first divergence this rank saw (see suite.gan.divergence)

    def _pair(self, seed: int) -> tuple[nn.Module, nn.Module]:
        g, d = build_pair(
            self.run.dataset.image_size,
            self.data.channels,
            self.run.model.latent_dim,
            dropout=self.run.model.dropout,
            seed=seed,
            architecture=self.run.model.architecture,
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
        if LOSSES[self.run.loss].draws and self.cfg.mustangs_choice == "cell":
            cell.fixed_loss = mustangs_draw(random.Random(derive_seed(self.seed, "mustangs", c)))
        return cell

    # --- helpers ---------------------------------------------------------------------------------------------
    def _loss(self, cell: CellState, rng: random.Random) -> Loss:
        if not LOSSES[self.run.loss].draws:
            return get_loss(self.run.loss)
        return cell.fixed_loss or mustangs_draw(rng)

    def _fetch(self, rows: np.ndarray) -> torch.Tensor:
        with self.telemetry.data():
            images, _ = self.data.fetch(rows)
            return images.to(self.device)

    def _noise(self, n: int, *name: object) -> torch.Tensor:
        return torch.randn(n, self.run.model.latent_dim, generator=torch_generator(self.seed, "z", *name)).to(self.device)

    def _training_batches(self, coords: Cell, it: int) -> Iterator[torch.Tensor | None]:
        """This iteration's batches: a fresh shuffle of the data cut into batches (no image twice). A batch whose
        discriminator step is skipped (``discriminator_skip``) is a generator-only step: its real images are never
        used, so they are neither loaded (None) nor counted as training images."""
        order = np.random.default_rng(derive_seed(self.seed, "order", coords, it)).permutation(len(self.data))
        for b in range(self.batches):
            if not discriminator_trains(b, self.cfg.discriminator_skip):
                yield None
                continue
            real = self._fetch(order[b * self.batch : (b + 1) * self.batch])
            self.real_images += len(real)
            yield real

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
    def _fitness(self, fakes: list[list[torch.Tensor]], discs: list[nn.Module], real: torch.Tensor, loss: Loss) -> Fitness:
        """Mean generator loss of each G against all Ds, and mean D loss of each D against all Gs, with each
        one's per-sample values (the noise that the decisions weigh, :mod:`.decide`).

        ``fakes`` holds each G's images (:meth:`_fakes`); over the whole sample, in batches of
        ``train.batch_size``, every pairing sees the same images and noise.
        """
        g_fit, d_fit = [0.0] * len(fakes), [0.0] * len(discs)
        g_rows, d_rows = np.zeros((len(fakes), len(real))), np.zeros((len(discs), len(real)))
        with batchnorm_stats_kept(discs):
            for b, lo in enumerate(range(0, len(real), self.batch)):
                images = real[lo : lo + self.batch]
                share, hi = len(images) / len(real), lo + len(images)
                for j, d in enumerate(discs):
                    real_scores = d(images)
                    for k, fake in enumerate(fakes):
                        fake_scores = d(fake[b])
                        g_fit[k] += share * float(loss.generator(fake_scores)) / len(discs)
                        d_fit[j] += share * float(loss.discriminator(real_scores, fake_scores)) / len(fakes)
                        g_rows[k, lo:hi] += per_sample(loss.generator, fake_scores) / len(discs)
                        d_rows[j, lo:hi] += per_sample(loss.discriminator, real_scores, fake_scores) / len(fakes)
                self.images += len(images) * len(discs) * (1 + len(fakes))
                self.eval_images += len(images) * len(discs) * (1 + len(fakes))
        return Fitness(g_fit, d_fit, g_rows, d_rows)

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
        pool_fit = self._fitness(pool_fakes, discs, real, loss)
        if self._diverged(cell, it, pool_fit.g, pool_fit.d):
            return
        cell.decisions = []
        self._select(cell, states, hood, pool_fit, rng)
        self.phase_s["fitness"] += time.perf_counter() - t

        t = time.perf_counter()
        self._train(cell, it, rng)
        self.phase_s["train"] += time.perf_counter() - t

        t = time.perf_counter()
        # Trained individuals meet the same opponents on the same sample as the cell's previous
        # ones, which are the neighbourhood's first p (hood[0] is the cell).
        new_g = self._fitness(self._fakes(cell.generators, z), discs, real, loss)
        new_d = self._fitness(pool_fakes, cell.discriminators, real, loss)
        if self._diverged(cell, it, new_g.g, new_d.d):
            return
        self._replace(
            cell,
            states[cell.coords],
            {"g": (pool_fit.head("g", p), new_g.side("g")), "d": (pool_fit.head("d", p), new_d.side("d"))},
        )
        self.phase_s["fitness"] += time.perf_counter() - t

        t = time.perf_counter()
        self._mixture_step(cell, hood, states, it)
        self.phase_s["mixture"] += time.perf_counter() - t

    def _select(self, cell: CellState, states: dict, hood: list[Cell], fitness: Fitness, rng: random.Random) -> None:
        """Tournaments copy neighbourhood individuals (weights, Adam state, learning rate) into the cell."""
        p, margin = self.cfg.population, self.cfg.decision_margin
        for kind in ("g", "d"):  # all generators first, as Lipizzaner
            nets, opts, lrs = cell.side(kind)
            values, rows = fitness.side(kind)
            for s in range(p):
                winner, drawn, z = tournament(values, self.cfg.tournament_size, rng, paired_se(rows), margin)
                cell.decisions.append({"op": "tournament", "side": kind, "slot": s, "chosen": winner, "drawn": drawn, "z": z})
                k, slot = divmod(winner, p)
                part = self.genomes.part(states[hood[k]], slot, kind)
                lrs[s] = self.genomes.layouts[kind].load(part, nets[s], opts[s], cell.emas(kind)[s])

    def _train(self, cell: CellState, it: int, rng: random.Random) -> None:
        mutation = np.random.default_rng(derive_seed(self.seed, "mutation", cell.coords, it))
        for b, real in enumerate(self._training_batches(cell.coords, it)):
            loss = self._loss(cell, rng)
            self._step(cell, "g", None, loss, rng, mutation, (cell.coords, it, b))
            if real is not None:  # the discriminators train on this batch (discriminator_skip)
                self._step(cell, "d", real, loss, rng, mutation, (cell.coords, it, b))

    def _step(
        self,
        cell: CellState,
        kind: str,
        real: torch.Tensor | None,
        loss: Loss,
        rng: random.Random,
        mutation: np.random.Generator,
        name: tuple,
    ) -> None:
        """One step of the cell's generators (``kind`` "g", on a batch of generated images: ``real`` None) or
        discriminators ("d", on the ``real`` batch and as many generated images).

        As Lipizzaner's ``step``: the learning rates mutate, then every individual trains against
        one opponent drawn from the cell's other side.
        """
        nets, opts, lrs = cell.side(kind)
        lrs[:] = mutate_learning_rates(lrs, self.run.train.lr, self.cfg.mutation_rate, self.cfg.mutation_probability, mutation)
        opponents = cell.side("d" if kind == "g" else "g")[0]
        opponent = opponents[rng.randrange(len(opponents))]
        for s, (net, opt) in enumerate(zip(nets, opts)):
            z = self._noise(self.batch, kind, *name, s)  # a training batch is always whole (batches <= a pass)
            opt.param_groups[0]["lr"] = lrs[s]
            opt.zero_grad(set_to_none=True)
            if kind == "g":
                with frozen(opponent):
                    loss.generator(opponent(net(z))).backward()
                self.images += self.batch
            else:
                assert real is not None, "a discriminator step trains on a real batch"
                with torch.no_grad():
                    fake = opponent(z)
                loss.discriminator(net(real), net(fake)).backward()
                self.images += 2 * self.batch
            opt.step()
            if kind == "g" and cell.ema_g is not None:  # never feeds back: the individual's average, beside it
                cell.ema_g[s].update(net)

    def keep_ema(self, half_life: float) -> None:
        """Give every generator of this rank's cells its EMA generator, its half-life ``half_life`` of a cell's
        generator steps (every generator of a cell steps on each of its batches); after the budget set the iterations."""
        steps = self.iterations * self.batches
        for cell in self.cells.values():
            cell.ema_g = [EmaGenerator(g, decay_for(half_life, steps)) for g in cell.generators]

    def _replace(self, cell: CellState, previous: torch.Tensor, fitness: dict) -> None:
        """Lipizzaner's replacement (:func:`replacement`) of the cell's previous individuals by trained ones."""
        for kind, ((old, old_rows), (new, new_rows)) in fitness.items():
            nets, opts, lrs = cell.side(kind)
            emas = cell.emas(kind)
            layout = self.genomes.layouts[kind]
            slots, zs = replacement(old, new, self.cfg.n_replacements, paired_se(old_rows, new_rows), self.cfg.decision_margin)
            cell.decisions.append({"op": "replace", "side": kind, "chosen": [f"{source}{i}" for source, i in slots], "z": zs})
            # pack first: a trained individual may move to a slot that is about to be overwritten
            parts = [
                self.genomes.part(previous, i, kind) if source == "old" else layout.pack(nets[i], opts[i], lrs[i], emas[i])
                for source, i in slots
            ]
            for s, part in enumerate(parts):
                lrs[s] = layout.load(part, nets[s], opts[s], emas[s])

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
        score, features = self.scorer.scored(nets, cell.mixture, sample_seed)
        accepted, z = False, None
        self.eval_images += self.scorer.n  # each scoring passes its samples through the feature network
        proposed = None
        if len(nets) > 1:  # a one-cell mixture has nothing to evolve (Lipizzaner on a 1x1 grid)
            proposal = propose_weights(
                cell.mixture, self.cfg.mixture_scale, np.random.default_rng(derive_seed(self.seed, "es", cell.coords, it))
            )
            proposal_score, proposed = self.scorer.scored(nets, proposal, sample_seed)
            self.eval_images += self.scorer.n
        seed = derive_seed(self.seed, "bootstrap", cell.coords, it)
        cell.mixture_se, diff_se = bootstrap_fid_se(features, proposed, self.scorer.fid, self.cfg.bootstrap_draws, seed)
        if proposed is not None:
            z = (score - proposal_score) / diff_se if diff_se > 0 else None
            cell.mixture, score, accepted = es_step(
                cell.mixture, score, proposal, proposal_score, diff_se, self.cfg.decision_margin
            )
            cell.decisions.append({"op": "mixture", "chosen": "proposal" if accepted else "current", "z": z})
        cell.mixture_score = score
        cell.history.append(
            {
                "iteration": it,
                "clock_s": self.telemetry.clock(),
                "mixture_fid": score,
                "accepted": accepted,
                "lr_g": list(cell.lr_g),
                "lr_d": list(cell.lr_d),
                "decisions": cell.decisions,
            }
        )


def per_sample(loss: Callable[..., torch.Tensor], *scores: torch.Tensor) -> np.ndarray:
    """A batch loss (a mean over its samples) of each sample alone: the values whose mean is the batch's loss."""
    return torch.func.vmap(lambda *row: loss(*(r[None] for r in row)))(*scores).double().numpy()


@dataclasses.dataclass
class Fitness:
    """One fitness evaluation: each generator's (``g``) and discriminator's (``d``) mean loss, and its per-sample values
    (one row each, the columns the same images and noise for all)."""

    g: list[float]
    d: list[float]
    g_rows: np.ndarray
    d_rows: np.ndarray

    def side(self, kind: str) -> tuple[list[float], np.ndarray]:
        """(means, per-sample rows) of the generators (``"g"``) or discriminators (``"d"``)."""
        return (self.g, self.g_rows) if kind == "g" else (self.d, self.d_rows)

    def head(self, kind: str, n: int) -> tuple[list[float], np.ndarray]:
        """:meth:`side` of the first ``n`` individuals (the cell's own, first in its neighbourhood)."""
        values, rows = self.side(kind)
        return values[:n], rows[:n]


class MixtureScorer:
    """FID of a weighted mixture of generators: Lipizzaner's ``FIDCalculator`` on a ``MixedGeneratorDataset``.

    ``cellular.mixture_samples`` generated images, each generator's share drawn as
    ``cellular.mixture_sampling`` says, against as many real training images, in the space of
    ``cellular.mixture_features``: the class logits or the features of the dataset's steering network
    (``steering:<dataset>``), never the ruler that scores the comparison (``steering`` names it in the record).
    """

    def __init__(self, run: Run, device: torch.device, reference: Reference):
        from ...measure.metrics.classifier import ClassLogits
        from ...measure.metrics.evaluate import STEERING_PROTOCOL, real_statistics
        from ...measure.metrics.features import steering_net, steering_record

        cfg = cellular_settings(run)
        self.n, self.sampling, self.device, self.latent = cfg.mixture_samples, cfg.mixture_sampling, device, run.model.latent_dim
        if cfg.mixture_features not in ("logits", "features"):  # metrics, the ruler: refused when the scenario is read
            raise ValueError(
                f"cellular.mixture_features: {cfg.mixture_features} is not the steering network's logits or features"
            )
        steering = steering_net(reference.dataset, reference.device, field="cellular.mixture_features")
        self.net: Features = ClassLogits(steering) if cfg.mixture_features == "logits" else steering
        self.name = self.net.name
        self.steering = steering_record(steering, f"cellular mixture weights ({cfg.mixture_features})", cfg.mixture_features)
        # a signal that steers training, not a reported score: its own sample count, samples as generated
        self.real = real_statistics(dataclasses.replace(reference, n=self.n, protocol=STEERING_PROTOCOL), self.net)
        self.dim = len(self.real["mu"])
        if self.n <= self.dim:
            raise ValueError(
                f"cellular.mixture_samples: {self.n} samples give a rank-deficient covariance in the "
                f"{self.dim}-d space of {self.name}; use more than {self.dim}"
            )

    def record(self) -> dict:
        """What the record says about the mixture scores: network, dimension, sample counts, sampling."""
        return {"features": self.name, "dim": self.dim, "n": self.n, "n_real": int(self.real["n"]), "sampling": self.sampling}

    def __call__(self, generators: list[nn.Module], weights: np.ndarray, seed: int) -> float:
        """The FID of the mixture of ``generators`` with ``weights`` on the samples that ``seed`` names."""
        return self.scored(generators, weights, seed)[0]

    @torch.no_grad()
    def scored(self, generators: list[nn.Module], weights: np.ndarray, seed: int) -> tuple[float, np.ndarray]:
        """:meth:`__call__` and the samples' features, row i made from latent vector i (the same for every mixture
        scored with ``seed``, so two mixtures' rows pair up: :func:`.decide.bootstrap_fid_se`)."""
        members = mixture_assignment(weights, self.n, self.sampling, np.random.default_rng(seed))
        z = torch.randn(self.n, self.latent, generator=torch.Generator().manual_seed(seed))
        drawing = [k for k in range(len(generators)) if (members == k).any()]
        with eval_mode(generators):
            images = [generators[k](z[members == k].to(self.device)).cpu() for k in drawing]
        features, _ = self.net(torch.cat(images))
        in_latent_order = np.empty_like(features)
        in_latent_order[np.concatenate([np.flatnonzero(members == k) for k in drawing])] = features
        return self.fid(features), in_latent_order

    def fid(self, features: np.ndarray) -> float:
        """The FID of ``features`` (rows: samples in the scorer's space) against the real statistics."""
        from ...measure.metrics.scores import frechet_distance, statistics

        return frechet_distance(*statistics(features), self.real["mu"], self.real["sigma"])
