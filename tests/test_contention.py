"""A busy host is named: every run records its host's load over the training clock (load average, steal, CPU time of
processes outside the run), one rule marks it contended, and the report lists the contended systems."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import run_scenario, tiny_scenario
from suite.analysis.conditions import contention_warnings
from suite.measure.hostload import BUSY_SHARE, STEAL_SHARE, HostLoadMeter, contention, host_load, read_cpu_times
from suite.records.codec import parse_record
from suite.records.record import Record

# --- the rule --------------------------------------------------------------------------------------------------------


def test_others_on_the_cores_the_run_left_free_do_not_contend_it():
    assert contention(0.9, free_cores=1.0, cores=2, steal_share=0.0) is None  # a run on 1 of 2 cores, 1 busy beside it
    assert contention(BUSY_SHARE * 2, free_cores=0.0, cores=2, steal_share=None) is None  # at the limit: quiet
    reason = contention(1.2, free_cores=1.0, cores=2, steal_share=0.0)
    assert reason is not None and "1.20 cores busy, 0.20 more than the 1 the run left free" in reason
    assert contention(None, free_cores=0.0, cores=2, steal_share=None) is None  # nothing known, nothing marked


def test_steal_above_its_share_contends_a_run_on_an_idle_host():
    assert contention(0.0, 0.0, 2, STEAL_SHARE) is None
    assert "CPU steal took 8%" in contention(0.0, 0.0, 2, 0.08)


def test_the_gate_and_the_runs_share_the_rule():
    from suite.tools import gate
    from suite.tools.gate_settings import Settings

    settings = Settings(scenario=None, out=None)  # only the limit is read
    pair = {"foreign_cores": {"A": 0.01, "B": settings.max_foreign_cores * 2}}
    assert gate.disturbed(pair, settings)
    assert not gate.disturbed({"foreign_cores": {"A": 0.01, "B": None}}, settings)
    cores = os.cpu_count() or 1
    expected = contention(settings.max_foreign_cores * 2, 0.0, cores, None, limit=settings.max_foreign_cores) is not None
    assert gate.disturbed(pair, settings) == expected


def reading(busy: float, own: float, wall: float = 10.0, cpus: int = 4, steal: float = 0.0, load=(0.5, 0.7)):
    host = {"busy_s": busy, "steal_s": steal, "total_s": wall * cpus, "cpus": cpus}
    return {"wall_s": wall, "own_cpu_s": own, "load_avg": list(load), "host": host}


def test_the_run_is_judged_by_its_busiest_host_from_its_ranks_readings():
    # two ranks of 1 thread on host a (4 cores): they used 20 of the 25 busy core-seconds of 10 s: 0.5 cores outside
    quiet = host_load([("a", reading(25.0, 10.0), 1), ("a", reading(25.0, 10.0), 1)])
    assert quiet["contended"] is False and quiet["outside_cores"] == pytest.approx(0.5) and quiet["free_cores"] == 2
    assert quiet["outside_share"] == pytest.approx(0.5 / 4) and quiet["load_avg"] == [0.5, 0.7]
    # host b's ranks claim all 4 cores, and others kept 1.5 busy there
    busy = host_load([("a", reading(25.0, 20.0), 2), ("b", reading(55.0, 40.0), 4)])
    assert busy["contended"] is True and busy["contention"].startswith("b: other processes kept 1.50 cores busy")
    assert [h["host"] for h in busy["hosts"]] == ["a", "b"] and busy["hosts"][0]["contention"] is None
    # without /proc/stat: unknown, not quiet
    unknown = host_load([("a", {"wall_s": 1.0, "own_cpu_s": 1.0, "load_avg": [None, None], "host": None}, 1)])
    assert unknown["contended"] is None and unknown["outside_cores"] is None


def busy_loop() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def stop(process: subprocess.Popen) -> None:
    process.kill()  # by its pid: the loop this test started
    process.wait()


@pytest.mark.skipif(read_cpu_times() is None, reason="no /proc/stat: the host's CPU times are unknown here")
def test_the_meter_reads_the_host_and_counts_a_ranks_children_as_its_own():
    meter = HostLoadMeter()
    meter.start()
    loop = busy_loop()  # a child of this process, as a rank's data-loading worker is of the rank
    try:
        time.sleep(1.5)
    finally:
        stop(loop)
    meter.stop()
    r = meter.as_dict()
    assert r["wall_s"] >= 1.5 and r["host"]["cpus"] >= 1 and r["host"]["total_s"] > 0
    # the loop's CPU time (however much a busy host gave it) is the run's own, and within the host's busy time
    assert r["own_cpu_s"] > 0.05 and r["host"]["busy_s"] >= r["own_cpu_s"] - 0.05


# --- real runs --------------------------------------------------------------------------------------------------------


def outside_cores_now(seconds: float = 2.0) -> float | None:
    """Cores that processes other than this one (and its children) keep busy over the next ``seconds``."""
    meter = HostLoadMeter()
    meter.start()
    time.sleep(seconds)
    meter.stop()
    r = meter.as_dict()
    if r is None or r["host"] is None:
        return None
    return max(0.0, r["host"]["busy_s"] - r["own_cpu_s"]) / r["wall_s"]


def timed_run(tmp_path, name: str, steps: int) -> Record:
    """A small run holding every core of the host (one rank, a thread per core)."""
    cores = os.cpu_count() or 1
    runs = [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}]
    scenario = tiny_scenario(name, runs, train={"steps": steps, "batch_size": 32, "warmup_steps": 1, "threads": cores})
    (tmp_path / name).mkdir()
    code, records = run_scenario(tmp_path / name, scenario)
    assert code == 0, {k: r.get("error") for k, r in records.items()}
    return parse_record(next(iter(records.values())))


@pytest.mark.multiproc
@pytest.mark.quiet
@pytest.mark.skipif(read_cpu_times() is None, reason="no /proc/stat: the host's CPU times are unknown here")
def test_a_run_beside_a_busy_loop_is_marked_contended_and_a_quiet_one_is_not(tmp_path):
    cores = os.cpu_count() or 1
    loop = busy_loop()
    try:
        busy = timed_run(tmp_path, "busy", steps=2)  # its threads wait on the loop's core: seconds a step
    finally:
        stop(loop)
    load = busy.host_load
    assert busy.status == "ok" and load.contended is True and load.free_cores == 0
    assert load.outside_cores > BUSY_SHARE * cores and "cores busy" in load.contention
    assert len(load.load_avg) == 2 and load.cores == cores
    (warning,) = contention_warnings([busy])
    assert warning.startswith("Busy host: 1 of 1 runs were timed while other processes used") and f"{busy.run_id}: " in warning

    before = outside_cores_now()
    if before is None or before > BUSY_SHARE * cores:
        pytest.skip(f"the host is busy with others' work ({before:.2f} cores before the quiet run): quiet is not testable now")
    quiet = timed_run(tmp_path, "quiet", steps=8)
    load = quiet.host_load
    if load.contended:
        after = outside_cores_now()
        if after is None or after > BUSY_SHARE * cores:
            pytest.skip(f"others loaded the host during the quiet run ({after:.2f} cores after it)")
    assert load.contended is False, load
    assert contention_warnings([quiet]) == []
