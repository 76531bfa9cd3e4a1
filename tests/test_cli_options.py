"""The command line: --version, -v anywhere, defaults in --help, --set overrides (checked by the scenario schema,
recorded in every run), and one table of exit codes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from suite import __version__
from suite.cli import build_parser, main
from suite.cli.exitcodes import EXIT_CODES, ExitCode, exit_code_table
from suite.config.escape import one_line
from suite.config.scenario import Run, Scenario
from suite.records.record import provenance

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "name: t\ntrain: {epochs: 1}\nruns: [{strategy: data_parallel, engine: mpi, procs: [1]}]\n"


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(SCENARIO)
    return path


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"suite {__version__}\n"


def test_verbose_is_accepted_before_and_after_the_sub_command():
    parser = build_parser()
    assert parser.parse_args(["schema"]).verbose is False
    assert parser.parse_args(["-v", "schema"]).verbose is True
    assert parser.parse_args(["schema", "-v"]).verbose is True
    assert parser.parse_args(["run", "x.yaml", "--verbose"]).verbose is True
    assert parser.parse_args(["ruler", "list", "-v"]).verbose is True


def test_help_shows_the_defaults(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert "seconds before a run is stopped and recorded as failed (default: 3600)" in text
    assert "(default: 29500)" in text  # --master-port had no default in its help before
    assert "(default: None)" not in text and "(default: False)" not in text
    assert text.count("default") == text.count("default") and "(default 1) (default: 1)" not in text


def test_set_overrides_reach_the_runs_and_their_records(scenario, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", str(scenario), "--dry-run", "--out", str(out), "--set", "train.lr=1e-3", "--set", "train.betas=[0.0, 0.9]"]
    assert main([*argv, "--set", "train.checkpoint_every.minutes=5"]) == 0
    (run_json,) = out.glob("*/run.json")
    run = Run.load(run_json)
    assert run.train.lr == 0.001 and run.train.betas == [0.0, 0.9] and run.train.checkpoint_every.minutes == 5.0
    assert run.overrides == {"train.lr": 0.001, "train.betas": [0.0, 0.9], "train.checkpoint_every.minutes": 5}
    record = provenance(run, {"suite_version": __version__}, "2026-01-01T00:00:00Z")
    assert record["settings"]["overrides"] == run.overrides
    assert main(["run", str(scenario), "--dry-run", "--out", str(tmp_path / "plain")]) == 0
    assert Run.load(next((tmp_path / "plain").glob("*/run.json"))).overrides is None


@pytest.mark.parametrize(
    "sets, message",
    [
        (["train.lr=.nan"], "{path} with --set train.lr=nan: train.lr: must be a finite number, got nan"),
        (
            ["train.lr=-1", "repeats=0"],
            "{path} with --set train.lr=-1 --set repeats=0: 2 problems:\n  repeats: must be at least 1, got 0\n"
            "  train.lr: must be positive, got -1\n  runs[0]: not checked until train is fixed",
        ),
        (["train.epochs=two"], "{path} with --set train.epochs='two': train.epochs: expected an integer, got 'two'"),
        (
            ["train.lrr=1"],
            "--set train.lrr: train has no field 'lrr'; expected one of epochs, steps, batch_size, lr, betas, seed, seeds, "
            "warmup_steps, threads, budget_s, budget_images, ema_half_life, class_schedule, stop_at_target, checkpoint_every (did you mean lr?)",
        ),
        (["train.lr.x=1"], "--set train.lr.x: train.lr is not a section"),
        (
            ["runs=[]"],
            "--set runs: a scenario has no field 'runs'; expected one of "
            + ", ".join(f.name for f in dataclasses.fields(Scenario) if f.init and f.name not in ("runs", "sections")),
        ),
        (["train.lr"], "--set train.lr: expected FIELD=VALUE, e.g. --set train.lr=1e-3"),
        (["train.lr=1", "train.lr=2"], "--set train.lr: given twice"),
        (
            ["train.betas=[0.5"],
            "--set train.betas: not valid YAML: line 1, column 5: expected ',' or ']', but got '<stream end>'",
        ),
    ],
)
def test_bad_overrides_are_refused_naming_the_field(scenario, tmp_path, capsys, sets, message):
    argv = ["run", str(scenario), "--dry-run", "--out", str(tmp_path / "out")]
    for text in sets:
        argv += ["--set", text]
    assert main(argv) == ExitCode.BAD_INPUT
    assert capsys.readouterr().err == f"error: {one_line(message.format(path=scenario))}\n"  # one line: suite.config.escape
    assert not (tmp_path / "out").exists()


# --- exit codes ---------------------------------------------------------------------------------------


def test_exit_codes_are_distinct_and_every_listed_sub_command_exists():
    assert len({int(code) for code in ExitCode}) == len(ExitCode)
    progs = {action.dest for action in build_parser()._subparsers._group_actions[0]._choices_actions}  # type: ignore[union-attr]
    assert {name.split()[0] for name in EXIT_CODES} <= progs
    assert ExitCode.DIVERGED != ExitCode.INCONCLUSIVE  # suite run's diverged and the gate's undecided differ


def test_the_lower_layers_record_the_tables_codes():
    from suite.analysis.stats import paired
    from suite.running import gpucheck
    from suite.tools import gate

    verdicts = gate.VERDICT_EXIT_CODES  # every verdict has a code, and the table lists the gate's codes but OK
    assert set(verdicts) == {paired.PASS, paired.FAIL, paired.INCONCLUSIVE} and verdicts[paired.PASS] == ExitCode.OK
    assert set(verdicts.values()) - {ExitCode.OK} == set(EXIT_CODES["gate"]) == set(EXIT_CODES["gate-history show"])
    assert gate.EXIT_BAD_INPUT == ExitCode.BAD_INPUT and ExitCode.DIVERGED == 3
    assert (gpucheck.EXIT_PASS, gpucheck.EXIT_FAIL, gpucheck.EXIT_NO_GPU) == (ExitCode.OK, ExitCode.FAILED, ExitCode.NO_GPU)


def test_the_cli_docs_show_the_exit_code_table():
    assert exit_code_table() in (ROOT / "docs" / "reference" / "cli.md").read_text()


def test_bad_input_exits_with_its_code(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("name: t\nname: u\n")
    assert main(["run", str(path)]) == ExitCode.BAD_INPUT == 2
    assert (
        capsys.readouterr().err
        == f"error: {path}: not valid YAML: line 2, column 1: duplicate key 'name' (first given at line 1)\n"
    )
    assert json.loads(json.dumps(int(ExitCode.INCONCLUSIVE))) == 5
