"""Scenario validation names the field; expansion produces the runs a user expects."""

from pathlib import Path

import pytest
import yaml

from suite.config.expansion import expand, load_scenario, parse_scenario
from suite.config.scenario import Run, ScenarioError
from suite.records.record import run_identity

REPO = Path(__file__).resolve().parent.parent
BASE = {"name": "t", "runs": [{"strategy": "data_parallel", "engine": "horovod", "procs": [1, 2]}]}


def with_(**changes):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    for dotted, value in changes.items():
        target = data
        *path, last = dotted.split("__")
        for key in path:
            target = target.setdefault(key, {}) if not key.isdigit() else target[int(key)]
        target[last] = value
    return data


@pytest.mark.parametrize("path", sorted((REPO / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path):
    runs = expand(load_scenario(path))
    assert runs and len({r.run_id for r in runs}) == len(runs)


def test_the_gpu_main_job_trains_as_the_main_job_does():
    # digits-gpu.yaml copies digits.yaml's settings (the scenario format has no include): keep the copy true
    main, gpu = (yaml.safe_load((REPO / "scenarios" / name).read_text()) for name in ("digits.yaml", "digits-gpu.yaml"))
    for section in ("dataset", "model", "wgan_gp", "cellular", "metrics", "scaling"):
        assert gpu[section] == main[section], section
    assert gpu["train"] == {k: v for k, v in main["train"].items() if k != "threads"}  # a GPU rank's threads: its own rule

    def own_settings(runs: list[dict]) -> dict:  # each system's own (tuned) settings
        def own(r: dict, k: str) -> dict | None:  # which seeds a timing sweep's entry trains and whether it keeps an EMA
            measured = ("seeds", "ema_half_life")  # generator to score are not settings of its training
            return {n: v for n, v in r[k].items() if n not in measured} if isinstance(r.get(k), dict) else r.get(k)

        return {(r["strategy"], r.get("loss", "bce")): {k: own(r, k) for k in ("train", "wgan_gp", "cellular")} for r in runs}

    assert own_settings(gpu["runs"]) == own_settings(main["runs"])


def test_smoke_scenario_runs_every_engine_at_one_and_two_processes():
    runs = expand(load_scenario(REPO / "scenarios" / "smoke.yaml"))
    dp = {(r.engine, r.procs) for r in runs if r.strategy == "data_parallel"}
    assert {("horovod", 1), ("horovod", 2), ("torch", 1), ("torch", 2)} <= dp


@pytest.mark.parametrize(
    "data, message",
    [
        (with_(train__epoch=3), r"train.epoch: unknown field; expected one of epochs, steps"),
        (with_(train__epochs="two"), r"train.epochs: expected an integer, got 'two'"),
        (with_(train__epochs=0), r"train.epochs: must be at least 1"),
        (with_(dataset__name="svhn"), r"dataset.name: 'svhn' is not one of 'digits'"),
        (with_(dataset__image_size=30), r"dataset.image_size: .*multiple of 4"),
        (with_(train__betas=[0.5]), r"train.betas: expected two numbers"),
        (with_(runs__0__engine="nccl"), r"runs\[0\].engine: 'nccl' is not one of"),
        (with_(runs__0__procs=[0]), r"runs\[0\].procs\[0\]: must be at least 1, got 0"),
        (with_(runs__0__loss="mustangs"), r"runs\[0\].loss: 'mustangs' is not available for data_parallel"),
        (with_(runs__0__grid=[2, 2]), r"runs\[0\].grid: only the cellular strategy takes a grid"),
        (with_(metrics__features="vgg"), r"metrics.features: 'vgg' is not one of"),
        (with_(metrics__protocol="clean"), r"metrics.protocol: 'clean' is not one of 'suite', 'standard'"),
        (with_(metrics__protocol="standard"), r"metrics.samples: protocol standard scores 10000 or 50000 samples, got 1000$"),
        (with_(metrics__prdc_k=0), r"metrics.prdc_k: must be at least 1, got 0"),
        (with_(metrics__prdc_k=101), r"metrics.prdc_k: .*100"),
        (with_(metrics__prdc_k=5, metrics__samples=5), r"metrics.prdc_k: must be below metrics.samples \(5\), got 5$"),
        ({"runs": []}, r"name: required field is missing"),
        ({"name": "x", "runs": []}, r"runs: at least one run is needed"),
        (with_(model__dropout=1.5), r"model.dropout: must be less than 1.0, got 1.5"),
        (with_(model__critic_norm="instance"), r"model.critic_norm: 'instance' is not one of 'auto', 'batch'"),
        (
            with_(
                model__critic_norm="layer",
                runs__0__strategy="cellular",
                runs__0__engine="mpi",
                runs__0__procs=[1],
                runs__0__grid=[1, 1],
            ),
            r"model.critic_norm: 'layer' is not available to the cellular strategy",
        ),
        (with_(runs__0__procs=[1, 3]), r"runs\[0\].procs: train.batch_size 64 cannot be split evenly over 3 processes"),
    ],
)
def test_errors_name_the_field(data, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(data, source="my.yaml")


def test_error_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nruns: [{strategy: data_parallel, procs: [1]}]\ntrain: {lr: -1}\n")
    with pytest.raises(ScenarioError, match=rf"{path}: train.lr: must be positive"):
        load_scenario(path)
    path.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "missing.yaml")


def test_label_partitioned_process_counts():
    spec = {"strategy": "label_partitioned", "engine": "mpi", "procs": [1, 2, 3, 4]}
    ok = parse_scenario({"name": "t", "dataset": {"classes": [0, 1]}, "runs": [{**spec, "procs": [1, 2, 4]}]})
    assert [r.procs for r in expand(ok)] == [1, 2, 4]
    with pytest.raises(ScenarioError, match=r"3 processes for 2 classes.*multiple"):
        parse_scenario({"name": "t", "dataset": {"classes": [0, 1]}, "runs": [spec]})


def test_weak_scaling_gives_one_class_per_rank():
    scenario = parse_scenario(
        {"name": "w", "scaling": "weak", "runs": [{"strategy": "label_partitioned", "engine": "mpi", "procs": [1, 2, 4]}]}
    )
    assert [r.dataset.classes for r in expand(scenario)] == [[0], [0, 1], [0, 1, 2, 3]]


def test_cellular_grids():
    strong = {"strategy": "cellular", "engine": "mpi", "grid": [2, 2], "procs": [1, 2, 4]}
    assert [r.grid for r in expand(parse_scenario({"name": "c", "runs": [strong]}))] == [[2, 2]] * 3
    with pytest.raises(ScenarioError, match=r"3 processes cannot share a 2x2 grid"):
        parse_scenario({"name": "c", "runs": [{**strong, "procs": [3]}]})
    weak = {"strategy": "cellular", "engine": "mpi", "scaling": "weak", "procs": [1, 4], "grids": [[1, 1], [2, 2]]}
    assert [r.grid for r in expand(parse_scenario({"name": "c", "runs": [weak]}))] == [[1, 1], [2, 2]]
    with pytest.raises(ScenarioError, match=r"grid \[1, 2\] cannot be shared evenly by 4 processes"):
        parse_scenario({"name": "c", "runs": [{**weak, "grids": [[1, 1], [1, 2]]}]})
    # a fixed block of cells per rank: 9 cells per rank at every process count
    block = {**weak, "procs": [1, 2, 4], "grids": [[3, 3], [3, 6], [6, 6]]}
    assert [r.grid for r in expand(parse_scenario({"name": "c", "runs": [block]}))] == [[3, 3], [3, 6], [6, 6]]
    with pytest.raises(ScenarioError, match=r"keeps the cells per rank fixed, but these grids give \[1, 9\] cells per rank"):
        parse_scenario({"name": "c", "runs": [{**weak, "grids": [[1, 1], [6, 6]]}]})


def test_expansion_ids_repeats_and_round_trip(tmp_path):
    scenario = parse_scenario(with_(repeats=2))
    runs = expand(scenario)
    assert [r.run_id for r in runs] == [
        "data_parallel-bce-horovod-p1-r0",  # repeats interleaved: drift over time hits every configuration alike
        "data_parallel-bce-horovod-p2-r0",
        "data_parallel-bce-horovod-p1-r1",
        "data_parallel-bce-horovod-p2-r1",
    ]
    (tmp_path / "run.json").write_text(runs[0].to_json())
    assert Run.load(tmp_path / "run.json") == runs[0]


def test_duplicate_run_ids_need_a_label():
    data = with_()
    data["runs"].append(dict(data["runs"][0]))
    with pytest.raises(ScenarioError, match="share the id .*label"):
        expand(parse_scenario(data))
    data["runs"][1]["label"] = "again"
    assert len(expand(parse_scenario(data))) == 4


def test_critic_norm_auto_is_layer_norm_for_wgan_gp_only_and_is_recorded():
    from typing import get_args, get_type_hints

    from suite.config.scenario import ModelConfig
    from suite.gan.models import CRITIC_NORMS

    assert get_args(get_type_hints(ModelConfig)["critic_norm"]) == ("auto", *CRITIC_NORMS)
    data = with_(runs=[{"strategy": "label_partitioned", "loss": "bce"}, {"strategy": "label_partitioned", "loss": "wgan-gp"}])
    bce, wgan = expand(parse_scenario(data))
    assert (bce.critic_norm, wgan.critic_norm) == ("batch", "layer")
    assert run_identity(bce)["critic_norm"] == "batch" and run_identity(wgan)["critic_norm"] == "layer"
    assert wgan.to_dict()["model"]["critic_norm"] == "auto"  # run.json keeps the setting as written
    bce, wgan = expand(parse_scenario({**data, "model": {"critic_norm": "batch"}}))
    assert (bce.critic_norm, wgan.critic_norm) == ("batch", "batch")  # the tables' critic, restored


def test_an_entry_can_train_longer_than_the_others():
    scenario = parse_scenario(
        {
            "name": "o",
            "train": {"epochs": 3, "batch_size": 32},
            "runs": [{"strategy": "data_parallel"}, {"strategy": "label_partitioned", "train": {"epochs": 30}}],
        }
    )
    dp, lp = expand(scenario)
    assert (dp.train.epochs, lp.train.epochs) == (3, 30) and lp.train.batch_size == 32  # the rest is the scenario's
    with pytest.raises(ScenarioError, match=r"runs\[0\].train.epoch: unknown field"):
        parse_scenario({"name": "o", "runs": [{"strategy": "data_parallel", "train": {"epoch": 3}}]})
    with pytest.raises(ScenarioError, match=r"runs\[0\].train.batch_size: must be at least 1"):
        parse_scenario({"name": "o", "runs": [{"strategy": "data_parallel", "train": {"batch_size": 0}}]})
    with pytest.raises(ScenarioError, match=r"runs\[0\].procs: train.batch_size 30 cannot be split evenly over 4"):
        parse_scenario({"name": "o", "runs": [{"strategy": "data_parallel", "procs": [4], "train": {"batch_size": 30}}]})


def test_targets_budgets_and_stopping_are_validated():
    target = {"features": "classifier", "target": {"fid": 40}}
    scenario = parse_scenario(
        {"name": "t", "train": {"budget_s": 60, "stop_at_target": True}, "metrics": target, "runs": [{"strategy": "conditional"}]}
    )
    run = expand(scenario)[0]
    assert run.train.budget_s == 60.0 and run.metrics.target.metric == "fid" and run.metrics.target.value == 40.0
    cases = [
        ({"metrics": {"target": {"fid": 40}}}, r"metrics.target: a target holds under one named feature network"),
        (
            {"metrics": {"features": "classifier", "target": {"fid": 40, "kid": 0.1}}},
            r"metrics.target: give exactly one of fid or kid",
        ),
        ({"train": {"budget_s": 0}}, r"train.budget_s: must be positive, got 0"),
        ({"train": {"stop_at_target": True}}, r"train.stop_at_target: needs metrics.target"),
        (
            {"train": {"stop_at_target": True}, "metrics": target, "runs": [{"strategy": "label_partitioned"}]},
            r"train.stop_at_target: stops one model trained by all ranks .* not label_partitioned",
        ),
    ]
    for data, message in cases:
        with pytest.raises(ScenarioError, match=message):
            parse_scenario({"name": "t", "runs": [{"strategy": "data_parallel"}], **data})


LP = {"strategy": "label_partitioned", "engine": "mpi", "loss": "wgan-gp", "procs": [1, 3]}
CELLULAR = {"strategy": "cellular", "engine": "mpi", "grid": [2, 2], "procs": [1, 2]}


@pytest.mark.parametrize(
    "data, message",
    [
        ({"train": {"budget_s": -1}}, r"^<scenario>: train.budget_s: must be positive, got -1$"),
        ({"train": {"budget_s": float("nan")}}, r"^<scenario>: train.budget_s: must be a finite number, got nan$"),
        ({"train": {"budget_s": float("inf")}}, r"^<scenario>: train.budget_s: must be a finite number, got inf$"),
        ({"train": {"budget_images": 0}}, r"^<scenario>: train.budget_images: must be at least 1, got 0$"),
        ({"train": {"budget_images": -640}}, r"^<scenario>: train.budget_images: must be at least 1, got -640$"),
        ({"train": {"budget_images": float("nan")}}, r"^<scenario>: train.budget_images: expected an integer, got nan$"),
        ({"train": {"budget_images": float("inf")}}, r"^<scenario>: train.budget_images: expected an integer, got inf$"),
        (
            {"train": {"budget_images": 6400, "budget_s": 30}},
            r"^<scenario>: train.budget_images: given alongside train.budget_s: give one budget, in seconds or in images$",
        ),
        (  # a data-parallel step: the global batch (64); the budget must buy one after the 2 warm-up steps
            {"runs": [{"strategy": "data_parallel", "train": {"budget_images": 191}}]},
            r"^<scenario>: runs\[0\].train.budget_images: 191 images buy 2 steps of 64 images, too few for one step of "
            r"data_parallel at P = 1 \(runs\[0\]\) after its 2 warm-up steps: it needs 192 images; give at least 192 or "
            r"fewer train.warmup_steps$",
        ),
        (  # without warm-up, one step is enough
            {"train": {"warmup_steps": 0}, "runs": [{"strategy": "data_parallel", "train": {"budget_images": 63}}]},
            r"^<scenario>: runs\[0\].train.budget_images: 63 images buy 0 steps of 64 images, too few for one step of "
            r"data_parallel at P = 1 \(runs\[0\]\): it needs 64 images; give at least 64$",
        ),
        (  # weak scaling holds each rank's work fixed: a whole system's images budget would shrink it as P grows
            {"train": {"budget_images": 1000}, "runs": [{"strategy": "conditional", "procs": [1, 2], "scaling": "weak"}]},
            r"^<scenario>: train.budget_images: an images budget is the whole system's work, so it cannot hold a weak "
            r"sweep's work per rank \(runs\[0\] is weak\); give train.budget_s or epochs instead$",
        ),
        (  # a step of every class GAN: 3 classes x n_critic 2 x batch 64, 3 of them (2 warm-up)
            {"train": {"budget_images": 1151}, "dataset": {"classes": [0, 1, 2]}, "wgan_gp": {"n_critic": 2}, "runs": [LP]},
            r"train.budget_images: 1151 images buy 2 steps of 384 images, too few for one step of label_partitioned at "
            r"P = 1 \(runs\[0\]\) after its 2 warm-up steps: it needs 1152 images",
        ),
        (  # the entry's own n_critic, not the scenario's: 3 classes x 5 x batch 64
            {"train": {"budget_images": 2879}, "dataset": {"classes": [0, 1, 2]}, "runs": [{**LP, "wgan_gp": {"n_critic": 5}}]},
            r"train.budget_images: 2879 images buy 2 steps of 960 images, too few .* it needs 2880 images",
        ),
        (  # one iteration: 4 cells x the 3 of 5 batches their discriminators train on (skip 1) x batch 64
            {"train": {"budget_images": 2303}, "cellular": {"batches_per_iteration": 5}, "runs": [CELLULAR]},
            r"train.budget_images: 2303 images buy 2 steps of 768 images, too few for one step of cellular at P = 1 "
            r"\(runs\[0\]\) after its 2 warm-up steps: it needs 2304 images",
        ),
    ],
)
def test_bad_budgets_name_the_field_in_one_line(data, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario({"name": "t", "runs": [{"strategy": "data_parallel"}], **data})


def test_an_images_budget_of_one_step_after_the_warm_up_or_more_is_accepted_and_recorded():
    data = {"dataset": {"classes": [0, 1, 2]}, "wgan_gp": {"n_critic": 2}, "cellular": {"batches_per_iteration": 5}}
    runs = expand(parse_scenario({"name": "t", "train": {"budget_images": 2304}, "runs": [LP, CELLULAR], **data}))
    assert [r.train.budget_images for r in runs] == [2304] * 4
    assert run_identity(runs[0])["budget_images"] == 2304 and run_identity(runs[0])["budget_s"] is None
    assert runs[0].train.class_schedule == "interleaved"  # the default; sequential is the other choice
    # a cellular full pass is known only once the data is loaded: the strategy checks it then
    expand(parse_scenario({"name": "t", "train": {"budget_images": 1}, "runs": [CELLULAR]}))
    with pytest.raises(ScenarioError, match=r"train.class_schedule: 'round' is not one of 'interleaved', 'sequential'"):
        parse_scenario({"name": "t", "train": {"class_schedule": "round"}, "runs": [LP]})


def test_a_system_without_a_step_rule_is_refused_an_images_budget(monkeypatch):
    from dataclasses import replace

    from suite.config.registry import STRATEGIES

    entry = STRATEGIES["conditional"]
    monkeypatch.setitem(STRATEGIES._entries, "conditional", replace(entry, step_images=None))
    with pytest.raises(ScenarioError, match=r"train.budget_images: conditional \(runs\[1\]\) cannot stop at an images budget"):
        parse_scenario(
            {"name": "t", "train": {"budget_images": 6400}, "runs": [{"strategy": "data_parallel"}, {"strategy": "conditional"}]}
        )
    parse_scenario({"name": "t", "train": {"budget_s": 30}, "runs": [{"strategy": "conditional"}]})  # a time budget it can honour


def test_seeds_are_an_axis_like_procs_and_interleave():
    data = with_(train__seeds=[0, 1, 2])
    runs = expand(parse_scenario(data))
    assert [r.run_id for r in runs] == [
        "data_parallel-bce-horovod-p1-s0-r0",
        "data_parallel-bce-horovod-p2-s0-r0",
        "data_parallel-bce-horovod-p1-s1-r0",
        "data_parallel-bce-horovod-p2-s1-r0",
        "data_parallel-bce-horovod-p1-s2-r0",
        "data_parallel-bce-horovod-p2-s2-r0",
    ]
    assert [r.train.seed for r in runs] == [0, 0, 1, 1, 2, 2] and all(r.train.seeds is None for r in runs)
    assert run_identity(runs[2])["seed"] == 1
    # an entry's own seed replaces the scenario's seeds; its own seeds replace the scenario's seed
    data["runs"].append({"strategy": "conditional", "engine": "horovod", "procs": [2], "train": {"seed": 7}})
    data["runs"].append({"strategy": "label_partitioned", "engine": "mpi", "procs": [2], "train": {"seeds": [4, 5]}})
    ids = [r.run_id for r in expand(parse_scenario(data))]
    assert "conditional-bce-horovod-p2-r0" in ids and sum(i.startswith("conditional") for i in ids) == 1
    assert {i for i in ids if i.startswith("label")} == {
        "label_partitioned-bce-mpi-p2-s4-r0",
        "label_partitioned-bce-mpi-p2-s5-r0",
    }


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"train__seeds": []}, "train.seeds: is empty"),
        ({"train__seeds": [0, 1, 1]}, r"train.seeds: seeds repeat: \[1\]"),
        ({"train__seeds": [0, 1], "train__seed": 3}, "train.seeds: given alongside train.seed"),
        ({"runs__0__train": {"seed": 1, "seeds": [2]}}, r"runs\[0\].train.seeds: given alongside runs\[0\].train.seed"),
        ({"train__seeds": [-1]}, r"train.seeds\[0\]: must not be negative, got -1"),
        ({"train__seed": -1}, "train.seed: must not be negative, got -1"),
    ],
)
def test_bad_seeds_name_the_field(changes, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(with_(**changes))


def test_the_standard_protocol_takes_the_papers_sample_counts():
    for samples in (10_000, 50_000):
        scenario = parse_scenario(with_(metrics__protocol="standard", metrics__samples=samples), source="my.yaml")
        assert expand(scenario)[0].metrics.protocol == "standard"
    assert expand(parse_scenario(with_(), source="my.yaml"))[0].metrics.protocol == "suite"
