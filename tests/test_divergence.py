"""Divergence ends a run as ``diverged`` (step, rank, quantity) on every engine, samples that
cannot be scored say why instead of raising, and the report gives diverged runs their own rows."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from report_text import whole_report

from conftest import run_scenario, tiny_scenario
from suite.analysis.report import write_report
from suite.config.expansion import expand, parse_scenario
from suite.gan.data import load_dataset
from suite.gan.divergence import CHECK_EVERY, LOSS_BOUND, PARAMETER_NORM_BOUND, Divergence, LossWatch, all_finite
from suite.measure.metrics.evaluate import Reference, evaluate_images
from suite.measure.metrics.signals import not_learned
from suite.measure.telemetry import CommStats, Telemetry
from suite.records.results import new_record, write_record
from suite.train.gan_plan import GanPlan
from suite.train.training import GanTrainer

# --- the check itself ---------------------------------------------------------------------------------------


def test_the_watch_names_the_first_value_out_of_bounds_with_its_step():
    watch = LossWatch(torch.device("cpu"), ["discriminator loss", "generator loss"], LOSS_BOUND, rank=1, where="class3")
    for step, (d, g) in enumerate([(0.7, 0.7), (0.6, 2e4), (math.inf, 1.0)], start=11):
        row = watch.row()
        row[0], row[1] = torch.tensor(d), torch.tensor(g)
        watch.done(step)
    seen = watch.check(13)
    assert (seen.step, seen.rank, seen.quantity, seen.value) == (12, 1, "generator loss", 2e4)
    assert seen.line() == "diverged at step 12 on rank 1: class3 generator loss 2e+04 beyond the bound 10000"
    assert watch.check(14) is None  # checked rows are not looked at again
    for step in range(15, 15 + 3 * CHECK_EVERY):  # checks further apart than CHECK_EVERY: the buffer grows
        watch.row()[:] = torch.tensor([float("nan"), 0.0]) if step == 40 else torch.zeros(2)
        watch.done(step)
    seen = watch.check(44, norms=torch.tensor([2 * PARAMETER_NORM_BOUND, 1.0]))
    assert seen.line() == "diverged at step 40 on rank 1: class3 discriminator loss nan"
    seen = watch.check(45, norms=torch.tensor([1.0, math.inf]))
    assert (seen.step, seen.quantity) == (45, "discriminator parameter norm")
    assert Divergence(3, 0, "generator loss", -math.inf, LOSS_BOUND, unit="iteration").line() == (
        "diverged at iteration 3 on rank 0: generator loss -inf"
    )
    assert all_finite({"a": [torch.zeros(2), (torch.ones(1), 5)], "clock": math.inf}) and not all_finite(
        [torch.tensor([0.0, math.nan])]
    )


def trainer_with(lr, steps, warmup=0):
    scenario = {
        "name": "t",
        "dataset": {"name": "digits", "image_size": 20},
        "train": {"epochs": 5, "steps": steps, "batch_size": 16, "warmup_steps": warmup, "lr": lr},
        "metrics": {"enabled": False},
        "runs": [{"strategy": "conditional", "engine": "mpi"}],
    }
    from test_training import SoloEngine

    run, engine = expand(parse_scenario(scenario))[0], SoloEngine()
    telemetry = Telemetry(engine.device, CommStats())
    gan = GanPlan("all", load_dataset("digits", 20), engine.world(), 16, conditional=True)
    return GanTrainer(run, engine, gan, telemetry), telemetry


def test_a_trainer_stops_at_the_first_check_point_after_its_losses_leave_the_bounds():
    trainer, telemetry = trainer_with(lr=50, steps=30)  # progress points every 3 steps: checked there too
    telemetry.open_window()
    trainer.train()
    assert trainer.halted and trainer.result.steps == 3
    assert trainer.diverged.step == 1 and trainer.diverged.quantity == "generator loss" and trainer.diverged.value > LOSS_BOUND
    assert trainer.result.history[-1]["step"] == 3  # the losses up to the stop are kept
    warm, _ = trainer_with(lr=1e6, steps=30, warmup=2)
    warm.warm_up(2)
    assert (
        warm.halted
        and warm.diverged.step == 1
        and warm.diverged.line().startswith("diverged at step 1 on rank 0: generator loss ")
    )
    assert warm.train().steps == 2  # nothing more after a divergence in warm-up


# --- scoring samples that cannot be scored ---------------------------------------------------------------------


class StubFeatures:
    """A fixed random projection as feature network and classifier (no training, no download)."""

    name, detail, is_unavailable, info = "stub", "a fixed random projection", None, {"heldout_accuracy": 1.0}
    sha256, device, literature = "0" * 64, torch.device("cpu"), False

    def __init__(self):
        self.weights = np.random.default_rng(0).normal(size=(400, 16))

    def __call__(self, images):
        features = images.reshape(len(images), -1).double().numpy() @ self.weights
        logits = features[:, :10] - features[:, :10].max(axis=1, keepdims=True)
        return features, np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda x: x.index_fill_(0, torch.tensor([3, 7]), math.nan), "2 of 200 samples are not finite (NaN or inf)"),
        (lambda x: x.zero_(), "the samples are constant (pixel std 0 across samples)"),
        (None, "the scores cannot be computed: FID: imaginary component 0.5 in the matrix square root"),
    ],
)
def test_samples_that_cannot_be_scored_say_why_and_score_nothing(monkeypatch, make, reason):
    stub, ref = StubFeatures(), Reference("digits", 20, features="stub", n=200)
    images = torch.rand(200, 1, 20, 20, generator=torch.Generator().manual_seed(0)) * 2 - 1
    good = evaluate_images(images, np.full(200, -1), ref, (stub, stub))
    assert good["fid"] is not None and good["kid_mean"] is not None and "not_scorable" not in good
    if make is None:  # a singular problem inside the scores

        def singular(*args):
            raise ValueError("FID: imaginary component 0.5 in the matrix square root")

        monkeypatch.setattr("suite.measure.metrics.evaluate.frechet_distance", singular)
    else:
        make(images)
    quality = evaluate_images(images, np.full(200, -1), ref, (stub, stub))
    assert quality["not_scorable"] == reason
    assert all(quality[k] is None for k in ("fid", "kid_mean", "is_mean", "tvd", "per_class_predicted"))
    assert (quality["n"], quality["n_real"], quality["features"], quality["feature_dim"]) == (200, 200, "stub", 16)
    assert not_learned(new_record({"quality": quality}).quality) == [f"not scorable: {reason}"]  # as the record reads it


# --- the report ---------------------------------------------------------------------------------------------------


def test_the_report_shows_diverged_and_not_learned_runs_in_their_own_rows(tmp_path):
    from report_text import whole_report
    from test_report import quality, record

    root = tmp_path / "results"
    diverged = record("lp-wgan-p2", strategy="label_partitioned", engine="mpi", procs=2, status="diverged", train_s=0.4)
    line = "diverged at step 12 on rank 1: class3 discriminator loss inf"
    diverged.update(
        error=None,
        reason=line,
        diverged={"step": 12, "rank": 1, "quantity": "discriminator loss", "value": None, "bound": 1e6, "where": "class3"},
    )
    runs = [
        record("dp-p1", quality=quality()),
        record("dp-p2", procs=2, train_s=6.0, quality=quality(is_mean=1.01)),
        diverged,
    ]
    for r in runs:
        write_record(root / r["run_id"], new_record(r))
    text = whole_report(write_report(root, tmp_path / "report"))
    section = text.split("## Diverged and not learned")[1].split("\n# ")[0]  # on the Runs page
    assert f"| lp-wgan-p2 | diverged | 12 | {line} |" in section
    assert "| dp-p2 | not learned |  | IS 1.010 is within 5 % of 1 |" in section
    assert "dp-p1 |" not in section
    assert "failed:**" not in text  # a diverged run is not a failed one


# --- checkpoints -------------------------------------------------------------------------------------------------


def test_a_state_that_is_not_finite_is_never_checkpointed(tmp_path):
    from test_training import SoloEngine

    from suite.train.checkpoint import Checkpointer
    from suite.train.resume import resume_plan

    scenario = tiny_scenario(
        "s", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}], train={"checkpoint_every": {"steps": 1}}
    )
    run, engine = expand(parse_scenario(scenario))[0], SoloEngine()
    weights = torch.ones(3)

    class Strategy:
        def peers(self):
            return engine.world()

        def checkpoint(self):
            return {"steps": int(weights[0]), "trainer": {"networks": {"G": {"w": weights.clone()}}}}

    checkpointer = Checkpointer(run, tmp_path, engine, Telemetry(engine.device, CommStats()))
    checkpointer.attach(Strategy())
    checkpointer.at_boundary(1)
    weights[1] = math.nan  # the run diverged between two checks
    checkpointer.at_boundary(2)
    assert checkpointer.written == 1 and resume_plan(tmp_path, run).checkpoint()["index"] == 1
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["000001-rank0.json", "000001-rank0.pt"]


# --- real runs on every engine ----------------------------------------------------------------------------------

# The data-parallel runs train normally; rank 1's divergence check sees an infinite loss at step 3 (the worker's
# test hook), after one warm-up step and a checkpoint at step 2. The W-CGAN diverges by itself at wgan_gp.lr 1000,
# the cellular grid at a learning rate of 1e6 (the largest a scenario accepts).
ENGINES = ("horovod", "mpi")
MATRIX_ENGINES = ("torch", "deepspeed")  # torch.distributed's objects, as DeepSpeed's: `make test-matrix`
RUNS = [{"strategy": "data_parallel", "engine": e, "procs": [2]} for e in ENGINES] + [
    {"strategy": "label_partitioned", "engine": "mpi", "loss": "wgan-gp", "procs": [2]},
    {"strategy": "cellular", "engine": "mpi", "grid": [1, 2], "procs": [2], "train": {"lr": 1e6}},
]
SCENARIO = tiny_scenario(
    "divergence",
    RUNS,
    dataset={"classes": [0, 1, 2]},
    train={"steps": 6, "epochs": 2, "batch_size": 16, "threads": 1, "checkpoint_every": {"steps": 2}},
    wgan_gp={"lr": 1000, "n_critic": 2},
    cellular={"iterations": 3, "batches_per_iteration": 1, "fitness_samples": 40, "mixture_samples": 40},
)


def diverge(folder: Path, scenario: dict) -> tuple[int, dict, Path]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SUITE_TEST_DIVERGE_AT_STEP", "3")
        code, records = run_scenario(folder, scenario)
    return code, records, folder / "results"


@pytest.fixture(scope="module")
def diverged_runs(tmp_path_factory):
    return diverge(tmp_path_factory.mktemp("divergence"), SCENARIO)


@pytest.fixture(scope="module")
def diverged_matrix_runs(tmp_path_factory):
    runs = [{"strategy": "data_parallel", "engine": e, "procs": [2]} for e in MATRIX_ENGINES]
    return diverge(tmp_path_factory.mktemp("divergence-matrix"), {**SCENARIO, "runs": runs})


@pytest.mark.multiproc
@pytest.mark.parametrize("engine", [*ENGINES, *(pytest.param(e, marks=pytest.mark.matrix) for e in MATRIX_ENGINES)])
def test_every_engine_stops_all_ranks_at_the_step_a_rank_diverged(request, engine):
    from test_reliability import survivors

    code, records, results = request.getfixturevalue("diverged_matrix_runs" if engine in MATRIX_ENGINES else "diverged_runs")
    run_id = f"data_parallel-bce-{engine}-p2-r0"
    record, run_dir = records[run_id], results / run_id
    assert code == 3  # suite run: no run failed, some diverged
    assert record["status"] == "diverged" and record["exit_code"] == 0 and record["error"] is None
    assert record["reason"] == "diverged at step 3 on rank 1: discriminator loss inf"
    assert record["diverged"] == {
        "step": 3,
        "rank": 1,
        "quantity": "discriminator loss",
        "value": None,  # inf: JSON has none
        "bound": LOSS_BOUND,
        "where": None,
        "unit": "step",
    }
    # rank 0 saw nothing, yet both stopped after step 3: two window steps each, after one warm-up step
    assert record["telemetry"]["work_steps_per_rank"] == [2, 2] and record["train_s"] > 0 and record["setup_s"] > 0
    assert [h["step"] for h in record["history"]] == [2, 3]  # the losses up to the stop
    assert record["checkpoint"]["steps"] == 2  # the last checkpoint, kept
    assert record["quality"] is None and not (run_dir / "generator.pt").exists()  # never scored
    assert "Traceback" not in (run_dir / "log.txt").read_text() and not survivors(run_dir)


@pytest.mark.multiproc
def test_label_partitioned_and_cellular_runs_diverge_on_mpi(diverged_runs):
    _, records, results = diverged_runs
    wcgan = records["label_partitioned-wgan-gp-mpi-p2-r0"]
    assert wcgan["status"] == "diverged"
    assert wcgan["reason"].startswith("diverged at step 1 on rank 0: class0 discriminator loss ")
    assert wcgan["reason"].endswith(" beyond the bound 1e+06") and wcgan["diverged"]["value"] > 1e6
    # rank 0 stopped its classes at the warm-up step; rank 1's class 2 diverged too
    assert wcgan["history"]["0"][-1]["step"] == 1 and wcgan["history"]["1"] == [] and wcgan["history"]["2"][-1]["step"] == 1
    cellular = next(r for r in records.values() if r["strategy"] == "cellular")
    assert cellular["status"] == "diverged" and cellular["diverged"]["unit"] == "iteration"
    assert cellular["reason"].startswith("diverged at iteration 1 on rank 0: cell 0,0 ")
    assert cellular["telemetry"]["warmup_steps_per_rank"] == [1, 1]  # every rank stopped after the same iteration
    for record in (wcgan, cellular):
        assert "Traceback" not in (results / record["run_id"] / "log.txt").read_text()
    text = whole_report(write_report(results, results.parent / "report"))  # a report of nothing but diverged runs
    assert text.count("| diverged |") >= len(RUNS)
