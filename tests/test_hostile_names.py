"""Files and scenarios from someone else: names stay data, paths stay inside their folder, results keep their settings."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, tiny_scenario
from suite.cli import main
from suite.config.safe_text import SAFE_NAME_RULE
from suite.config.shown import shown
from suite.records.record import SCHEMA_VERSION

HOSTILE = ["../../x", "/ABSOLUTE/x", "nl\ntouch TOUCHED", "a;touch TOUCHED", "$(touch TOUCHED)", ""]
"""Names that would leave their folder (``../``, an absolute path, none at all) or run code in a job script."""


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (links too) by relative path, with its content's sha256."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() or path.is_symlink():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "link"
    return found


def _hostile(value: str, tmp_path: Path) -> str:
    """``value`` with its placeholders pointing into ``tmp_path`` (an absolute name, a file a command would touch)."""
    return value.replace("/ABSOLUTE", str(tmp_path / "absolute")).replace("TOUCHED", str(tmp_path / "touched"))


def _scenario(tmp_path: Path, name: str = "s", label: str | None = None, **sections) -> Path:
    entry = {"strategy": "data_parallel", "engine": "mpi", "procs": [1]}
    if label is not None:
        entry["label"] = label
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario(name, [entry], **sections)))
    return path


# --- names are data -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", HOSTILE)
def test_names_a_hostile_scenario_name_is_refused_and_nothing_is_written(tmp_path, monkeypatch, capsys, value):
    name = _hostile(value, tmp_path)
    path = _scenario(tmp_path, name=name)
    here = tmp_path / "a" / "b"  # the default results folder is results/NAME under the working directory
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    before = _tree(tmp_path)
    assert main(["run", str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {path}: name: {shown(name)} is not a safe name: {SAFE_NAME_RULE}\n"
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("value", HOSTILE)
def test_names_a_hostile_run_label_is_refused_and_nothing_is_written(tmp_path, capsys, value):
    label = _hostile(value, tmp_path)
    path = _scenario(tmp_path, label=label)
    out = tmp_path / "a" / "b" / "out"
    before = _tree(tmp_path)
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {path}: runs[0].label: {shown(label)} is not a safe name: {SAFE_NAME_RULE}\n"
    assert _tree(tmp_path) == before


def test_names_safe_names_with_dots_dashes_and_underscores_still_run(tmp_path, monkeypatch, capsys):
    path = _scenario(tmp_path, name="Digits_v2.1-a", label="dp.mpi_1-b")
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path), "--dry-run"]) == 0
    written = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "results").rglob("*") if p.is_file())
    assert written == [
        "results/Digits_v2.1-a/.suite.lock",
        "results/Digits_v2.1-a/dp.mpi_1-b-p1-r0/run.json",
        "results/Digits_v2.1-a/scenario.yaml",
    ]
    assert capsys.readouterr().out.split()[-3] == str(tmp_path / "results" / "Digits_v2.1-a" / "dp.mpi_1-b-p1-r0")


def test_names_path_under_keeps_every_path_inside_its_root(tmp_path):
    from suite.records.results import OutsideRoot, path_under

    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)  # a link inside that points out
    assert path_under(root, "run-p1-r0") == root / "run-p1-r0"
    assert path_under(root, "run-p1-r0", "result.json") == root / "run-p1-r0" / "result.json"
    for parts in (("../x",), ("..",), (str(tmp_path / "elsewhere"),), ("",), (".",), ("out", "x"), ("a", "..", "..", "x")):
        with pytest.raises(OutsideRoot) as error:
            path_under(root, *parts)
        assert str(error.value) == f"{root.joinpath(*parts)}: not inside {root}; a name must not lead out of its folder"


@pytest.mark.parametrize("option", ["--queue", "--account", "--qos"])
@pytest.mark.parametrize("value", ["debug\ntouch TOUCHED", "a;touch TOUCHED", "$(touch TOUCHED)", "a b", "../x", ""])
def test_names_a_jobscript_refuses_an_unsafe_queue_or_account(tmp_path, monkeypatch, capsys, option, value):
    value = _hostile(value, tmp_path)
    path = _scenario(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["jobscript", str(path), "--scheduler", "slurm", option, value])
    assert stop.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"suite jobscript: error: argument {option}: {shown(value)} is not a safe name: {SAFE_NAME_RULE}"
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("scheduler", ["slurm", "lsf"])
def test_names_free_text_in_a_jobscript_is_quoted_and_runs_as_data(tmp_path, monkeypatch, scheduler):
    """A results folder holding commands reaches `suite run` as one argument; the command never runs (a newline is
    refused: tests/test_jobscript_hostile.py)."""
    results = f"r; touch {tmp_path / 'touched'} # $(touch {tmp_path / 'touched'}); `touch {tmp_path / 'touched'}` x"
    path = _scenario(tmp_path, name="quoted")
    monkeypatch.chdir(tmp_path)
    # /bin/echo stands for the compute nodes' python: the script then prints the commands it would run
    args = ["jobscript", str(path), "--scheduler", scheduler, "--results", results, "--python", "/bin/echo", "--queue", "q1"]
    assert main(args) == 0
    script = tmp_path / "jobs" / f"quoted.{scheduler}.sh"
    # SUITE_DEVICE=cpu: no GPU check (an LSF script runs it under jsrun, absent here; test_jobscript_first_submission runs it)
    env = {**os.environ, "SLURM_JOB_NODELIST": "n1", "LSB_DJOB_HOSTFILE": str(tmp_path / "hosts"), "SUITE_DEVICE": "cpu"}
    (tmp_path / "hosts").write_text("n1\n")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "touched").exists()
    assert done.stdout.count(results) == 2  # `suite run ... --out RESULTS` and `suite report RESULTS`, each one argument
    assert f"-m suite report {results}\n" in done.stdout


def test_names_a_report_refuses_a_record_whose_run_id_leads_out(tmp_path, capsys, caplog):
    from test_report import record

    results = tmp_path / "results"
    (results / "evil").mkdir(parents=True)  # a record the suite would never write: as someone planted it
    (results / "evil" / "result.json").write_text(json.dumps({"schema": SCHEMA_VERSION, **record("../../evil")}))
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "samples.png").write_bytes(b"not ours")
    before = {k: v for k, v in _tree(tmp_path).items() if not k.startswith("results/report/")}
    assert main(["report", str(results)]) == 2
    # the record is named and left out (a report of the others would go on); with none left, one line says so
    assert (
        f"skipped {results / 'evil' / 'result.json'}" in caplog.text and "run_id: '../../evil' is not a safe name" in caplog.text
    )
    assert capsys.readouterr().err == (
        f"error: {results}: no result.json found; run `suite run SCENARIO --out {results}` first\n"
    )
    assert {k: v for k, v in _tree(tmp_path).items() if not k.startswith("results/report/")} == before


# --- provenance --------------------------------------------------------------------------------------------------


def _utc(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


def _source_revision(tmp_path: Path, path_variable: str | None = None) -> dict:
    """``source_revision()`` of the suite package copied to ``tmp_path/suite``, asked in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    if path_variable is not None:
        env["PATH"] = path_variable
    code = "import json; from suite.measure.env import source_revision; print(json.dumps(source_revision()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    return json.loads(done.stdout)


def test_provenance_names_the_commit_and_whether_tracked_files_changed(tmp_path):
    import suite

    shutil.copytree(REPO / "suite", tmp_path / "suite", ignore=shutil.ignore_patterns("__pycache__"))
    outside = _source_revision(tmp_path)
    assert outside == {
        "suite_version": suite.__version__,
        "git_commit": None,
        "git_dirty": None,
        "git_note": f"{tmp_path / 'suite'} is not a tracked part of a git checkout",
    }
    no_git = _source_revision(tmp_path, path_variable=str(tmp_path / "empty"))
    assert (no_git["git_commit"], no_git["git_dirty"], no_git["git_note"]) == (None, None, "git is not installed")

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "suite"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (tmp_path / "notes.txt").write_text("untracked files do not count")
    assert _source_revision(tmp_path) == {
        "suite_version": suite.__version__,
        "git_commit": head,
        "git_dirty": False,
        "git_note": None,
    }
    with open(tmp_path / "suite" / "config" / "registry.py", "a") as f:
        f.write("\n# changed\n")
    assert _source_revision(tmp_path)["git_dirty"] is True


def test_provenance_of_a_record_the_launcher_writes(tmp_path):
    """A run that left no record gets a failed one from `suite run`, with the same provenance a worker writes."""
    from conftest import finalize_record
    from suite.config.expansion import expand, load_scenario
    from suite.measure.env import source_revision
    from suite.records.codec import record_data

    (run,) = expand(load_scenario(_scenario(tmp_path)))
    run_dir = tmp_path / run.run_id
    run_dir.mkdir()
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    record = finalize_record(run, run_dir, ["false"], 1, 0.5, started_utc="2030-01-02T03:04:05Z")
    written = json.loads((run_dir / "result.json").read_text())
    assert written == {"schema": SCHEMA_VERSION, **json.loads(json.dumps(record_data(record)))} and written["status"] == "failed"
    assert written["settings"] == json.loads(json.dumps(run.to_dict()))
    assert written["started_utc"] == "2030-01-02T03:04:05Z"
    assert before <= _utc(written["ended_utc"]) <= dt.datetime.now(dt.timezone.utc)
    source = source_revision()
    assert {k: written.get(k) for k in source} == source  # a field that is None is left out of the file


def _finished(tmp_path: Path, path: Path, out: Path, with_settings: bool = True) -> None:
    """``out`` as a folder of finished runs of ``path``: run folders with an ok ``result.json`` each."""
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 0
    for run_json in out.glob("*/run.json"):
        settings = json.loads(run_json.read_text())
        record = {"run_id": settings["run_id"], "status": "ok", **({"settings": settings} if with_settings else {})}
        (run_json.parent / "result.json").write_text(json.dumps({"schema": SCHEMA_VERSION, **record}))


@pytest.mark.parametrize("with_settings", [True, False], ids=["settings-in-record", "record-before-provenance"])
@pytest.mark.parametrize("mode", [["--dry-run"], ["--dry-run", "--resume"], ["-q", "--resume"], ["-q"]])
def test_provenance_an_edited_scenario_over_finished_runs_is_refused(tmp_path, capsys, mode, with_settings):
    path, out = _scenario(tmp_path), tmp_path / "out"
    _finished(tmp_path, path, out, with_settings)
    path.write_text(path.read_text().replace("batch_size: 32", "batch_size: 32\n  lr: 0.005"))
    before = _tree(out)
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(out), *mode]) == 2
    assert capsys.readouterr().err == (
        f"error: {out}: a finished run was made with other settings: data_parallel-bce-mpi-p1-r0 (train.lr 0.0002 -> 0.005); "
        "a finished run's settings are never rewritten: choose another --out, or delete those run folders to run them again\n"
    )
    assert _tree(out) == before


def test_provenance_the_refusal_names_every_changed_run_and_field_in_one_line(tmp_path, capsys):
    path, out = _scenario(tmp_path), tmp_path / "out"
    data = yaml.safe_load(path.read_text())
    data["runs"][0]["procs"] = [1, 2]
    data["runs"].append({"strategy": "data_parallel", "engine": "mpi", "procs": [1, 2], "label": "second"})
    path.write_text(yaml.safe_dump(data))
    _finished(tmp_path, path, out)
    data["train"].update(lr=0.005, betas=[0.0, 0.9], seed=3, epochs=4)
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 2
    fields = "train.betas [0.5, 0.999] -> [0.0, 0.9], train.epochs 1 -> 4, train.lr 0.0002 -> 0.005, and 1 more"
    assert capsys.readouterr().err == (
        f"error: {out}: 4 finished runs were made with other settings: data_parallel-bce-mpi-p1-r0 ({fields}); "
        f"data_parallel-bce-mpi-p2-r0 ({fields}); second-p1-r0 ({fields}), and 1 more; "
        "a finished run's settings are never rewritten: choose another --out, or delete those run folders to run them again\n"
    )


def test_provenance_an_unchanged_scenario_and_only_other_runs_pass(tmp_path, capsys):
    path, out = _scenario(tmp_path), tmp_path / "out"
    data = yaml.safe_load(path.read_text())
    data["runs"][0]["procs"] = [1, 2]
    path.write_text(yaml.safe_dump(data))
    _finished(tmp_path, path, out)
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 0  # the same settings, placement aside
    assert main(["run", str(path), "--out", str(out), "--dry-run", "--ranks-per-node", "1"]) == 0
    # a sweep's other process counts are not the run's settings: dropping P=1 leaves the P=2 run as it was
    path.write_text(yaml.safe_dump({**data, "runs": [{**data["runs"][0], "procs": [2]}]}))
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 0
    path.write_text(yaml.safe_dump(data))
    # tracing is the command line's, per command, and trains nothing else: `--resume --trace` over finished runs passes
    assert main(["run", str(path), "--out", str(out), "--dry-run", "--only", "*-p2-*", "--trace"]) == 0
    assert json.loads((out / "data_parallel-bce-mpi-p2-r0" / "run.json").read_text())["trace"] is True
    # a selection does not hide the others: the folder's scenario.yaml would describe them
    path.write_text(path.read_text().replace("batch_size: 32", "batch_size: 32\n  lr: 0.005"))
    assert main(["run", str(path), "--out", str(out), "--dry-run", "--only", "*-p2-*"]) == 2
    assert "data_parallel-bce-mpi-p1-r0 (train.lr 0.0002 -> 0.005)" in capsys.readouterr().err


@pytest.mark.multiproc
def test_provenance_a_trained_run_records_its_settings_version_commit_and_times(small_sweep, tmp_path, capsys):
    import suite
    from suite.config.scenario import Run
    from suite.measure.env import source_revision

    # a run of the shared small sweep (tests/conftest.py), with its `suite run`'s times before and after
    assert small_sweep.code == 0
    record = small_sweep.records["data_parallel-bce-mpi-p1-r0"]
    run_dir = small_sweep.results / record["run_id"]
    assert record["status"] == "ok"
    assert record["settings"] == json.loads((run_dir / "run.json").read_text())
    assert Run.from_dict(record["settings"]).train.lr == 0.0002  # the settings load back as the run
    assert record["suite_version"] == suite.__version__
    source = source_revision()
    assert {k: record.get(k) for k in source} == source  # a field that is None is left out of the file
    assert small_sweep.before <= _utc(record["started_utc"]) <= _utc(record["ended_utc"]) <= small_sweep.after
    # and an edited scenario cannot be dry-run over it (a folder holding that run alone)
    results = small_sweep.subset("provenance", [record["run_id"]])
    path = tmp_path / "provenance.yaml"
    path.write_text(yaml.safe_dump({**small_sweep.scenario, "model": {"latent_dim": 64}}))
    hashed = _tree(results)
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(results), "--dry-run"]) == 2
    assert f"{record['run_id']} (model.latent_dim 100 -> 64)" in capsys.readouterr().err
    assert _tree(results) == hashed
