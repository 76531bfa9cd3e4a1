"""Hostile scenarios (issue 43, bug 7 and the caps): bounded YAML, shortened values in errors, caps on a scenario.

Every case ends in exit code 2 and one line on stderr naming the file (or the option) and what was refused, with
no traceback. The YAML cases run under a watchdog and with memory traced: before the bounds, a 1 KB alias bomb
took 1.6-2.2 GB and gave no answer in 60 s.
"""

from __future__ import annotations

import signal
import tracemalloc
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from conftest import tiny_scenario
from suite.cli import main
from suite.config.expansion import expand, load_scenario, run_count
from suite.config.scenario import MAX_RUNS, MAX_SCENARIO_BYTES, ScenarioCaps, ScenarioError
from suite.config.shown import LISTED_PROBLEMS, SHOWN_CHARS, shown
from suite.config.yamlfile import MAX_ALIAS_NODES, MAX_YAML_DEPTH, YamlError, parse_yaml

WATCHDOG_S = 60
"""A hang guard, not a timing target: a case that has not ended by then failed."""

MEMORY_BYTES = 100 * 2**20
"""A refused bomb allocates far less than this; the unbounded reader took 1.6 GB and more."""


@contextmanager
def _bounded() -> Iterator[None]:
    """Fail the test if the block hangs (SIGALRM) or allocates more than :data:`MEMORY_BYTES` at its peak."""

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer in {WATCHDOG_S} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(WATCHDOG_S)
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
        assert peak < MEMORY_BYTES, f"peak {peak / 2**20:.0f} MiB"
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


def _dry_run(tmp_path: Path, path: Path, *options: str) -> int:
    return main(["run", str(path), "--dry-run", "-q", "--out", str(tmp_path / "out"), *options])


def _laughs(levels: int = 9, width: int = 9) -> list[str]:
    """The "billion laughs": ``levels`` anchors, each a list of ``width`` aliases of the one before (~1 KB)."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return lines


def _bomb(tmp_path: Path, where: str) -> Path:
    """A scenario whose ``where`` field (``description`` or ``train.steps``) is the bomb."""
    field = "description: *a8" if where == "description" else "train: {steps: *a8}"
    text = "\n".join(["name: bomb", *_laughs(), field, "runs: [{strategy: data_parallel}]", ""])
    assert len(text) < 1024
    path = tmp_path / f"bomb-{where}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("where", ["description", "train.steps"])
def test_a_billion_laughs_is_refused_in_one_line_naming_the_file(tmp_path, capsys, where):
    path = _bomb(tmp_path, where)
    with _bounded():
        assert _dry_run(tmp_path, path) == 2
    line = _one_line(capsys)
    assert line == f"error: {path}: refused: its aliases expand to more than {MAX_ALIAS_NODES:,} nodes beyond the ones written"
    assert not (tmp_path / "out").exists()


def test_a_billion_laughs_in_a_set_value_is_refused_naming_the_option(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("s", [{"strategy": "data_parallel"}])))
    bomb = "{" + ", ".join(_laughs()) + ", x: *a8}"
    with _bounded():
        assert _dry_run(tmp_path, path, "--set", f"description={bomb}") == 2
    assert _one_line(capsys) == (
        f"error: --set description: refused: its aliases expand to more than {MAX_ALIAS_NODES:,} nodes beyond the ones written"
    )


def test_aliases_a_scenario_really_uses_are_read(tmp_path):
    """Anchors that share settings between run entries (a merge key, a repeated list) read as if written out."""
    anchored = tmp_path / "anchored.yaml"
    anchored.write_text(
        "name: anchored\ndataset: {name: digits, image_size: 20}\n"
        "train: {epochs: 1, steps: 3, batch_size: 32, warmup_steps: 1}\nmetrics: {enabled: false}\n"
        "runs:\n"
        "  - &entry {strategy: data_parallel, procs: &procs [1, 2], train: {steps: 4}}\n"
        "  - {<<: *entry, label: other, procs: *procs}\n"
    )
    written = tmp_path / "written.yaml"
    entry = {"strategy": "data_parallel", "procs": [1, 2], "train": {"steps": 4}}
    written.write_text(yaml.safe_dump(tiny_scenario("anchored", [entry, {**entry, "label": "other"}])))
    assert [r.to_dict() for r in expand(load_scenario(anchored))] == [r.to_dict() for r in expand(load_scenario(written))]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "x: " + "[" * 100_000 + "]" * 100_000,
            f"refused: line 1, column {MAX_YAML_DEPTH + 3}: nested more than {MAX_YAML_DEPTH} deep",
        ),
        ("x: " + "{a: " * 100_000 + "1" + "}" * 100_000, f"nested more than {MAX_YAML_DEPTH} deep"),
        ("a: &a [*a]", "refused: line 1: an alias refers to a node that contains it (a recursive structure)"),
        ("a: &a\n  b: *a", "refused: line 1: an alias refers to a node that contains it (a recursive structure)"),
        (
            "a: &a " + "[" * 30 + "1" + "]" * 30 + "\nb: &b " + "[" * 30 + "*a" + "]" * 30,
            f"refused: nested more than {MAX_YAML_DEPTH} deep once its aliases are followed",
        ),
        ("n: " + "9" * 5000, "not valid YAML: Exceeds the limit"),
        ("d: 2020-13-45", "not valid YAML: month must be in 1..12"),
    ],
)
def test_deep_recursive_or_unbuildable_yaml_is_refused_in_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    with _bounded():
        assert _dry_run(tmp_path, path) == 2
    line = _one_line(capsys)
    assert line.startswith(f"error: {path}: ")
    assert message in line
    assert len(line) < 400


def test_nesting_up_to_the_limit_is_read():
    assert parse_yaml("[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH, "t") == _nested(MAX_YAML_DEPTH - 1)
    with pytest.raises(YamlError, match=f"nested more than {MAX_YAML_DEPTH} deep"):
        parse_yaml("[" * (MAX_YAML_DEPTH + 1) + "]" * (MAX_YAML_DEPTH + 1), "t")


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "field, value",
    [
        ("train.steps", "x" * 200_000),
        ("description", [str(i) * 10 for i in range(2000)]),
        ("train.steps", [[[i, i + 1] for i in range(j, j + 30)] for j in range(30)]),
        ("name", "n" * 200_000),
        ("train.betas", [0.5 + i / 1e6 for i in range(5000)]),
        ("runs[0].procs", list(range(-5000, 0))),
        ("train.seeds", list(range(-5000, 0))),
    ],
)
def test_a_huge_value_is_shown_shortened_in_the_error(tmp_path, capsys, field, value):
    data = tiny_scenario("huge", [{"strategy": "data_parallel"}])
    if field.startswith("runs[0]."):
        data["runs"][0][field.split(".")[1]] = value
    elif "." in field:
        section, name = field.split(".")
        data[section][name] = value
    else:
        data[field] = value
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(data, width=1 << 30))
    with _bounded():
        assert _dry_run(tmp_path, path, "--max-scenario-bytes", str(20 * 2**20)) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "Traceback" not in err and lines[0].startswith(f"error: {path}: ")
    assert field in err
    assert len(lines) <= 2 * LISTED_PROBLEMS + 3 and len(err) < 1500, err  # ten problems and notes at most, values shortened


def test_shown_values_are_short_and_escaped():
    assert shown("a\nb") == "'a\\nb'"
    assert len(shown("x" * 10**6)) <= SHOWN_CHARS
    assert len(shown([[[["y" * 1000] * 1000] * 1000]])) <= SHOWN_CHARS
    assert shown(int("9" * 4000) * 10**1000) == "<an integer of about 5001 digits>"
    assert shown(0.001) == "0.001" and shown(None) == "None" and shown({"a": 1}) == "{'a': 1}"


# --- caps -----------------------------------------------------------------------------------------------------------


def _sweep(tmp_path: Path, lrs: int, betas: int, procs: list[int], seeds: int = 1, repeats: int = 1) -> Path:
    entry = {
        "strategy": "data_parallel",
        "procs": procs,
        "sweep": {"train.lr": [10.0**-k for k in range(1, lrs + 1)], "train.warmup_steps": list(range(betas))},
    }
    data = tiny_scenario("sweep", [entry], train={"seeds": list(range(seeds))})
    data["train"].pop("seed", None)
    data["repeats"] = repeats
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_run_count_is_what_expansion_makes(tmp_path):
    path = _sweep(tmp_path, lrs=3, betas=2, procs=[1, 2], seeds=2, repeats=2)
    scenario = load_scenario(path)
    assert run_count(scenario) == 3 * 2 * 2 * 2 * 2 == len(expand(scenario))


def test_a_sweep_past_the_cap_is_refused_naming_the_cap_and_its_flag(tmp_path, capsys):
    path = _sweep(tmp_path, lrs=40, betas=40, procs=[1])  # 1,600 runs
    with _bounded():
        assert _dry_run(tmp_path, path) == 2
    assert _one_line(capsys) == (
        f"error: {path}: runs: the scenario expands to 1,600 runs, more than the cap of {MAX_RUNS:,} (--max-runs raises it)"
    )
    assert not (tmp_path / "out").exists()
    assert main(["jobscript", str(path), "--scheduler", "slurm", "--out", str(tmp_path / "j.sh")]) == 2
    assert "(--max-runs raises it)" in _one_line(capsys)


def test_the_run_cap_is_raised_by_its_flag(tmp_path, capsys):
    path = _sweep(tmp_path, lrs=3, betas=2, procs=[1, 2])  # 12 runs
    assert _dry_run(tmp_path, path, "--max-runs", "11") == 2
    assert "12 runs, more than the cap of 11" in _one_line(capsys)
    job = tmp_path / "j.sh"
    assert main(["jobscript", str(path), "--scheduler", "slurm", "--max-runs", "12", "--out", str(job)]) == 0
    assert "12 runs" in job.read_text()
    assert len(expand(load_scenario(path, caps=ScenarioCaps(runs=12)))) == 12


def test_a_scenario_file_past_the_cap_is_refused_naming_the_cap_and_its_flag(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    text = yaml.safe_dump(tiny_scenario("big", [{"strategy": "data_parallel"}]))
    path.write_text(text + "# " + "x" * (MAX_SCENARIO_BYTES - len(text)) + "\n")
    with _bounded():
        assert _dry_run(tmp_path, path) == 2
    assert _one_line(capsys) == (
        f"error: {path}: larger than the cap of {MAX_SCENARIO_BYTES:,} bytes on a scenario file (--max-scenario-bytes raises it)"
    )
    job = tmp_path / "j.sh"
    assert main(["jobscript", str(path), "--scheduler", "slurm", "--out", str(job)]) == 2
    assert "(--max-scenario-bytes raises it)" in _one_line(capsys)
    options = ["--scheduler", "slurm", "--max-scenario-bytes", str(MAX_SCENARIO_BYTES + 10), "--out", str(job)]
    assert main(["jobscript", str(path), *options]) == 0


@pytest.mark.parametrize("flag", ["--max-runs", "--max-scenario-bytes"])
@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_a_cap_flag_takes_a_positive_whole_number(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as stop:
        main(["run", "s.yaml", flag, value])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"suite run: error: argument {flag}: ")


def test_a_scenario_given_as_data_has_the_run_cap_too():
    from suite.config.expansion import parse_scenario

    data = tiny_scenario("d", [{"strategy": "data_parallel", "procs": [1, 2]}])
    data["repeats"] = 3
    with pytest.raises(ScenarioError, match=r"^<scenario>: runs: the scenario expands to 6 runs, more than the cap of 5 "):
        parse_scenario(data, caps=ScenarioCaps(runs=5))
    assert len(expand(parse_scenario(data, caps=ScenarioCaps(runs=6)))) == 6


# --- third-party configs (issue 43, hole 6) -------------------------------------------------------------------------


def _deepspeed(tmp_path: Path, config: object) -> Path:
    entry = {"strategy": "data_parallel", "engine": "deepspeed", "procs": [1], "deepspeed": {"config": config}}
    path = tmp_path / "ds.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("ds", [entry])))
    return path


ELSEWHERE = "/tmp/elsewhere"


@pytest.mark.parametrize(
    "config, key, reason",
    [
        ({"csv_monitor": {"enabled": True, "output_path": ELSEWHERE}}, "csv_monitor.output_path", "the suite sets it"),
        ({"csv_monitor": {"enabled": True, "job_name": "../../x"}}, "csv_monitor.job_name", "the suite sets it"),
        ({"tensorboard": {"enabled": True, "output_path": ELSEWHERE}}, "tensorboard", "logs.tensorboard"),
        ({"wandb": {"enabled": True}}, "wandb", "Weights & Biases"),
        ({"comet": {"enabled": True}}, "comet", "Comet"),
        ({"flops_profiler": {"enabled": True, "output_file": ELSEWHERE}}, "flops_profiler", "bwd_microstep timer"),
        ({"autotuning": {"enabled": True, "results_dir": ELSEWHERE}}, "autotuning", "launches runs of its own"),
        ({"aio": {"block_size": 1048576}}, "aio", "NVMe swap files"),
        ({"nebula": {"enabled": True, "persistent_storage_path": ELSEWHERE}}, "nebula", "persistent_storage_path"),
        ({"checkpoint": {"use_node_local_storage": True}}, "checkpoint", "train.checkpoint_every"),
        ({"data_efficiency": {"enabled": True}}, "data_efficiency", "paths of its own"),
        (
            {"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": ELSEWHERE}}},
            "zero_optimization.offload_optimizer",
            "NVMe files",
        ),
        ({"zero_optimization": {"stage": 3}}, "zero_optimization.stage", "use deepspeed.zero_stage"),
        ({"zero_optimization": {"some_path": ELSEWHERE}}, "zero_optimization.some_path", "zero_optimization takes only"),
        ({"optimizer": {"type": "SGD"}}, "optimizer", "the run's own Adam"),
        ({"train_batch_size": 7}, "train_batch_size", "train.batch_size"),
        ({"fp16": {"enabled": True}}, "fp16", "performance.bf16"),
        ({"output_file": ELSEWHERE}, "output_file", "the suite hands DeepSpeed only"),
        ({"gradient_clipping": "1; rm -rf /"}, "gradient_clipping", "expected a finite number"),
        ({"gradient_predivide_factor": 0}, "gradient_predivide_factor", "must be greater than 0"),
        ({"zero_optimization": {"reduce_bucket_size": 0}}, "zero_optimization.reduce_bucket_size", "must be at least 1"),
        ({"comms_logger": {"prof_ops": "all"}}, "comms_logger.prof_ops", "expected a list of names"),
        ({"communication_data_type": "fp8"}, "communication_data_type", "expected one of fp32, fp16, bf16"),
    ],
)
def test_a_deepspeed_key_that_writes_elsewhere_or_crashes_is_refused_before_the_run(tmp_path, capsys, config, key, reason):
    path = _deepspeed(tmp_path, config)
    assert _dry_run(tmp_path, path) == 2
    line = _one_line(capsys)
    assert line.startswith(f"error: {path}: runs[0].deepspeed.config.{key}: "), line
    assert reason in line
    assert not (tmp_path / "out").exists()


def test_deepspeed_settings_on_another_engine_are_still_refused_as_before(tmp_path, capsys):
    entry = {"strategy": "data_parallel", "engine": "torch", "procs": [1], "deepspeed": {"config": {"wandb": {}}}}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("t", [entry])))
    assert _dry_run(tmp_path, path) == 2
    assert "runs[0].deepspeed: only the deepspeed engine takes deepspeed settings, not torch" in _one_line(capsys)


def test_allowed_deepspeed_keys_are_handed_on_and_the_csv_monitor_writes_inside_the_run_folder(tmp_path):
    from suite.train.engines.deepspeed import DeepSpeedEngine
    from suite.train.launchenv import LaunchInfo

    config = {
        "csv_monitor": {"enabled": True},
        "zero_optimization": {"overlap_comm": True, "reduce_bucket_size": 1000},
        "gradient_clipping": 1.0,
        "communication_data_type": "fp32",
    }
    (run,) = expand(load_scenario(_deepspeed(tmp_path, config)))
    assert run.deepspeed.config == config
    run_dir = tmp_path / "out" / run.run_id
    engine = DeepSpeedEngine.from_run(run, LaunchInfo("torchrun", 0, 1, 0, 1), run_dir)
    handed = engine.config_for(16, 1, "all.G")
    assert handed["csv_monitor"] == {"enabled": True, "output_path": str(run_dir / "deepspeed-monitor"), "job_name": "all.G"}
    assert handed["zero_optimization"] == {"stage": 0, "overlap_comm": True, "reduce_bucket_size": 1000}
    assert handed["gradient_clipping"] == 1.0 and handed["train_batch_size"] == 16
    assert run.deepspeed.config == config  # the run's own settings are not changed by the confinement


@pytest.mark.parametrize(
    "config, message",
    [
        ({"csv_monitor": {"enabled": True, "output_path": ELSEWHERE}}, "deepspeed.config.csv_monitor.output_path: refused"),
        ({"flops_profiler": {"enabled": True}}, "deepspeed.config.flops_profiler: refused: it crashes this engine"),
        ("not a mapping", "deepspeed.config: expected a mapping of DeepSpeed config keys"),
    ],
)
def test_a_rank_refuses_a_hostile_deepspeed_config_from_a_run_file_too(tmp_path, config, message):
    """A run.json written by hand (or by someone else) is checked again where the config is made."""
    from suite.train.engines.deepspeed import DeepSpeedEngine
    from suite.train.launchenv import LaunchInfo

    engine = DeepSpeedEngine(LaunchInfo("torchrun", 0, 1, 0, 1), 0, config, monitor_dir=tmp_path / "m")  # type: ignore[arg-type]
    with pytest.raises(ValueError) as error:
        engine.config_for(16, 1, "all.G")
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("where", ["top", "entry", "train", "sweep", "strategy"])
def test_a_huge_key_or_name_is_shown_shortened_in_the_error(tmp_path, capsys, where):
    huge = "k" * 100_000
    data = tiny_scenario("keys", [{"strategy": "data_parallel"}])
    if where == "top":
        data[huge] = 1
    elif where == "entry":
        data["runs"][0][huge] = 1
    elif where == "train":
        data["train"][huge] = 1
    elif where == "sweep":
        data["runs"][0]["sweep"] = {f"train.{huge}": [1]}
    else:
        data["runs"][0]["strategy"] = huge
    path = tmp_path / "keys.yaml"
    path.write_text(yaml.safe_dump(data, width=1 << 30))
    assert _dry_run(tmp_path, path) == 2
    line = _one_line(capsys)
    assert line.startswith(f"error: {path}: ") and "kkk..." in line
    assert len(line) < 1000, line[:2000]
