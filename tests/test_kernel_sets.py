"""ci/kernel_sets.py: the same scenario on two CPU kernel sets, its spreads and claims compared."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from suite.records.record import Record
from suite.records.results import new_record

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def kernel_sets():
    spec = importlib.util.spec_from_file_location("kernel_sets", ROOT / "ci" / "kernel_sets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _records(fids: dict[str, list[float]], numerics: str) -> list[Record]:
    return [
        new_record(
            {
                "status": "ok",
                "run_id": f"{strategy}-s{seed}",
                "strategy": strategy,
                "loss": "bce",
                "engine": "mpi",
                "procs": 2,
                "scaling": "strong",
                "seed": seed,
                "train_s": 10.0,
                "machine": {"cpu_capability": numerics.upper(), "numerics": numerics},
                "quality": {
                    "fid": fid,
                    "ema_fid": fid,
                    "ema_n": 500,
                    "features": "classifier:digits",
                    "n": 500,
                    "is_mean": 3.0,
                    "pixel_std": 0.3,
                },
                # the end-of-budget FID is the value compared (the final model's, the curve's last point)
                "curve": [{"images": 1000 * (i + 1), "clock_s": 1.0 + i, "fid": fid * (3 if i == 0 else 1)} for i in range(4)],
            }
        )
        for strategy, values in fids.items()
        for seed, fid in enumerate(values)
    ]


def test_spreads_and_claims_across_kernel_sets(kernel_sets):
    native = _records({"conditional": [60, 66, 63], "data_parallel": [300, 330, 315]}, "avx512")
    other = _records({"conditional": [62, 65, 61], "data_parallel": [310, 320, 318]}, "avx2")
    table, claims = kernel_sets.compare(native, other)
    row = table.set_index("system").loc["conditional / bce / mpi"]
    diffs = [math.log(62 / 60), math.log(65 / 66), math.log(61 / 63)]
    mean = sum(diffs) / 3
    assert row["kernel_sd"] == pytest.approx(math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2) / math.sqrt(2))
    assert row["mean_shift"] == pytest.approx(mean)
    assert claims["native"] == claims["other"] == [("conditional / bce / mpi", "data_parallel / bce / mpi")]
    assert claims["contradictions"] == []
    flipped = _records({"conditional": [300, 330, 315], "data_parallel": [60, 66, 63]}, "avx2")
    _, claims = kernel_sets.compare(native, flipped)
    assert claims["contradictions"] == [("conditional / bce / mpi", "data_parallel / bce / mpi")]


def test_the_kernel_set_scenario_is_the_main_jobs_first_block_at_p2():
    """scenarios/kernel-sets.yaml's runs are the main job's P = 2 runs of its first block, each with the main job's
    settings (learning rate, EMA generator, curve, budget) apart from the scenario's name and seed policy: the native
    side of the comparison is the committed main job, so the other side must train what it trained."""
    from suite.config.expansion import expand, load_scenario

    def settings(run):
        data = run.settings()
        return {**data, "scenario": None, "train": {**data["train"], "seeds": None}}

    scenario = load_scenario(ROOT / "scenarios" / "digits.yaml")
    main_job = {run.run_id: run for run in expand(scenario)}
    initial = scenario.train.seeds.initial
    first_block = {rid for rid, run in main_job.items() if run.procs == 2 and run.train.seed < initial}
    kernel_sets = expand(load_scenario(ROOT / "scenarios" / "kernel-sets.yaml"))
    assert {run.run_id for run in kernel_sets} == first_block
    for run in kernel_sets:
        assert settings(run) == settings(main_job[run.run_id]), run.run_id
