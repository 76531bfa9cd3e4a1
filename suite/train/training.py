"""Training of one GAN by the ranks of one group: the steps shared by the data-parallel,
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
from typing import Any

import numpy as np
import torch

from ..config.plan import local_batch
from ..config.registry import LOSSES
from ..config.scenario import Run
from ..gan.divergence import CHECK_EVERY, Divergence, LossWatch, loss_bound, parameter_norm
from ..gan.losses import get_loss, gradient_penalty
from ..gan.models import build_pair
from ..gan.seeding import derive_seed, torch_generator
from ..measure.telemetry import Telemetry
from . import graphs, performance
from .ema import EmaGenerator, ema_for
from .engines.base import Engine, Replica
from .flat import cpu_state
from .gan_plan import GanPlan, GanResult, TrainerHooks, optimizer_settings, step_counts
from .progress import LossSums, Position
from .syncbn import convert_sync_batchnorm

log = logging.getLogger(__name__)


class GanTrainer:
    """Builds one G/D pair for a group of ranks and trains it step by step.

    Parameters
    ----------
    run:
        The run (losses, optimiser and model settings).
    engine:
        The ranks' communication.
    gan:
        The GAN to train: its data, its group, its batch and its schedule (:class:`GanPlan`).
    telemetry:
        This rank's step timers.
    hooks:
        What it is offered between steps (:class:`TrainerHooks`): none by default.
    """

    def __init__(self, run: Run, engine: Engine, gan: GanPlan, telemetry: Telemetry, hooks: TrainerHooks | None = None):
        hooks = hooks or TrainerHooks()
        group, key, global_batch = gan.group, gan.key, gan.global_batch
        self.run, self.engine, self.group, self.data, self.key = run, engine, group, gan.data, key
        self.gradient_group = gan.gradient_group or group
        self.checkpointer = hooks.checkpointer
        self.conditional, self.global_batch, self.telemetry = gan.conditional, global_batch, telemetry
        self.loss = get_loss(run.loss)
        self.seed = run.train.seed
        self.local_batch = local_batch(global_batch, group.size)
        self.batches_per_epoch, self.n_critic, self.max_steps = step_counts(run, len(gan.data), global_batch, key, gan.max_steps)
        self.generator, self.discriminator = self._build()
        # the forward passes the steps call, compiled where performance.compile asks (the penalty's stays eager):
        # through the engine's wrapper (module) where gradients flow into the network, else the plain network
        g, d, settings = self.generator, self.discriminator, run.performance
        self._eager = (g.module, d.module, g.network, d.network)
        self._compiled = tuple(performance.compiled(m, settings) for m in self._eager)
        self._g_train, self._d_train, self._g_forward, self._d_forward = self._compiled
        graphed = bool(settings.cuda_graphs)
        self._autocast = lambda: performance.autocast(run.performance, engine.device, cache=not graphed)
        # performance.cuda_graphs: the whole step, a function of static inputs, captured once and replayed
        self._graphed: graphs.GraphedStep | None = None
        self._static = graphs.StaticInputs()
        if graphed:
            graphs.check_capturable((self.generator, self.discriminator), self.loss, self.n_critic)
            self._graphed = graphs.GraphedStep(hooks.capture or graphs.CudaGraphs(engine.device))
        self.result = GanResult(key, self.generator.network)
        # the EMA generator (train.ema_half_life), kept by the group's first rank, which keeps the model
        self.ema: EmaGenerator | None = (
            ema_for(self.generator.network, run.train.ema_half_life, self.max_steps) if group.rank == 0 else None
        )
        self.snapshot_points, self.evaluate = gan.snapshot_points, hooks.evaluate
        fixed = set(gan.snapshot_steps) if gan.snapshot_steps is not None else None
        self.position = Position(snapshot_points=gan.snapshot_points, fixed_steps=fixed)  # the next batch, the window
        self._batches: Any = None
        self._losses = LossSums(engine.device)  # since the last progress point
        # every step's losses, checked for divergence at check points (see suite.gan.divergence)
        columns = ["discriminator loss"] * self.n_critic + ["generator loss"]
        where = None if key == "all" else key
        self._watch = LossWatch(engine.device, columns, loss_bound(run.loss), engine.rank, where)
        self.diverged: Divergence | None = None  # the first divergence this rank saw
        self.halted = False  # its group stopped training because a rank of it diverged
        self.events = hooks.events if group.rank == 0 else None  # the group's first rank keeps the history: it writes it
        self.rank_times = hooks.rank_times
        self._told = (0, -1, self.position.epoch)  # history points written, the step and the epoch of the last events

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
            architecture=run.model.architecture,
        )
        if run.model.sync_batchnorm:
            g = convert_sync_batchnorm(g, self.engine, self.group)
            d = convert_sync_batchnorm(d, self.engine, self.group)
        g, d = performance.place(g.to(device), run.performance), performance.place(d.to(device), run.performance)
        g.train()
        d.train()
        lr, betas = optimizer_settings(run)
        # a captured step keeps Adam's step counters on the device (capturable), where the graph counts them
        capturable = bool(run.performance.cuda_graphs) and device.type == "cuda"
        opt_g = torch.optim.Adam(g.parameters(), lr=lr, betas=betas, capturable=capturable)
        opt_d = torch.optim.Adam(d.parameters(), lr=lr, betas=betas, capturable=capturable)
        return (
            self.engine.replicate(g, opt_g, self.gradient_group, f"{self.key}.G", self.local_batch),
            self.engine.replicate(d, opt_d, self.gradient_group, f"{self.key}.D", self.local_batch),
        )

    # --- the data and noise of one step --------------------------------------------------------
    def _epoch_batches(self, epoch: int) -> np.ndarray:
        """(batches, local_batch) indices of this rank for ``epoch``."""
        rng = np.random.default_rng(derive_seed(self.seed, "order", self.key, epoch))
        order = rng.permutation(len(self.data))[: self.batches_per_epoch * self.global_batch]
        batches = order.reshape(self.batches_per_epoch, self.global_batch)
        lo = self.group.rank * self.local_batch
        return batches[:, lo : lo + self.local_batch]

    def _next_batch(self) -> tuple[tuple[int, int], torch.Tensor, torch.Tensor | None]:
        """The name (epoch, batch) and the data of the next batch of this rank."""
        p = self.position
        if self._batches is None:
            # in-memory datasets slice their tensor; folder datasets prefetch with dataset.workers
            # from the next batch of the epoch (not the first where a checkpoint resumed it)
            self._batches = self.data.batches(self._epoch_batches(p.epoch)[p.batch :], self.run.dataset.workers)
        name = (p.epoch, p.batch)
        with self.telemetry.data():
            real, labels = next(self._batches)
            real = performance.images(real.to(self.engine.device, non_blocking=True), self.run.performance)
            labels = labels.to(self.engine.device, non_blocking=True) if self.conditional else None
        p.batch += 1
        if p.batch == self.batches_per_epoch:
            p.epoch, p.batch, self._batches = p.epoch + 1, 0, None
        return name, real, labels

    def _my_slice(self, draws: torch.Tensor) -> torch.Tensor:
        """This rank's part of draws made for the whole global batch."""
        lo = self.group.rank * self.local_batch
        return draws[lo : lo + self.local_batch]

    def _noise(self, *name: object) -> torch.Tensor:
        z = torch.randn(self.global_batch, self.run.model.latent_dim, generator=torch_generator(self.seed, "z", self.key, *name))
        return self._my_slice(z).to(self.engine.device, non_blocking=True)

    # --- one step ----------------------------------------------------------------------------------
    def _discriminator_step(
        self, real: torch.Tensor, labels: torch.Tensor | None, z: torch.Tensor, name: tuple | None
    ) -> torch.Tensor:
        """D's update on ``real`` and G's images of noise ``z``; its loss (``name``: the batch's, for the penalty's draw)."""
        d = self.discriminator
        with self._autocast():
            with torch.no_grad():
                fake = self._g_forward(z, labels)
            d_loss = self.loss.discriminator(self._d_train(real, labels), self._d_train(fake, labels))
        if self.loss.needs_penalty:
            assert name is not None, "the penalty draws by the batch's name (a captured step has no penalty)"
            eps = self._my_slice(torch.rand(self.global_batch, generator=torch_generator(self.seed, "gp", self.key, *name)))
            own = LOSSES[self.run.loss].settings  # the loss's own section (wgan_gp) holds the penalty's weight
            assert own is not None, "a loss with a gradient penalty has a section with its weight"
            weight = self.run.section(own).gp_weight
            d_loss = d_loss + weight * gradient_penalty(d.network, real, fake, labels, eps=eps)
        d.zero_grad()
        d.backward(d_loss)
        d.step()
        return d_loss.detach()

    def _generator_step(self, labels: torch.Tensor | None, z: torch.Tensor) -> torch.Tensor:
        """G's update through the frozen D on its images of noise ``z``; its loss."""
        g, d = self.generator, self.discriminator
        with d.frozen():
            with self._autocast():
                fake = self._g_train(z, labels)
                g_loss = self.loss.generator(self._d_forward(fake, labels))
            g.zero_grad()
            g.backward(g_loss)
            g.step()
        return g_loss.detach()

    def step(self) -> None:
        """One generator step: ``n_critic`` discriminator steps on the next batches, then G."""
        telemetry = self.telemetry
        # the step that counts FLOPs runs eager: compiled code skips a frame under the counter's dispatch mode
        counting = telemetry.counts_flops_next()
        self._g_train, self._d_train, self._g_forward, self._d_forward = self._eager if counting else self._compiled
        with telemetry.counting_flops():
            telemetry.begin_step()
            losses = self._watch.row()  # on the device: written without a read
            if self._graphed is None:
                self._eager_step(losses)
            else:
                self._graphed_step(self._graphed, losses, eager=counting)
            self.result.steps += 1
            self._watch.done(self.result.steps)
            # real and generated images through D; the real ones of the critic steps are training images
            telemetry.end_step(images=self.local_batch * (2 * self.n_critic + 1), train_images=self.local_batch * self.n_critic)
        self._losses.counted(self.n_critic)
        if self.events is not None and self.position.epoch != self._told[2]:  # an epoch ended in this step
            self._tell_events()

    def stepped(self) -> None:
        """After a whole step (a subclass's :meth:`step` included): the EMA generator averages the new weights in."""
        if self.ema is not None:
            self.ema.update(self.generator.network)

    def _seed_dropout(self, name: tuple[int, int]) -> None:
        """Seed the global generators that dropout draws from by the batch's name.

        (torch.manual_seed would also reach every lazily initialised device type, formatting a stack trace for
        each, on every batch.)"""
        dropout_seed = derive_seed(self.seed, "dropout", self.key, self.group.rank, *name)
        torch.default_generator.manual_seed(dropout_seed)
        if self.engine.device.type == "cuda":
            torch.cuda.manual_seed(dropout_seed)  # this rank's device (a captured step's replay reads its state)

    def _eager_step(self, losses: torch.Tensor) -> None:
        """The step's batches and updates, its losses into the device row ``losses`` and the loss sums."""
        for critic in range(self.n_critic):
            name, real, labels = self._next_batch()
            self._seed_dropout(name)  # dropout masks come from the global generator: seeded by the batch's name
            losses[critic] = d_loss = self._discriminator_step(real, labels, self._noise(*name, "d"), name)
            self._losses.sums[0] += d_loss
            self.result.images += self.global_batch
        losses[self.n_critic] = g_loss = self._generator_step(labels, self._noise(*name, "g"))
        self._losses.sums[1] += g_loss

    def _captured_step(self) -> torch.Tensor:
        """The step of the static inputs (one critic step, then G's), as a graph captures it: [D's loss, G's loss].

        It reads nothing back to the host and draws nothing there; dropout draws on the device."""
        s = self._static
        d_loss = self._discriminator_step(s["real"], s.get("labels"), s["z_d"], None)
        g_loss = self._generator_step(s.get("labels"), s["z_g"])
        return torch.stack([d_loss, g_loss])

    def _graphed_step(self, graphed: graphs.GraphedStep, losses: torch.Tensor, eager: bool) -> None:
        """:meth:`_eager_step` under ``performance.cuda_graphs``: the same batch, noise and dropout seed, copied
        into the static inputs, then the captured step (run eagerly while it warms up, and where ``eager``: the
        step that counts FLOPs). Its losses are copied on the device; the host reads them at check points only."""
        name, real, labels = self._next_batch()
        self._seed_dropout(name)
        self._static.fill(real=real, labels=labels, z_d=self._noise(*name, "d"), z_g=self._noise(*name, "g"))
        self.result.images += self.global_batch
        out = graphed(self._captured_step, eager=eager)  # once captured, the same tensor each step
        losses.copy_(out)
        self._losses.sums[0] += out[0]
        self._losses.sums[1] += out[1]

    # --- what happens between steps ----------------------------------------------------------------
    def take_snapshot(self, scheduled: bool = False) -> None:
        """Keep the generator's current weights (on the device) with the step and window clock.

        ``scheduled`` marks the snapshots of ``snapshot_points`` (evenly spaced steps or times).
        """
        state = copy.deepcopy(self.generator.network.state_dict())
        self.result.snapshots.append(
            {
                "step": self.result.steps,
                "images": self.result.images,
                "clock_s": self.telemetry.clock(),
                "state": state,
                "scheduled": scheduled,
            }
        )
        if scheduled and self.events is not None:  # a curve point
            self._tell_events()

    def _between_steps(self) -> bool:
        """Divergence checks, snapshots, evaluation and progress after a window step; True when training should stop.

        Steps decide by their count; a budgeted GAN decides by the window clock, agreed over
        its group so that every rank stops after the same step.
        """
        steps, clock, pos = self.result.steps, self.telemetry.clock(), self.position
        if pos.deadline is None:
            snapshot, progress = steps in pos.snapshot_steps, steps in pos.progress_steps
            stop = steps >= self.max_steps
            if stop or snapshot or progress or steps % CHECK_EVERY == 0:
                self.halted = self._check_divergence(final=stop)
        else:
            if steps % CHECK_EVERY == 0:
                self._look_for_divergence()
            snapshot, progress, out_of_time, self.halted = self.engine.any_rank(
                [pos.due("snapshot", clock), pos.due("progress", clock), clock >= pos.deadline, self.diverged is not None],
                self.group,
            )
            stop = out_of_time or steps >= self.max_steps
            if stop and not self.halted:
                self.halted = self._check_divergence(final=True)
            snapshot = snapshot or stop  # the model as the budget ends is always among the snapshots
        if self.halted:
            if self.group.rank == 0:
                self._progress()  # the losses up to the step where training stopped
            return True
        if snapshot and self.snapshot_points:
            self.take_snapshot(scheduled=True)
            if self.evaluate is not None:
                with self.telemetry.paused():  # scoring is not training: the window's clock stops
                    reached = self.evaluate(self) if self.group.rank == 0 else False
                    stop = self.engine.any_rank([reached], self.group)[0] or stop
        if (progress or stop) and self.group.rank == 0:
            self._progress()
        if not stop and self.checkpointer is not None:
            self.checkpointer.at_boundary(steps)
        return stop

    # --- divergence (see suite.gan.divergence) ---------------------------------------------------------
    def _look_for_divergence(self, final: bool = False) -> None:
        """Check this rank's losses since the last check point and G's and D's parameter norms (no vote)."""
        norms = torch.stack([parameter_norm(self.generator.network), parameter_norm(self.discriminator.network)])
        seen = self._watch.check(self.result.steps, norms, final=final)
        if seen is not None and self.diverged is None:
            self.diverged = seen
            log.warning("%s; training stops", seen.line())

    def _check_divergence(self, final: bool = False) -> bool:
        """Look for divergence, then agree over the group: whether any of its ranks diverged."""
        self._look_for_divergence(final)
        return self.engine.any_rank([self.diverged is not None], self.group)[0]

    def _progress(self) -> None:
        """Mean losses since the last progress point (with the divergence checks, the only device reads of the loop) and a log line."""
        d_loss, g_loss = self._losses.means()
        steps, clock, pos = self.result.steps, self.telemetry.clock(), self.position
        self.result.history.append(
            {
                "step": steps,
                "epoch": pos.epoch,
                "clock_s": clock,
                "d_loss": d_loss,
                "g_loss": g_loss,
            }
        )
        if self.events is not None:
            self._tell_events(synced=True)  # the loss read above waited for the device
        mine = clock - pos.clock0  # this GAN's part of the window (a rank may train several)
        # real images reaching its discriminator per second of that part (all its ranks: global batches), as it trains
        rate = (steps - (pos.first_step or 0)) * self.n_critic * self.global_batch / mine if mine > 0 else 0.0
        if pos.deadline is not None:
            log.info(
                "%s: step %d, %.0f images/s, %.0fs in the training window, %.0fs left",
                *(self.key, steps, rate, clock, max(0.0, pos.deadline - clock)),
            )
        elif steps < self.max_steps:
            eta = mine / max(1, steps - pos.warmup_steps) * (self.max_steps - steps)
            log.info(
                "%s: step %d/%d, %.0f images/s, %.0fs in the training window, ETA %.0fs",
                *(self.key, steps, self.max_steps, rate, clock, eta),
            )
        else:
            log.info("%s: step %d/%d, %.0f images/s, %.0fs in the training window", self.key, steps, self.max_steps, rate, clock)

    def _tell_events(self, synced: bool = False) -> None:
        """The group's first rank, between steps: the history points not written yet, the epochs and this rank's step
        times so far, each at the system's training images when this GAN had made that many steps; then a flush.

        The step times are read first where that waits for nothing: on a CPU, or once the device is ``synced``
        (a GPU's are otherwise those read at the last progress point, :mod:`suite.measure.telemetry`)."""
        events = self.events
        assert events is not None, "only a writing rank tells"
        if synced or not self.telemetry.timeline.on_device:
            self.telemetry.flush()
        suffix = "" if self.key == "all" else f"/{self.key}"
        own = self.n_critic * self.global_batch  # this GAN's images a step
        written, last_step, _ = self._told
        for point in self.result.history[written:]:
            values = {f"loss/d_loss{suffix}": point["d_loss"], f"loss/g_loss{suffix}": point["g_loss"]}
            events.scalars(events.images(point["step"], own), values)
        if self.result.steps != last_step:
            images = events.images(self.result.steps, own)
            events.scalars(images, {f"train/epoch{suffix}": self.position.epoch + self.position.batch / self.batches_per_epoch})
            if self.rank_times:
                events.step_times(images, self.telemetry.step_times)
        events.flush()
        self._told = (len(self.result.history), self.result.steps, self.position.epoch)

    # --- the phases ----------------------------------------------------------------------------------
    def warm_up(self, steps: int) -> None:
        """The first ``steps`` generator steps (they train, on the training clock, but are not timed steps).

        Where ``snapshot_steps`` fall inside them, the snapshots are taken here.
        """
        count = min(steps, self.max_steps - self.result.steps)
        for i in range(count):
            self.step()
            self.stepped()
            self.position.warmup_steps += 1
            self.result.warmup_images = self.result.images
            if (i + 1 == count or self.result.steps % CHECK_EVERY == 0) and self._check_divergence(final=i + 1 == count):
                self.halted = True
                if self.group.rank == 0:
                    self._progress()  # the losses up to the step where training stopped
                return
            if self.snapshot_points and (fixed := self.position.fixed_steps) and self.result.steps in fixed:
                self.take_snapshot(scheduled=True)

    def train(self, deadline: float | None = None) -> GanResult:
        """The remaining steps: to ``max_steps``, or until the window clock reaches ``deadline``.

        Snapshots (and progress lines) fall on evenly spaced steps of the window, or evenly
        spaced times up to the deadline.
        """
        self.open_window(deadline)
        while not self.advance():
            pass
        return self.result

    def advance(self) -> bool:
        """One window step and what follows it (:meth:`open_window` first); whether this GAN's training is over."""
        if self.position.finished or self.halted:  # resumed after this GAN's training was over, or diverged in warm-up
            return True
        if self.result.steps < self.max_steps:
            self.step()
            self.stepped()
            if not self._between_steps() and self.result.steps < self.max_steps:
                return False
        self.position.finished = True
        return True

    def open_window(self, deadline: float | None = None) -> None:
        """The window opens for this GAN: its step or time schedule of snapshots and progress lines
        (a resumed GAN keeps the schedule it had); it then trains step by step with :meth:`advance`."""
        if not (self.position.finished or self.halted):
            self.position.open(self.result.steps, self.telemetry.clock, deadline, self.max_steps)

    # --- checkpoints -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """This rank's part of the GAN's training state, for a checkpoint (CPU tensors).

        The ranks of a group hold the same weights and optimizer states, so only the group's first
        rank keeps them, under ``"shared"``, with the history and snapshots that only it records.
        Every rank keeps its position in the data, its loss sums and its BatchNorm statistics
        (buffers are per rank: each normalises its own shard), and its optimizer states where the
        engine partitions them.
        """
        g, d = self.generator, self.discriminator
        state: dict[str, Any] = {
            "position": self.position.state_dict(self.result),
            **self._losses.state_dict(),
            "buffers": {name: cpu_state(dict(r.network.named_buffers())) for name, r in (("G", g), ("D", d))},
            "optimizers": {name: r.optimizer_state() for name, r in (("G", g), ("D", d)) if not r.shared_optimizer},
        }
        if self.group.rank == 0:
            state["shared"] = {
                "networks": {"G": cpu_state(g.network), "D": cpu_state(d.network)},
                "optimizers": {name: r.optimizer_state() for name, r in (("G", g), ("D", d)) if r.shared_optimizer},
                "history": copy.deepcopy(self.result.history),
                "snapshots": [{**snap, "state": cpu_state(snap["state"])} for snap in self.result.snapshots],
            }
            if self.ema is not None:
                state["shared"]["ema"] = self.ema.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any], shared: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`: this rank's ``state`` and its group's first rank's ``shared`` part."""
        device = self.engine.device
        for name, replica in (("G", self.generator), ("D", self.discriminator)):
            replica.network.load_state_dict(shared["networks"][name])
            with torch.no_grad():  # this rank's own normalisation statistics
                for key, buffer in replica.network.named_buffers():
                    buffer.copy_(state["buffers"][name][key])
            opt = shared["optimizers"][name] if replica.shared_optimizer else state["optimizers"][name]
            replica.load_optimizer_state(opt)
        self.position.load_state_dict(state["position"], self.result)
        self._batches = None
        self._losses.load_state_dict(state, device)
        if self._graphed is not None:  # the optimizers' states are new tensors, which an earlier capture would miss
            self._graphed.reset()
        if self.group.rank == 0:
            if self.ema is not None:
                self.ema.load_state_dict(shared["ema"])
            self.result.history = copy.deepcopy(shared["history"])
            self.result.snapshots = [
                {**snap, "state": {k: v.to(device) for k, v in snap["state"].items()}} for snap in shared["snapshots"]
            ]
