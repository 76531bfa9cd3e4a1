"""Bounded everywhere (issue 52, item 5): what a scenario, a results folder or a record declares cannot make the suite
use memory, disk or time out of proportion to it.

- a scenario's data, aliases followed, is capped (a 272 KB scenario whose aliases expanded inside
  ``deepspeed.config`` gave a 181 MB ``run.json`` and took 1 GB of memory on a dry run), ``deepspeed.config`` too;
- the files the report quotes or copies are capped and read as UTF-8, one line naming the file;
- hashing reads at most the declared size, refuses a declared size past its cap, and stops at its time budget;
- the local launcher refuses more ranks than the machine holds unless asked.
"""

from __future__ import annotations

import hashlib
import logging
import os

import pytest
import yaml

from conftest import tiny_scenario
from suite.analysis.report.sections import scenario_lines
from suite.cli import main
from suite.config.engine_configs import MAX_CONFIG_CHARS, MAX_NAMES, deepspeed_config_problem
from suite.config.expansion import load_scenario
from suite.config.scenario import ScenarioError
from suite.config.yamlfile import MAX_ALIAS_CHARS, YamlError, parse_yaml
from suite.records import integrity
from suite.records.integrity import IntegrityError, damage, sha256_file, verify_file
from suite.records.quoted import MAX_QUOTED_BYTES, QuotedFileError, read_quoted
from suite.records.record import FileDigest
from suite.running import commands
from suite.running.commands import LOCAL_PROCS_PER_CORE, LaunchError, LaunchOptions, local_procs_problem
from suite.running.planning import plan_run
from suite.running.preflight import check_tools


def _deepspeed_scenario(text: str, copies: int) -> str:
    """A scenario whose one deepspeed run lists ``text`` in ``comms_logger.prof_ops``, then ``copies`` aliases of it."""
    aliases = ", ".join(["*s"] * copies)
    return (
        "name: ds\ndataset: {name: digits, image_size: 20}\nruns:\n  - strategy: data_parallel\n    engine: deepspeed\n"
        f'    procs: [1]\n    deepspeed:\n      config:\n        comms_logger: {{prof_ops: [&s "{text}", {aliases}]}}\n'
    )


# --- a scenario's size once its aliases are followed ----------------------------------------------------------


def test_aliases_may_not_repeat_a_long_string_past_the_cap():
    text = "x" * 100_000
    with pytest.raises(YamlError, match=r"^f.yaml: refused: its aliases expand to more than 1,048,576 characters"):
        parse_yaml(f"a: &s {text}\nb: [{', '.join(['*s'] * 11)}]\n", "f.yaml")
    assert len(parse_yaml(f"a: &s {text}\nb: [{', '.join(['*s'] * 9)}]\n", "f.yaml")["b"]) == 9  # 0.9 MB: within it
    assert MAX_ALIAS_CHARS == 1 << 20


def test_a_block_of_settings_repeated_by_anchors_still_reads():
    text = "base: &b {lr: 0.001, betas: [0.5, 0.999], steps: 100}\n" + "".join(f"r{i}: *b\n" for i in range(500))
    assert parse_yaml(text, "f.yaml")["r499"]["steps"] == 100


def test_the_scenario_of_the_issue_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys):
    scenario = tmp_path / "ds.yaml"
    scenario.write_text(_deepspeed_scenario("x" * 270_000, 680))  # 272 KB; 181 MB once expanded
    assert scenario.stat().st_size < 280_000
    assert main(["run", str(scenario), "--dry-run", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {scenario}: refused: its aliases expand to more than 1,048,576 characters beyond the ones written"]
    assert not (tmp_path / "out").exists()


def test_deepspeed_config_is_capped_within_the_file_cap(tmp_path):
    scenario = tmp_path / "ds.yaml"
    scenario.write_text(_deepspeed_scenario("x" * 2000, 100))  # 200 KB once expanded: within the file's cap
    with pytest.raises(ScenarioError, match=r"runs\[0\]\.deepspeed\.config: more than 65,536 characters as JSON"):
        load_scenario(scenario)
    key, why = deepspeed_config_problem({"comms_logger": {"prof_ops": ["all_reduce"] * (MAX_NAMES + 1)}})
    assert key == "comms_logger.prof_ops" and why.startswith(f"at most {MAX_NAMES} names, got ['all_reduce', ")
    assert deepspeed_config_problem({"comms_logger": {"prof_ops": ["all_reduce", "x" * 201]}})[1].startswith(
        "expected a list of names (1 to 200 characters each)"
    )
    assert deepspeed_config_problem({"comms_logger": {"prof_ops": ["all_reduce", "broadcast"]}}) is None
    assert MAX_CONFIG_CHARS == 64 << 10


# --- files the report quotes ------------------------------------------------------------------------------------


def test_a_huge_sparse_scenario_file_is_not_quoted(tmp_path, caplog):
    scenario = tmp_path / "scenario.yaml"
    with open(scenario, "wb") as handle:
        handle.truncate(1 << 30)  # 1 GB, sparse: nothing on disk
    with caplog.at_level(logging.WARNING):
        lines = scenario_lines(tmp_path)
    assert sum(map(len, lines)) < 1000
    assert f"skipped {scenario}: larger than {MAX_QUOTED_BYTES:,} bytes, the most a scenario file may hold here" in caplog.text
    assert lines[1].startswith(f"Not shown: {scenario}: larger than")


def test_a_scenario_file_that_is_not_utf8_is_named(tmp_path, caplog):
    (tmp_path / "scenario.yaml").write_bytes(b"name: x\n\xff\xfe\n")
    with caplog.at_level(logging.WARNING):
        lines = scenario_lines(tmp_path)
    words = f"{tmp_path / 'scenario.yaml'}: not UTF-8 text (byte 0xff at offset 8); a scenario file is UTF-8 text"
    assert f"skipped {words}" in caplog.text and lines[1] == f"Not shown: {words}.\n"


def test_read_quoted_reads_at_most_its_cap(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("é" * 10)
    assert read_quoted(path, 20) == "é" * 10
    with pytest.raises(QuotedFileError, match=r"f.txt: larger than 19 bytes, the most a probe may hold here; not read$"):
        read_quoted(path, 19, "probe")


# --- hashing ----------------------------------------------------------------------------------------------------


def test_a_forged_size_past_the_cap_is_refused_without_reading(tmp_path):
    model = tmp_path / "generator.pt"
    with open(model, "wb") as handle:
        handle.truncate(30 << 30)  # 30 GB, sparse
    problem = damage(model, 30 << 30, "0" * 64)
    assert problem == f"is declared {30 << 30:,} bytes, more than the {16 << 30:,} a model file or checkpoint may have here"
    with pytest.raises(IntegrityError, match=r"generator.pt: is declared 32,212,254,720 bytes, more than"):
        verify_file(model, FileDigest(sha256="0" * 64, bytes=30 << 30))


def test_hashing_reads_at_most_the_declared_size(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert sha256_file(path, limit=4) == hashlib.sha256(b"0123").hexdigest()
    assert sha256_file(path) == hashlib.sha256(b"0123456789").hexdigest()


def test_hashing_stops_at_its_budget(tmp_path, monkeypatch):
    path = tmp_path / "big"
    with open(path, "wb") as handle:
        handle.truncate(64 << 20)
    with pytest.raises(IntegrityError, match=r"big: its digest took longer than 0 s to check; not loaded$"):
        sha256_file(path, budget_s=0)
    monkeypatch.setattr(integrity, "HASH_BUDGET_S", 0.0)
    assert damage(path, 64 << 20, "0" * 64).startswith("took longer than 0 s to digest")


# --- the local launcher -------------------------------------------------------------------------------------------


def test_the_local_launcher_refuses_more_ranks_than_the_machine_holds(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(commands, "machine_cores", lambda: 2)
    scenario = tmp_path / "s.yaml"
    runs = [{"strategy": "data_parallel", "engine": "torch", "procs": [64]}]
    scenario.write_text(yaml.safe_dump(tiny_scenario("big", runs, train={"batch_size": 64})))
    assert main(["run", str(scenario), "--out", str(tmp_path / "out")]) == 2  # refused before anything starts
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: data_parallel-bce-torch-p64-r0: 64 ranks on this machine, more than the {2 * LOCAL_PROCS_PER_CORE} it "
        f"holds (2 cores x {LOCAL_PROCS_PER_CORE} ranks per core); lower procs, use a cluster launcher, or raise "
        "--max-local-procs"
    ]
    assert not (tmp_path / "out").exists()
    # a dry run starts nothing: it prints the command (a cluster's scenario dry-runs anywhere)
    assert main(["run", str(scenario), "--dry-run", "--out", str(tmp_path / "out")]) == 0
    assert "--nproc_per_node 64" in capsys.readouterr().out


def test_the_check_counts_only_local_launches_and_yields_to_max_local_procs(monkeypatch, tmp_path):
    from suite.config.expansion import expand, parse_scenario

    monkeypatch.setattr(commands, "machine_cores", lambda: 1)
    (run,) = expand(parse_scenario(tiny_scenario("p", [{"strategy": "data_parallel", "engine": "torch", "procs": [16]}])))
    planned = [plan_run(run, tmp_path, LaunchOptions())]
    with pytest.raises(LaunchError, match=r"16 ranks on this machine, more than the 8 it holds \(1 core x 8"):
        check_tools(planned, LaunchOptions())
    check_tools(planned, LaunchOptions(max_local_procs=16))
    assert local_procs_problem(run, 16, LaunchOptions(launcher="mpirun")) is not None  # the caller asks for local only
    assert local_procs_problem(run, 8, LaunchOptions()) is None
    assert commands.machine_cores is not None and os.cpu_count()
