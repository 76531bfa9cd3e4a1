"""The step-wise GAN trainer: warm-up outside the window, no device reads between progress
and divergence check points, the same model whatever the warm-up split, FLOPs counted once, evenly spaced snapshots."""

import dataclasses
import os
import sys
import time

import pytest
import torch

from suite.config.expansion import expand, parse_scenario
from suite.gan.data import load_dataset
from suite.gan.divergence import CHECK_EVERY
from suite.measure.telemetry import CommStats, Telemetry
from suite.train.engines.base import Engine, Group
from suite.train.gan_plan import GanPlan, TrainerHooks, evenly_spaced_steps, generator_steps
from suite.train.progress import PROGRESS_POINTS
from suite.train.training import GanTrainer


class SoloEngine(Engine):
    """One process, no communication."""

    name = "solo"

    def start(self):
        pass

    def shutdown(self):
        pass

    def split(self, groups):
        return Group(index=0, ranks=[0], rank=0)

    def _replicate(self, network, optimizer, group, name):
        raise AssertionError("a group of one rank needs no replication")

    def _allreduce_sum_(self, tensor, group):
        pass

    def _max_(self, votes, group):
        pass

    def allgather_object(self, obj):
        return [obj]


def make_trainer(
    steps: int | None, loss: str = "bce", points: int = 0, warmup: int = 2, budget_s=None, evaluate=None, batch: int = 32
):
    scenario = parse_scenario(
        {
            "name": "t",
            "dataset": {"name": "digits", "image_size": 20},
            "train": {"epochs": 5, "steps": steps, "batch_size": batch, "warmup_steps": warmup, "budget_s": budget_s},
            "wgan_gp": {"n_critic": 2},
            "metrics": {"enabled": False},
            "runs": [{"strategy": "data_parallel", "engine": "mpi", "loss": loss}],
        }
    )
    run = expand(scenario)[0]
    engine = SoloEngine()
    telemetry = Telemetry(engine.device, CommStats())
    data = load_dataset("digits", 20)
    gan = GanPlan("all", data, engine.world(), batch, snapshot_points=points)
    trainer = GanTrainer(run, engine, gan, telemetry, TrainerHooks(evaluate=evaluate))
    return trainer, telemetry


READS = ("item", "tolist", "__float__", "__int__", "__bool__", "numpy", "cpu")


def record_reads(monkeypatch, trainer):
    """The generator step at which the suite's own code copied a tensor value to the host.

    (PyTorch's Adam reads its step counter with ``item()``; that counter lives on the host even
    when training on a GPU, so reads from inside PyTorch are not counted.)
    """
    steps = []
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            if f"{os.sep}suite{os.sep}" in sys._getframe(1).f_code.co_filename:
                steps.append(trainer.result.steps)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return steps


@pytest.mark.slow
def test_steady_state_steps_read_nothing_from_the_device(monkeypatch):
    trainer, telemetry = make_trainer(steps=40, batch=4)  # small batches: the reads are the point, not the maths
    trainer.warm_up(2)
    telemetry.open_window()
    reads = record_reads(monkeypatch, trainer)
    trainer.train()
    assert trainer.result.steps == 40
    progress = {2 + k for k in evenly_spaced_steps(38, PROGRESS_POINTS)}
    checks = progress | {s for s in range(3, 41) if s % CHECK_EVERY == 0}  # divergence check points
    assert reads and set(reads) <= checks, f"device reads after steps {sorted(set(reads) - checks)}"
    # one read (both loss sums at once) per progress point, one (the steps' losses, see suite.gan.divergence) per check point
    assert len(reads) == len(progress) + len(checks)
    assert [h["step"] for h in trainer.result.history] == sorted(progress)
    assert all(h["d_loss"] > 0 and h["g_loss"] > 0 for h in trainer.result.history)


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["bce", "wgan-gp"])
def test_the_warmup_split_does_not_change_the_model(loss):
    a, _ = make_trainer(steps=5, loss=loss)
    a.warm_up(0)
    a.train()
    b, tb = make_trainer(steps=5, loss=loss)
    b.warm_up(3)
    tb.open_window()
    b.train()
    assert a.result.steps == b.result.steps == 5 and b.position.warmup_steps == 3
    for (name, x), y in zip(a.generator.network.state_dict().items(), b.generator.network.state_dict().values()):
        assert torch.equal(x, y), name


@pytest.mark.slow
def test_flops_are_counted_once_in_the_first_step():
    trainer, telemetry = make_trainer(steps=4)
    trainer.warm_up(1)
    first = telemetry.flops_per_step
    # a 20x20 generator step: the generator's convolutions dominate; 2 x MACs of a 32-image forward
    # pass through G alone is a lower bound
    g = trainer.generator.network
    macs = 32 * (10 * 10 * 128 * 128 * 9 + 20 * 20 * 128 * 64 * 9)
    assert first > 2 * macs
    trainer.warm_up(1)
    assert telemetry.flops_per_step == first  # counted once
    wgan, t2 = make_trainer(steps=4, loss="wgan-gp")
    wgan.warm_up(1)
    assert t2.flops_per_step > first  # n_critic=2 critic steps and the penalty's double backward
    assert g is trainer.generator.network


@pytest.mark.slow
def test_snapshots_at_evenly_spaced_steps():
    trainer, telemetry = make_trainer(steps=9, points=3, warmup=1)
    trainer.warm_up(1)
    telemetry.open_window()
    trainer.train()
    assert [s["step"] for s in trainer.result.snapshots] == [4, 6, 9]  # evenly spaced over the window's 8 steps
    assert all(s["scheduled"] for s in trainer.result.snapshots)
    assert evenly_spaced_steps(10, 3) == [3, 7, 10] and evenly_spaced_steps(2, 5) == [1, 2]


def test_one_step_count_rule():
    run = make_trainer(steps=1000)[0].run
    assert generator_steps(run, 1437, 32) == 5 * (1437 // 32)
    run = dataclasses.replace(run, train=dataclasses.replace(run.train, steps=7))  # settings are frozen: a new run
    assert generator_steps(run, 1437, 32) == 7


def test_a_budget_stops_training_by_the_window_clock():
    trainer, telemetry = make_trainer(steps=None, points=3, budget_s=1.0)
    assert trainer.max_steps > 10**9  # no step limit: the budget decides
    trainer.warm_up(1)
    telemetry.open_window()
    seen = []  # the window clock as each step's end decides on it (its first reading after the step)
    clock, between_steps = telemetry.clock, trainer._between_steps

    def deciding():
        first = []
        telemetry.clock = lambda: first[0] if first else (first.append(clock()) or first[0])
        try:
            return between_steps()
        finally:
            telemetry.clock = clock
            seen.append(first[0])

    trainer._between_steps = deciding
    trainer.train(deadline=1.0)
    # it stops after the first step that ends past the budget, and only then
    assert seen[-1] >= 1.0 and all(c < 1.0 for c in seen[:-1]) and len(seen) == trainer.result.steps - 1  # 1 warm-up step
    snaps = trainer.result.snapshots
    assert len(snaps) <= 3 and snaps[-1]["step"] == trainer.result.steps  # the model as the budget ends
    assert all(a["clock_s"] < b["clock_s"] for a, b in zip(snaps, snaps[1:]))
    capped, t2 = make_trainer(steps=4, budget_s=100.0)
    t2.open_window()
    capped.train(deadline=100.0)
    assert capped.result.steps == 4  # train.steps still caps a budgeted GAN


def test_stop_at_target_stops_at_the_first_snapshot_that_meets_it_and_pauses_the_clock():
    calls = []

    def evaluate(trainer):
        calls.append(trainer.result.steps)
        time.sleep(0.3)  # scoring takes time that is not training
        return len(calls) == 2

    trainer, telemetry = make_trainer(steps=12, points=4, warmup=0, evaluate=evaluate)
    telemetry.open_window()
    started = time.perf_counter()
    trainer.train()
    assert calls == [3, 6] and trainer.result.steps == 6
    assert telemetry.paused_s >= 0.6 and telemetry.clock() <= time.perf_counter() - started - 0.6
