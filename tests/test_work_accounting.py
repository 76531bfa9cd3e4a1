"""Work accounted the same way for every strategy: training images (real images that reach a discriminator update),
evaluation images (scored without an update), generator-only steps, throughput over the training clock with the
warm-up inside it, and older records read in that meaning."""

from dataclasses import replace
from types import MethodType, SimpleNamespace

import pytest
import torch
from test_budgets import in_process

from suite.analysis.conditions import condition_warnings, unequal_work
from suite.config.plan import SystemSize, discriminator_batches
from suite.measure.telemetry import CommStats, Telemetry
from suite.records.codec import check_record
from suite.records.record import SCHEMA_VERSION, Record
from suite.records.results import new_record
from suite.strategies.cellular.algorithm import Cellular
from suite.strategies.cellular.grid import discriminator_trains
from suite.strategies.cellular.rules import cellular_step_images


@pytest.mark.parametrize("skip", [0, 1, 2, 5])
def test_the_budget_rule_counts_the_batches_the_cellular_discriminators_train_on(skip):
    for batches in range(1, 12):
        trained = sum(discriminator_trains(b, skip) for b in range(batches))
        assert discriminator_batches(batches, skip) == trained
    size = SystemSize(
        batch_size=16, procs=1, weak=False, critic_steps=1, cells=4, batches_per_iteration=5, discriminator_skip=skip
    )
    assert cellular_step_images(size) == 4 * 16 * discriminator_batches(5, skip)


class CountingData:
    """Forty images; counts what is fetched."""

    def __init__(self):
        self.fetched = []

    def __len__(self):
        return 40

    def fetch(self, rows):
        self.fetched.append(list(rows))
        return torch.zeros(len(rows), 1, 2, 2), torch.zeros(len(rows), dtype=torch.long)


@pytest.mark.parametrize("skip, trained", [(0, [0, 1, 2, 3, 4]), (1, [0, 2, 4]), (3, [0, 4])])
def test_a_generator_only_step_loads_and_charges_no_real_batch(skip, trained):
    data = CountingData()
    cellular = SimpleNamespace(
        seed=0,
        data=data,
        batch=8,
        batches=5,
        cfg=SimpleNamespace(discriminator_skip=skip),
        real_images=0,
        device=torch.device("cpu"),
        telemetry=Telemetry(torch.device("cpu"), CommStats()),
    )
    cellular._fetch = MethodType(Cellular._fetch, cellular)
    batches = list(Cellular._training_batches(cellular, (0, 0), 3))
    assert [b for b, real in enumerate(batches) if real is not None] == trained
    assert all(real is None or len(real) == 8 for real in batches)
    assert len(data.fetched) == len(trained) and cellular.real_images == 8 * len(trained)
    # the batches it loads are the ones it would have loaded with every batch: skipping moves no other batch
    everything = SimpleNamespace(**{**vars(cellular), "cfg": SimpleNamespace(discriminator_skip=0), "data": CountingData()})
    everything._fetch = MethodType(Cellular._fetch, everything)
    list(Cellular._training_batches(everything, (0, 0), 3))
    assert data.fetched == [everything.data.fetched[b] for b in trained]


@pytest.mark.slow
@pytest.mark.parametrize(
    "strategy, train, step_images",
    [
        ("data_parallel", {"budget_images": 5 * 16}, 16),
        # the W-CGAN: two critic batches of each of the 3 class GANs a generator step
        ("label_partitioned", {"budget_images": 3 * 96, "loss": "wgan-gp"}, 96),
    ],
)
def test_a_step_charges_the_real_images_of_its_discriminator_updates(tmp_path, strategy, train, step_images):
    extra = {"wgan_gp": {"n_critic": 2}} if train.get("loss") else {}
    loss = train.pop("loss", None)
    run, outcome = in_process(tmp_path, strategy, {**train, "warmup_steps": 1}, points=2, loss=loss, extra=extra)
    t, fields = run.telemetry, outcome.fields
    steps = train["budget_images"] // step_images
    assert t.train_images == fields["images_consumed"] == train["budget_images"] and t.eval_images == 0
    assert t.warmup["train_images"] == step_images and t.window.train_images == (steps - 1) * step_images
    # real and generated images through a discriminator are the step's work, not its training images
    assert t.images > t.train_images
    assert fields["steps_per_gan"] == steps and fields["generator_only_steps"] == 0
    # throughput: every training image over the training clock, whose first part is the warm-up
    d = t.as_dict()
    assert d["images_per_s"] == pytest.approx(train["budget_images"] / d["window"]["seconds"])
    assert d["window"]["seconds"] > d["warmup"]["seconds"] > 0


def old_record(**fields):
    base = {
        "schema": 4,
        "run_id": "x-p2-r0",
        "status": "ok",
        "strategy": "data_parallel",
        "engine": "mpi",
        "procs": 2,
        "train_s": 10.0,
        "warmup_s": 2.0,
        "images_consumed": 600,
        "images_per_s": 300.0,  # then: real and generated images through a discriminator, per window second
        "images_per_s_ci95": [250.0, 350.0],
        "curve": [{"clock_s": 0.0, "step": 1}, {"clock_s": 5.0, "step": 4}],
        "time_to_target": {"reached": True, "clock_s": 5.0},
    }
    return {**base, **fields}


def test_an_older_record_is_read_in_the_current_meaning():
    r = check_record(old_record())
    assert r["schema"] == SCHEMA_VERSION
    assert r["train_s"] == 12.0  # the warm-up is on the clock
    assert r["train_images"] == 600 and r["images_per_s"] == pytest.approx(50.0) and r["images_per_s_per_rank"] == 25.0
    assert r["images_per_s_ci95"] == pytest.approx([250 / 6, 350 / 6])  # the same relative width
    # points after the warm-up move by it; a point taken inside the warm-up stays where it was put
    assert [p["clock_s"] for p in r["curve"]] == [0.0, 7.0] and r["time_to_target"]["clock_s"] == 7.0
    # a cellular grid whose discriminators skipped every other of 3 batches trained on 2 of them
    cellular = check_record(
        old_record(
            strategy="cellular", images_consumed=960, batches_per_iteration=3, settings={"cellular": {"discriminator_skip": 1}}
        )
    )
    assert cellular["train_images"] == 640 and cellular["images_per_s"] == pytest.approx(640 / 12)
    # what it cannot tell, it leaves unknown
    assert check_record(old_record(images_consumed=None))["images_per_s"] is None
    # a current record is read as written
    current = old_record(schema=SCHEMA_VERSION, train_images=600)
    assert check_record(current) == current


def record(strategy: str, loss: str, images: int, **fields) -> Record:
    data = {
        "run_id": f"{strategy}-{loss}-p2-r0",
        "status": "ok",
        "scenario": "smoke",
        "scaling": "strong",
        "procs": 2,
        "strategy": strategy,
        "loss": loss,
        "engine": "mpi",
        "budget_images": None,
        "budget_s": None,
        "train_images": images,
        **fields,
    }
    return new_record(data)


def test_systems_that_trained_unequal_images_under_steps_are_named_with_their_images():
    runs = [record("data_parallel", "bce", 256), record("label_partitioned", "wgan-gp", 2560)]
    (line,) = unequal_work(runs)
    assert line.startswith("Unequal work in scenario smoke (strong scaling, P = 2), stopped by train.steps or epochs")
    assert "data_parallel / bce / mpi 256, label_partitioned / wgan-gp / mpi 2,560 (up to 10x)" in line
    assert line.endswith("give train.budget_images for equal work")
    # equal images, an images budget, or a time budget (equal time by design): nothing to say
    assert unequal_work([record("data_parallel", "bce", 256), record("conditional", "bce", 256)]) == []
    assert unequal_work([replace(r, budget_images=2560) for r in runs]) == []
    assert unequal_work([replace(r, budget_s=30.0) for r in runs]) == []
    # other process counts are other comparisons
    assert unequal_work([runs[0], replace(runs[1], procs=1)]) == []


def test_a_runs_own_warnings_reach_the_report():
    warned = record("data_parallel", "bce", 16, warnings=["no timed step after the warm-up (1 warm-up step, ...)"])
    assert condition_warnings([warned]) == ["data_parallel-bce-p2-r0: no timed step after the warm-up (1 warm-up step, ...)"]
