"""Training of one GAN by the ranks of one group: the loop shared by the data-parallel,
conditional and label-partitioned strategies.

The group sees the data as *global* batches: every epoch is a permutation drawn from the
scenario seed and the GAN's name, cut into batches of ``global_batch`` images, and rank ``r``
of a group of ``n`` takes slice ``r`` of each batch. The noise is drawn the same way, for the
whole global batch, and sliced. Hence a GAN trained by 2 ranks sees exactly the batches and
noise that 1 rank would, and (with synchronised BatchNorm and no dropout) makes the same first
step up to float32 rounding; later steps drift apart only where Adam's per-weight scaling
amplifies summation-order noise in near-zero gradients.
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass, field
import numpy as np
import torch

from .data import ImageData
from .engines.base import Engine, Group, Replica
from .losses import gradient_penalty, get_loss
from .models import build_pair
from .scenario import Run
from .seeding import derive_seed, torch_generator
from .syncbn import convert_sync_batchnorm
from .telemetry import Telemetry

log = logging.getLogger(__name__)


class TrainingError(RuntimeError):
    """The run's settings cannot train this GAN (e.g. fewer images than one batch)."""


@dataclass
class GanResult:
    """What one trained GAN leaves behind on this rank."""

    key: str
    generator: torch.nn.Module
    steps: int = 0
    history: list[dict] = field(default_factory=list)  # per epoch: losses and train clock
    snapshots: list[dict] = field(default_factory=list)  # generator weights along the way


def optimizer_settings(run: Run) -> tuple[float, tuple[float, float]]:
    """Adam learning rate and betas for this run's loss."""
    if run.loss == "wgan-gp":
        return run.wgan_gp.lr, tuple(run.wgan_gp.betas)
    return run.train.lr, tuple(run.train.betas)


def snapshot_epochs(epochs: int, points: int) -> set[int]:
    """Epoch indices (0-based) after which to keep a generator snapshot; the last is always kept."""
    if points <= 1:
        return {epochs - 1}
    return {int(round(x)) for x in np.linspace(0, epochs - 1, min(points, epochs))}


class GanTrainer:
    """Builds one G/D pair for a group of ranks and trains it.

    Parameters
    ----------
    run:
        The run (losses, optimiser and model settings).
    engine, group:
        Who trains this GAN together; a group of one rank communicates nothing.
    data:
        The images this GAN learns (all classes, or one class for label-partitioned training).
    key:
        Names the GAN in seeds (``"all"``, ``"class3"``): the same key gives the same GAN
        whichever ranks train it.
    conditional:
        Build the label-conditioned pair (Tables 3 and 4).
    global_batch:
        Images per step over the whole group.
    generator_steps:
        Train exactly this many generator steps, however many epochs that takes (weak
        scaling keeps the one-rank run's step count); default: ``train.epochs`` / ``train.steps``.
    """

    def __init__(
        self,
        run: Run,
        engine: Engine,
        group: Group,
        data: ImageData,
        key: str,
        conditional: bool,
        global_batch: int,
        telemetry: Telemetry,
        generator_steps: int | None = None,
    ):
        self.run, self.engine, self.group, self.data, self.key = run, engine, group, data, key
        self.conditional, self.global_batch, self.telemetry = conditional, global_batch, telemetry
        self.loss = get_loss(run.loss)
        self.seed = run.train.seed
        if global_batch % group.size:
            raise TrainingError(
                f"train.batch_size: a global batch of {global_batch} images cannot be split evenly over "
                f"{group.size} ranks; use a multiple of {group.size}"
            )
        if len(data) < global_batch:
            raise TrainingError(
                f"train.batch_size: GAN '{key}' has {len(data)} training images, fewer than one batch of "
                f"{global_batch}; lower train.batch_size or select more data"
            )
        self.local_batch = global_batch // group.size
        self.batches_per_epoch = len(data) // global_batch
        self.n_critic = run.wgan_gp.n_critic if run.loss == "wgan-gp" else 1
        epoch_steps = run.train.epochs * self.batches_per_epoch // self.n_critic
        self.max_steps = min(epoch_steps, run.train.steps) if run.train.steps else epoch_steps
        if generator_steps is not None:
            self.max_steps = generator_steps
        if self.max_steps < 1:
            raise TrainingError(
                f"train.epochs: GAN '{key}' would make no generator step ({self.batches_per_epoch} batches per "
                f"epoch, {self.n_critic} critic steps per generator step); train longer or use smaller batches"
            )
        self.generator, self.discriminator = self._build()

    def _build(self) -> tuple[Replica, Replica]:
        run, device = self.run, self.engine.device
        g, d = build_pair(
            run.dataset.image_size,
            self.data.channels,
            run.model.latent_dim,
            num_classes=self.data.num_classes if self.conditional else 0,
            dropout=run.model.dropout,
            seed=derive_seed(self.seed, "init", self.key),
            critic_norm=run.critic_norm,
        )
        if run.model.sync_batchnorm:
            g = convert_sync_batchnorm(g, self.engine, self.group)
            d = convert_sync_batchnorm(d, self.engine, self.group)
        g, d = g.to(device), d.to(device)
        lr, betas = optimizer_settings(run)
        opt_g = torch.optim.Adam(g.parameters(), lr=lr, betas=betas)
        opt_d = torch.optim.Adam(d.parameters(), lr=lr, betas=betas)
        return (
            self.engine.replicate(g, opt_g, self.group, f"{self.key}.G", self.local_batch),
            self.engine.replicate(d, opt_d, self.group, f"{self.key}.D", self.local_batch),
        )

    # --- the data and noise of one step --------------------------------------------------------
    def _epoch_batches(self, epoch: int) -> np.ndarray:
        """(batches, local_batch) indices of this rank for ``epoch``."""
        rng = np.random.default_rng(derive_seed(self.seed, "order", self.key, epoch))
        order = rng.permutation(len(self.data))[: self.batches_per_epoch * self.global_batch]
        batches = order.reshape(self.batches_per_epoch, self.global_batch)
        lo = self.group.rank * self.local_batch
        return batches[:, lo : lo + self.local_batch]

    def _my_slice(self, draws: torch.Tensor) -> torch.Tensor:
        """This rank's part of draws made for the whole global batch."""
        lo = self.group.rank * self.local_batch
        return draws[lo : lo + self.local_batch]

    def _noise(self, *name: object) -> torch.Tensor:
        z = torch.randn(self.global_batch, self.run.model.latent_dim, generator=torch_generator(self.seed, "z", self.key, *name))
        return self._my_slice(z).to(self.engine.device)

    # --- training --------------------------------------------------------------------------------
    def _discriminator_step(self, real: torch.Tensor, labels: torch.Tensor | None, name: tuple) -> float:
        g, d = self.generator.network, self.discriminator
        with torch.no_grad():
            fake = g(self._noise(*name, "d"), labels)
        d_loss = self.loss.discriminator(d.module(real, labels), d.module(fake, labels))
        if self.loss.needs_penalty:
            eps = self._my_slice(torch.rand(self.global_batch, generator=torch_generator(self.seed, "gp", self.key, *name)))
            d_loss = d_loss + self.run.wgan_gp.gp_weight * gradient_penalty(d.network, real, fake, labels, eps=eps)
        d.zero_grad()
        d.backward(d_loss)
        d.step()
        return float(d_loss.detach())

    def _generator_step(self, labels: torch.Tensor | None, name: tuple) -> float:
        g, d = self.generator, self.discriminator
        with d.frozen():
            fake = g.module(self._noise(*name, "g"), labels)
            g_loss = self.loss.generator(d.network(fake, labels))
            g.zero_grad()
            g.backward(g_loss)
            g.step()
        return float(g_loss.detach())

    def _progress(self, step: int) -> None:
        """A log line at every tenth of training (in RUN_DIR/log.txt), from the group's first rank."""
        if self.group.rank == 0 and (step % max(1, self.max_steps // 10) == 0 or step == self.max_steps):
            elapsed = self.telemetry.clock()
            eta = elapsed / step * (self.max_steps - step)
            log.info("%s: step %d/%d, %.0fs elapsed, ETA %.0fs", self.key, step, self.max_steps, elapsed, eta)

    def train(self, snapshot_points: int = 0) -> GanResult:
        """Train to ``train.epochs`` (or ``train.steps``); keep ``snapshot_points`` snapshots."""
        result = GanResult(self.key, self.generator.network)
        keep = snapshot_epochs(math.ceil(self.max_steps * self.n_critic / self.batches_per_epoch), snapshot_points)
        torch.manual_seed(derive_seed(self.seed, "dropout", self.key, self.group.rank))
        self.generator.network.train()
        self.discriminator.network.train()
        telemetry, epoch, critic_steps = self.telemetry, 0, 0
        while result.steps < self.max_steps:
            d_losses, g_losses = [], []
            # in-memory datasets slice their tensor; folder datasets prefetch with dataset.workers
            batches = self.data.batches(self._epoch_batches(epoch), self.run.dataset.workers)
            for b in range(self.batches_per_epoch):
                telemetry.begin_step()
                with telemetry.data():
                    real, labels = next(batches)
                    real = real.to(self.engine.device, non_blocking=True)
                    labels = labels.to(self.engine.device) if self.conditional else None
                d_losses.append(self._discriminator_step(real, labels, (epoch, b)))
                critic_steps += 1
                if critic_steps < self.n_critic:  # WGAN-GP: n_critic critic steps per generator step
                    continue
                critic_steps = 0
                g_losses.append(self._generator_step(labels, (epoch, b)))
                result.steps += 1
                telemetry.end_step(images=self.local_batch * (2 * self.n_critic + 1))
                self._progress(result.steps)
                if result.steps >= self.max_steps:
                    break
            result.history.append(
                {"epoch": epoch, "clock_s": telemetry.clock(), "d_loss": float(np.mean(d_losses)) if d_losses else None, "g_loss": float(np.mean(g_losses)) if g_losses else None}
            )
            if epoch in keep or result.steps >= self.max_steps:
                result.snapshots.append({"epoch": epoch, "clock_s": telemetry.clock(), "state": copy.deepcopy(self.generator.network.state_dict())})
            epoch += 1
        return result
