"""``local_sgd``: every rank trains its own copy of one G/D pair on its shard of the global batch, and the ranks
average their models' parameters every ``local_sgd.average_every`` generator steps (one allreduce of the model).

With ``average_every: 1`` the models are averaged after every step: the data-parallel baseline with model
instead of gradient averaging. Larger periods trade communication for drift between the replicas: the
trade-off between the Horovod baseline (every step) and label-partitioned training (never).
Checkpoints keep every rank's own weights and Adam state; the final model is the average.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import torch

from suite.config.scenario import Run
from suite.measure.telemetry import Telemetry
from suite.strategies.data_parallel.strategy import DataParallel
from suite.train.engines.base import Engine, Group
from suite.train.flat import cpu_state, flatten, unflatten_
from suite.train.gan_plan import GanPlan, TrainerHooks
from suite.train.strategies.base import Outcome
from suite.train.training import GanTrainer


class LocalSGDTrainer(GanTrainer):
    """A :class:`GanTrainer` whose ranks step alone and average their parameters every ``every`` steps."""

    def __init__(self, every: int, run: Run, engine: Engine, gan: GanPlan, telemetry: Telemetry, hooks: TrainerHooks):
        alone = Group(index=engine.rank, ranks=[engine.rank], rank=0)  # no gradient averaging
        super().__init__(run, engine, replace(gan, gradient_group=alone), telemetry, hooks)
        self.every = every

    def step(self) -> None:
        super().step()
        if self.result.steps % self.every == 0:
            self.average()

    def average(self) -> None:
        """Replace every rank's parameters by their mean over the ranks (one counted allreduce)."""
        if self.group.size == 1:
            return
        params = [p for replica in (self.generator, self.discriminator) for p in replica.network.parameters()]
        flat = self.engine.allreduce_sum_(flatten(params).to(self.engine.device), self.group)
        unflatten_(params, flat / self.group.size)


class LocalSGD(DataParallel):
    """Data-parallel training with periodic model averaging (see the module docstring)."""

    def make_trainer(self, gan: GanPlan, hooks: TrainerHooks) -> GanTrainer:
        self.every = self.run.section("local_sgd").average_every
        return LocalSGDTrainer(self.every, self.run, self.engine, gan, self.telemetry, hooks)

    def checkpoint(self) -> dict:
        state = super().checkpoint()
        g, d = self.trainer.generator, self.trainer.discriminator
        state["own"] = {
            "networks": {"G": cpu_state(g.network), "D": cpu_state(d.network)},
            "optimizers": {"G": g.optimizer_state(), "D": d.optimizer_state()},
        }
        return state

    def restore(self, load: Callable[[int], dict[str, Any]]) -> None:
        super().restore(load)
        own = load(self.engine.rank)["own"]
        for name, replica in (("G", self.trainer.generator), ("D", self.trainer.discriminator)):
            with torch.no_grad():
                replica.network.load_state_dict(own["networks"][name])
            replica.load_optimizer_state(own["optimizers"][name])

    def finalize(self) -> Outcome:
        trainer = self.trainer
        if isinstance(trainer, LocalSGDTrainer) and trainer.result.steps % trainer.every:
            trainer.average()  # the model is the average, whatever step training ended on
        outcome = super().finalize()
        outcome.fields["allreduce_every"] = self.every
        return outcome
