"""`suite jobscript` with hostile strings (issue 43, hole 5): every string that reaches a job script is data.

Every site preset is rendered with a hostile value in each string option (and the scenario's path). A value with a
control character or a line break is refused at its option (exit 2, one line naming it, no script written); any
other value renders, passes `bash -n`, and appears only as a quoted word: putting the benign value's quoted word
back where the hostile one's stands gives, byte for byte, the script rendered with the benign value. The script
is also run (with /bin/echo for the compute nodes' python): no hostile command runs.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import tiny_scenario
from suite.cli import main
from suite.running.jobplan import JobOptions
from suite.running.jobscript import render
from suite.running.sites import SITES

RUNS_DATA = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "r'; touch PWNED #",
    'r"; touch PWNED; "',
    "a;b&&c||d #e",
    "résumé → ünïcode",
    "a b\\c",
]
"""Values that hold no control character: each must render as data."""

REFUSED = {
    "newline": "r\ntouch PWNED #",
    "carriage return": "r\rtouch PWNED",
    "NUL": "a\x00b",
    "escape": "a\x1b[2Jb",
    "tab": "a\tb",
    "NEL (C1)": "a\x85touch PWNED",
    "line separator": "a\u2028touch PWNED",
    "paragraph separator": "a\u2029touch PWNED",
    "right-to-left override": "a\u202eb",
}
"""Values with a control character, a line or paragraph separator or a format character: each is refused."""

BENIGN = "benign"
OPTIONS = ("--results", "--python", "--workdir", "--master-addr", "--preamble", "--venv", "--conda", "scenario")
"""Every string option of `suite jobscript` that is written into the script (the others take names or choices)."""


def _scenario(folder: Path, file_name: str = "js.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name
    path.write_text(yaml.safe_dump(tiny_scenario("js", [{"strategy": "data_parallel", "procs": [1, 2]}])))
    return path


def _preamble(folder: Path, file_name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name
    path.write_text("module load python\n")
    return path


def _arguments(tmp_path: Path, option: str, value: str) -> tuple[Path, dict[str, str]]:
    """The scenario path and the options of a script with ``value`` in ``option`` (the others benign)."""
    options = {"--results": BENIGN, "--python": BENIGN, "--workdir": BENIGN, "--master-addr": BENIGN}
    options["--preamble"] = str(_preamble(tmp_path / "pre", "benign.sh"))
    scenario = _scenario(tmp_path / "sc")
    if option == "scenario":
        scenario = _scenario(tmp_path / "sc", f"{value}.yaml")
    elif option == "--preamble":
        options[option] = str(_preamble(tmp_path / "pre", value))
    elif option in ("--venv", "--conda"):  # one of the two, the other left out
        options[option] = value
    else:
        options[option] = value
    return scenario, options


def _write(tmp_path: Path, site: str, scenario: Path, options: dict[str, str], out: Path) -> int:
    argv = ["jobscript", str(scenario), "--site", site, "--out", str(out), "--account", "p1"]
    for option, value in options.items():
        argv.append(f"{option}={value}")
    return main(argv)


def _quoted_forms(tmp_path: Path, option: str, value: str) -> list[str]:
    """How ``value`` of ``option`` is written into the script: every way it may appear there."""
    if option == "scenario":
        return [shlex.quote(str(tmp_path / "sc" / f"{value}.yaml"))]
    if option == "--preamble":
        return [json.dumps(str(tmp_path / "pre" / value))]  # in a comment, as a JSON string
    return [shlex.quote(value)]


@pytest.mark.parametrize("site", sorted(SITES))
@pytest.mark.parametrize("option", OPTIONS)
def test_a_hostile_value_without_control_characters_is_one_quoted_word(tmp_path, site, option):
    for n, value in enumerate(RUNS_DATA):
        if option == "--preamble" or option == "scenario":
            value = value.replace("/", "_")  # a file name
        benign_scenario, benign_options = _arguments(tmp_path / f"b{n}", option, BENIGN)
        hostile_scenario, hostile_options = _arguments(tmp_path / f"b{n}", option, value)
        benign_out, hostile_out = tmp_path / f"benign{n}.sh", tmp_path / f"hostile{n}.sh"
        assert _write(tmp_path, site, benign_scenario, benign_options, benign_out) == 0
        assert _write(tmp_path, site, hostile_scenario, hostile_options, hostile_out) == 0, (option, value)
        benign, hostile = benign_out.read_text(), hostile_out.read_text()
        assert subprocess.run(["bash", "-n", str(hostile_out)], capture_output=True).returncode == 0, (option, value)
        assert len(hostile.split("\n")) == len(benign.split("\n"))
        assert len(hostile.splitlines()) == len(benign.splitlines())  # no other line break either (\r, \x85, \u2028)
        forms = _quoted_forms(tmp_path / f"b{n}", option, value)
        benign_forms = _quoted_forms(tmp_path / f"b{n}", option, BENIGN)
        assert any(form in hostile for form in forms), (option, value)
        restored = hostile
        for form, benign_form in zip(forms, benign_forms):
            restored = restored.replace(form, benign_form)
        assert restored == benign, (option, value)  # the value appears nowhere but as its quoted word


@pytest.mark.parametrize("site", sorted(SITES))
@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_value_with_a_control_character_or_line_break_is_refused_naming_the_option(tmp_path, capsys, site, option, kind):
    value = REFUSED[kind]
    if option in ("--preamble", "scenario") and "\x00" in value:
        pytest.skip("a file name cannot hold NUL")
    scenario, options = _arguments(tmp_path, option, value)
    out = tmp_path / "job.sh"
    assert _write(tmp_path, site, scenario, options, out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {option} "), lines[0]
    assert "a job script takes no control characters, line or paragraph separators" in lines[0]
    assert "\n" not in value or "\\n" in lines[0]  # the value is shown escaped, never raw
    assert not out.exists()


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_script_with_every_option_hostile_runs_no_hostile_command(tmp_path, site):
    """Every string option hostile at once; the script, run with /bin/echo as python, touches nothing."""
    value = f"$(touch {tmp_path}/PWNED) `touch {tmp_path}/PWNED`; touch {tmp_path}/PWNED #"
    name = "$(touch PWNED) `touch PWNED`; touch PWNED #"  # file names stay short: a tmp path under xdist is long
    scenario = _scenario(tmp_path / "sc", f"{name}.yaml")
    work = tmp_path / name.replace("$", "d")
    work.mkdir()
    venv = work / name / "bin"  # --venv, read from the working folder
    venv.mkdir(parents=True)
    (venv / "activate").write_text("")
    options = {
        "--results": value,
        "--python": "/bin/echo",
        "--workdir": str(work),
        "--master-addr": value,
        "--preamble": str(_preamble(tmp_path / "pre", name)),
        "--venv": name,
    }
    out = tmp_path / "job.sh"
    assert _write(tmp_path, site, scenario, options, out) == 0
    env = {**os.environ, "SLURM_JOB_NODELIST": "n1", "LSB_DJOB_HOSTFILE": str(tmp_path / "hosts"), "PATH": os.environ["PATH"]}
    env["SUITE_DEVICE"] = "cpu"  # no GPU check (LSF's runs it under jsrun, absent here; tests/test_jobscript.py runs it)
    (tmp_path / "hosts").write_text("n1\n")
    done = subprocess.run(["bash", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "PWNED").exists() and not any(tmp_path.rglob("PWNED"))
    assert f"--out {value} " in done.stdout  # reached `suite run` as one argument
    assert done.stdout.rstrip("\n").endswith(f"-m suite report {value}")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("account", "a\nb", "--account: 'a\\nb' is not a safe name"),
        ("queue", "$(x)", "--queue: '$(x)' is not a safe name"),
        ("constraint", "gpu\n#SBATCH --exclusive", "--constraint: 'gpu\\n#SBATCH --exclusive' cannot go into"),
        ("gpu_bind", "a b", "--gpu-bind: 'a b' cannot go into"),
        ("mpi", "pmix; x", "--mpi 'pmix; x': choose one of"),
        ("master_port", "1; x", "--master-port '1; x': expected a port number"),
        ("site", "nowhere", "--site 'nowhere': not a site preset"),
        ("results", "-rf", "--results '-rf': starts with '-'"),
        ("venv", "-rf", "--venv '-rf': starts with '-'"),
        ("conda", "e\nx", "--conda 'e\\nx' holds U+000A"),
        ("module", ("ok", "$(x)"), "--module '$(x)': not a module name"),
        ("module", "pytorch", "--module: expected module names, got 'pytorch'"),
    ],
)
def test_options_given_from_python_are_checked_as_the_command_line_checks_them(tmp_path, field, value, message):
    """`render` checks its options itself: a caller that skips the command line cannot write a hostile script."""
    options = {"site": "frontier", field: value} if field != "site" else {field: value}
    with pytest.raises(ValueError) as error:
        render(_scenario(tmp_path), JobOptions(**options))
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("site", sorted(SITES))
@pytest.mark.parametrize(
    "name", ["$(touch PWNED)", "`touch PWNED`", "a;touch PWNED", "a b", "-rf", "a'b", "a\nb", "", "r\u202eb"]
)
def test_a_module_that_is_not_a_module_name_is_refused_naming_the_option(tmp_path, capsys, site, name):
    """--module takes a module's name (letters, digits and . _ + / @ -), written as one quoted word; anything else is
    refused in one line, before a script is written."""
    out = tmp_path / "job.sh"
    assert (
        main(["jobscript", str(_scenario(tmp_path)), "--site", site, "--account", "p1", "--out", str(out), f"--module={name}"])
        == 2
    )
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --module ") and "not a module name" in lines[0], lines
    assert not out.exists()
    assert (
        main(
            [
                "jobscript",
                str(_scenario(tmp_path)),
                "--site",
                site,
                "--account",
                "p1",
                "--out",
                str(out),
                "--module=pytorch/2.3.1+cu121",
            ]
        )
        == 0
    )
    assert "module load pytorch/2.3.1+cu121 || " in out.read_text()
