"""A run's settings are final when expansion returns it; what ``suite run`` decides later is a placement on a copy,
and each run's launch command is built once and is the one printed, launched and recorded."""

import contextlib
import dataclasses
import hashlib
import json
import shlex

import pytest
import yaml

from conftest import tiny_scenario
from suite.cli import main
from suite.config.expansion import expand, parse_scenario
from suite.config.scenario import PLACEMENT_FIELDS, Run, RunPlacement
from suite.records.record import Record
from suite.running import launch as launching
from suite.running import planning, preflight
from suite.train.resume import settings_fingerprint

ENTRY = {"strategy": "data_parallel", "engine": "torch", "procs": [1, 2]}


def test_a_run_cannot_be_changed_after_expansion():
    run = expand(parse_scenario(tiny_scenario("frozen", [ENTRY])))[0]
    for name, value in [("trace", True), ("procs", 4), ("overrides", {"train.lr": 0.1}), ("sweep_ranks_per_node", 2)]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(run, name, value)


def test_a_placement_makes_a_placed_copy_with_the_same_settings_and_fingerprint():
    run = expand(parse_scenario(tiny_scenario("placed", [ENTRY], logs={"tensorboard": True})))[0]
    before = run.to_dict()
    where = RunPlacement(sweep_ranks_per_node=2, trace=True, mllog=True, tensorboard_dir="/tb", overrides={"train.lr": 0.001})
    placed = run.placed(where)
    assert run.to_dict() == before  # the expanded run is left as it was
    assert (placed.sweep_ranks_per_node, placed.trace, placed.tensorboard_dir) == (2, True, "/tb")
    assert (placed.logs.mllog, placed.logs.tensorboard, placed.overrides) == (True, True, {"train.lr": 0.001})
    changed = {k for k, v in placed.to_dict().items() if before[k] != v}
    assert changed == {"sweep_ranks_per_node", "trace", "logs", "tensorboard_dir", "overrides"}
    assert changed <= set(PLACEMENT_FIELDS)  # so a finished run and a checkpoint are the same run, placed or not
    assert placed.settings() == run.settings() and settings_fingerprint(placed) == settings_fingerprint(run)
    assert Run.from_dict(placed.to_dict()) == placed  # run.json reads back as the placed run
    assert run.placed(RunPlacement()) == run  # nothing to add: the same settings and placement


def _counting_command_for(monkeypatch) -> list[list[str]]:
    """Every command ``suite.running.planning`` builds, in order."""
    built: list[list[str]] = []
    real = planning.command_for

    def command_for(*args, **kwargs):
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(planning, "command_for", command_for)
    return built


def _write(tmp_path, name: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario(name, [ENTRY])))
    return str(path)


def test_suite_run_builds_each_command_once_and_launches_that_command_with_the_placed_run(tmp_path, monkeypatch):
    built = _counting_command_for(monkeypatch)
    launched = []

    def launch(planned, opts, **kwargs):  # in place of the processes: the plan it was given
        launched.append(planned)
        return Record(status="ok", wall_s=0.0)

    monkeypatch.setattr(launching, "launch", launch)
    monkeypatch.setattr(preflight, "check_devices", lambda runs: None)  # no torch device probe
    monkeypatch.setattr("suite.running.reaper.Reaper", contextlib.nullcontext)  # no watchdog process
    out = tmp_path / "out"
    code = main(["run", _write(tmp_path, "once"), "--out", str(out), "-q", "--trace", "--set", "train.lr=0.001"])
    assert code == 0
    assert len(built) == len(launched) == 2  # one command per run, built once: checked, launched and recorded from it
    assert [p.command for p in launched] == built and all(p.command is c for p, c in zip(launched, built))
    for planned in launched:
        on_disk = json.loads((planned.run_dir / "run.json").read_text())
        assert on_disk == planned.run.to_dict()  # run.json is the run that was launched
        assert (on_disk["trace"], on_disk["overrides"], on_disk["sweep_ranks_per_node"]) == (True, {"train.lr": 0.001}, 2)


def test_a_dry_run_prints_the_one_command_built_per_run(tmp_path, monkeypatch, capsys):
    built = _counting_command_for(monkeypatch)
    out = tmp_path / "out"
    assert main(["run", _write(tmp_path, "dry"), "--out", str(out), "--dry-run"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(built) == 2 and printed == [shlex.join(command) for command in built]
    run_ids = [run.run_id for run in expand(parse_scenario(tiny_scenario("dry", [ENTRY])))]
    assert [command[-3] for command in built] == [str((out / run_id).resolve()) for run_id in run_ids]  # absolute
    for command, run_id in zip(built, run_ids):  # last, the sha256 of the run.json written, which the rank checks
        assert command[-2:] == ["--run-sha256", hashlib.sha256((out / run_id / "run.json").read_bytes()).hexdigest()]


def test_each_options_field_is_read_from_the_option_of_its_name():
    """``options_from`` fills a field from the option of its name and leaves a field no option names at its
    default: here every field but the converted ones has its option, so renaming one cannot drop it unnoticed."""
    from suite.cli import build_parser
    from suite.cli.running import options_from
    from suite.running.jobplan import JobOptions
    from suite.running.launch import LaunchOptions
    from suite.running.sweep import SweepOptions

    parser = build_parser()
    run = parser.parse_args(["run", "s.yaml", "--nodes", "3", "--master-port", "1234", "--grace", "5", "--resume"])
    job = parser.parse_args(["jobscript", "s.yaml", "--nodes", "2", "--qos", "q", "--no-site-setup", "--array"])
    for cls, args, converted in [
        (LaunchOptions, run, {"extra"}),  # extra: no option; python and container: converted by _launch_options
        (SweepOptions, run, set()),
        (JobOptions, job, {"caps"}),  # --max-runs and --max-scenario-bytes, as one ScenarioCaps
    ]:
        missing = {f.name for f in dataclasses.fields(cls) if not hasattr(args, f.name)}
        assert missing == converted, cls.__name__
    launch = options_from(LaunchOptions, run, python="py")
    assert (launch.nodes, launch.master_port, launch.python, launch.extra) == (3, 1234, "py", [])
    assert (options_from(SweepOptions, run).grace, options_from(SweepOptions, run).resume) == (5.0, True)
    built = options_from(JobOptions, job, container=None)
    assert (built.nodes, built.qos, built.site_setup, built.array, built.walltime) == (2, "q", False, True, None)
