"""``data_parallel`` (the Horovod baseline: one unconditional DC-GAN) and ``conditional``
(one DC-CGAN): a single G/D pair replicated on every rank, gradients averaged every step.

Strong scaling keeps the global batch (``train.batch_size``) and the number of steps; weak
scaling keeps the per-rank batch, so the global batch grows with the ranks, and keeps the
number of steps of the one-rank run. Under ``train.budget_images`` the model makes the global
steps the budget buys (a step draws ``n_critic`` global batches), warm-up steps included. With ``train.stop_at_target`` rank 0 scores every
snapshot during training (the window's clock stops meanwhile) and all ranks stop together
when the target is met.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Callable

from ...config.plan import SystemSize
from ...config.registry import STRATEGIES
from ...gan.sampling import SINGLE
from ...records.record import StrategyFields
from ...train.flat import cpu_state
from ...train.gan_plan import GanPlan, TrainerHooks, generator_steps, run_critic_steps
from ...train.strategies.base import Outcome, Strategy, images_budget, make_bundle, parameter_digest
from ...train.training import GanTrainer

if TYPE_CHECKING:
    import torch

    from ...gan.divergence import Divergence
    from ...gan.sampling import GeneratorBundle


class DataParallel(Strategy):
    def setup(self) -> None:
        run, group = self.run, self.engine.world()
        self.conditional = STRATEGIES[run.strategy].conditional
        weak = run.scaling == "weak"
        self.global_batch = run.train.batch_size * (group.size if weak else 1)
        # weak scaling: the one-rank run's number of generator steps
        steps = generator_steps(run, len(self.data), run.train.batch_size) if weak and run.train.budget_s is None else None
        size = SystemSize(run.train.batch_size, group.size, weak, run_critic_steps(run))
        self.budget = images_budget(run, size)
        if self.events is not None:
            self.events.count_steps(size)
        if self.budget is not None:
            steps = self.budget.steps
        self.scored_curve: list[dict] = []
        evaluate = None
        if run.train.stop_at_target:
            evaluate = self._reaches_target
            if self.engine.rank == 0:
                from ...measure.metrics.reference import Reference

                self.reference = Reference.for_run(run, self.engine.device)
                self.networks = self.reference.networks()  # built (and cached) before the window opens
        gan = GanPlan(
            "all",
            self.data,
            group,
            self.global_batch,
            self.conditional,
            max_steps=steps,
            snapshot_points=run.metrics.curve_points,
            snapshot_steps=tuple(self.budget.snapshot_steps) if self.budget is not None else None,
        )
        self.trainer = self.make_trainer(gan, TrainerHooks(evaluate, self.checkpointer, events=self.events))

    def make_trainer(self, gan: GanPlan, hooks: TrainerHooks) -> GanTrainer:
        """The trainer of the one model (a strategy built on this one may train with a trainer of its own)."""
        return GanTrainer(self.run, self.engine, gan, self.telemetry, hooks)

    def _bundle(self, state: torch.nn.Module | dict[str, torch.Tensor]) -> GeneratorBundle:
        return make_bundle(self.run, self.data, SINGLE, {"all": cpu_state(state)}, conditional=self.conditional)

    def _reaches_target(self, trainer: GanTrainer) -> bool:
        """Rank 0: score the latest snapshot; whether it meets ``metrics.target``."""
        from ...gan.sampling import Sampler
        from ...measure.metrics.curve import curve_point, meets
        from ...measure.metrics.evaluate import evaluate_sampler

        snap = trainer.result.snapshots[-1]
        quality = evaluate_sampler(
            Sampler(self._bundle(snap["state"]), self.engine.device),
            self.reference,
            networks=self.networks,
        )
        self.scored_curve.append(curve_point(quality, snap["clock_s"], snap["step"], snap["images"]))
        assert self.run.metrics.target is not None, "stop_at_target is validated to come with metrics.target"
        return meets(self.scored_curve[-1], self.run.metrics.target)

    def warm_up(self) -> None:
        self.trainer.warm_up(self.run.train.warmup_steps)

    def checkpoint(self) -> dict:
        return {"steps": self.trainer.result.steps, "trainer": self.trainer.state_dict(), "scored_curve": list(self.scored_curve)}

    def restore(self, load: Callable[[int], dict[str, Any]]) -> None:
        mine = load(self.engine.rank)
        self.trainer.load_state_dict(mine["trainer"], load(0)["trainer"]["shared"])
        self.scored_curve = list(mine["scored_curve"])

    def train(self) -> None:
        self.trainer.train(deadline=self.deadline())

    def divergence(self) -> Divergence | None:
        return self.trainer.diverged

    def halted(self) -> bool:
        return self.trainer.halted

    def history_so_far(self) -> list[dict] | None:
        return self.trainer.result.history if self.engine.rank == 0 else None

    def finalize(self) -> Outcome:
        result = self.trainer.result
        digests = self.engine.allgather_object(
            parameter_digest(self.trainer.generator.network, self.trainer.discriminator.network)
        )
        fields = asdict(
            StrategyFields(
                global_batch=self.global_batch,
                generator_steps=result.steps,
                images_consumed=result.images,
                warmup_images_consumed=result.warmup_images,
                budget_steps=self.budget.steps if self.budget is not None else None,
                steps_per_gan=result.steps,
                generator_only_steps=0,
                replica_digests=digests,
                replicas_identical=len(set(digests)) == 1,
            )
        )
        fields["history"] = result.history  # the losses as training kept them (:class:`LossPoint` rows)
        if self.engine.rank != 0:
            return Outcome(None, fields=fields)
        curve = [(snap["clock_s"], snap["step"], snap["images"], self._bundle(snap["state"])) for snap in result.snapshots]
        if self.scored_curve:  # scored while training (stop_at_target); the snapshots still give the sample grids
            fields["curve"] = self.scored_curve
        ema = self.trainer.ema
        return Outcome(self._bundle(result.generator), curve, fields, ema=self._bundle(ema.state) if ema is not None else None)
