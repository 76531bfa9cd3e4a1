"""``data_parallel`` (the Horovod baseline: one unconditional DC-GAN) and ``conditional``
(one DC-CGAN): a single G/D pair replicated on every rank, gradients averaged every step.

Strong scaling keeps the global batch (``train.batch_size``) and the number of steps; weak
scaling keeps the per-rank batch, so the global batch grows with the ranks, and keeps the
number of steps of the one-rank run.
"""

from __future__ import annotations

from ..scenario import Run
from ..training import GanTrainer
from .base import Outcome, cpu_state, make_bundle, parameter_digest


def train(run: Run, engine, data, telemetry) -> Outcome:
    group = engine.world()
    conditional = run.strategy == "conditional"
    weak = run.scaling == "weak"
    global_batch = run.train.batch_size * (group.size if weak else 1)
    one_rank_steps = None
    if weak:  # the one-rank run's number of generator steps
        one_rank_steps = run.train.epochs * (len(data) // run.train.batch_size) // (run.wgan_gp.n_critic if run.loss == "wgan-gp" else 1)
        if run.train.steps:
            one_rank_steps = min(one_rank_steps, run.train.steps)
    trainer = GanTrainer(run, engine, group, data, "all", conditional, global_batch, telemetry, generator_steps=one_rank_steps)
    result = trainer.train(snapshot_points=run.metrics.curve_points)
    digests = engine.allgather_object(parameter_digest(trainer.generator.network, trainer.discriminator.network))
    fields = {
        "global_batch": global_batch,
        "generator_steps": result.steps,
        "history": result.history,
        "replica_digests": digests,
        "replicas_identical": len(set(digests)) == 1,
    }
    if engine.rank != 0:
        return Outcome(None, fields=fields)
    bundle = make_bundle(run, data, "single", {"all": cpu_state(result.generator)}, conditional=conditional)
    curve = [
        (snap["clock_s"], make_bundle(run, data, "single", {"all": cpu_state(snap["state"])}, conditional=conditional))
        for snap in result.snapshots
    ]
    return Outcome(bundle, curve, fields)
