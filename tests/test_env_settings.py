"""``SUITE_*`` environment variables are settings, checked at start-up (issue 52, item 7).

``SUITE_LOG=xyz`` killed every rank with a traceback (the record said "exited with code 1") and ``SUITE_DEVICE=xyz``
was ignored silently. Now the ``suite`` command and every rank check every ``SUITE_*`` variable before anything
runs: one line per wrong variable naming it and its allowed values, exit code 2, nothing written.
"""

from __future__ import annotations

import logging
import re

import pytest

from suite.cli import main
from suite.config.envsettings import SETTINGS, EnvironmentSettingError, check_environment, environment_problems
from suite.running.worker import main as worker_main


@pytest.mark.parametrize(
    ("name", "value", "takes"),
    [
        ("SUITE_LOG", "xyz", "DEBUG, INFO, WARNING, ERROR, CRITICAL"),
        ("SUITE_DEVICE", "xyz", "auto, cpu"),
        ("SUITE_NO_PLUGINS", "yes", "1 (on) or 0 (off)"),
        ("SUITE_TEST_FAIL_AT_STEP", "-3", "a whole number from 0"),
        ("SUITE_TEST_FAIL_HOW", "explode", "raise or kill"),
        ("SUITE_TEST_SLOWDOWN", "nan", "a number from 0 to 1000"),
        ("SUITE_INCEPTION_WEIGHTS", "/no/such/file.pth", "an existing file"),
    ],
)
def test_a_wrong_value_stops_the_command_in_one_line_naming_the_variable(monkeypatch, capsys, tmp_path, name, value, takes):
    monkeypatch.setenv(name, value)
    assert main(["schema"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [f"error: {name}={value}: {SETTINGS[name].purpose}; it takes {takes}"]


def test_every_wrong_variable_is_named_at_once(monkeypatch):
    monkeypatch.setenv("SUITE_LOG", "xyz")
    monkeypatch.setenv("SUITE_DEVICE", "gpu")
    with pytest.raises(EnvironmentSettingError) as caught:
        check_environment()
    head, listed = str(caught.value).split(": ", 1)
    assert head == "2 environment variables are wrong" and "\n" not in listed  # one line: the refusal's
    assert [part.split("=")[0].strip() for part in re.split(r"\(\d\) ", listed)[1:]] == ["SUITE_DEVICE", "SUITE_LOG"]


def test_a_rank_refuses_a_wrong_value_in_one_line_before_reading_its_run(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("SUITE_LOG", "xyz")
    assert worker_main([str(tmp_path / "no-run")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines() == [
        "error: SUITE_LOG=xyz: the ranks' logging level; it takes DEBUG, INFO, WARNING, ERROR, CRITICAL"
    ]


def test_good_values_pass_and_an_empty_one_is_unset(monkeypatch, tmp_path):
    weights = tmp_path / "w.pth"
    weights.write_bytes(b"x")
    env = {
        "SUITE_LOG": "DEBUG",
        "SUITE_DEVICE": "cpu",
        "SUITE_NO_PLUGINS": "1",
        "SUITE_CACHE": str(tmp_path / "cache"),
        "SUITE_INCEPTION_WEIGHTS": str(weights),
        "SUITE_TEST_SLOWDOWN": "0.25",
        "SUITE_RUN_OWNER": "node1:123:456789",
        "SUITE_VENV": "anything",
        "SUITE_DATA": "",
    }
    assert environment_problems(env) == ([], [])
    assert environment_problems({"SUITE_CACHE": str(weights)})[0] == [
        f"SUITE_CACHE={weights}: the suite's cache (statistics, datasets); it takes a folder (made when missing)"
    ]


def test_an_unknown_name_is_a_warning_with_the_closest_name(monkeypatch, caplog):
    monkeypatch.setenv("SUITE_DEVCE", "cpu")
    with caplog.at_level(logging.WARNING):
        check_environment()
    assert "SUITE_DEVCE: not a variable the suite reads (did you mean SUITE_DEVICE?); it is ignored" in caplog.text


def test_a_value_with_control_characters_is_shown_escaped(monkeypatch):
    problems, _ = environment_problems({"SUITE_LOG": "x\x1b[2J\u202e"})
    assert problems == ["SUITE_LOG=x\\x1b[2J\\u202e: the ranks' logging level; it takes DEBUG, INFO, WARNING, ERROR, CRITICAL"]


def test_every_variable_the_code_reads_is_a_setting():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    read = set()
    for path in [*root.joinpath("suite").rglob("*.py"), *root.joinpath("ci").rglob("*.sh"), *root.joinpath("ci").rglob("*.py")]:
        read |= set(re.findall(r"\b(SUITE_[A-Z][A-Z_]*[A-Z])\b", path.read_text(errors="replace")))
    read -= {"SUITE_SETS_IT", "SUITE_DEVCE"}  # a constant's name in engine_configs; the misspelt example of envsettings
    assert read - set(SETTINGS) == set()
