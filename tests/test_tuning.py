"""``suite tune`` on synthetic result folders: known FIDs give a known ranking, choice and overrides."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from suite.analysis.tuning import tune
from suite.cli import main
from suite.config.expansion import expand, load_scenario
from suite.records.results import new_record, write_record

RULER = {"features": "classifier:digits", "ruler_sha256": "ab" * 32, "n": 500, "classes": list(range(10)), "num_classes": 10}
CGAN = {"strategy": "conditional", "loss": "bce", "engine": "horovod"}
WCGAN = {"strategy": "label_partitioned", "loss": "wgan-gp", "engine": "mpi"}


def run(system, sweep, order, seed, fid=None, status="ok", procs=2, label=None, ruler=RULER, **extra):
    """A record of one tuning run: ``fid`` None with status ok is a run that could not be scored."""
    stem = f"{system['strategy']}-{system['loss']}-{system['engine']}"
    swept = "-".join(f"{k.rpartition('.')[2]}{v}" for k, v in sweep.items())
    record = {
        "run_id": f"{label or stem}-{swept}-p{procs}-s{seed}-r0",
        "status": status,
        "scenario": "tuning",
        **system,
        "procs": procs,
        "scaling": "strong",
        "repeat": 0,
        "label": label,
        "seed": seed,
        "sweep": sweep or None,
        "sweep_order": order if sweep else None,
        **extra,
    }
    if status == "ok":
        record["quality"] = {**ruler, "fid": fid, "not_scorable": None if fid is not None else "samples are constant"}
    return record


def write(tmp_path, records):
    root = tmp_path / "results"
    for record in records:
        write_record(root / record["run_id"], new_record(record))
    return root


def typed(records):
    """The records' data as the :class:`~suite.records.record.Record` objects tune takes."""
    return [new_record(r) for r in records]


LRS = [0.0001, 0.0003, 0.001]


@pytest.fixture
def results(tmp_path):
    records = []
    # the DC-CGAN: lr 3e-4 is best on average (mean 90), though 1e-3 wins seed 10
    for order, (lr, fids) in enumerate(zip(LRS, [(200.0, 180.0), (100.0, 80.0), (70.0, 130.0)])):
        records += [run(CGAN, {"train.lr": lr}, order, seed, fid) for seed, fid in zip((10, 11), fids)]
    # the W-CGAN: lr x n_critic; the best mean (lr 1e-3, n_critic 5) has a diverged seed, so it ranks below every
    # fully scored setting; lr 1e-4 / n_critic 1 failed on one seed and could not be scored on the other
    grid = [(lr, n) for lr in (0.0001, 0.001) for n in (5, 1)]
    scores = {
        (0.0001, 5): (300.0, 320.0),
        (0.0001, 1): (None, "failed"),
        (0.001, 5): (40.0, "diverged"),
        (0.001, 1): (150.0, 170.0),
    }
    for order, (lr, n) in enumerate(grid):
        for seed, outcome in zip((10, 11), scores[(lr, n)]):
            sweep = {"wgan_gp.lr": lr, "wgan_gp.n_critic": n}
            if outcome == "diverged":
                records.append(
                    run(WCGAN, sweep, order, seed, status="diverged", reason="diverged at step 12 on rank 1: critic loss inf")
                )
            elif outcome == "failed":
                records.append(run(WCGAN, sweep, order, seed, status="failed", error="rank 0 exited with code 1: MemoryError"))
            else:
                records.append(run(WCGAN, sweep, order, seed, outcome))
    return write(tmp_path, records)


def test_each_system_ranks_its_settings_by_mean_fid_and_failures_count_as_worst(results, tmp_path, capsys):
    assert main(["tune", str(results)]) == 0
    out = results / "tuning"
    assert "chosen overrides" in capsys.readouterr().out
    table = pd.read_csv(out / "tuning.csv")
    cgan = table[table["system"] == "conditional / bce / horovod"]
    assert list(cgan["train.lr"]) == [0.0003, 0.001, 0.0001] and list(cgan["rank"]) == [1, 2, 3]
    assert list(cgan["mean_fid"]) == [90.0, 100.0, 190.0] and list(cgan["fid_s10"]) == [100.0, 70.0, 200.0]
    assert list(cgan["chosen"]) == [True, False, False]
    wcgan = table[table["system"] == "label_partitioned / wgan-gp / mpi"]
    assert list(zip(wcgan["wgan_gp.lr"], wcgan["wgan_gp.n_critic"])) == [(0.001, 1), (0.0001, 5), (0.001, 5), (0.0001, 1)]
    assert list(wcgan["worst_runs"]) == [0, 0, 1, 2]
    assert "diverged at step 12 on rank 1" in wcgan["problems"].iloc[2]
    problems = wcgan["problems"].iloc[3]
    assert (
        "seed 10" in problems and "no FID: samples are constant" in problems and "failed: rank 0 exited with code 1" in problems
    )

    chosen = yaml.safe_load((out / "chosen.yaml").read_text())["systems"]
    assert [(c["system"], c["overrides"]) for c in chosen] == [
        ("conditional / bce / horovod", {"train": {"lr": 0.0003}}),
        ("label_partitioned / wgan-gp / mpi", {"wgan_gp": {"lr": 0.001, "n_critic": 1}}),
    ]
    assert chosen[0]["mean_fid"] == 90.0 and chosen[0]["seeds"] == [10, 11] and chosen[1]["procs"] == 2
    md = (out / "tuning.md").read_text()
    assert "# Tuning: tuning" in md and "tuning seeds (10, 11)" in md
    assert "| label_partitioned / wgan-gp / mpi | 2 | lr=0.001, n_critic=1 | 160 |" in md
    assert "classifier:digits abababababab, n=500" in md


def test_ties_go_to_the_setting_listed_first_and_are_stated(tmp_path):
    records = [run(CGAN, {"train.lr": lr}, order, seed, 50.0) for order, lr in enumerate([0.001, 0.0001]) for seed in (10, 11)]
    (system,) = tune(typed(records))
    assert system.chosen.values == {"train.lr": 0.001} and system.tied
    reordered = [dict(r, sweep_order=1 - r["sweep_order"]) for r in records]  # 0.0001 listed first
    assert tune(typed(reordered))[0].chosen.values == {"train.lr": 0.0001}
    root = write(tmp_path, records)
    assert main(["tune", str(root), "--out", str(tmp_path / "t")]) == 0
    assert "tied with the runner-up (mean FID 50): the first listed is chosen" in (tmp_path / "t" / "tuning.md").read_text()


def test_a_missing_seed_counts_as_worst_and_systems_differ_by_label_and_procs():
    records = [run(CGAN, {"train.lr": 0.001}, 0, 10, 60.0), run(CGAN, {"train.lr": 0.0001}, 1, 10, 80.0)]
    records.append(run(CGAN, {"train.lr": 0.0001}, 1, 11, 70.0))  # 0.001 has no seed-11 run
    records.append(run(CGAN, {"train.lr": 0.001}, 0, 10, 10.0, label="other"))
    records.append(run(CGAN, {"train.lr": 0.001}, 0, 10, 10.0, procs=1))
    systems = {(s.name, s.procs): s for s in tune(typed(records))}
    assert set(systems) == {
        ("conditional / bce / horovod", 2),
        ("conditional / bce / horovod [other]", 2),
        ("conditional / bce / horovod", 1),
    }
    main_system = systems[("conditional / bce / horovod", 2)]
    assert main_system.chosen.values == {"train.lr": 0.0001} and main_system.chosen.mean == 75.0
    assert main_system.settings[1].problems == ["seed 11: no run"]


def test_an_unswept_system_has_one_setting_and_empty_overrides(tmp_path):
    root = write(tmp_path, [run(CGAN, {}, 0, seed, 90.0) for seed in (10, 11)])
    assert main(["tune", str(root)]) == 0
    chosen = yaml.safe_load((root / "tuning" / "chosen.yaml").read_text())["systems"]
    assert chosen[0]["overrides"] == {}
    assert "one setting: nothing to choose" in (root / "tuning" / "tuning.md").read_text()


def test_bad_input_is_one_line(tmp_path, capsys):
    other = {**RULER, "features": "inception", "ruler_sha256": "cd" * 32}
    mixed = [run(CGAN, {"train.lr": 0.001}, 0, 10, 60.0), run(CGAN, {"train.lr": 0.0001}, 1, 10, 80.0, ruler=other)]
    assert main(["tune", str(write(tmp_path / "a", mixed))]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: conditional / bce / horovod at P=2: its runs were scored under different rulers")
    assert error.count("\n") == 1
    unscored = [run(CGAN, {"train.lr": 0.001}, 0, 10, status="failed", error="boom")]
    assert main(["tune", str(write(tmp_path / "b", unscored))]) == 2
    assert "no run has a final FID to rank by" in capsys.readouterr().err
    assert main(["tune", str(tmp_path / "missing")]) == 2
    assert "no such results folder" in capsys.readouterr().err


REPO = Path(__file__).resolve().parent.parent


def test_the_tuning_scenario_searches_the_main_jobs_systems_alike_on_other_seeds():
    main_job, tuning = (yaml.safe_load((REPO / "scenarios" / name).read_text()) for name in ("digits.yaml", "tuning.yaml"))
    for section in ("dataset", "model"):
        assert tuning[section] == main_job[section], section
    for name in ("batch_size", "threads", "betas", "warmup_steps", "ema_half_life", "budget_images"):
        assert tuning["train"][name] == main_job["train"][name], name
    main_seeds = main_job["train"]["seeds"]  # a list, or sequential seeds 0 to max - 1
    assert not set(tuning["train"]["seeds"]) & set(range(main_seeds["max"]) if isinstance(main_seeds, dict) else main_seeds)
    assert {k: tuning["metrics"][k] for k in ("features", "samples", "ema_samples")} == {
        k: main_job["metrics"][k] for k in ("features", "samples", "ema_samples")
    }  # ranked by the same estimand, the end FID of the EMA generator
    systems = {(r["strategy"], r.get("loss", "bce"), r["engine"]) for r in main_job["runs"]}
    assert {(r["strategy"], r.get("loss", "bce"), r["engine"]) for r in tuning["runs"]} == systems
    runs = expand(load_scenario(REPO / "scenarios" / "tuning.yaml"))
    assert {r.procs for r in runs} == {2}
    (budget,) = {r.train.budget_images for r in runs}
    if budget != main_job["train"]["budget_images"]:  # tuned at another budget than compared at: said where it shows
        limits = (REPO / "docs" / "known-limits.md").read_text()
        assert f"{budget:,} images" in limits and f"{main_job['train']['budget_images']:,}" in limits
    lrs = {(r.strategy, r.loss): set() for r in runs}
    for r in runs:
        lrs[(r.strategy, r.loss)].add(r.section("wgan_gp").lr if r.loss == "wgan-gp" else r.train.lr)
    # the same grid for every system: as many settings each, three seeds per setting
    assert set(map(frozenset, lrs.values())) == {frozenset({0.0003, 0.001, 0.003, 0.01, 0.03})}
    assert {r.section("wgan_gp").n_critic for r in runs if r.loss == "wgan-gp"} == {1}
    assert len(tuning["train"]["seeds"]) == 3
    assert len(runs) == 5 * 5 * 3  # what its time estimate counts


@pytest.mark.multiproc
def test_a_real_sweep_records_its_values_and_is_tuned(small_sweep):
    # the shared small sweep's entry (tests/conftest.py: small_sweep_scenario): label-partitioned W-CGANs at P = 1, two
    # learning rates, scored with the classifier; tuned and reported in a results folder of their own
    records = {k: v for k, v in small_sweep.records.items() if k.startswith("label_partitioned-wgan-gp-")}
    assert small_sweep.code == 0 and set(records) == {
        "label_partitioned-wgan-gp-mpi-lr0.0001-p1-r0",
        "label_partitioned-wgan-gp-mpi-lr0.001-p1-r0",
    }
    results = small_sweep.subset("tuning", sorted(records))
    for run_id, record in records.items():
        lr = record["sweep"]["wgan_gp.lr"]
        assert record["status"] == "ok" and run_id.endswith(f"-lr{lr}-p1-r0")
        assert json.loads((results / run_id / "run.json").read_text())["sections"]["wgan_gp"]["lr"] == lr
    assert main(["tune", str(results)]) == 0
    chosen = yaml.safe_load((results / "tuning" / "chosen.yaml").read_text())["systems"]
    assert len(chosen) == 1 and set(chosen[0]["overrides"]["wgan_gp"]) == {"lr"}
    assert main(["report", str(results)]) == 0
    assert set(pd.read_csv(results / "report" / "runs.csv")["sweep"]) == {"lr=0.0001", "lr=0.001"}


def test_the_main_job_trains_each_system_with_the_settings_its_committed_tuning_chose():
    chosen = yaml.safe_load((REPO / "reports" / "tuning" / "chosen.yaml").read_text())["systems"]
    main_job = yaml.safe_load((REPO / "scenarios" / "digits.yaml").read_text())
    tuning = yaml.safe_load((REPO / "scenarios" / "tuning.yaml").read_text())
    tuned = {(c["strategy"], c["loss"], c["engine"]): c["overrides"] for c in chosen}
    assert len(tuned) == len(chosen) == 5
    # what the tuning held fixed for a system in its entry (the W-CGAN's n_critic) goes with it
    fixed = {
        (e["strategy"], e.get("loss", "bce"), e["engine"]): {s: e[s] for s in ("train", "wgan_gp", "cellular") if s in e}
        for e in tuning["runs"]
    }
    for entry in main_job["runs"]:
        system = (entry["strategy"], entry.get("loss", "bce"), entry["engine"])
        own = {section: dict(entry[section]) for section in ("train", "wgan_gp", "cellular") if section in entry}
        # which seeds an entry trains (the timing sweep's) is not a setting, nor whether it keeps an EMA generator to score
        # (keeping one leaves the trained model bit-identical: tests/test_ema.py)
        for measured in ("seeds", "ema_half_life"):
            own.get("train", {}).pop(measured, None)
        expected = {s: {**fixed[system].get(s, {}), **tuned[system].get(s, {})} for s in {*fixed[system], *tuned[system]}}
        assert own == expected, system  # its tuned settings, what its tuning held fixed, and nothing else of its own
    largest = {}
    for entry in main_job["runs"]:
        system = (entry["strategy"], entry.get("loss", "bce"), entry["engine"])
        largest[system] = max(largest.get(system, 0), *entry["procs"])
    for entry in main_job["runs"]:  # the entries the quality verdicts compare (the largest P) keep the EMA generator
        system = (entry["strategy"], entry.get("loss", "bce"), entry["engine"])
        if largest[system] in entry["procs"]:
            assert "ema_half_life" not in entry.get("train", {}), system
    for section in ("train", "wgan_gp"):  # no system keeps a scenario-wide setting that the search tuned for others
        assert not {"lr", "n_critic"} & set(main_job.get(section) or {}), section


def test_a_best_setting_at_the_grids_edge_is_said_and_unequal_grids_are_named(tmp_path):
    from suite.analysis.tuning import balance, tune, tuning_markdown

    def run(strategy, lr, seed, fid):
        return {
            "status": "ok",
            "run_id": f"{strategy}-lr{lr}-s{seed}",
            "scenario": "tuning",
            "strategy": strategy,
            "loss": "bce",
            "engine": "mpi",
            "procs": 2,
            "scaling": "strong",
            "seed": seed,
            "sweep": {"train.lr": lr},
            "sweep_order": [0.0001, 0.001, 0.01].index(lr),
            "quality": {"fid": fid, "features": "classifier:digits", "n": 500},
        }

    records = [run("conditional", lr, s, fid) for lr, fid in ((0.0001, 90), (0.001, 60), (0.01, 40)) for s in (10, 11, 12)]
    records += [run("data_parallel", lr, s, fid) for lr, fid in ((0.0001, 90), (0.001, 30)) for s in (10, 11)]
    systems = tune(typed(records))
    by_name = {s.name: s for s in systems}
    assert by_name["conditional / bce / mpi"].edges() == ["train.lr: the largest swept, 0.01"]
    assert balance(systems) == [
        "systems got different numbers of settings: conditional / bce / mpi 3, data_parallel / bce / mpi 2",
        "systems got different numbers of seeds: conditional / bce / mpi 3, data_parallel / bce / mpi 2",
    ]
    text = "\n".join(tuning_markdown(systems, "results", "tuning", len(records)))
    assert "**At the edge**" in text and "conditional / bce / mpi: train.lr: the largest swept, 0.01" in text
    interior = [run("conditional", lr, s, fid) for lr, fid in ((0.0001, 90), (0.001, 30), (0.01, 40)) for s in (10, 11, 12)]
    (system,) = tune(typed(interior))
    assert system.edges() == [] and "**Bracketed**" in "\n".join(tuning_markdown([system], "r", "tuning", 9))


def test_the_committed_tuning_is_what_the_committed_scenario_makes():
    """reports/tuning comes from scenarios/tuning.yaml with the committed command: its runs, grid and seeds."""
    runs = expand(load_scenario(REPO / "scenarios" / "tuning.yaml"))
    text = (REPO / "reports" / "tuning" / "tuning.md").read_text()
    assert f"({len(runs)} runs)" in text
    seeds = sorted({r.train.seed for r in runs})
    assert f"over the tuning seeds ({', '.join(map(str, seeds))})" in text
    table = pd.read_csv(REPO / "reports" / "tuning" / "tuning.csv")
    assert len(table) == len({(r.strategy, r.loss, json.dumps(r.sweep)) for r in runs})  # one row per system and setting
    grid = {r.section("wgan_gp").lr if r.loss == "wgan-gp" else r.train.lr for r in runs}
    assert f"every system got {len(grid)} settings and {len(seeds)} seeds per setting" in text
