"""Scoring a finished run: what is sampled, and that nothing is scored twice."""

import copy
import dataclasses
import threading

import pytest
import torch

from conftest import tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.gan.models import build_pair
from suite.gan.sampling import GeneratorBundle, Sampler
from suite.gan.seeding import torch_generator
from suite.measure.metrics import evaluate as evaluation
from suite.running import scoring
from suite.train.strategies.base import Outcome

PRIOR = {c: 0.1 for c in range(10)}


def bundle(seed: int, conditional: bool = True) -> GeneratorBundle:
    generator, _ = build_pair(20, 1, 100, num_classes=10 if conditional else 0, seed=seed)
    return GeneratorBundle("single", 20, 1, 100, 10, conditional, {"all": generator.state_dict()}, dict(PRIOR))


def copy_of(original: GeneratorBundle, **changes) -> GeneratorBundle:
    tensors = {key: {name: t.clone() for name, t in state.items()} for key, state in original.generators.items()}
    return dataclasses.replace(original, generators=tensors, **changes)


@pytest.mark.parametrize("conditional", [True, False])
def test_the_sampler_draws_what_the_generator_makes_in_any_batch_size(conditional):
    model = bundle(3, conditional)
    sampler = Sampler(model)
    images, labels = sampler.sample(230, seed=1)
    again, _ = sampler.sample(230, seed=1, batch_size=230)
    torch.testing.assert_close(images, again, rtol=0, atol=1e-6)  # batching is not part of the model
    generator, _ = build_pair(20, 1, 100, num_classes=10 if conditional else 0, seed=3)
    generator.eval()
    z = torch.randn(230, 100, generator=torch_generator(1, "sample-noise"))
    with torch.no_grad():
        expected = generator(z, labels if conditional else None)
    torch.testing.assert_close(images, expected, rtol=0, atol=1e-6)
    assert (labels >= 0).all() if conditional else (labels == -1).all()


def scoring_run(samples: int = 200):
    metrics_settings = {"enabled": True, "features": "classifier", "samples": samples, "curve_points": 3}
    return expand(parse_scenario(tiny_scenario("s", [{"strategy": "conditional", "procs": [2]}], metrics=metrics_settings)))[0]


class ThreadRank:
    """A rank of a run whose ranks are threads of this process: the two collectives scoring uses."""

    device = torch.device("cpu")

    def __init__(self, rank: int, board: list, barrier: threading.Barrier):
        self.rank, self.size, self.board, self.barrier = rank, len(board), board, barrier

    def allgather_object(self, obj):
        self.barrier.wait()  # the board's last values are read
        self.board[self.rank] = obj
        self.barrier.wait()
        return list(self.board)

    def gather_object(self, obj):
        everything = self.allgather_object(obj)
        return everything if self.rank == 0 else None


def score_on_ranks(run, outcome, size: int):
    """score_models on ``size`` thread ranks: (rank 0's result, which thread scored which bundle)."""
    board, barrier, results, errors = [None] * size, threading.Barrier(size), {}, []

    def rank(r: int) -> None:
        try:
            results[r] = scoring.score_models(run, ThreadRank(r, board, barrier), outcome if r == 0 else Outcome(None))
        except BaseException as error:  # noqa: BLE001  (reported below, in the test's thread)
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=rank, args=(r,), name=f"rank{r}") for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def identity(model: GeneratorBundle) -> tuple:
    """A model as scoring tells it apart (a model handed to another rank is a copy): its tensors and prior."""
    return model.digest(), tuple(model.class_prior.values())


@pytest.fixture
def scored_by(monkeypatch):
    """Which thread scored each bundle (by :func:`identity`), in order."""
    seen = []
    evaluate = evaluation.evaluate_sampler

    def counted(sampler, *args, **kwargs):
        seen.append((threading.current_thread().name, identity(sampler.bundle)))
        return evaluate(sampler, *args, **kwargs)

    monkeypatch.setattr(evaluation, "evaluate_sampler", counted)
    return seen


def test_the_models_are_shared_out_over_the_ranks_the_final_one_on_rank_0():
    final, a, b, c = bundle(0), bundle(1), bundle(2), bundle(3)
    curve = [(1.0, 2, 64, a), (1.5, 3, 96, b), (2.0, 4, 128, copy_of(final))]
    outcome = Outcome(final, curve=curve, extra_bundles={"best_cell": c})
    plan = {r: [(key, id(m)) for key, m in jobs] for r, jobs in scoring.share_out(outcome, 2).items()}
    assert plan == {0: [("final", id(final)), ("curve1", id(b))], 1: [("curve0", id(a)), ("extra:best_cell", id(c))]}
    assert list(scoring.share_out(outcome, 1)) == [0]
    scored_while_training = Outcome(final, curve=curve, fields={"curve": [{"step": 4}]})
    assert [key for jobs in scoring.share_out(scored_while_training, 4).values() for key, _ in jobs] == ["final"]


def test_models_too_large_to_hand_out_are_scored_on_rank_0(monkeypatch):
    final, a = bundle(0), bundle(1)
    monkeypatch.setattr(scoring, "SHARE_LIMIT_BYTES", scoring.bundle_bytes(a) - 1)
    assert list(scoring.share_out(Outcome(final, curve=[(1.0, 2, 64, a)]), 2)) == [0]


def test_scores_shared_over_ranks_are_those_of_one_rank_and_a_snapshot_of_the_final_model_is_not_scored(scored_by):
    run = scoring_run()
    final, earlier = bundle(0), bundle(1)
    other_prior = copy_of(final, class_prior={**PRIOR, 0: 0.3})  # the same tensors, other samples
    curve = [(1.0, 2, 64, earlier), (1.5, 3, 96, other_prior), (2.0, 4, 128, copy_of(final))]
    outcome = Outcome(final, curve=curve)
    alone = score_on_ranks(run, outcome, 1)[0]
    assert sorted(scored_by) == sorted(("rank0", identity(m)) for m in (final, earlier, other_prior))  # last snapshot: final
    scored_by.clear()
    shared = score_on_ranks(run, outcome, 2)
    expected = [("rank0", identity(final)), ("rank0", identity(other_prior)), ("rank1", identity(earlier))]
    assert shared[1] is None and sorted(scored_by) == sorted(expected)
    assert shared[0][0] == alone[0]  # every score, bit for bit
    scores = scoring.quality_fields(run, outcome, shared[0], 2.0, 4, 128)
    last = scores.curve[-1]
    assert last["step"] == 4 and len(scores.curve) == 3
    assert (last["fid"], last["kid_mean"], last["is_mean"]) == tuple(scores.quality[k] for k in ("fid", "kid_mean", "is_mean"))
    assert scores.curve[0]["fid"] != last["fid"] and scores.quality["untrained_fid"] > 0


def test_a_lone_ranks_models_scored_in_threads_score_as_on_one_thread(scored_by):
    run = scoring_run()
    final, earlier, later, best = bundle(0), bundle(1), bundle(2), bundle(3)
    outcome = Outcome(final, curve=[(1.0, 2, 64, earlier), (1.5, 3, 96, later)], extra_bundles={"best_cell": best})
    alone = score_on_ranks(run, outcome, 1)[0]
    scored_by.clear()
    engine = ThreadRank(0, [None], threading.Barrier(1))
    threaded = scoring.score_models(run, engine, outcome, workers=2)
    assert threaded[0] == alone[0]  # every score, bit for bit
    threads = {name for name, _ in scored_by}
    assert len(scored_by) == 4 and len(threads) == 2 and not threads & {"rank0", "MainThread"}  # two scoring threads
    scored_by.clear()
    assert scoring.score_models(run, engine, outcome, workers=64)[0] == alone[0]  # a big node: a thread a model at most
    assert len({name for name, _ in scored_by}) == 4


def test_a_lone_rank_scores_on_the_cores_its_training_left_idle(monkeypatch):
    monkeypatch.setattr("suite.train.launchenv.node_cores", lambda: (2, 2))
    cpu = torch.device("cpu")
    assert scoring.scoring_workers(cpu, 1, 1) == 2 and scoring.scoring_workers(cpu, 1, 2) == 1
    assert scoring.scoring_workers(cpu, 2, 1) == 1 and scoring.scoring_workers(torch.device("cuda"), 1, 1) == 1
    monkeypatch.setattr("suite.train.launchenv.node_cores", lambda: (16, 8))  # this process may use 8 of 16
    assert scoring.scoring_workers(cpu, 1, 4) == 2


@pytest.mark.parametrize("how", ["no ruler", "another ruler"])
def test_a_rank_without_rank_0s_ruler_hands_its_share_back_to_rank_0(scored_by, monkeypatch, caplog, how):
    from suite.measure.metrics.features import FeatureUnavailable

    run = scoring_run()
    final, earlier = bundle(0), bundle(1)
    outcome = Outcome(final, curve=[(1.0, 2, 64, earlier), (2.0, 4, 128, copy_of(final))])
    alone = score_on_ranks(run, outcome, 1)[0]
    scored_by.clear()
    load = scoring.ruler

    def rank_1_differs(run, device):
        if threading.current_thread().name != "rank1":
            return load(run, device)
        if how == "no ruler":
            raise FeatureUnavailable("no inception weights on this node")
        ref, (net, classifier) = load(run, device)
        other = copy.copy(net)
        other.sha256 = "0" * 64  # another file of the same name
        return ref, (other, classifier)

    monkeypatch.setattr(scoring, "ruler", rank_1_differs)
    caplog.set_level("WARNING", logger="suite.running.scoring")
    shared = score_on_ranks(run, outcome, 2)[0]
    assert sorted(scored_by) == sorted([("rank0", identity(final)), ("rank0", identity(earlier))])
    assert shared[0] == alone[0] and "rank 0 scores its share" in caplog.text


def test_the_ema_generator_of_ten_times_the_samples_gets_a_rank_of_its_own():
    """The longest-processing-time rule: handed out in turn, the EMA generator (scored on 10 times the samples) landed
    beside the final model and a curve snapshot on rank 0 while rank 1 waited."""
    final, a, b, c, ema = bundle(0), bundle(1), bundle(2), bundle(3), bundle(4)
    outcome = Outcome(final, curve=[(1.0, 2, 64, a), (1.5, 3, 96, b), (2.0, 4, 128, c)], ema=ema)
    keys = {r: [key for key, _ in jobs] for r, jobs in scoring.share_out(outcome, 2, ema_cost=10).items()}
    assert keys == {0: ["final", "curve0", "curve1", "curve2"], 1: ["ema"]}
    assert {r: [key for key, _ in jobs] for r, jobs in scoring.share_out(outcome, 2).items()} == {
        0: ["final", "curve1", "ema"],
        1: ["curve0", "curve2"],
    }  # at equal costs, in turn (as before)
    three = {r: [key for key, _ in jobs] for r, jobs in scoring.share_out(outcome, 3, ema_cost=2).items()}
    assert three == {0: ["final", "curve1"], 1: ["ema"], 2: ["curve0", "curve2"]}  # the costliest first


def test_water_fill_evens_the_ranks_out_and_parts_cut_consecutive_batches():
    assert scoring.water_fill([6.0, 0.0], 10) == pytest.approx([0.2, 0.8])  # both finish at 8
    assert scoring.water_fill([4.0, 2.0, 9.0], 3) == pytest.approx([0.5 / 3, 2.5 / 3, 0.0])  # the busiest rank takes none
    assert scoring.water_fill([1.0, 5.0], 2) == [1.0, 0.0]
    assert scoring.parts(50, [0.2, 0.8]) == [slice(0, 10), slice(10, 50)]
    assert scoring.parts(3, [0.5, 0.0, 0.5]) == [slice(0, 2), slice(2, 2), slice(2, 3)]


def ema_bundles() -> dict[str, GeneratorBundle]:
    """An EMA generator of each kind: one (conditional) network, one network per class, a mixture of two cells."""
    nets = [build_pair(20, 1, 100, seed=seed)[0].state_dict() for seed in (5, 6, 7)]
    prior = {0: 0.5, 1: 0.3, 2: 0.2}
    per_class = GeneratorBundle(
        "per_class", 20, 1, 100, 10, False, {f"c{c}": nets[c] for c in prior}, prior, classes={f"c{c}": c for c in prior}
    )
    mixture = GeneratorBundle(
        "mixture", 20, 1, 100, 10, False, {"a": nets[0], "b": nets[1]}, dict(PRIOR), weights={"a": 0.7, "b": 0.3}
    )
    return {"single": bundle(8), "per_class": per_class, "mixture": mixture}


@pytest.mark.parametrize("kind", ["single", "per_class", "mixture"])
def test_a_draw_generated_in_parts_is_the_whole_draw_to_the_bit(kind):
    sampler = Sampler(ema_bundles()[kind])
    whole, labels = sampler.sample(730, seed=2)
    cuts = scoring.parts(len(sampler.batches(730, seed=2)), [0.3, 0.0, 0.7])
    pieces = [sampler.sample(730, seed=2, part=cut)[0] for cut in cuts]
    assert torch.equal(sum(pieces), whole) and torch.equal(sampler.sample(730, seed=2)[1], labels)
    assert all(cut.stop - cut.start < len(sampler.batches(730, seed=2)) for cut in cuts)  # no part is the whole draw


@pytest.mark.parametrize("kind", ["single", "per_class", "mixture"])
def test_the_ema_generators_draw_split_over_the_ranks_scores_as_on_one_rank(kind, monkeypatch):
    """Its batches and feature batches over 2 and 3 ranks (the busier rank 0 taking fewer), its scores one rank's to
    the bit; a rank without rank 0's ruler leaves its feature batches to rank 0, with the same scores."""
    metrics_settings = {"enabled": True, "features": "classifier", "samples": 150, "ema_samples": 730, "curve_points": 3}
    scenario = tiny_scenario(
        "s", [{"strategy": "conditional", "procs": [2]}], metrics=metrics_settings, train={"ema_half_life": 0.1}
    )
    run = expand(parse_scenario(scenario))[0]
    outcome = Outcome(bundle(0), curve=[(1.0, 2, 64, bundle(1)), (2.0, 4, 128, bundle(2))], ema=ema_bundles()[kind])
    drawn = []
    sample = Sampler.sample
    monkeypatch.setattr(Sampler, "sample", lambda self, n, *a, **k: drawn.append((n, k.get("part"))) or sample(self, n, *a, **k))
    alone = score_on_ranks(run, outcome, 1)[0][0]
    assert alone["ema"]["n"] == 730 and alone["ema"]["fid"] > 0
    for size in (2, 3):
        drawn.clear()
        shared = score_on_ranks(run, outcome, size)[0][0]
        assert shared == alone  # every score, the EMA generator's included, bit for bit
        ema_parts = [part for n, part in drawn if n == 730]
        assert len(ema_parts) == size and all(part is not None for part in ema_parts)  # split: no rank drew it whole
    load = scoring.ruler

    def rank_1_differs(run, device):
        ref, (net, classifier) = load(run, device)
        if threading.current_thread().name == "rank1":
            net = copy.copy(net)
            net.sha256 = "0" * 64
        return ref, (net, classifier)

    monkeypatch.setattr(scoring, "ruler", rank_1_differs)
    assert score_on_ranks(run, outcome, 2)[0][0] == alone


def test_a_rank_asks_numpy_for_no_huge_pages_unless_the_site_says_otherwise(monkeypatch):
    """The worker turns NumPy's huge-page advice off (the scores' kernel matrices stalled on the kernel's defragmenting),
    unless ``NUMPY_MADVISE_HUGEPAGE`` is set, which is NumPy's own switch and stands."""
    from numpy._core import multiarray

    from suite.running.worker import _no_huge_page_advice

    before = multiarray._set_madvise_hugepage(True)
    try:
        monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
        _no_huge_page_advice()
        assert multiarray._get_madvise_hugepage()
        monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE")
        _no_huge_page_advice()
        assert not multiarray._get_madvise_hugepage()
    finally:
        multiarray._set_madvise_hugepage(before)


class _ThreadedHorovod:
    """Horovod's ``allgather`` for one of several ranks that are threads of this process (as many as ``barrier``
    waits for): each rank's tensor, concatenated in rank order, once every rank has handed one under the same name."""

    def __init__(self, rank: int, world: dict, barrier: threading.Barrier):
        self.rank, self.world, self.barrier = rank, world, barrier

    def allgather(self, tensor: torch.Tensor, name: str) -> torch.Tensor:
        self.world[self.rank] = (name, tensor.clone())
        self.barrier.wait()
        names, tensors = zip(*(self.world[r] for r in sorted(self.world)))
        self.barrier.wait()  # every rank has read the world before the next collective writes it
        assert len(set(names)) == 1, f"the ranks named one collective differently: {names}"
        return torch.cat(tensors)


def test_horovods_object_gather_hands_every_ranks_object_in_rank_order_whatever_its_type_and_size():
    from suite.train.engines.horovod import HorovodEngine

    # the scoring hand-out: a plan with models on rank 0, None on rank 1, a large payload on rank 2
    handed = [{"jobs": {1: [("curve0", bundle(1))]}, "ruler": ("classifier", "ab")}, None, torch.arange(750_000.0)]
    world: dict = {}
    barrier = threading.Barrier(len(handed))
    results: list = [None] * len(handed)

    def rank(r: int) -> None:
        engine = HorovodEngine.__new__(HorovodEngine)  # its collective alone: no hvd.init()
        engine.hvd = _ThreadedHorovod(r, world, barrier)
        results[r] = engine.allgather_object(handed[r])

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(handed))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for gathered in results:
        plan, nothing, payload = gathered
        assert nothing is None and torch.equal(payload, handed[2])
        assert plan["ruler"] == ("classifier", "ab") and plan["jobs"][1][0][0] == "curve0"
        assert plan["jobs"][1][0][1].digest() == handed[0]["jobs"][1][0][1].digest()
