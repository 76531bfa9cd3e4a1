"""Scoring a finished run's models, shared out over its ranks (every rank calls :func:`score_models`).

Rank 0 holds the models: the final one, the snapshots of the quality curve and the strategy's
extra models (cellular's best cell). It lists the distinct ones (a snapshot that is the final
model itself, the curve's last point mostly, takes the final model's scores instead of being
scored again), keeps the final model and hands the others round-robin to the ranks in one
collective, naming the ruler it loaded; every rank scores its share with the run's ruler, seed and
threads, as rank 0 would (a score depends on the model, the seed and the node's kernels, not on
which rank computes it), and rank 0 gathers the scores into the record's quality fields. After
training the other ranks would only wait, so a run at P = 2 scores in about half the time. A rank
whose node gives another ruler (``features: auto`` picks by what a node has) or none hands its share
back, and rank 0 scores it: every score of a record comes from rank 0's ruler.

Models that are large to hand out (more than :data:`SHARE_LIMIT_BYTES` together, e.g. the class
generators of a label-partitioned run over many classes) stay on rank 0, which then scores them all.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..config.scenario import Run
from ..records.parts import Scored

if TYPE_CHECKING:
    import torch

    from ..gan.sampling import GeneratorBundle
    from ..measure.metrics.features import ClassifierNet, FeatureNet
    from ..measure.metrics.reference import Reference
    from ..train.engines.base import Engine
    from ..train.strategies.base import Outcome

log = logging.getLogger(__name__)

FINAL = "final"
EMA = "ema"
CURVE = "curve"
"""The prefix of a curve snapshot's key (``curve0``, ``curve1``, ...)."""
"""The key of the EMA generator (``train.ema_half_life``), scored on ``metrics.ema_samples``."""
EMA_FIELDS = {"ema_fid": "fid", "ema_kid_mean": "kid_mean", "ema_n": "n"}
"""The quality fields of the EMA generator, each its scores' field."""
SHARE_LIMIT_BYTES = 256 * 2**20
"""Models handed to other ranks together at most (every rank receives the whole hand-out)."""

Jobs = list[tuple[str, "GeneratorBundle"]]


def traits(bundle: GeneratorBundle) -> dict[str, Any]:
    """What decides a bundle's samples besides its tensors (kind, sizes, class prior, mixture weights)."""
    return {k: v for k, v in vars(bundle).items() if k != "generators"}


def on_cpu(bundle: GeneratorBundle) -> GeneratorBundle:
    """The bundle as it crosses processes: host copies of its tensors (a GPU tensor handed over would land on the
    sender's device)."""
    import dataclasses

    from ..train.flat import cpu_state

    return dataclasses.replace(bundle, generators={key: cpu_state(state) for key, state in bundle.generators.items()})


def bundle_bytes(bundle: GeneratorBundle) -> int:
    """The bytes of a bundle's tensors."""
    return sum(t.numel() * t.element_size() for state in bundle.generators.values() for t in state.values())


def final_aliases(outcome: Outcome) -> list[str]:
    """The keys of the curve's snapshots that are the final model itself (equal tensors and traits; the curve's last
    point mostly): they take its scores (none where the strategy scored its curve while training)."""
    final = outcome.bundle
    assert final is not None, "a strategy's bundle is complete on rank 0"
    if outcome.fields.get("curve"):
        return []
    digest, kind = final.digest(), traits(final)
    return [
        f"{CURVE}{i}"
        for i, (_, _, _, b) in enumerate(outcome.curve)
        if b is final or (traits(b) == kind and b.digest() == digest)
    ]


def share_out(outcome: Outcome, size: int, aliases: list[str] | None = None, ema_cost: float = 1.0) -> dict[int, Jobs]:
    """Which rank scores which model: ``{rank: [(key, bundle)]}``, the final model (key ``final``) on rank 0.

    The curve's snapshots are ``curve<i>`` (none where the strategy scored them while training, nor
    the :func:`final_aliases`), the extra models ``extra:<name>``, the EMA generator :data:`EMA`, which costs
    ``ema_cost`` times another model (it is scored on ``metrics.ema_samples``, the others on ``metrics.samples``).
    Each model goes to the rank with the least cost so far, the costliest first (the longest-processing-time rule), so
    that the ranks finish together: handed out in turn, the EMA generator of 10 times the samples landed beside the
    final model on rank 0 while rank 1 waited.
    """
    assert outcome.bundle is not None, "a strategy's bundle is complete on rank 0"
    skipped = set(final_aliases(outcome) if aliases is None else aliases)
    jobs: Jobs = [(FINAL, outcome.bundle)]
    if not outcome.fields.get("curve"):  # a strategy that scored while training brings its curve in its fields
        curve = [(f"{CURVE}{i}", b) for i, (_, _, _, b) in enumerate(outcome.curve)]
        jobs += [(key, b) for key, b in curve if key not in skipped]
    jobs += [(f"extra:{name}", b) for name, b in outcome.extra_bundles.items()]
    jobs += [(EMA, outcome.ema)] if outcome.ema is not None else []
    shared = size > 1 and sum(bundle_bytes(b) for _, b in jobs[1:]) <= SHARE_LIMIT_BYTES
    if not shared:
        return {0: jobs}
    cost = {key: ema_cost if key == EMA else 1.0 for key, _ in jobs}
    load, owner = [cost[FINAL]] + [0.0] * (size - 1), {FINAL: 0}
    for key, _ in sorted(jobs[1:], key=lambda job: -cost[job[0]]):  # stable: equal costs keep their order
        rank = min(range(size), key=lambda r: (load[r], r))
        owner[key], load[rank] = rank, load[rank] + cost[key]
    plan: dict[int, Jobs] = {}
    for key, bundle in jobs:
        plan.setdefault(owner[key], []).append((key, bundle))
    return plan


_LOADED: dict[str, tuple[Reference, tuple[FeatureNet, ClassifierNet]]] = {}
"""The rulers this process loaded, by their real side (:class:`~suite.measure.metrics.reference.Reference`, which names the
data, the networks, their weights, the sample count, the protocol and the device)."""


def ruler(run: Run, device: torch.device) -> tuple[Reference, tuple[FeatureNet, ClassifierNet]]:
    """The run's real side and its networks (the pinned ruler), on ``device``: loaded once per process, so that a
    launch that carries several runs loads each ruler once (the networks are only read: scoring never trains them)."""
    from ..measure.metrics.reference import Reference

    ref = Reference.for_run(run, device)
    key = repr(ref)
    if key not in _LOADED:
        _LOADED[key] = ref, ref.networks()
    return _LOADED[key]


def score_jobs(run: Run, jobs: Jobs, device: torch.device, ruled: tuple[Any, ...] | None = None) -> dict[str, dict[str, Any]]:
    """The quality block of each ``(key, bundle)``, by key, with the run's ruler (``ruled``, else loaded), every model on
    the common latents (:data:`suite.measure.metrics.evaluate.COMMON_LATENTS_SEED`), whatever the run's seed."""
    if not jobs:
        return {}
    from ..gan.sampling import Sampler
    from ..measure.metrics.evaluate import estimand_of_sampler, evaluate_sampler

    ref, networks = ruled or ruler(run, device)
    scored = {}
    for key, bundle in jobs:
        sampler, real = Sampler(bundle, device), samples_for(run, key, ref)
        if key == EMA:  # the end-of-budget estimand alone
            scored[key] = estimand_of_sampler(sampler, real, networks=networks)
        else:  # a curve snapshot's block holds what a curve point keeps
            scored[key] = evaluate_sampler(sampler, real, networks=networks, curve=key.startswith(CURVE))
    return scored


def samples_for(run: Run, key: str, ref: Reference) -> Reference:
    """The real side that scores model ``key``: the run's, at ``metrics.ema_samples`` for the EMA generator."""
    import dataclasses

    ema_n = run.metrics.ema_samples
    return dataclasses.replace(ref, n=ema_n) if key == EMA and ema_n is not None else ref


def ruler_identity(ruled: tuple[Any, ...]) -> tuple[str, str | None]:
    """The feature network's name and weights' sha256: equal identities, equal scores of equal samples."""
    net = ruled[1][0]
    return net.name, net.sha256


def _score_share(run: Run, engine: Engine, handed: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """A rank other than 0: the scores of its share, or None where its ruler is not rank 0's (rank 0 then scores it)."""
    from ..measure.metrics.features import FeatureUnavailable

    jobs = handed["jobs"].get(engine.rank, [])
    if not jobs:
        return {}
    try:
        ruled = ruler(run, engine.device)
    except (FeatureUnavailable, OSError) as error:
        log.warning("rank %d cannot load the ruler (%s): rank 0 scores its %d models", engine.rank, error, len(jobs))
        return None
    if ruler_identity(ruled) != tuple(handed["ruler"]):
        log.warning(
            "rank %d's ruler is %s, rank 0's %s: rank 0 scores its %d models",
            engine.rank,
            ruler_identity(ruled),
            tuple(handed["ruler"]),
            len(jobs),
        )
        return None
    return score_jobs(run, jobs, engine.device, ruled)


def score_models(run: Run, engine: Engine, outcome: Outcome) -> tuple[dict[str, dict[str, Any]], tuple[Any, ...]] | None:
    """Every rank (a collective): score the run's models over the ranks. Rank 0 (whose ``outcome`` holds them)
    gets the score of every key of :func:`share_out` and :func:`final_aliases`, and the ruler it loaded (for
    :func:`quality_fields`); the others None."""
    if engine.rank != 0:
        handed = engine.allgather_object(None)[0]
        engine.gather_object(_score_share(run, engine, handed))
        return None
    ruled = ruler(run, engine.device)
    aliases = final_aliases(outcome)
    samples, ema_samples = run.metrics.samples, run.metrics.ema_samples
    plan = share_out(outcome, engine.size, aliases, ema_samples / samples if ema_samples and samples else 1.0)
    jobs = {r: [(key, on_cpu(b)) for key, b in share] for r, share in plan.items() if r != 0}
    engine.allgather_object({"ruler": ruler_identity(ruled), "jobs": jobs})
    gathered = engine.gather_object(score_jobs(run, plan.get(0, []), engine.device, ruled))
    assert gathered is not None, "rank 0 gathers"
    scores: dict[str, dict[str, Any]] = {}
    for rank, part in enumerate(gathered):
        scores.update(score_jobs(run, plan.get(rank, []), engine.device, ruled) if part is None else part)
    scores.update({key: scores[FINAL] for key in aliases})
    return scores, ruled


def quality_fields(
    run: Run,
    outcome: Outcome,
    scored: tuple[dict[str, dict[str, Any]], tuple[Any, ...]],
    train_s: float,
    steps: int,
    images: int | None,
) -> Scored:
    """Rank 0: the record's scores (``quality`` with the untrained generator's scores as a yardstick, ``curve``,
    ``quality_<name>``, ``time_to_target``) from what :func:`score_models` returned."""
    from ..measure.metrics.curve import curve_point, time_to_target
    from ..measure.metrics.evaluate import untrained_baseline

    scores, (ref, networks) = scored
    quality = scores[FINAL]
    untrained = untrained_baseline(ref, networks, run.model.latent_dim, run.model.architecture)
    quality["untrained_fid"], quality["untrained_kid"] = untrained["fid"], untrained["kid_mean"]
    if EMA in scores:  # the EMA generator's scores, beside the final model's (suite.analysis.estimand.end_fid)
        quality.update({field: scores[EMA].get(score) for field, score in EMA_FIELDS.items()})
    curve = outcome.fields.get("curve") or [
        curve_point(scores[f"{CURVE}{i}"], clock, step, at) for i, (clock, step, at, _) in enumerate(outcome.curve)
    ]
    if not curve or curve[-1]["step"] != steps:
        curve.append(curve_point(quality, train_s, steps, images))  # the final model, as the window ends
    target = run.metrics.target
    return Scored(
        quality=quality,
        curve=curve,
        time_to_target=time_to_target(curve, target, quality["features"]) if target is not None else None,
        extra_quality={f"quality_{name}": scores[f"extra:{name}"] for name in outcome.extra_bundles},
    )
