"""ci/cellular_decisions.py: two kernel sets' runs of a seed aligned decision by decision; a flip is a decision
chosen differently at the same cell, iteration and place."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("cellular_decisions", ROOT / "ci" / "cellular_decisions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(chosen: list[str], tournament: list[int], z: float = 0.5):
    points = [
        SimpleNamespace(
            iteration=it,
            decisions=[
                {"op": "tournament", "side": "g", "slot": 0, "chosen": t, "z": z},
                {"op": "replace", "side": "g", "chosen": ["new0"], "z": [3.0]},
                {"op": "mixture", "chosen": c, "z": None},
            ],
        )
        for it, (c, t) in enumerate(zip(chosen, tournament))
    ]
    part = SimpleNamespace(best_mixture_cell=[0, 0])
    return SimpleNamespace(seed=0, history={"0,0": points}, curve=[], strategy_part=part)


def test_flips_are_counted_where_the_same_decision_differs(report):
    native = _run(["current", "proposal", "current"], [1, 0, 0])
    other = _run(["current", "current", "current"], [1, 0, 1], z=2.0)
    row = report.compare_seed(native, other)
    assert (row["decisions"], row["flipped"]) == (9, 2)
    assert row["first_flip"].startswith("iteration 1, mixture")
    assert row["tournament_flipped"] == "1/3" and row["mixture_flipped"] == "1/3" and row["replace_flipped"] == "0/3"
    assert row["close_calls"] == 3  # the native run's tournaments were within 1 SE
    assert row["es_accepted_native"] == "1/3" and row["best_cell_same"]


def test_identical_runs_have_no_flip(report):
    run = _run(["current", "proposal"], [0, 1])
    row = report.compare_seed(run, run)
    assert row["flipped"] == 0 and row["first_flip"] == "none"
