"""Scoring a finished run's models, shared out over its ranks (every rank calls :func:`score_run`).

Rank 0 holds the models: the final one, the snapshots of the quality curve and the strategy's
extra models (cellular's best cell). It lists the distinct ones (a snapshot that is the final
model itself, the curve's last point mostly, takes the final model's scores instead of being
scored again), keeps the final model and hands the others round-robin to the ranks in one
collective; every rank scores its share with the run's ruler, seed and threads, as rank 0 would
(a score depends on the model, the seed and the node's kernels, not on which rank computes it),
and rank 0 gathers the scores into the record's quality fields. After training the other ranks
would only wait, so a run at P = 2 scores in about half the time.

Models that are large to hand out (more than :data:`SHARE_LIMIT_BYTES` together, e.g. the class
generators of a label-partitioned run over many classes) stay on rank 0, which then scores them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config.scenario import Run

if TYPE_CHECKING:
    import torch

    from ..gan.sampling import GeneratorBundle
    from ..measure.metrics import Reference
    from ..measure.metrics.features import ClassifierNet, FeatureNet
    from ..train.engines.base import Engine
    from ..train.strategies.base import Outcome

FINAL = "final"
SHARE_LIMIT_BYTES = 256 * 2**20
"""Models handed to other ranks together at most (every rank receives the whole hand-out)."""

Jobs = list[tuple[str, "GeneratorBundle"]]


def traits(bundle: GeneratorBundle) -> dict:
    """What decides a bundle's samples besides its tensors (kind, sizes, class prior, mixture weights)."""
    return {k: v for k, v in vars(bundle).items() if k != "generators"}


def same_model(a: GeneratorBundle, b: GeneratorBundle) -> bool:
    """Whether two bundles draw the same samples from the same seed (equal tensors and traits)."""
    return a is b or (traits(a) == traits(b) and a.digest() == b.digest())


def on_cpu(bundle: GeneratorBundle) -> GeneratorBundle:
    """The bundle with its tensors in host memory (a GPU tensor handed over would land on the sender's device)."""
    import dataclasses

    generators = {key: {name: t.cpu() for name, t in state.items()} for key, state in bundle.generators.items()}
    return dataclasses.replace(bundle, generators=generators)


def bundle_bytes(bundle: GeneratorBundle) -> int:
    """The bytes of a bundle's tensors."""
    return sum(t.numel() * t.element_size() for state in bundle.generators.values() for t in state.values())


def share_out(outcome: Outcome, size: int) -> dict[int, Jobs]:
    """Which rank scores which model: ``{rank: [(key, bundle)]}``, the final model (key ``final``) on rank 0.

    The curve's snapshots are ``curve<i>`` (none where the strategy scored them while training, or
    where a snapshot is the final model), the extra models ``extra:<name>``.
    """
    assert outcome.bundle is not None, "a strategy's bundle is complete on rank 0"
    final = outcome.bundle
    jobs: Jobs = [(FINAL, final)]
    if not outcome.fields.get("curve"):  # a strategy that scored while training brings its curve in its fields
        jobs += [(f"curve{i}", b) for i, (_, _, _, b) in enumerate(outcome.curve) if not same_model(b, final)]
    jobs += [(f"extra:{name}", b) for name, b in outcome.extra_bundles.items()]
    shared = size > 1 and sum(bundle_bytes(b) for _, b in jobs[1:]) <= SHARE_LIMIT_BYTES
    plan: dict[int, Jobs] = {}
    for i, job in enumerate(jobs):
        plan.setdefault(i % size if shared else 0, []).append(job)
    return plan


def ruler(run: Run, device: torch.device) -> tuple[Reference, tuple[FeatureNet, ClassifierNet]]:
    """The run's real side and its networks (the pinned ruler), on ``device``."""
    from ..measure.metrics import Reference

    ref = Reference.for_run(run, device)
    return ref, ref.networks()


def score_jobs(run: Run, jobs: Jobs, device: torch.device, ruled: tuple | None = None) -> dict[str, dict]:
    """The quality block of each ``(key, bundle)``, by key, with the run's ruler (``ruled``, else loaded) and seed."""
    if not jobs:
        return {}
    from ..gan.sampling import Sampler
    from ..measure.metrics import evaluate_sampler

    ref, networks = ruled or ruler(run, device)
    return {key: evaluate_sampler(Sampler(b, device), ref, seed=run.train.seed, networks=networks) for key, b in jobs}


def score_models(run: Run, engine: Engine, outcome: Outcome) -> tuple[dict[str, dict], tuple] | None:
    """Every rank (a collective): score the run's models over the ranks. Rank 0 (whose ``outcome`` holds them)
    gets every score by :func:`share_out`'s key and the ruler it loaded (for :func:`quality_fields`); the others None."""
    if engine.rank != 0:
        handed = engine.allgather_object(None)[0]
        engine.gather_object(score_jobs(run, handed.get(engine.rank, []), engine.device))
        return None
    plan = share_out(outcome, engine.size)
    engine.allgather_object({r: [(key, on_cpu(b)) for key, b in jobs] for r, jobs in plan.items() if r != 0})
    ruled = ruler(run, engine.device)
    gathered = engine.gather_object(score_jobs(run, plan.get(0, []), engine.device, ruled))
    assert gathered is not None, "rank 0 gathers"
    return {key: quality for part in gathered for key, quality in part.items()}, ruled


def quality_fields(
    run: Run, outcome: Outcome, scored: tuple[dict[str, dict], tuple], train_s: float, steps: int, images: int | None
) -> dict:
    """Rank 0: the record's quality fields (``quality`` with the untrained generator's scores as a yardstick,
    ``curve``, ``quality_<name>``, ``time_to_target``) from what :func:`score_models` returned."""
    from ..measure.metrics.curve import curve_point, time_to_target
    from ..measure.metrics.evaluate import untrained_baseline

    scores, (ref, networks) = scored
    quality = scores[FINAL]
    untrained = untrained_baseline(ref, networks, run.model.latent_dim, run.model.architecture)
    quality["untrained_fid"], quality["untrained_kid"] = untrained["fid"], untrained["kid_mean"]
    curve = outcome.fields.get("curve") or [
        curve_point(scores.get(f"curve{i}", quality), clock, step, at) for i, (clock, step, at, _) in enumerate(outcome.curve)
    ]
    if not curve or curve[-1]["step"] != steps:
        curve.append(curve_point(quality, train_s, steps, images))  # the final model, as the window ends
    fields = {
        "quality": quality,
        "curve": curve,
        **{f"quality_{name}": scores[f"extra:{name}"] for name in outcome.extra_bundles},
    }
    if run.metrics.target is not None:
        fields["time_to_target"] = time_to_target(curve, run.metrics.target, quality["features"])
    return fields
