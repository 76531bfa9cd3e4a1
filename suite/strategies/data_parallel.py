"""``data_parallel`` (the Horovod baseline: one unconditional DC-GAN) and ``conditional``
(one DC-CGAN): a single G/D pair replicated on every rank, gradients averaged every step.

Strong scaling keeps the global batch (``train.batch_size``) and the number of steps; weak
scaling keeps the per-rank batch, so the global batch grows with the ranks, and keeps the
number of steps of the one-rank run.
"""

from __future__ import annotations

from ..training import GanTrainer, generator_steps
from .base import Outcome, Strategy, cpu_state, make_bundle, parameter_digest


class DataParallel(Strategy):
    def setup(self) -> None:
        run, group = self.run, self.engine.world()
        self.conditional = run.strategy == "conditional"
        weak = run.scaling == "weak"
        self.global_batch = run.train.batch_size * (group.size if weak else 1)
        # weak scaling: the one-rank run's number of generator steps
        steps = generator_steps(run, len(self.data), run.train.batch_size) if weak else None
        self.trainer = GanTrainer(run, self.engine, group, self.data, "all", self.conditional, self.global_batch,
                                  self.telemetry, max_steps=steps, snapshot_points=run.metrics.curve_points)

    def warm_up(self) -> None:
        self.trainer.warm_up(self.run.train.warmup_steps)

    def train(self) -> None:
        self.trainer.train()

    def finalize(self) -> Outcome:
        run, data, result = self.run, self.data, self.trainer.result
        digests = self.engine.allgather_object(parameter_digest(self.trainer.generator.network, self.trainer.discriminator.network))
        fields = {
            "global_batch": self.global_batch,
            "generator_steps": result.steps,
            "history": result.history,
            "replica_digests": digests,
            "replicas_identical": len(set(digests)) == 1,
        }
        if self.engine.rank != 0:
            return Outcome(None, fields=fields)
        single = lambda state: make_bundle(run, data, "single", {"all": cpu_state(state)}, conditional=self.conditional)  # noqa: E731
        curve = [(snap["clock_s"], snap["step"], single(snap["state"])) for snap in result.snapshots]
        return Outcome(single(result.generator), curve, fields)
