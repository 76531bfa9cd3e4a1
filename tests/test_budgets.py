"""Equal budgets: an images budget gives the same model on a slower host, every strategy counts and stops at
it alike, warm-up counts inside a time budget, and label-partitioned ranks interleave their class GANs."""

import time
from pathlib import Path

import pytest
from test_training import SoloEngine

from conftest import SMALL_SWEEP_BUDGET, run_scenario, tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.config.plan import budget_fraction_steps
from suite.gan.data import load_dataset
from suite.measure.telemetry import CommStats, Telemetry
from suite.train.gan_plan import window_seconds
from suite.train.strategies.base import create

CLASSES = [0, 1, 2]


def in_process(
    tmp_path, strategy: str, train: dict, points: int = 3, slowdown: str | None = None, monkeypatch=None, loss=None, extra=None
):
    """Train ``strategy`` on one process as the worker does (set-up, warm-up, window, finalize): (strategy, outcome).

    ``loss``: the run entry's; ``extra``: more scenario sections (``{"wgan_gp": {"n_critic": 2}}``)."""
    scenario = {
        "name": "b",
        "dataset": {"name": "digits", "image_size": 20, "classes": CLASSES},
        "train": {"epochs": 1, "batch_size": 16, "warmup_steps": 2, **train},
        "metrics": {"enabled": False, "curve_points": points},
        "runs": [{"strategy": strategy, "engine": "mpi", **({"loss": loss} if loss else {})}],
        **(extra or {}),
    }
    run = expand(parse_scenario(scenario))[0]
    engine = SoloEngine()
    telemetry = Telemetry(engine.device, CommStats())
    slept = []
    if slowdown is not None:  # the worker's own slowdown hook: every step sleeps `slowdown` times its duration
        from suite.running import fault_hooks

        monkeypatch.setenv("SUITE_TEST_SLOWDOWN", slowdown)
        sleep = time.sleep
        monkeypatch.setattr(fault_hooks.time, "sleep", lambda s: slept.append(s) or sleep(s))
        fault_hooks.slow_down_steps(telemetry)
    data = load_dataset("digits", 20, classes=CLASSES)
    strategy_ = create(run, engine, data, telemetry, tmp_path / f"scratch-{len(list(tmp_path.iterdir()))}")
    strategy_.setup()
    telemetry.start_warmup()
    strategy_.warm_up()
    strategy_.window_s = window_seconds(run.train.budget_s, telemetry.warmup_seconds())
    strategy_.window_opens_s = telemetry.warmup_seconds()
    telemetry.open_window()
    strategy_.train()
    telemetry.training_done()
    telemetry.close_window()
    outcome = strategy_.finalize()
    if slowdown is not None:
        assert len(slept) == telemetry.steps  # every step, warm-up included, was slowed down
    return strategy_, outcome


# --- the images budget -----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("strategy, step_images", [("conditional", 16), ("label_partitioned", 3 * 16)])
def test_an_images_budget_gives_the_same_model_on_a_slower_host(tmp_path, monkeypatch, strategy, step_images):
    budget = 10 * step_images + step_images // 2  # ten whole steps and half of one
    _, fast = in_process(tmp_path, strategy, {"budget_images": budget, "steps": 3})
    _, slow = in_process(tmp_path, strategy, {"budget_images": budget, "steps": 3}, slowdown="1.0", monkeypatch=monkeypatch)
    assert fast.bundle.digest() == slow.bundle.digest()
    for outcome in (fast, slow):
        fields = outcome.fields
        # the budget, not train.steps, decides: ten steps of the system, two of them warm-up
        assert fields["budget_steps"] == 10 and fields["images_consumed"] == 10 * step_images
        assert fields["warmup_images_consumed"] == 2 * step_images
        steps = fields["generator_steps"]
        assert steps == 10 if strategy == "conditional" else steps == {"0": 10, "1": 10, "2": 10}
    # curve points at equal fractions of the budget, the same on both hosts
    expected = [s * step_images for s in budget_fraction_steps(budget, step_images, 3)]
    assert [images for _, _, images, _ in fast.curve] == [images for _, _, images, _ in slow.curve] == expected
    assert expected == [4 * step_images, 7 * step_images, 10 * step_images]  # 3.5, 7 and 10.5 steps: nearest, within the budget


@pytest.mark.slow
def test_snapshots_inside_the_warm_up_count_toward_the_budget(tmp_path):
    strategy, outcome = in_process(tmp_path, "data_parallel", {"budget_images": 160, "warmup_steps": 4}, points=4)
    # fractions of 10 steps: 2.5, 5, 7.5, 10, the nearest steps 3, 5, 8, 10; the first falls in the 4 warm-up steps,
    # which are on the training clock
    assert [(step, images) for _, step, images, _ in outcome.curve] == [(3, 48), (5, 80), (8, 128), (10, 160)]
    clocks = [clock for clock, *_ in outcome.curve]
    assert 0 < clocks[0] <= strategy.telemetry.warmup["seconds"] < clocks[1] < clocks[2] < clocks[3]
    assert strategy.trainer.position.warmup_steps == 4 and outcome.fields["warmup_images_consumed"] == 64


def test_budget_fractions_are_the_nearest_whole_steps():
    assert budget_fraction_steps(1000, 100, 4) == [3, 5, 8, 10]  # 250 and 750 images: a tie goes to the later step
    assert budget_fraction_steps(1000, 300, 3) == [1, 2, 3]  # 333 and 666 images: steps 1 (300) and 2 (600)
    assert budget_fraction_steps(1000, 400, 2) == [1, 2]  # 1000 images round to 3 steps, but the budget buys 2
    assert budget_fraction_steps(640, 640, 3) == [1]  # a budget of one step has one point


@pytest.mark.parametrize("budget, points", [(3840, 8), (3840, 6), (5120, 8), (1000, 7), (960, 3), (4000, 12)])
def test_every_system_is_scored_at_the_same_budget_fractions(budget, points):
    # the step sizes of the main job's systems (DC-GAN and DC-CGAN 32 images, the label-partitioned 10 class GANs
    # 320, the W-CGAN at n_critic 2 640, the 1x2 cellular grid 320) and odd ones
    for step in (32, 320, 640, 96, 250):
        if budget < step:
            continue
        steps = budget_fraction_steps(budget, step, points)
        wanted = [budget * k / points for k in range(1, points + 1)]
        at = [s * step for s in steps]
        # each point is within half a step of its fraction (the first no earlier than one step, the last no later than
        # the budget), the last point is the budget's end, and a fraction below one step shares the first point
        nearest = [min(at, key=lambda x, w=w: abs(x - w)) for w in wanted]
        assert all(abs(x - w) <= step / 2 or x == step or x == (budget // step) * step for x, w in zip(nearest, wanted))
        assert at[-1] == (budget // step) * step
    assert budget_fraction_steps(3840, 32, 6) == [20, 40, 60, 80, 100, 120]  # every 640 images
    assert budget_fraction_steps(3840, 320, 6) == [2, 4, 6, 8, 10, 12]  # the same images


# --- the time budget ------------------------------------------------------------------------------------------------


def test_warm_up_seconds_are_taken_off_a_time_budget():
    assert window_seconds(30.0, 6.5) == 23.5
    assert window_seconds(30.0, 31.0) == 0.0  # the window then makes one step
    assert window_seconds(None, 6.5) is None  # no budget: epochs decide


# --- interleaved class GANs -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_interleaved_and_sequential_class_gans_are_the_same_generators_with_complete_curve_points(tmp_path):
    inter, interleaved = in_process(tmp_path, "label_partitioned", {"steps": 8})
    seq, sequential = in_process(tmp_path, "label_partitioned", {"steps": 8, "class_schedule": "sequential"})
    assert interleaved.bundle.digest() == sequential.bundle.digest()  # the class GANs share nothing
    assert interleaved.fields["class_schedule"] == "interleaved" and sequential.fields["class_schedule"] == "sequential"
    # interleaved: at every curve point every class GAN is at the same step (window steps 2..8: snapshots at 4, 6, 8)
    assert [step for _, step, _, _ in interleaved.curve] == [3 * 4, 3 * 6, 3 * 8]
    assert [[s["step"] for s in t.result.snapshots] for t in inter.trainers] == [[4, 6, 8]] * 3
    # sequential: the first point with class 2 trained comes once classes 0 and 1 are over
    assert [step for _, step, _, _ in sequential.curve] == [8 + 8 + 4, 8 + 8 + 6, 8 + 8 + 8]
    assert [[s["step"] for s in t.result.snapshots if s["scheduled"]] for t in seq.trainers] == [[4, 6, 8]] * 3


class StopAfter(Exception):
    pass


class SavingCheckpointer:
    """Saves the strategy's state at the round boundary ``at`` and stops there, as a killed run's last checkpoint."""

    def __init__(self, at: int):
        self.at, self.saved, self.boundaries = at, None, []

    def at_boundary(self, steps: int) -> None:
        self.boundaries.append(steps)
        if steps == self.at:
            self.saved = self.strategy.checkpoint()
            raise StopAfter


@pytest.mark.slow
def test_interleaved_class_gans_resume_from_a_checkpoint_to_the_same_generators(tmp_path):
    _, reference = in_process(tmp_path, "label_partitioned", {"budget_images": 8 * 48})
    scenario = {
        "name": "b",
        "dataset": {"name": "digits", "image_size": 20, "classes": CLASSES},
        "train": {"epochs": 1, "batch_size": 16, "warmup_steps": 2, "budget_images": 8 * 48},
        "metrics": {"enabled": False, "curve_points": 3},
        "runs": [{"strategy": "label_partitioned", "engine": "mpi"}],
    }
    run = expand(parse_scenario(scenario))[0]
    data = load_dataset("digits", 20, classes=CLASSES)

    def started(checkpointer):
        engine = SoloEngine()
        strategy = create(run, engine, data, Telemetry(engine.device, CommStats()), tmp_path / "scratch")
        strategy.checkpointer = checkpointer
        strategy.setup()
        checkpointer.strategy = strategy
        return strategy

    first = started(SavingCheckpointer(at=5))
    first.warm_up()
    with pytest.raises(StopAfter):
        first.train()
    assert first.checkpointer.boundaries == [3, 4, 5]  # once per round of the three class GANs, not once per GAN step
    assert [t.result.steps for t in first.trainers] == [5, 5, 5]
    resumed = started(SavingCheckpointer(at=-1))
    resumed.restore(lambda rank: first.checkpointer.saved)
    resumed.train()
    assert resumed.checkpointer.boundaries == [6, 7]
    outcome = resumed.finalize()
    assert outcome.bundle.digest() == reference.bundle.digest()
    assert outcome.fields["images_consumed"] == reference.fields["images_consumed"] == 8 * 48


# --- real runs: every strategy records what it got ------------------------------------------------------------------


@pytest.fixture(scope="module")
def budgeted(small_sweep):
    """The three kinds of system under one images budget, and one time budget, on 1 and 2 processes: the shared small
    sweep's (tests/conftest.py: small_sweep_scenario), run with --tensorboard (events change no training)."""
    assert small_sweep.scenario["dataset"]["classes"] == CLASSES
    assert small_sweep.code == 0, {k: r.get("error") for k, r in small_sweep.records.items()}
    return small_sweep.records


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "run_id, steps, step_images",
    [
        ("budgeted-p2-r0", 36, 16),  # data-parallel: a global step, one batch of 16
        ("label_partitioned-bce-mpi-p2-r0", 12, 48),  # a step of each of the 3 class GANs
        # an iteration: 3 batches of 16 in each of 2 cells, the discriminators trained on 2 of them (skip 1)
        ("cellular-mustangs-mpi-p1-g1x2-r0", 9, 64),
    ],
)
def test_every_system_stops_at_the_images_budget_and_records_what_it_got(budgeted, run_id, steps, step_images):
    r = budgeted[run_id]
    assert r["status"] == "ok", r.get("error")
    assert r["budget_images"] == SMALL_SWEEP_BUDGET and r["budget_s"] is None and r["budget_window_s"] is None
    assert r["budget_steps"] == steps and r["images_consumed"] == steps * step_images == SMALL_SWEEP_BUDGET
    assert r["warmup_images_consumed"] == step_images  # one warm-up step of the system
    # the warm-up is on the training clock, and the throughput counts its training images
    assert r["train_s"] > r["warmup_s"] > 0 and r["telemetry"]["timed_steps"] == steps - 1 and not r["warnings"]
    assert r["train_images"] == r["images_consumed"] and r["images_per_s"] == pytest.approx(
        SMALL_SWEEP_BUDGET / r["train_s"], rel=0.05
    )
    # work as a trait of the strategy: a cellular generator steps on every batch, its discriminators on 2 of 3 (skip
    # 1); only cellular scores images while it trains (fitness and mixtures)
    cellular = run_id.startswith("cellular")
    assert (r["steps_per_gan"], r["generator_only_steps"]) == ((steps * 3, steps) if cellular else (steps, 0))
    assert (r["eval_images"] > 0) == cellular
    # the curve: at the whole step nearest half the budget, a tie to the later (cellular: 5 of 9 iterations), and at its end
    assert [p["images"] for p in r["curve"]] == [
        s * step_images for s in budget_fraction_steps(SMALL_SWEEP_BUDGET, step_images, 2)
    ]
    assert r["curve"][-1]["images"] == SMALL_SWEEP_BUDGET and r["curve"][0]["images"] == (320 if cellular else 288)


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "run_id, step_images, writers",
    [
        ("budgeted-p2-r0", 16, [0]),  # data-parallel: rank 0 keeps the one model's history
        ("label_partitioned-bce-mpi-p2-r0", 48, [0, 1]),  # each rank its own class GANs' (classes 0, 1 and 2)
        ("cellular-mustangs-mpi-p1-g1x2-r0", 64, [0]),  # each rank its own cells'
    ],
)
def test_every_system_writes_its_tensorboard_events_on_one_axis_of_training_images(budgeted, run_id, step_images, writers):
    from test_logs import _events, _series

    r = budgeted[run_id]
    events = _events(Path(r["settings"]["tensorboard_dir"]) / run_id)
    tags = events.Tags()["scalars"]
    steps = {tag: [e.step for e in events.Scalars(tag)] for tag in tags}
    trained = [tag for tag in tags if tag.startswith(("loss/", "train/mixture_fid"))]
    assert trained and all(s % step_images == 0 for tag in trained for s in steps[tag])  # whole steps of the system
    assert (
        max(s for points in steps.values() for s in points) == r["train_images"] == SMALL_SWEEP_BUDGET
    )  # nothing beyond the run
    assert _series(events, "quality/kid_mean") == [(p["images"], pytest.approx(p["kid_mean"], rel=1e-6)) for p in r["curve"]]
    assert sorted(t for t in tags if t.startswith("time/step_mean_s/rank")) == [f"time/step_mean_s/rank{w}" for w in writers]
    # rank 0's step times as training ended are the record's own (its last point comes after its last step)
    assert _series(events, "time/step_mean_s/rank0")[-1][1] == pytest.approx(
        r["telemetry"]["per_rank"][0]["step_times"]["mean"], rel=1e-6
    )


@pytest.mark.multiproc
def test_a_time_budget_window_is_what_the_warm_up_left(budgeted):
    r = budgeted["timed-p1-r0"]
    assert r["status"] == "ok", r.get("error")
    assert r["budget_s"] == 2.0 and r["budget_images"] is None
    # the window was the budget less the warm-up the ranks agreed on (measured a moment before warmup_s)
    assert 0 < r["budget_window_s"] < 2.0 and r["budget_window_s"] + r["warmup_s"] >= 2.0
    # the warm-up is inside the clock: training stops after the first step past the whole budget
    assert r["train_s"] >= 2.0 - 1e-9 and r["train_s"] >= r["warmup_s"] + r["budget_window_s"] - 1e-9
    assert r["images_consumed"] == 16 * r["generator_steps"] and r["warmup_images_consumed"] == 16


@pytest.mark.multiproc
def test_a_run_without_a_timed_step_is_not_plainly_ok(budgeted):
    r = budgeted["warmonly-p1-r0"]
    assert r["status"] == "ok" and r["telemetry"]["timed_steps"] == 0 and r["generator_steps"] == 1
    assert len(r["warnings"]) == 1 and r["warnings"][0].startswith("no timed step after the warm-up (1 warm-up step,")
    # its throughput is still measured: the warm-up is on the training clock
    assert r["train_s"] >= r["warmup_s"] > 0 and r["images_per_s"] == pytest.approx(16 / r["train_s"], rel=0.05)
    assert r["telemetry"]["step_p50"] is None  # no step time without a timed step


# --- bad input: a budget that buys no timed step ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "run, budget, step",
    [
        ({"strategy": "data_parallel", "engine": "mpi", "procs": [1]}, 31, 16),  # one step of 16: the warm-up
        ({"strategy": "label_partitioned", "engine": "mpi", "procs": [1]}, 95, 48),  # one step of the 3 class GANs
        # a cellular iteration: 2 cells x the 2 of 3 batches its discriminators train on (skip 1) x 16 images
        ({"strategy": "cellular", "engine": "mpi", "procs": [1], "grid": [1, 2]}, 127, 64),
    ],
)
def test_a_budget_that_buys_no_timed_step_is_refused_before_any_rank_starts(tmp_path, capsys, run, budget, step):
    scenario = tiny_scenario(
        "refused",
        [run],
        dataset={"classes": CLASSES},
        train={"budget_images": budget, "batch_size": 16, "warmup_steps": 1, "steps": None},
        cellular={"batches_per_iteration": 3, "fitness_samples": 32, "mixture_samples": 40},
    )
    code, records = run_scenario(tmp_path, scenario)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and records == {} and not (tmp_path / "results").exists()
    # one line: the field, the system, and the images one step after the warm-up needs
    assert len(err) == 1 and "train.budget_images" in err[0] and f"{run['strategy']} at P = 1" in err[0]
    assert f"after its 1 warm-up step: it needs {2 * step} images" in err[0]
    # the same settings with the images it asked for are accepted
    assert expand(parse_scenario({**scenario, "train": {**scenario["train"], "budget_images": 2 * step}}))
