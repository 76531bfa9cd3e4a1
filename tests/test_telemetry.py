"""Telemetry: warm-up excluded from the timed window, phases add up, GPU numbers only when measured."""

import time

import pytest
import torch

from suite.engines.base import CommStats
from suite.telemetry import Telemetry, summary
from suite.worker import _summaries


def test_steps_phases_and_window():
    comm = CommStats()
    t = Telemetry(torch.device("cpu"), comm, warmup_steps=2)
    t.start()
    for step in range(5):
        t.begin_step()
        with t.data():
            time.sleep(0.01)
        comm.add(1000, 0.02, 2)  # what an engine records while the step waits on communication
        time.sleep(0.03)
        t.end_step(images=64)
    t.stop()
    d = t.as_dict()
    assert d["steps"] == 5 and d["images"] == 320
    window = d["window"]
    assert window["steps"] == 3 and window["images"] == 192  # the 2 warm-up steps are left out
    assert d["comm_bytes_window"] == 3000
    assert window["comm"] == pytest.approx(0.06)
    assert window["data"] >= 0.03 and window["compute"] > 0
    assert window["seconds"] == pytest.approx(window["data"] + window["comm"] + window["compute"])
    assert d["images_per_s"] == pytest.approx(192 / window["seconds"])
    assert d["train_s"] >= window["seconds"]
    # on a CPU nothing about GPUs is reported, and the record says why
    assert d["gpu_util"] is None and d["gpu_mem_used_bytes"] is None and d["gpu_mem_peak_bytes"] is None
    assert d["gpu_note"] == "CPU run: no GPU to measure"
    assert d["host_mem_peak_bytes"] > 0


def test_begin_step_is_idempotent_within_a_step():
    t = Telemetry(torch.device("cpu"), CommStats(), warmup_steps=0)
    t.start()
    t.begin_step()
    time.sleep(0.02)
    t.begin_step()  # e.g. a critic batch that ends no generator step
    t.end_step(images=1)
    t.stop()
    assert t.window["seconds"] >= 0.02


def test_no_timed_window_means_no_throughput():
    t = Telemetry(torch.device("cpu"), CommStats(), warmup_steps=5)
    t.start()
    t.begin_step()
    t.end_step(images=10)
    t.stop()
    assert t.as_dict()["images_per_s"] is None


def test_summary_of_samples():
    assert summary([]) is None
    s = summary([float(v) for v in range(1, 101)])
    assert s["mean"] == pytest.approx(50.5) and s["p95"] == pytest.approx(95.05)


def _rank(gpu: bool) -> dict:
    return {
        "window": {"steps": 4, "seconds": 2.0, "data": 0.2, "comm": 0.4, "compute": 1.4, "images": 256},
        "steps": 6, "cpu_util": {"mean": 90.0, "p95": 99.0}, "host_mem_peak_bytes": 2**30,
        "gpu_util": {"mean": 70.0, "p95": 90.0} if gpu else None,
        "gpu_mem_used_bytes": {"mean": 2.0 * 2**30, "p95": 2.5 * 2**30} if gpu else None,
        "gpu_mem_peak_bytes": 2**29 if gpu else None, "gpu_note": None if gpu else "CPU run: no GPU to measure",
    }


def test_record_summaries_of_gpu_and_cpu_ranks():
    s = _summaries([_rank(True), _rank(True)], warmup_steps=2)
    assert s["step_s"] == pytest.approx(0.5) and s["comm_s"] == pytest.approx(0.1) and s["comm_share"] == pytest.approx(0.2)
    assert s["timed_steps"] == 4 and s["steps"] == 12 and s["warmup_steps_per_rank"] == 2
    assert s["gpu_util_mean"] == 70.0 and s["gpu_util_p95"] == 90.0
    assert s["gpu_mem_used_mb"] == 2048.0 and s["gpu_mem_peak_mb"] == 512.0 and s["host_mem_peak_mb"] == 1024.0
    cpu = _summaries([_rank(False)], warmup_steps=2)
    assert cpu["gpu_util_mean"] is None and cpu["gpu_mem_used_mb"] is None and cpu["gpu_mem_peak_mb"] is None
    assert cpu["gpu_note"] == "CPU run: no GPU to measure"
