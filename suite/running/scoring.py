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

The EMA generator, scored on many more samples than the others (``metrics.ema_samples``), is not handed to one rank
but split: every rank generates its share of the draw's batches, the ranks exchange the images, each computes the
ruler's features of its share of the feature batches, and rank 0 scores the whole draw from them. Each batch is made as
one rank would make it, so the scores are one rank's to the bit; the shares fill the ranks up to one level after the
other models (at P = 2 the EMA generator's rank finished 4 models' time after the other).

A run of one rank shares its models out the same way over threads, as many as the node's cores its training left idle
(:func:`scoring_workers`: a P = 1 timing run on 2 cores scores on both); each thread scores whole models, so the scores
are the lone thread's to the bit.

Models that are large to hand out (more than :data:`SHARE_LIMIT_BYTES` together, e.g. the class
generators of a label-partitioned run over many classes) stay on rank 0, which then scores them all, the EMA
generator's draw whole; so does a draw whose images are larger than that to exchange.
"""

from __future__ import annotations

import dataclasses
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


def share_out(
    outcome: Outcome, size: int, aliases: list[str] | None = None, ema_cost: float = 1.0, split_ema: bool = False
) -> dict[int, Jobs]:
    """Which rank scores which model: ``{rank: [(key, bundle)]}``, the final model (key ``final``) on rank 0.

    The curve's snapshots are ``curve<i>`` (none where the strategy scored them while training, nor
    the :func:`final_aliases`), the extra models ``extra:<name>``, the EMA generator :data:`EMA`, which costs
    ``ema_cost`` times another model (it is scored on ``metrics.ema_samples``, the others on ``metrics.samples``).
    Each model goes to the rank with the least cost so far, the costliest first (the longest-processing-time rule), so
    that the ranks finish together: handed out in turn, the EMA generator of 10 times the samples landed beside the
    final model on rank 0 while rank 1 waited. With ``split_ema``, where the models are handed out, the EMA generator
    is no one rank's: its draw is split over the ranks (:func:`water_fill`).
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
    jobs = [job for job in jobs if not (split_ema and job[0] == EMA)]
    cost = {key: ema_cost if key == EMA else 1.0 for key, _ in jobs}
    load, owner = [cost[FINAL]] + [0.0] * (size - 1), {FINAL: 0}
    for key, _ in sorted(jobs[1:], key=lambda job: -cost[job[0]]):  # stable: equal costs keep their order
        rank = min(range(size), key=lambda r: (load[r], r))
        owner[key], load[rank] = rank, load[rank] + cost[key]
    plan: dict[int, Jobs] = {}
    for key, bundle in jobs:
        plan.setdefault(owner[key], []).append((key, bundle))
    return plan


def water_fill(loads: list[float], amount: float) -> list[float]:
    """Each rank's share (they sum to 1) of work of cost ``amount`` that raises the lowest ``loads`` to one level, so
    that the ranks finish together."""
    order = sorted(range(len(loads)), key=lambda r: loads[r])
    for k in range(1, len(loads) + 1):
        level = (sum(loads[r] for r in order[:k]) + amount) / k
        if k == len(loads) or level <= loads[order[k]]:
            break
    return [max(0.0, level - load) / amount for load in loads]


def parts(count: int, shares: list[float]) -> list[slice]:
    """``count`` batches cut into consecutive parts, rank by rank, of about ``shares`` of them each."""
    bounds = [0, *(round(count * sum(shares[: r + 1])) for r in range(len(shares)))]
    bounds[-1] = count
    return [slice(bounds[r], bounds[r + 1]) for r in range(len(shares))]


def feature_parts(n: int, net: FeatureNet, shares: list[float]) -> list[slice]:
    """Each rank's :func:`parts` of the ruler's batches over a draw of ``n`` images."""
    return parts(-(-n // net.batch_size), shares)


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
    ema_n = run.metrics.ema_samples
    return dataclasses.replace(ref, n=ema_n) if key == EMA and ema_n is not None else ref


def ruler_identity(ruled: tuple[Any, ...]) -> tuple[str, str | None]:
    """The feature network's name and weights' sha256: equal identities, equal scores of equal samples."""
    net = ruled[1][0]
    return net.name, net.sha256


def _own_ruler(run: Run, engine: Engine, handed: dict[str, Any]) -> tuple[Any, ...] | None:
    """A rank other than 0: its ruler, or None where it cannot load one or it is not rank 0's (rank 0 then does its
    share)."""
    from ..measure.metrics.features import FeatureUnavailable

    try:
        ruled = ruler(run, engine.device)
    except (FeatureUnavailable, OSError) as error:
        log.warning("rank %d cannot load the ruler (%s): rank 0 scores its share", engine.rank, error)
        return None
    if ruler_identity(ruled) != tuple(handed["ruler"]):
        log.warning(
            "rank %d's ruler is %s, rank 0's %s: rank 0 scores its share",
            engine.rank,
            ruler_identity(ruled),
            tuple(handed["ruler"]),
        )
        return None
    return ruled


@dataclasses.dataclass(frozen=True)
class SplitDraw:
    """A rank's view of the EMA generator's draw split over the ranks: the whole draw's images, its real side, each rank's
    share, and this rank's share of its features (None where its ruler is not rank 0's)."""

    images: torch.Tensor
    ref: Reference
    shares: list[float]
    features: Any


def _split_draw(run: Run, engine: Engine, handed: dict[str, Any], ruled: tuple[Any, ...] | None) -> SplitDraw | None:
    """Every rank, where the EMA generator's draw is split (a collective): its share of the draw's batches generated,
    the shares exchanged (every rank then holds the whole draw), then its share of the ruler's feature batches (None
    where its ruler is not rank 0's). None where the draw is not split."""
    if handed["ema"] is None:
        return None
    import numpy as np
    import torch

    from ..gan.sampling import Sampler
    from ..measure.metrics.evaluate import COMMON_LATENTS_SEED, draw_features
    from ..measure.metrics.reference import Reference

    bundle, shares = handed["ema"]
    ref = samples_for(run, EMA, Reference.for_run(run, engine.device))
    sampler = Sampler(bundle, engine.device)
    batches = sampler.batches(ref.n, COMMON_LATENTS_SEED)
    mine = parts(len(batches), shares)[engine.rank]
    images, _ = sampler.sample(ref.n, COMMON_LATENTS_SEED, part=mine)
    rows = torch.from_numpy(np.concatenate([np.empty(0, dtype=np.int64), *(r for _, r in batches[mine])]))
    for their_rows, theirs in engine.allgather_object((rows, images[rows])):
        images[their_rows] = theirs
    features = None
    if ruled is not None:
        net = ruled[1][0]
        own = feature_parts(ref.n, net, shares)[engine.rank]
        features = draw_features(images, ref, net, own) if own.stop > own.start else np.empty((0, 0))
    return SplitDraw(images, ref, shares, features)


def _score_split_draw(draw: SplitDraw, parts_gathered: list[Any], ruled: tuple[Any, ...]) -> dict[str, Any]:
    """Rank 0: the EMA generator's estimand from the ranks' feature shares (those a rank could not compute, its own)."""
    import numpy as np

    from ..measure.metrics.evaluate import COMMON_LATENTS_SEED, draw_features, evaluate_estimand

    images, ref, networks = draw.images, draw.ref, ruled[1]
    cuts = feature_parts(ref.n, networks[0], draw.shares)
    shares = [
        part if part is not None else draw_features(images, ref, networks[0], cut)
        for part, cut in zip(parts_gathered, cuts, strict=True)
        if cut.stop > cut.start
    ]
    features = np.concatenate(shares)
    return {**evaluate_estimand(images, ref, networks, features=features), "latent_seed": COMMON_LATENTS_SEED}


def score_models(
    run: Run, engine: Engine, outcome: Outcome, workers: int = 1
) -> tuple[dict[str, dict[str, Any]], tuple[Any, ...]] | None:
    """Every rank (a collective): score the run's models over the ranks. Rank 0 (whose ``outcome`` holds them)
    gets the score of every key of :func:`share_out` and :func:`final_aliases`, and the ruler it loaded (for
    :func:`quality_fields`); the others None. A run of one rank shares its models out over ``workers`` threads
    instead (:func:`scoring_workers`); a run of several ranks ignores ``workers``."""
    if engine.size == 1 and workers > 1:
        return _score_in_threads(run, engine, outcome, workers)
    if engine.rank != 0:
        handed = engine.allgather_object(None)[0]
        jobs = handed["jobs"].get(engine.rank, [])
        ruled = _own_ruler(run, engine, handed) if jobs or handed["ema"] is not None else None
        draw = _split_draw(run, engine, handed, ruled)
        share = None if ruled is None and jobs else score_jobs(run, jobs, engine.device, ruled)
        engine.gather_object((share, draw and draw.features))
        return None
    ruled = ruler(run, engine.device)
    aliases = final_aliases(outcome)
    ema_cost = _ema_cost(run)
    plan = share_out(outcome, engine.size, aliases, ema_cost, split_ema=_draw_fits(outcome, run.metrics.ema_samples))
    placed = {key for share in plan.values() for key, _ in share}
    loads = [float(len(plan.get(r, []))) for r in range(engine.size)]
    ema = (on_cpu(outcome.ema), water_fill(loads, ema_cost)) if outcome.ema is not None and EMA not in placed else None
    jobs = {r: [(key, on_cpu(b)) for key, b in share] for r, share in plan.items() if r != 0}
    handed = {"ruler": ruler_identity(ruled), "jobs": jobs, "ema": ema}
    engine.allgather_object(handed)
    draw = _split_draw(run, engine, handed, ruled)
    gathered = engine.gather_object((score_jobs(run, plan.get(0, []), engine.device, ruled), draw and draw.features))
    assert gathered is not None, "rank 0 gathers"
    scores: dict[str, dict[str, Any]] = {}
    for rank, (share, _) in enumerate(gathered):  # a share of None: that rank's ruler was not rank 0's
        scores.update(score_jobs(run, plan.get(rank, []), engine.device, ruled) if share is None else share)
    if draw is not None:
        scores[EMA] = _score_split_draw(draw, [features for _, features in gathered], ruled)
    scores.update({key: scores[FINAL] for key in aliases})
    return scores, ruled


def _ema_cost(run: Run) -> float:
    """The EMA generator's scoring cost in models scored on ``metrics.samples``: its sample count over theirs."""
    samples, ema_samples = run.metrics.samples, run.metrics.ema_samples
    return ema_samples / samples if ema_samples and samples else 1.0


def scoring_workers(device: torch.device, ranks_here: int, threads: int) -> int:
    """Threads that score a lone rank's models side by side: the node's cores that its training leaves idle (one rank
    of one thread on 2 cores: 2), each as many torch threads as training had; 1 on a GPU, or where no core is spare."""
    from ..train.launchenv import node_cores

    if device.type != "cpu":
        return 1
    return max(1, node_cores()[1] // max(1, ranks_here * threads))


def _score_in_threads(
    run: Run, engine: Engine, outcome: Outcome, workers: int
) -> tuple[dict[str, dict[str, Any]], tuple[Any, ...]]:
    """One rank's models shared out over ``workers`` threads as over ranks (:func:`share_out`, the EMA generator
    whole), every score as the rank alone computes it: each model is sampled and scored by one thread, whose torch
    kernels release the interpreter's lock."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    ruled = ruler(run, engine.device)
    aliases = final_aliases(outcome)
    plan = share_out(outcome, workers, aliases, _ema_cost(run))

    def share(jobs: Jobs) -> dict[str, dict[str, Any]]:
        with torch.no_grad():  # grad mode is a thread's own
            return score_jobs(run, jobs, engine.device, ruled)

    with ThreadPoolExecutor(len(plan), thread_name_prefix="scoring") as pool:  # no more threads than models' shares
        shares = list(pool.map(share, [plan[worker] for worker in sorted(plan)]))
    scores = {key: value for part in shares for key, value in part.items()}
    scores.update({key: scores[FINAL] for key in aliases})
    return scores, ruled


def _draw_fits(outcome: Outcome, ema_samples: int | None) -> bool:
    """Whether the EMA generator's draw is small enough to exchange between the ranks (:data:`SHARE_LIMIT_BYTES`)."""
    ema = outcome.ema
    if ema is None or not ema_samples:
        return False
    return ema_samples * ema.channels * ema.image_size**2 * 4 <= SHARE_LIMIT_BYTES


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
