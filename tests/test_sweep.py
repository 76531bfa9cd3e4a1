"""Sweeps and per-entry sections of a run entry: expansion, the one-line errors, and what a run records."""

import pytest
import yaml

from suite.config.expansion import expand, parse_scenario
from suite.config.scenario import Run, ScenarioError
from suite.config.sweep import overrides_of, sweep_text
from suite.records.codec import check_record
from suite.records.record import run_identity
from suite.records.results import new_record, records_frame, write_record

WCGAN = {"strategy": "label_partitioned", "engine": "mpi", "loss": "wgan-gp", "procs": [2]}
CGAN = {"strategy": "conditional", "engine": "horovod", "procs": [2]}
CELLULAR = {"strategy": "cellular", "engine": "mpi", "grid": [1, 2], "procs": [2]}


def scenario(*runs, **sections):
    return {"name": "t", "train": {"seeds": [10, 11], "batch_size": 32}, **sections, "runs": list(runs)}


def test_a_sweep_is_the_cartesian_product_in_the_order_listed_and_every_run_records_it():
    wcgan = {**WCGAN, "sweep": {"wgan_gp.lr": [0.0001, 0.001], "wgan_gp.n_critic": [5, 1]}}
    runs = expand(parse_scenario(scenario(wcgan, {**CGAN, "sweep": {"train.lr": [0.0003]}})))
    first_seed = [r for r in runs if r.train.seed == 10]
    assert [r.run_id for r in first_seed] == [
        "label_partitioned-wgan-gp-mpi-lr0.0001-n_critic5-p2-s10-r0",
        "label_partitioned-wgan-gp-mpi-lr0.0001-n_critic1-p2-s10-r0",
        "label_partitioned-wgan-gp-mpi-lr0.001-n_critic5-p2-s10-r0",
        "label_partitioned-wgan-gp-mpi-lr0.001-n_critic1-p2-s10-r0",
        "conditional-bce-horovod-lr0.0003-p2-s10-r0",
    ]
    assert len(runs) == 10 and [r.train.seed for r in runs[5:]] == [11] * 5  # every setting on every seed
    third = first_seed[2]
    wgan_gp = third.section("wgan_gp")
    assert (wgan_gp.lr, wgan_gp.n_critic, wgan_gp.gp_weight) == (0.001, 5, 10.0)  # the rest: the scenario's
    assert third.sweep == {"wgan_gp.lr": 0.001, "wgan_gp.n_critic": 5} and third.sweep_order == 2
    assert first_seed[4].train.lr == 0.0003 and first_seed[4].section("wgan_gp").lr == 0.0001
    assert Run.from_dict(third.to_dict()) == third  # run.json keeps it
    identity = run_identity(third)
    assert identity["sweep"] == {"wgan_gp.lr": 0.001, "wgan_gp.n_critic": 5} and identity["sweep_order"] == 2
    plain = expand(parse_scenario(scenario(CGAN)))[0]
    assert plain.sweep is None and run_identity(plain)["sweep"] is None and plain.run_id == "conditional-bce-horovod-p2-s10-r0"


def test_a_label_and_integers_for_a_float_field():
    runs = expand(parse_scenario(scenario({**CGAN, "label": "cgan", "sweep": {"train.lr": [1, 0.5]}})))
    assert [r.run_id for r in runs[:2]] == ["cgan-lr1.0-p2-s10-r0", "cgan-lr0.5-p2-s10-r0"]
    assert runs[0].sweep == {"train.lr": 1.0} and runs[0].label == "cgan"


def test_an_entry_overrides_its_loss_and_strategy_sections_field_by_field():
    data = scenario(
        {**WCGAN, "label": "tuned", "wgan_gp": {"lr": 0.001, "n_critic": 1}},
        {**CELLULAR, "cellular": {"iterations": 7}},
        WCGAN,
        wgan_gp={"gp_weight": 5},
        cellular={"iterations": 3, "population": 2},
    )
    own, cell, default = expand(parse_scenario(data))[:3]
    wgan_gp = own.section("wgan_gp")
    assert (wgan_gp.lr, wgan_gp.n_critic, wgan_gp.gp_weight) == (0.001, 1, 5.0)
    assert (cell.section("cellular").iterations, cell.section("cellular").population) == (7, 2)
    assert (default.section("wgan_gp").lr, default.section("wgan_gp").n_critic) == (0.0001, 5)


def test_swept_values_become_the_overrides_to_paste():
    assert overrides_of({"wgan_gp.lr": 0.001, "wgan_gp.n_critic": 1, "train.epochs": 3}) == {
        "wgan_gp": {"lr": 0.001, "n_critic": 1},
        "train": {"epochs": 3},
    }
    assert sweep_text({"train.lr": 0.001, "train.betas": [0.5, 0.9]}) == "lr=0.001, betas=0.5,0.9"
    assert sweep_text({"train.lr": 0.001, "wgan_gp.lr": 0.01}) == "train.lr=0.001, wgan_gp.lr=0.01"  # shared names in full
    assert sweep_text(None) == ""


def _with_sweep(entry, sweep, **own):
    return scenario({**entry, "sweep": sweep, **own})


@pytest.mark.parametrize(
    "data, message",
    [
        (_with_sweep(CGAN, {"train.lr": [0.001, -1]}), r"runs\[0\].sweep.train.lr\[1\]: must be positive, got -1$"),
        (_with_sweep(CGAN, {"train.lr": [0.001, "fast"]}), r"runs\[0\].sweep.train.lr\[1\]: expected a number, got 'fast'$"),
        (_with_sweep(CGAN, {"train.lr": ["1e-4"]}), r"runs\[0\].sweep.train.lr\[0\]: expected a number, got '1e-4'$"),
        (_with_sweep(CGAN, {"train.betas": [[0.5, 0.9], [0.5]]}), r"runs\[0\].sweep.train.betas\[1\]: expected two numbers"),
        (_with_sweep(CGAN, {"train.epochs": [1, 0]}), r"runs\[0\].sweep.train.epochs\[1\]: must be at least 1, got 0"),
        (_with_sweep(WCGAN, {"wgan_gp.n_critic": [1, 0]}), r"runs\[0\].sweep.wgan_gp.n_critic\[1\]: must be at least 1, got 0"),
        (_with_sweep(CGAN, {"train.lr": []}), r"runs\[0\].sweep.train.lr: is empty: give the values to try$"),
        (_with_sweep(CGAN, {}), r"runs\[0\].sweep: is empty"),
        (_with_sweep(CGAN, {"train.lr": 0.001}), r"runs\[0\].sweep.train.lr: expected a list of values to try, got 0.001"),
        (_with_sweep(CGAN, {"train.lr": [0.1, 0.1]}), r"runs\[0\].sweep.train.lr: values repeat: \[0.1\]"),
        (_with_sweep(CGAN, {"train.lrate": [0.1]}), r"runs\[0\].sweep.train.lrate: unknown field; train has epochs, steps"),
        (_with_sweep(CGAN, {"procs": [1, 2]}), r"runs\[0\].sweep.procs: not sweepable: a sweep varies fields of train, wgan_gp"),
        (_with_sweep(CGAN, {"model.dropout": [0.1]}), r"runs\[0\].sweep.model.dropout: not sweepable"),
        (_with_sweep(CGAN, {"train.seeds": [[1], [2]]}), r"runs\[0\].sweep.train.seeds: not sweepable: seeds are an axis"),
        (_with_sweep(CGAN, {"train.lr": [0.1]}, train={"lr": 0.2}), r"runs\[0\].sweep.train.lr: also set in runs\[0\].train"),
        # a section the entry's loss or strategy does not read (registry traits), and the optimizer a loss uses
        (
            _with_sweep(CGAN, {"wgan_gp.lr": [0.1]}),
            r"runs\[0\].sweep.wgan_gp.lr: a conditional entry with loss bce does not read wgan_gp",
        ),
        (_with_sweep(CGAN, {"cellular.population": [1]}), r"runs\[0\].sweep.cellular.population: .* does not read cellular"),
        (
            _with_sweep(WCGAN, {"train.lr": [0.1]}),
            r"runs\[0\].sweep.train.lr: the wgan-gp loss takes its Adam lr and betas from wgan_gp",
        ),
        (
            scenario({**WCGAN, "train": {"lr": 0.1}}),
            r"runs\[0\].train.lr: the wgan-gp loss takes its Adam lr and betas from wgan_gp",
        ),
        (
            scenario({**CGAN, "wgan_gp": {"n_critic": 1}}),
            r"runs\[0\].wgan_gp: a conditional entry with loss bce does not read wgan_gp",
        ),
        (scenario({**WCGAN, "wgan_gp": {"lr": -1}}), r"runs\[0\].wgan_gp.lr: must be positive"),
        (scenario({**WCGAN, "wgan_gp": {"n_crit": 1}}), r"runs\[0\].wgan_gp.n_crit: unknown field"),
        # a rule across fields that only a combination breaks names the combination
        (
            _with_sweep({**CGAN, "procs": [4]}, {"train.batch_size": [32, 30]}),
            r"runs\[0\].procs: train.batch_size 30 cannot be split evenly over 4 .*\(with runs\[0\].sweep's batch_size=30\)$",
        ),
    ],
)
def test_bad_sweeps_and_sections_are_one_line_errors_naming_the_field(data, message):
    with pytest.raises(ScenarioError, match=message) as error:
        parse_scenario(yaml.safe_load(yaml.safe_dump(data)), source="tuning.yaml")
    assert str(error.value).startswith("tuning.yaml: runs[0]") and "\n" not in str(error.value)


def test_records_carry_the_sweep_and_the_runs_table_shows_it(tmp_path):
    run = expand(parse_scenario(scenario({**WCGAN, "sweep": {"wgan_gp.lr": [0.001], "wgan_gp.n_critic": [1]}})))[0]
    record = {**run_identity(run), "status": "ok"}
    write_record(tmp_path / run.run_id, new_record(record))
    check_record({"schema": 4, **record})  # the fields are the record schema's
    frame = records_frame([record])
    assert frame.loc[0, "sweep"] == "lr=0.001, n_critic=1"
    assert records_frame([{**record, "sweep": None}]).loc[0, "sweep"] is None


def test_each_loss_trains_with_the_optimizer_settings_its_registry_entry_names():
    from suite.train.gan_plan import optimizer_settings

    data = scenario({**WCGAN, "wgan_gp": {"lr": 0.002}}, {**CGAN, "train": {"lr": 0.0005}}, train={"betas": [0.4, 0.99]})
    wcgan, cgan = expand(parse_scenario(data))[:2]
    assert optimizer_settings(wcgan) == (0.002, (0.0, 0.9))
    assert optimizer_settings(cgan) == (0.0005, (0.4, 0.99))
