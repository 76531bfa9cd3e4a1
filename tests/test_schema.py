"""The scenario schema reports every mistake at once, one line naming each field; the YAML reader means what a file
says; the label-partitioned rule knows each dataset's classes."""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from typing import Any, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suite.config.escape import one_line
from suite.config.expansion import expand, load_scenario, parse_scenario
from suite.config.scenario import RunSpec, Scenario, ScenarioError, strategy_sections
from suite.config.schema import json_schema, section_type, type_hints
from suite.config.yamlfile import YamlError, load_yaml, parse_yaml

BASE = {"name": "t", "runs": [{"strategy": "data_parallel", "engine": "mpi", "procs": [1, 2]}]}


def _numeric(tp: Any) -> tuple[type, bool] | None:
    """``(int or float, whether a list of them)`` for a numeric field's type, else None."""
    while get_origin(tp) is typing.Annotated or type(None) in get_args(tp):
        tp = get_args(tp)[0] if get_origin(tp) is typing.Annotated else next(a for a in get_args(tp) if a is not type(None))
    if tp in (int, float):
        return tp, False
    if get_origin(tp) is list:
        inner = _numeric(get_args(tp)[0])
        return (inner[0], True) if inner and not inner[1] else None
    return None


def _has_maximum(node: Any) -> bool:
    if isinstance(node, dict):
        return "maximum" in node or "exclusiveMaximum" in node or any(_has_maximum(v) for v in node.values())
    return isinstance(node, list) and any(_has_maximum(v) for v in node)


def _numeric_fields() -> list[tuple[tuple[str, ...], type, bool, bool]]:
    """Every numeric field a scenario can hold: ``(path, int or float, in a list, has an upper bound)``."""
    found = []

    def visit(cls: type, path: tuple[str, ...]) -> None:
        props = json_schema(cls)["properties"]
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            hint = type_hints(cls)[f.name]
            if (section := section_type(hint)) is not None:
                visit(section, (*path, f.name))
            elif (numeric := _numeric(hint)) is not None:
                found.append(((*path, f.name), numeric[0], numeric[1], _has_maximum(props[f.name])))

    visit(Scenario, ())
    for name, section in strategy_sections().items():  # the strategies' and losses' (cellular, wgan_gp)
        visit(section, (name,))
    visit(RunSpec, ("runs", "0"))
    return found


NUMERIC_FIELDS = _numeric_fields()


def test_the_property_test_covers_every_numeric_field():
    paths = {".".join(path) for path, *_ in NUMERIC_FIELDS}
    assert {"repeats", "train.lr", "train.budget_s", "wgan_gp.gp_weight", "model.latent_dim", "dataset.workers"} <= paths
    assert {"metrics.curve_points", "train.threads", "train.checkpoint_every.minutes", "metrics.target.fid"} <= paths
    assert {"runs.0.procs", "runs.0.horovod.cycle_time_ms", "cellular.mixture_scale"} <= paths
    assert len(paths) >= 45


def _bad_values(kind: type, bounded: bool) -> st.SearchStrategy:
    bad: list[Any] = [math.nan, math.inf, -math.inf, -1, -1e300, "x", True, "1e-3", [1]]
    bad += [2.5] if kind is int else []
    bad += [10**15 if kind is int else 1e15] if bounded else []
    return st.sampled_from(bad)


def _where(path: tuple[str, ...], in_list: bool) -> str:
    text = "runs[0]" if path[:2] == ("runs", "0") else ".".join(path[:1])
    rest = path[2:] if path[:2] == ("runs", "0") else path[1:]
    text += "".join(f".{p}" for p in rest)
    return text + ("[0]" if in_list else "")


@st.composite
def broken_scenarios(draw: st.DrawFn) -> tuple[dict, list[str]]:
    fields = draw(st.lists(st.sampled_from(NUMERIC_FIELDS), min_size=1, max_size=3, unique_by=lambda f: f[0]))
    data: dict = {"name": "t", "runs": [dict(BASE["runs"][0])]}
    named = []
    for path, kind, in_list, bounded in fields:
        value = draw(_bad_values(kind, bounded))
        target: Any = data
        for part in path[:-1]:
            target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
        target[path[-1]] = [value] if in_list else value
        named.append(_where(path, in_list))
    return data, named


@settings(max_examples=500, deadline=None)
@given(broken_scenarios())
def test_nan_inf_negative_huge_and_mistyped_numbers_are_refused_in_one_message_naming_each_field(case):
    data, named = case
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data, source="p.yaml")
    message = str(error.value)
    assert message.startswith("p.yaml: ") and "Traceback" not in message
    lines = message.splitlines()
    if len(lines) > 1:  # several problems: a line that counts them, then one line each
        assert re.fullmatch(r"p\.yaml: \d+ problems:", lines[0]) and all(line.startswith("  ") for line in lines[1:])
    for where in named:
        assert any(line.startswith((f"p.yaml: {where}: ", f"  {where}: ")) for line in lines), (where, message)


def test_a_scenario_with_three_mistakes_reports_all_three(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(
        "name: t\ntrain: {lrr: 0.001, budget_s: .nan}\nwgan_gp: {gp_weight: -1}\nruns: [{strategy: data_parallel, procs: [1]}]\n"
    )
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    assert str(error.value).splitlines() == [
        f"{path}: 3 problems:",
        "  train.budget_s: must be a finite number, got nan",
        "  train.lrr: unknown field; expected one of epochs, steps, batch_size, lr, betas, seed, seeds, warmup_steps, "
        "threads, budget_s, budget_images, ema_half_life, class_schedule, stop_at_target, checkpoint_every (did you mean lr?)",
        "  wgan_gp.gp_weight: must not be negative, got -1",
        "  runs[0]: not checked until train and wgan_gp are fixed",  # its rules read both: no default stands in
    ]


def test_three_broken_rules_across_fields_are_reported_together():
    data = {
        "name": "t",
        "train": {"stop_at_target": True},
        "runs": [
            {"strategy": "data_parallel", "procs": [3]},
            {"strategy": "cellular", "procs": [2], "grid": [1, 1]},
        ],
    }
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data, source="s.yaml")
    assert str(error.value).splitlines() == [
        "s.yaml: 3 problems:",
        "  train.stop_at_target: needs metrics.target, e.g. metrics: {target: {fid: 30}}",
        "  runs[0].procs: train.batch_size 64 cannot be split evenly over 3 processes; use process counts that divide it, "
        "or weak scaling",
        "  runs[1].procs: 2 processes cannot share a 1x1 grid evenly (1 cells); use a divisor of 1",
    ]


def test_unknown_names_suggest_the_closest_one():
    with pytest.raises(
        ScenarioError, match=r"runs\[0\].strategy: 'data_paralel' is not one of .*\(did you mean data_parallel\?\)$"
    ):
        parse_scenario({"name": "t", "runs": [{"strategy": "data_paralel"}]})
    with pytest.raises(ScenarioError, match=r"modle: unknown field; expected one of name, runs, .* \(did you mean model\?\)$"):
        parse_scenario({**BASE, "modle": {}})


# --- every mistake in one message: an unknown name does not hide the other fields' problems ----------------------

STRATEGY_NAMES = "'data_parallel', 'conditional', 'label_partitioned', 'cellular'"
TRAIN_FIELDS = (
    "epochs, steps, batch_size, lr, betas, seed, seeds, warmup_steps, threads, budget_s, budget_images, ema_half_life, class_schedule, "
    "stop_at_target, checkpoint_every"
)


def test_a_misspelt_strategy_hides_none_of_the_files_other_mistakes(tmp_path, capsys):
    from suite.cli import main

    path = tmp_path / "three.yaml"
    path.write_text("name: t\ntrain: {lrr: 0.1, batch_size: -4}\nruns: [{strategy: conditionl, procs: [1]}]\n")
    assert main(["run", str(path), "--dry-run", "--out", str(tmp_path / "out")]) == 2
    expected = [
        f"error: {path}: 3 problems:",
        f"  runs[0].strategy: 'conditionl' is not one of {STRATEGY_NAMES} (did you mean conditional?)",
        "  train.batch_size: must be at least 1, got -4",
        f"  train.lrr: unknown field; expected one of {TRAIN_FIELDS} (did you mean lr?)",
        "  runs[0]: not checked until its strategy is known",
    ]
    assert capsys.readouterr().err.splitlines() == [one_line("\n".join(expected))]  # one line: suite.config.escape
    assert not (tmp_path / "out").exists()


def test_beside_an_unknown_name_the_rules_of_the_parts_that_fit_are_checked():
    data = {
        "name": "t",
        "metrics": {"target": {"fid": 30}},  # a rule across fields: a target needs a named feature network
        "runs": [
            {"strategy": "conditional", "engine": "torchh", "loss": "wgan", "procs": [1]},
            {"strategy": "cellular", "engine": "torch", "procs": [1]},  # fits the schema, breaks a rule
            {"strategy": "data_parallel", "procs": [3]},  # batch 64 over 3 ranks
        ],
    }
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data, "s.yaml")
    lines = str(error.value).splitlines()
    assert lines[0] == "s.yaml: 5 problems:"
    assert lines[1].startswith("  runs[0].engine: 'torchh' is not one of ") and lines[1].endswith("(did you mean torch?)")
    assert lines[2].startswith("  runs[0].loss: 'wgan' is not one of ")
    assert lines[3:] == [
        "  metrics.target: a target holds under one named feature network: set metrics.features to classifier or inception",
        "  runs[1].engine: 'torch' does not run cellular; choose one of mpi",
        "  runs[2].procs: train.batch_size 64 cannot be split evenly over 3 processes; use process counts that divide it, "
        "or weak scaling",
        "  runs[0]: not checked until its engine and loss are known",
    ]


def test_no_default_stands_in_for_a_section_that_does_not_fit():
    # modle (model, misspelt) asks for the mlp, which takes 8x8 images; the default dcgan does not, and must not be
    # blamed; the entries' rules, which read the model, wait for it
    data = {"name": "t", "dataset": {"image_size": 8}, "modle": {"architecture": "mlp"}, "repeats": 0, "runs": BASE["runs"]}
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data, "s.yaml")
    lines = str(error.value).splitlines()
    assert lines[0] == "s.yaml: 2 problems:" and lines[1] == "  repeats: must be at least 1, got 0"
    assert lines[2].startswith("  modle: unknown field; ") and lines[2].endswith("(did you mean model?)")
    assert lines[3:] == ["  runs[0]: not checked until model is fixed"]


def test_one_problem_is_still_one_line_and_an_unknown_plugin_section_waits_for_its_strategy():
    data = {"name": "t", "runs": [{"strategy": "gossip", "gossip": {"fanout": 2}, "procs": [1]}]}
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data, "s.yaml")
    assert str(error.value) == (  # the entry's gossip key is not called an unknown field: its plugin may bring it
        f"s.yaml: runs[0].strategy: 'gossip' is not one of {STRATEGY_NAMES} (a plugin's strategy needs its package installed)"
    )


def test_sizes_that_cannot_fit_are_refused_with_the_reason():
    with pytest.raises(ScenarioError) as error:
        parse_scenario({**BASE, "repeats": 100_000_000, "model": {"latent_dim": 10**11}})
    assert str(error.value).splitlines() == [
        "<scenario>: 2 problems:",
        "  repeats: must be at most 1000, got 100000000: every repeat runs the whole sweep again, and its runs "
        "are held in memory",
        "  model.latent_dim: must be at most 4096, got 100000000000: the generator's first layer "
        "holds latent_dim x 128 x (image_size / 4)^2 weights",
        "  runs[0]: not checked until model is fixed",
    ]
    with pytest.raises(ScenarioError, match=r"model.latent_dim: expected an integer, got 100000000000.0$"):
        parse_scenario({**BASE, "model": {"latent_dim": 1e11}})


def test_types_are_strict():
    for section, field, value, expected in [
        ("train", "epochs", "3", "an integer"),
        ("train", "epochs", 3.0, "an integer"),
        ("train", "epochs", True, "an integer"),
        ("metrics", "enabled", 1, "true or false"),
        ("metrics", "enabled", "yes", "true or false"),
        ("dataset", "root", 5, "a string"),
    ]:
        with pytest.raises(ScenarioError, match=rf"{section}.{field}: expected {expected}, got {value!r}$"):
            parse_scenario({**BASE, section: {field: value}})


def test_an_entry_section_is_checked_with_the_rest():
    data = {"name": "t", "repeats": 0, "runs": [{"strategy": "data_parallel", "train": {"lr": -1, "epochs": 0}}]}
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data)
    assert str(error.value).splitlines() == [
        "<scenario>: 3 problems:",
        "  repeats: must be at least 1, got 0",
        "  runs[0].train.epochs: must be at least 1, got 0",
        "  runs[0].train.lr: must be positive, got -1",
    ]


# --- the YAML reader ----------------------------------------------------------------------------------


def test_yaml_1_2_numbers_and_an_exponent_learning_rate(tmp_path):
    assert parse_yaml("a: 1e-3\nb: 2E5\nc: -1.5e+2\nd: 3\ne: .5\nf: 1.0\ng: '1e-3'\n", "x") == {
        "a": 0.001,
        "b": 200000.0,
        "c": -150.0,
        "d": 3,
        "e": 0.5,
        "f": 1.0,
        "g": "1e-3",
    }
    path = tmp_path / "lr.yaml"
    path.write_text("name: t\ntrain: {lr: 1e-3}\nruns: [{strategy: data_parallel}]\n")
    assert expand(load_scenario(path))[0].train.lr == 0.001


def test_a_duplicate_key_is_refused_naming_the_key_and_its_lines(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: t\ntrain: {epochs: 3}\nruns: [{strategy: data_parallel}]\ntrain: {lr: 0.1}\n")
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    assert str(error.value) == f"{path}: not valid YAML: line 4, column 1: duplicate key 'train' (first given at line 2)"
    with pytest.raises(YamlError, match=r"line 1, column 11: duplicate key 'a' \(first given at line 1\)$"):
        parse_yaml("x: {a: 1, a: 2}", "inline")


def test_a_file_that_is_not_utf8_text_is_named(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(b"PK\x03\x04\xf0\x9f\x00\xff binary")
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    assert str(error.value) == f"{path}: not UTF-8 text (byte 0xf0 at offset 4); a YAML file is expected"
    path.write_bytes(b"name: \x00\n")
    with pytest.raises(YamlError, match=rf"^{path}: not valid YAML: unacceptable character #x0000") as error:
        load_yaml(path)
    assert "\n" not in str(error.value)


# --- the label-partitioned rule without dataset.classes ------------------------------------------------


@pytest.mark.parametrize(
    "dataset, procs, scaling, message",
    [
        ("digits", 16, "strong", r"runs\[0\].procs: 16 processes for 10 classes: 16 processes cannot be split evenly over 10"),
        ("cifar100", 150, "strong", r"runs\[0\].procs: 150 processes for 100 classes"),
        ("mnist", 12, "weak", r"runs\[0\].procs: weak scaling trains one class per rank, but only 10 classes are in mnist"),
    ],
)
def test_the_label_partitioned_rule_uses_the_datasets_own_class_count(dataset, procs, scaling, message):
    entry = {"strategy": "label_partitioned", "engine": "mpi", "procs": [procs], "scaling": scaling}
    with pytest.raises(ScenarioError, match=message):
        parse_scenario({"name": "t", "dataset": {"name": dataset}, "train": {"batch_size": 600}, "runs": [entry]})


def test_label_partitioned_counts_that_fit_the_dataset_are_accepted():
    entry = {"strategy": "label_partitioned", "engine": "mpi", "procs": [20, 100]}
    runs = expand(parse_scenario({"name": "t", "dataset": {"name": "cifar100"}, "runs": [entry]}))
    assert [r.procs for r in runs] == [20, 100]
    entry = {"strategy": "label_partitioned", "engine": "mpi", "procs": [16]}  # ImageNet: its folders tell, at run time
    assert expand(parse_scenario({"name": "t", "dataset": {"name": "imagenet"}, "runs": [entry]}))[0].procs == 16
