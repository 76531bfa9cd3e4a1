"""At what scale a verdict holds: the power a run's own spread gives, the ranking over the budget, and who was still
improving at its end (suite.analysis.stats.power, suite.analysis.stats.settling, and how the first page says them)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from suite.analysis import findings
from suite.analysis.findings import verdicts
from suite.analysis.headline import headline_rows
from suite.analysis.report.headline_view import first_page_headline, kernel_line
from suite.analysis.stats.pair_tests import TEST, TESTS
from suite.analysis.stats.power import POWER, detectable_ratio, seeds_needed, undistinguished_power
from suite.analysis.stats.settling import below_p, claims_of, curve_anytime, last_stretch
from suite.analysis.stats.summary import summarise
from suite.analysis.stats.verdicts import compare_all
from suite.records.measured import HostLoad, Machine
from suite.records.results import new_record


def _simulated_power(ratio: float, sd: float, n: int, level: float, reps: int = 4000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(reps):
        a = summarise(np.exp(rng.normal(0.0, sd, n)))
        b = summarise(np.exp(rng.normal(math.log(ratio), sd, n)))
        p = TESTS[TEST].p_value(a, b)
        found += p is not None and p < level
    return found / reps


def test_the_detectable_ratio_is_found_with_the_stated_power_at_that_spread():
    rng = np.random.default_rng(7)
    sd, n, level = 0.2, 3, 0.05 / 10
    a, b = (summarise(np.exp(rng.normal(0, sd, n))) for _ in range(2))
    detectable = detectable_ratio(a, b, level)
    assert detectable is not None and detectable > 1
    # simulate draws with the pair's own spread (its sample SDs) at the detectable ratio: found about POWER of the time
    spread = math.sqrt((np.var(np.log(a.values), ddof=1) + np.var(np.log(b.values), ddof=1)) / 2)
    power = _simulated_power(detectable, spread, n, level)
    # Welch's df varies from draw to draw while the stated figure uses the pair's own: a few points either side
    assert abs(power - POWER) < 0.08, power
    assert _simulated_power(detectable / 1.3, spread, n, level, reps=2000) < POWER - 0.1


def test_the_seeds_needed_reach_the_power_and_one_fewer_does_not():
    a = summarise([100.0, 120.0, 90.0])
    b = summarise([150.0, 130.0, 170.0])
    n = seeds_needed(a, b, 0.05)
    assert n is not None and 2 <= n < 50
    spread = math.sqrt((np.var(np.log(a.values), ddof=1) + np.var(np.log(b.values), ddof=1)) / 2)
    assert _simulated_power(1.5, spread, n, 0.05) >= POWER - 0.04
    if n > 2:
        assert _simulated_power(1.5, spread, n - 1, 0.05) < POWER + 0.02
    wider = summarise([100.0, 200.0, 60.0])
    assert seeds_needed(wider, b, 0.05) > n  # more spread, more seeds


def test_no_spread_no_power_statement():
    one = summarise([100.0])
    assert detectable_ratio(one, summarise([1.0, 2.0])) is None and seeds_needed(one, summarise([1.0, 2.0])) is None
    family = compare_all({"A": summarise([100.0, 104.0, 98.0]), "B": summarise([101.0, 99.0, 103.0])}, True)
    (pair,) = undistinguished_power(family)
    assert pair.detectable is not None and pair.detectable < 1.2 and "detectable" in pair.text()


def _curves(values_by_seed):
    return {seed: [(1000.0 * (i + 1), v) for i, v in enumerate(values)] for seed, values in values_by_seed.items()}


def test_a_consistent_fall_at_the_end_is_still_improving_and_a_flat_end_is_not():
    falling = last_stretch("W", _curves({0: [900, 500, 250], 1: [950, 520, 270], 2: [880, 480, 240]}))
    assert falling.improving and falling.start == 2000 and falling.end == 3000
    assert falling.change.center == pytest.approx(0.5, rel=0.05)
    flat = last_stretch("D", _curves({0: [300, 200, 210], 1: [310, 190, 180], 2: [305, 205, 206]}))
    assert not flat.improving


def test_a_flat_curve_is_called_improving_at_most_alpha_of_the_time():
    rng = np.random.default_rng(3)
    calls = 0
    for _ in range(2000):
        noise = np.exp(rng.normal(0, 0.15, (3, 2)))
        calls += last_stretch("X", _curves({s: [100 * noise[s, 0], 100 * noise[s, 1]] for s in range(3)})).improving
    assert 0.03 < calls / 2000 < 0.07


def test_the_anytime_ranking_says_whether_the_claims_held_over_the_last_half():
    steady = {
        "A": _curves({s: [100 + s, 60 + s, 50 + s, 48 + s] for s in range(3)}),
        "B": _curves({s: [300 + s, 280 + s, 260 + s, 255 + s] for s in range(3)}),
    }
    ranked = curve_anytime(steady)
    assert ranked.positions == [1000, 2000, 3000, 4000] and ranked.held is True and ranked.changes() == []
    assert claims_of(ranked.families[-1]) == {("A", "B")}
    overtaken = {
        "A": _curves({s: [100 + s, 90 + s, 60 + s, 61 + s] for s in range(3)}),
        "B": _curves({s: [300 + s, 280 + 2 * s, 61 + s, 60 + s] for s in range(3)}),
    }
    late = curve_anytime(overtaken)
    assert late.held is False and late.changes() == ["at 2,000: A beat B"]


def test_a_model_learned_when_its_fids_fall_significantly_below_the_reference():
    assert below_p([500, 520, 480], 900) < 0.05
    assert below_p([880, 950, 890], 900) > 0.05
    assert below_p([500], 900) is None


def _record(strategy, seed, curve, procs=2, numerics="aaaa"):
    data = {
        "status": "ok",
        "run_id": f"{strategy}-s{seed}",
        "strategy": strategy,
        "loss": "bce",
        "engine": "mpi",
        "procs": procs,
        "scaling": "strong",
        "seed": seed,
        "train_s": 10.0 + seed,
        "images_per_s": 100.0 + seed,
        "budget_images": 4000,
        "generator_steps": 125,
        "machine": {"numerics": numerics, "cpu_capability": "AVX2"},
        "quality": {
            "features": "classifier:digits",
            "n": 500,
            "fid": curve[-1],
            "ema_fid": curve[-1],
            "ema_n": 500,
            "is_mean": 3.0,
            "pixel_std": 0.3,
        },
        "curve": [{"images": 1000 * (i + 1), "clock_s": 2.0 * (i + 1), "fid": v} for i, v in enumerate(curve)],
    }
    return new_record(data)


def _records():
    falling = [[900, 500, 300, 150], [920, 520, 310, 160], [910, 490, 305, 155]]
    flat = [[300, 195, 200, 193], [310, 205, 198, 207], [305, 200, 196, 199]]
    records = [_record("label_partitioned", s, falling[s]) for s in range(3)]
    records += [_record("conditional", s, flat[s]) for s in range(3)]
    return records


def test_the_first_page_names_the_budget_the_improving_systems_and_the_power():
    records = _records()
    table = headline_rows(records, {})
    found = findings.tested_findings(table, records, {})
    fid = next(f for f in found if f.quantity == findings.END_FID)
    assert fid.scale.improving == ["label_partitioned / bce / mpi"]
    said = verdicts(found, [row.config for row in table])
    # at the end of the budget the still-falling system is better; the flat one got there first: it learns faster,
    # a family of its own
    assert said["label_partitioned / bce / mpi"] == "best end FID†; worst learns faster"
    assert said["conditional / bce / mpi"] == "worst end FID†; best learns faster"
    page = "\n".join(first_page_headline(table, found, records))
    assert "**At what scale these verdicts hold** (4,000 training images per system" in page
    assert "generator steps per GAN: conditional / bce / mpi 125" in page
    # the slope over the last half (2,000-4,000 images) fits a fall to about 0.3 of its start
    assert "still improving at the end" in page and "label_partitioned / bce / mpi 0.3" in page
    assert "power" in next(t.text() for t in fid.scale.trends if t.improving)
    assert "claims involving them hold at this budget only" in page
    assert "| best end FID†; worst learns faster |" in page and "† Holds at this budget only" in page
    assert "bit-identical only on the same CPU kernel set (here AVX2 (numerics aaaa))" in page


def test_records_of_two_kernel_sets_are_named_as_such():
    records = _records()
    records[0] = replace(records[0], machine=Machine(numerics="bbbb", cpu_capability="AVX512"))
    line = kernel_line(records)
    assert line.startswith("These runs come from 2 CPU kernel sets") and "AVX512 (numerics bbbb)" in line
    assert kernel_line([replace(r, machine=None) for r in records]) == ""
    # two capabilities that happened to give one digest are still two kernel sets
    same_digest = [replace(r, machine=Machine(numerics="aaaa", cpu_capability="DEFAULT")) for r in records[:2]] + records[2:]
    line = kernel_line(same_digest)
    assert line.startswith("These runs come from 2 CPU kernel sets") and "DEFAULT (numerics aaaa)" in line


def test_power_is_stated_for_every_pair_not_distinguishable():
    records = _records()
    spread = {0: 0.6, 1: 1.8, 2: 1.0}  # end FIDs about the label-partitioned ones', spread too wide to decide
    for r in records:
        if r.strategy == "conditional":
            for point in r.curve:
                point.fid = 155.0 * spread[r.seed]
            r.quality.fid = r.quality.ema_fid = r.curve[-1].fid
    table = headline_rows(records, {})
    found = findings.tested_findings(table, records, {})
    fid = next(f for f in found if f.quantity == findings.END_FID)
    assert not fid.family.claims and not fid.family.equivalences and len(fid.power) == 1
    page = "\n".join(first_page_headline(table, found, records))
    assert "smallest ratio this run could have detected at 80 % power" in page


def test_a_timing_verdict_of_runs_on_a_busy_host_is_flagged():
    records = []
    for strategy, times in (("label_partitioned", [10.0, 10.5, 9.8]), ("conditional", [20.0, 21.0, 19.5])):
        for procs, factor in ((1, 2.0), (2, 1.0)):
            for seed, t in enumerate(times):
                r = _record(strategy, seed, [300, 200, 150, 140], procs=procs)
                train_s = t * factor * (1.0 if strategy == "label_partitioned" else 0.8 if procs == 1 else 1.0)
                records.append(replace(r, train_s=train_s, run_id=f"{r.run_id}-p{procs}"))
    busy = next(r for r in records if r.strategy == "label_partitioned" and r.procs == 2)
    busy.host_load = HostLoad(contended=True)
    table = headline_rows(records, {})
    found = findings.tested_findings(table, records, {})
    speedup = next(f for f in found if f.quantity == "speedup")
    assert speedup.family.claims  # label-partitioned scales 2x, the DC-CGAN 1.6x: found different
    page = "\n".join(first_page_headline(table, found, records))
    row = next(line for line in page.splitlines() if line.startswith("| label_partitioned"))
    assert "best speedup‡" in row
    assert "‡ Timed on a busy host: 1 of these runs were contended" in page
    assert "ran on a busy host (contended)" in speedup.text
    quiet = [replace(r, host_load=HostLoad(contended=False)) for r in records]
    page = "\n".join(
        first_page_headline(headline_rows(quiet, {}), findings.tested_findings(headline_rows(quiet, {}), quiet, {}), quiet)
    )
    assert "‡" not in page


def test_the_budget_is_told_as_numbers_with_its_unit_and_as_words():
    """The scale's budget as the findings table writes it (issue 63): images where every run had an images budget,
    seconds where every run had a time budget, the smallest and largest where they differ, none without an equal one."""
    from types import SimpleNamespace

    from suite.analysis.stats.settling import BudgetAmount, budget_amount, budget_text

    base = _record("a", 0, [100.0])

    def rows(*changes):
        runs = [replace(base, **change) for change in changes]
        return [SimpleNamespace(config="a", main=runs, base=[])]

    assert budget_amount(rows({}, {"budget_images": 8000})) == BudgetAmount(4000.0, 8000.0, "images")
    assert budget_text(rows({}, {"budget_images": 8000})).startswith("4,000-8,000 training images per system;")
    timed = rows({"budget_images": None, "budget_s": 60.0}, {"budget_images": None, "budget_s": 60.0})
    assert budget_amount(timed) == BudgetAmount(60.0, 60.0, "seconds")
    assert budget_text(timed).startswith("60 s of training per run;")
    mixed = rows({}, {"budget_images": None})  # one run on its own steps: no equal budget to state as a number
    assert budget_amount(mixed) is None and budget_text(mixed).startswith("each run's own steps or epochs")
