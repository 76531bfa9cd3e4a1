"""Telemetry: the training window, phases that add up, step-time spread, lazy device timing,
a training loop that never reads a loss from the device between progress points, and FLOPs."""

import math
import time

import numpy as np
import pytest
import torch

from suite.measure.flops import peak_use
from suite.measure.sampler import summary
from suite.measure.telemetry import MAX_PENDING_STEPS, CommStats, StepTimes, Telemetry, spread
from suite.measure.timelines import HostTimeline
from suite.records.codec import build_part
from suite.records.measured import RankTelemetry
from suite.running.rank_record import summaries


def test_warmup_is_on_the_clock_but_not_a_timed_step_and_phases_add_up():
    comm = CommStats()
    t = Telemetry(torch.device("cpu"), comm)
    t.start_warmup()
    for _ in range(2):  # warm-up steps train and are on the clock, but are not timed steps
        t.begin_step()
        time.sleep(0.01)
        t.end_step(images=64, train_images=16, eval_images=8)
    warmed = t.clock()
    t.open_window()
    waited = 0.0
    for _ in range(3):
        t.begin_step()
        with t.data():
            time.sleep(0.01)
        start = t.timeline.mark()
        time.sleep(0.02)  # an engine blocked on communication
        end = t.timeline.mark()
        comm.add(1000, 2, (start, end))
        waited += t.timeline.seconds(start, end)
        time.sleep(0.03)
        t.end_step(images=64, train_images=16)
    t.training_done()
    t.close_window()
    d = t.as_dict()
    assert d["steps"] == 5 and d["images"] == 320 and d["train_images"] == 80 and d["eval_images"] == 16
    assert d["warmup"]["steps"] == 2 and d["warmup"]["images"] == 128 and d["warmup"]["train_images"] == 32
    assert d["warmup"]["seconds"] >= warmed >= 0.02
    w = d["window"]
    assert w["steps"] == 3 and w["images"] == 192 and w["train_images"] == 48 and w["comm_bytes"] == 3000
    assert w["comm"] == pytest.approx(waited) and waited >= 0.06 and w["data"] >= 0.03 and w["compute"] > 0
    assert w["step_seconds"] == pytest.approx(w["data"] + w["comm"] + w["compute"])
    # the clock holds the warm-up and the timed steps; busy seconds only the timed steps (the projection's)
    assert w["seconds"] >= warmed + w["busy_seconds"] and w["busy_seconds"] >= w["step_seconds"]
    # throughput: every training image, warm-up included, over the whole clock
    assert d["images_per_s"] == pytest.approx(80 / w["seconds"])
    assert d["step_times"]["count"] == 3
    # on a CPU nothing about GPUs is reported, and the record says why
    assert d["gpu_util"] is None and d["gpu_mem_used_bytes"] is None and d["gpu_mem_peak_bytes"] is None
    assert d["gpu_note"] == "CPU run: no GPU to measure"
    assert d["device"] == "cpu" and d["timeline"] == "host_clock"  # what suite gpu-check reads on a GPU
    assert d["host_mem_peak_bytes"] > 0


def test_waits_outside_steps_belong_to_no_step():
    comm = CommStats()
    t = Telemetry(torch.device("cpu"), comm)
    comm.add(10, 2, (0.0, 5.0))  # e.g. the initial broadcast of the weights, during set-up
    t.open_window()
    t.begin_step()
    t.end_step(images=1)
    t.close_window()
    assert t.window.comm < 1.0 and t.window.comm_bytes == 0


def test_begin_step_is_idempotent_within_a_step():
    t = Telemetry(torch.device("cpu"), CommStats())
    t.open_window()
    t.begin_step()
    time.sleep(0.02)
    t.begin_step()  # e.g. a critic batch that ends no generator step
    t.end_step(images=1)
    t.close_window()
    assert t.window.step_seconds >= 0.02


def test_no_timed_step_means_no_throughput():
    t = Telemetry(torch.device("cpu"), CommStats())
    t.begin_step()
    t.end_step(images=10)  # a warm-up step
    t.open_window()
    t.close_window()
    assert t.as_dict()["images_per_s"] is None


class FakeDeviceTimeline(HostTimeline):
    """Marks are events with device times that can only be read after a wait, like CUDA events."""

    on_device = True

    def __init__(self, step_device_seconds: float):
        self.now, self.step, self.waits, self.done = 0.0, step_device_seconds, 0, 0.0

    def mark(self):
        self.now += self.step / 2  # the device runs half a step between two marks
        return self.now

    def seconds(self, start, end):
        assert end <= self.done, "read an event the host has not waited for"
        return end - start

    def wait(self, mark):
        self.waits += 1
        self.done = max(self.done, mark)


def test_device_times_are_read_lazily_in_bounded_batches():
    timeline = FakeDeviceTimeline(0.5)
    t = Telemetry(torch.device("cpu"), CommStats(), timeline)
    t.open_window()
    steps = MAX_PENDING_STEPS + 10
    for _ in range(steps):
        t.begin_step()
        t.end_step(images=8)
    assert timeline.waits == 1  # one wait after MAX_PENDING_STEPS steps, none per step
    t.close_window()
    assert timeline.waits == 2
    assert t.window.steps == steps and t.window.step_seconds == pytest.approx(0.25 * steps)


def test_step_time_spread_and_interval():
    rng = np.random.default_rng(0)
    a, b = StepTimes(), StepTimes()
    values_a, values_b = rng.normal(1.0, 0.1, 300), rng.normal(1.2, 0.1, 200)
    for v in values_a:
        a.add(float(v))
    for v in values_b:
        b.add(float(v))
    s = spread([a.as_dict(), b.as_dict()])
    pooled = np.concatenate([values_a, values_b])
    assert s["n"] == 500 and s["mean"] == pytest.approx(pooled.mean())
    assert s["p50"] == pytest.approx(np.percentile(pooled, 50)) and s["p95"] == pytest.approx(np.percentile(pooled, 95))
    assert s["ci95"] == pytest.approx(1.9647 * pooled.std(ddof=1) / math.sqrt(500), rel=1e-3)
    assert spread([StepTimes().as_dict()])["mean"] is None


def test_step_times_keep_a_bounded_uniform_sample():
    times = StepTimes(size=100, seed=1)
    for v in range(10_000):
        times.add(float(v))
    assert len(times.sample) == 100 and times.count == 10_000
    assert times.mean == pytest.approx(4999.5)
    assert 3000 < np.median(times.sample) < 7000  # a uniform sample, not the first 100 steps


def test_summary_of_samples():
    assert summary([]) is None
    s = summary([float(v) for v in range(1, 101)])
    assert s["mean"] == pytest.approx(50.5) and s["p95"] == pytest.approx(95.05)


def _rank(gpu: bool, peak: float = 10**10) -> RankTelemetry:
    """A rank's telemetry as it hands it to rank 0."""
    times = StepTimes()
    for v in (0.4, 0.5, 0.5, 0.6):
        times.add(v)
    measured = {
        "window": {
            "steps": 4,
            "seconds": 2.2,
            "busy_seconds": 2.1,
            "step_seconds": 2.0,
            "data": 0.2,
            "comm": 0.4,
            "compute": 1.4,
            "images": 256,
            "comm_bytes": 100,
        },
        "warmup": {"steps": 2, "images": 128, "seconds": 1.0},
        "step_times": times.as_dict(),
        "flops_per_step": 10**9,
        "peak": {"flops": peak, "source": "measured"},
        "steps": 6,
        "cpu_util": {"mean": 90.0, "p95": 99.0},
        "host_mem_peak_bytes": 2**30,
        "gpu_util": {"mean": 70.0, "p95": 90.0} if gpu else None,
        "gpu_mem_used_bytes": {"mean": 2.0 * 2**30, "p95": 2.5 * 2**30} if gpu else None,
        "gpu_mem_peak_bytes": 2**29 if gpu else None,
        "gpu_note": None if gpu else "CPU run: no GPU to measure",
    }
    return build_part(RankTelemetry, measured)


def test_record_summaries_of_gpu_and_cpu_ranks():
    s = summaries([_rank(True), _rank(True)])
    assert s.step_s == pytest.approx(0.5) and s.comm_wait_s == pytest.approx(0.1) and s.comm_share == pytest.approx(0.2)
    assert s.step_p50 == pytest.approx(0.5) and s.step_mean == pytest.approx(0.5) and s.step_ci95 > 0
    assert s.timed_steps == 4 and s.steps == 12 and s.warmup_steps_per_rank == [2, 2]
    assert s.work_images_per_rank == [256, 256] and s.busy_s_per_rank == [2.1, 2.1]
    assert s.flops_per_step == 10**9 and s.achieved_flops_per_rank == pytest.approx(2e9)  # 4 steps in 2 s
    assert s.fraction_of_peak == pytest.approx(0.2) and s.peak_source == "measured"
    assert s.gpu_util_mean == 70.0 and s.gpu_util_p95 == 90.0
    assert s.gpu_mem_used_mb == 2048.0 and s.gpu_mem_peak_mb == 512.0 and s.host_mem_peak_mb == 1024.0
    cpu = summaries([_rank(False)])
    assert cpu.gpu_util_mean is None and cpu.gpu_mem_used_mb is None and cpu.gpu_mem_peak_mb is None
    assert cpu.gpu_note == "CPU run: no GPU to measure"


def test_a_rank_faster_than_its_peak_raises_it_and_is_named():
    slow, fast = _rank(False), _rank(False, peak=1.5e9)  # computes 2e9 FLOP/s: its ceiling was measured too low
    s = summaries([slow, fast])
    assert s.peak_raised_ranks == [1]
    assert s.achieved_flops_per_rank == pytest.approx(2e9) and s.peak_flops_per_rank == pytest.approx((1e10 + 2e9) / 2)
    assert s.fraction_of_peak == pytest.approx(2e9 / 6e9)  # the mean achieved over the mean peak, as printed
    assert summaries([slow, slow]).peak_raised_ranks == []


def test_fraction_of_peak_is_never_above_one():
    exact = peak_use([3.0, None, 1.0], [2.0, 4.0, 2.0])
    assert exact.raised_ranks == [0] and exact.peak == pytest.approx(3.0) and exact.fraction == pytest.approx(4 / 5)
    rng = np.random.default_rng(0)
    for _ in range(200):
        ranks = int(rng.integers(1, 6))
        achieved = [float(a) if a > 0.5 else None for a in rng.uniform(0, 10, ranks)]
        peaks = list(rng.uniform(0.5, 8, ranks))
        use = peak_use(achieved, peaks)
        assert use.fraction is None or 0 < use.fraction <= 1
        assert use.raised_ranks == [r for r, (a, p) in enumerate(zip(achieved, peaks)) if a is not None and a > p]
