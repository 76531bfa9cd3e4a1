"""A new user's first commands (issue 54): one name for a paper with the old ones as aliases, messages that say what
to do (``suite compare`` on run folders, ``suite env`` under a ROCm torch), and "did you mean" wherever a name is typed."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from conftest import REPO
from suite.analysis.report.paper_pages import collect, paper_of
from suite.analysis.report.papers import PAPERS
from suite.cli import main
from suite.config import names
from suite.config.builtin import resolve_scenario
from suite.config.expansion import expand, load_scenario
from suite.measure import env
from suite.records.results import new_record, write_record

QUALITY = REPO / "scenarios" / "papers" / "reduced" / "paper000-quality.yaml"
COMMITTED = REPO / "reports" / "papers" / "paper000" / "paper000-quality" / "records.json"


# --- one name for a paper, the old ones as aliases -------------------------------------------------------------


def test_paper_scenarios_files_folders_and_keys_say_paper():
    assert list(PAPERS) == ["paper000", "paper001", "paper002", "paper003"]
    papers = REPO / "scenarios" / "papers"
    files = sorted(p.name for p in [*papers.glob("*.yaml"), *papers.glob("reduced/*.yaml")])
    assert files and all(f.startswith("paper00") for f in files), files
    assert sorted(p.name for p in (REPO / "reports" / "papers").iterdir() if p.is_dir()) == list(PAPERS)
    for path in [*papers.glob("*.yaml"), *papers.glob("reduced/*.yaml")]:
        assert load_scenario(path).name.startswith(path.stem.split("-")[0] + "-"), path  # name: as the file


def test_old_names_are_aliases_of_the_new():
    assert names.current_name("seed002-reduced-wcgan") == "paper002-reduced-wcgan"
    assert names.current_name("digits") == "digits" and names.current_name("seed-x") == "seed-x"
    assert names.old_names("paper000-reduced-quality") == ["seed000-reduced-quality"]
    assert names.old_names("quickstart") == []
    assert paper_of("seed003-reduced-grids") is paper_of("paper003-reduced-grids") is PAPERS["paper003"]


def test_committed_records_under_old_names_still_belong_to_their_paper():
    by_paper = collect([REPO / "reports" / "papers"])
    assert set(by_paper) == set(PAPERS)
    assert {r.scenario for r in by_paper["paper000"]} >= {"seed000-reduced-quality"}  # recorded before the rename


def test_an_old_scenario_path_runs_the_renamed_file(caplog):
    old = REPO / "scenarios" / "papers" / "reduced" / "seed000-quality.yaml"
    assert resolve_scenario(old) == QUALITY
    assert "renamed paper000-quality.yaml" in caplog.text


def _old_folder(out: Path, scenario_name: str) -> None:
    """A results folder holding one finished run of the reduced quality scenario, recorded as ``scenario_name``."""
    scenario = load_scenario(QUALITY)
    scenario.name = scenario_name
    run = expand(scenario)[0]
    data = next(r for r in json.loads(COMMITTED.read_text()) if r["run_id"] == run.run_id)
    data["settings"] = json.loads(json.dumps(run.settings()))
    write_record(out / run.run_id, new_record(data))


def test_a_results_folder_begun_under_the_old_name_resumes(tmp_path, monkeypatch, capsys):
    out = tmp_path / "old"
    _old_folder(out, "seed000-reduced-quality")
    assert main(["run", str(QUALITY), "--out", str(out), "--dry-run", "--resume"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(names, "RENAMED_PREFIXES", {})  # without the alias the finished run's settings differ
    assert main(["run", str(QUALITY), "--out", str(out), "--dry-run", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "made with other settings" in err and '"seed000-reduced-quality" -> "paper000-reduced-quality"' in err


def test_the_default_results_folder_is_the_old_one_where_only_it_exists(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _old_folder(tmp_path / "results" / "seed000-reduced-quality", "seed000-reduced-quality")
    assert main(["run", str(QUALITY), "--dry-run", "--resume"]) == 0
    assert not (tmp_path / "results" / "paper000-reduced-quality").exists()


# --- suite compare on run folders ------------------------------------------------------------------------------


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    record = json.loads((REPO / "reports" / "digits" / "records.json").read_text())[0]
    for side in ("a", "b"):
        write_record(tmp_path / side / record["run_id"], new_record(record))
    return tmp_path / "a" / record["run_id"], tmp_path / "b" / record["run_id"]


def test_compare_takes_two_run_folders(tmp_path, capsys):
    one, other = _two_runs(tmp_path)
    assert main(["compare", str(one), str(other), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["regressions"] == 0 and report["rows"]


def test_a_run_folder_where_a_results_folder_is_needed_names_its_results_folder(tmp_path, capsys):
    one, _ = _two_runs(tmp_path)
    assert main(["tune", str(one)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {one}: a run folder (its result.json is one run); give the results folder that holds it ({one.parent})"


# --- suite env under a ROCm torch ------------------------------------------------------------------------------


@pytest.fixture
def rocm(monkeypatch):
    """A ROCm build of torch as torch reports one: ``torch.version.hip`` set, one GPU, RCCL behind the nccl backend."""
    import torch
    import torch.distributed as dist

    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "AMD Instinct MI250X")
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 20, 5))
    monkeypatch.setattr(env, "_horovod", lambda: {"version": "0.28.1", "build": "CPU-only"})
    monkeypatch.setattr(env, "_deepspeed", lambda: {"version": "0"})
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # not installed unless a test fakes it
    monkeypatch.setenv("PATH", "")  # nor rocm-smi


def test_env_under_rocm_reports_rccl_and_amd_smi_not_nccl_and_nvml(rocm, monkeypatch):
    calls = []
    fake = types.SimpleNamespace(
        amdsmi_init=lambda: calls.append("init"),
        amdsmi_shut_down=lambda: calls.append("shut"),
        amdsmi_get_processor_handles=lambda: ["h0"],
        amdsmi_get_gpu_driver_info=lambda h: {"driver_version": "6.8.5"},
        amdsmi_get_gpu_asic_info=lambda h: {"market_name": "MI250X"},
    )
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    caps = env.capabilities()
    assert "nvml" not in caps and "nccl_version" not in caps["torch"]
    assert caps["torch"]["rccl_version"] == "2.20.5" and caps["torch"]["hip_build"] == "6.2.41133"
    assert caps["amd_smi"] == {"available": True, "library": "amdsmi", "driver": "6.8.5", "devices": ["MI250X"]}
    assert calls == ["init", "shut"]


def test_env_under_rocm_falls_back_to_rocm_smi_then_says_neither_is_there(rocm, tmp_path, monkeypatch):
    assert env.gpu_monitor() == (
        "amd_smi",
        {
            "available": False,
            "error": "RuntimeError: neither the amdsmi package nor the rocm-smi command is installed (ROCm ships both)",
        },
    )
    shown = {"card0": {"Card Series": "AMD Instinct MI250X"}, "system": {"Driver version": "6.8.5"}}
    script = tmp_path / "rocm-smi"
    script.write_text(f"#!/bin/sh\necho '{json.dumps(shown)}'\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    key, found = env.gpu_monitor()
    assert (key, found["library"], found["driver"], found["devices"]) == (
        "amd_smi",
        "rocm-smi",
        "6.8.5",
        ["AMD Instinct MI250X"],
    )


def test_env_on_a_cuda_build_keeps_nvml_and_nccl(monkeypatch):
    import torch

    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert env.gpu_monitor()[0] == "nvml"


# --- did you mean, wherever a name is typed --------------------------------------------------------------------


def test_a_mistyped_subcommand_gets_did_you_mean(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["repot"])
    assert exit_.value.code == 2
    assert "invalid choice: 'repot' (did you mean report?); choose from run, report," in capsys.readouterr().err


def test_an_only_pattern_that_matches_nothing_is_named_with_the_close_names(capsys):
    quickstart = REPO / "scenarios" / "quickstart.yaml"
    args = ["run", str(quickstart), "--dry-run", "--only", "conditional-*", "--only", "data_paralel-*"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --only data_paralel-* matches no run of quickstart (did you mean data_parallel")
    assert "--dry-run` lists its 3 runs" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("command", [["report"], ["papers"], ["tune"], ["compare", "reports/digits"]])
def test_a_mistyped_results_folder_gets_did_you_mean(command, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main([*command, "reports/digit"]) == 2
    assert "reports/digit: no such results folder" in (err := capsys.readouterr().err)
    assert "(did you mean reports/digits?)" in err


def test_a_near_miss_among_a_folders_names_is_offered_only_when_it_prints_on_one_line(tmp_path, capsys):
    (tmp_path / "result\nz").mkdir()  # anyone's folder name: a line break would split the one-line refusal
    (tmp_path / "resultz\x1b[31m").mkdir()
    assert names.did_you_mean_path(tmp_path / "resultz") == ""
    (tmp_path / "results").mkdir()
    assert names.did_you_mean_path(tmp_path / "resultz") == f" (did you mean {tmp_path / 'results'}?)"
    assert main(["report", str(tmp_path / "resultz")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_one_did_you_mean_serves_every_name():
    assert names.did_you_mean("digitz", ["digits", "smoke"]) == " (did you mean digits?)"
    assert names.did_you_mean("zzz", ["digits"]) == ""
    assert names.did_you_mean("digit", ["digits", "digits-gpu", "smoke"], n=2) == " (did you mean digits or digits-gpu?)"
    users = sorted(str(p.relative_to(REPO)) for p in (REPO / "suite").rglob("*.py") if "get_close_matches" in p.read_text())
    assert users == ["suite/config/names.py"]


def test_a_mistyped_choice_in_a_scenario_or_a_registry_name_gets_did_you_mean(tmp_path):
    from suite.config.registry import STRATEGIES
    from suite.config.scenario import ScenarioError

    text = (REPO / "scenarios" / "quickstart.yaml").read_text().replace("name: digits", "name: digts")
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(ScenarioError, match=r"dataset.name: 'digts' is not one of .* \(did you mean digits\?\)"):
        load_scenario(tmp_path / "s.yaml")
    with pytest.raises(ValueError, match=r"unknown strategy 'celular' \(did you mean cellular\?\); choose one of"):
        STRATEGIES["celular"]
