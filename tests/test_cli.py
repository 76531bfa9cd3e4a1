"""The `suite` command: clear errors, dry runs, and failures recorded instead of lost."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from report_text import whole_report

from conftest import REPO, launched_runs, run_scenario, tiny_scenario
from suite.cli import main
from suite.config.scenario import TrainConfig
from suite.records.results import LOCK_FILE

HEAVY_LIBRARIES = ("torch", "matplotlib", "scipy", "pandas")


@pytest.mark.parametrize("call", ["build_parser()", "main(['--version'])", "main(['--help'])", "main(['run', '--help'])"])
def test_the_parser_and_help_load_none_of_the_heavy_libraries(call):
    # a fresh interpreter: this one has long imported them all
    code = (
        "import sys\n"
        "from suite.cli import main\n"
        "from suite.cli.parser import build_parser\n"
        "try:\n"
        f"    {call}\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in {HEAVY_LIBRARIES!r} if m in sys.modules), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_bad_scenario_is_one_clear_line(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "train": {"epoch": 2}, "runs": [{"strategy": "data_parallel", "procs": [1]}]}))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    fields = ", ".join(f.name for f in dataclasses.fields(TrainConfig))
    assert err.strip() == f"error: {path}: train.epoch: unknown field; expected one of {fields} (did you mean epochs?)"
    assert fields.startswith("epochs, steps, batch_size")


def test_dry_run_prints_one_command_per_run(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(
            tiny_scenario(
                "s",
                [
                    {"strategy": "data_parallel", "engine": "horovod", "procs": [2]},
                    {"strategy": "data_parallel", "engine": "torch", "procs": [2]},
                    {"strategy": "label_partitioned", "engine": "mpi", "procs": [1]},
                ],
            )
        )
    )
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3
    assert "horovodrun -np 2 --gloo -H localhost:2" in lines[0] and lines[0].split()[-3].endswith(
        "data_parallel-bce-horovod-p2-r0"
    )
    assert "torch.distributed.run --standalone --nnodes 1 --nproc_per_node 2 --log-dir " in lines[1]
    assert "/torchelastic -m suite.running.worker" in lines[1]  # torchrun's logs in the run's folder
    assert "mpirun -np 1 --bind-to none" in lines[2] and "-m suite.running.worker" in lines[2]
    # a dry run writes each run's settings, so the printed commands can be run by hand, and no result
    assert sorted(p.name for p in (tmp_path / "r").glob("*/run.json")) == ["run.json"] * 3
    assert not list((tmp_path / "r").glob("*/result.json"))


@pytest.mark.multiproc
def test_a_failing_run_is_recorded_and_the_others_still_run(tmp_path, monkeypatch):
    scenario = tiny_scenario(
        "mixed",
        [
            {"strategy": "data_parallel", "engine": "mpi", "procs": [2], "label": "fails"},
            {"strategy": "data_parallel", "engine": "mpi", "procs": [1]},
        ],
    )
    code, _ = run_scenario(tmp_path, scenario, "--only", "data_parallel-bce-mpi-*")
    assert code == 0
    # the same scenario (a folder never mixes settings), with rank 1 raising after its first step:
    # a runtime error in the worker of the 2-rank run, the only one with a rank 1
    monkeypatch.setenv("SUITE_TEST_FAIL_AT_STEP", "1")
    code, records = run_scenario(tmp_path, scenario, "--only", "fails-*", "--resume")
    assert code == 1
    failed = records["fails-p2-r0"]
    assert failed["status"] == "failed" and failed["exit_code"] != 0
    assert failed["error"].splitlines()[0].startswith("rank 1 on ")
    assert "RuntimeError: injected failure after step 1 (SUITE_TEST_FAIL_AT_STEP)" in failed["error"].splitlines()[0]
    assert records["data_parallel-bce-mpi-p1-r0"]["status"] == "ok"  # earlier result kept
    # the report still renders and lists the failure
    assert main(["report", str(tmp_path / "results")]) == 0
    report = whole_report(tmp_path / "results" / "report" / "report.md")
    assert "fails-p2-r0 | failed" in report
    runs = json.loads((tmp_path / "results" / "report" / "records.json").read_text())
    assert {r["status"] for r in runs} == {"ok", "failed"}


def test_report_of_an_empty_folder_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "no result.json found" in capsys.readouterr().err


def test_records_are_written_atomically_and_readable_by_others(tmp_path):
    import dataclasses
    import stat

    from suite.records.results import new_record, read_record, write_record

    record = new_record({"run_id": "x", "status": "ok", "train_s": float("nan")})  # a field of the record schema
    write_record(tmp_path / "run", record)
    path = tmp_path / "run" / "result.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask() & ~0o022  # nobody else may change it
    assert read_record(tmp_path / "run").train_s is None  # JSON has no NaN: n/a
    write_record(tmp_path / "run", dataclasses.replace(record, wall_s=1.5))
    assert read_record(tmp_path / "run").wall_s == 1.5 and read_record(tmp_path / "run").status == "ok"
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["result.json"]  # no temporary files left
    path.write_text("{broken")
    with pytest.raises(ValueError, match="not a valid result record"):
        read_record(tmp_path / "run")


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.multiproc
def test_a_run_over_its_time_limit_is_stopped_and_recorded(tmp_path):
    scenario = tiny_scenario("slow", [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}], train={"steps": 1000})
    code, records = run_scenario(tmp_path, scenario, "--timeout", "4")
    record = records["data_parallel-bce-mpi-p2-r0"]
    assert code == 1 and record["status"] == "failed"
    assert record["error"].startswith("timed out after") and "--timeout" in record["error"]
    assert record["wall_s"] < 60  # the ranks were stopped, not waited for


def test_an_interrupted_run_is_recorded(tmp_path, monkeypatch):
    import subprocess

    from suite.config.expansion import expand, parse_scenario
    from suite.running.commands import LaunchOptions
    from suite.running.launch import launch
    from suite.running.planning import plan_run, prepare_run_folder

    run = expand(parse_scenario(tiny_scenario("i", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}])))[0]
    planned = plan_run(run, tmp_path, LaunchOptions())
    run_dir = prepare_run_folder(planned)

    class Interrupted(subprocess.Popen):
        def wait(self, timeout=None):
            if timeout == 1.0:
                raise KeyboardInterrupt  # as if the user pressed Ctrl-C while the run was going
            return super().wait(timeout)

    monkeypatch.setattr("suite.running.launch.subprocess.Popen", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        launch(planned, LaunchOptions())
    record = json.loads((run_dir / "result.json").read_text())
    assert record["status"] == "interrupted" and record["error"].startswith("interrupted by SIGINT after")
    assert "no checkpoint yet: --resume starts it again from step 0" in record["error"]
    assert record["run_id"] == run.run_id and record["exit_code"] != 0  # the launcher was stopped


def test_a_scenario_with_three_seeds_plans_three_runs(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    data = tiny_scenario("s", [{"strategy": "conditional", "engine": "torch", "procs": [2]}])
    data["train"] = {**data.get("train", {}), "seeds": [0, 1, 2]}
    data["train"].pop("seed", None)
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# one launch, 3 runs: ")  # one launch carries the three seeds
    folders = launched_runs(printed)
    assert folders == [f"conditional-bce-torch-p2-s{s}-r0" for s in (0, 1, 2)]
    assert [json.loads((tmp_path / "r" / name / "run.json").read_text())["train"]["seed"] for name in folders] == [0, 1, 2]


def test_suite_ruler_train_pins_a_new_ruler_and_list_checks_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SUITE_RULERS", str(tmp_path / "rulers"))
    assert main(["ruler", "train", "--dataset", "digits", "--image-size", "12"]) == 0
    out = capsys.readouterr().out
    digest = out.split("sha256 ")[1].split()[0]
    manifest = json.loads((tmp_path / "rulers" / "rulers.json").read_text())
    assert manifest["classifier:digits"]["sha256"] == digest and manifest["classifier:digits"]["image_size"] == 12
    assert main(["ruler", "list"]) == 0
    listing = capsys.readouterr().out
    assert listing.count("classifier:digits") == 2  # the packaged one and the new one
    assert listing.count(" ok") == 3 and listing.count(" ruler ") == 2  # and the packaged steering network
    (tmp_path / "rulers" / "classifier-digits.pt").write_bytes(b"not a ruler")
    assert main(["ruler", "list"]) == 1
    assert "BROKEN: ruler classifier:digits" in capsys.readouterr().out


def mnist_without_its_ruler(tmp_path) -> Path:
    """A scenario scored on MNIST's classifier ruler, whose data is there (empty files named as torchvision's: nothing
    reads them before the ruler check) in ``tmp_path / "data"`` and whose ruler is not pinned anywhere."""
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / name).write_bytes(b"")
    data = tiny_scenario("s", [{"strategy": "conditional", "engine": "torch", "procs": [1]}])
    data["dataset"] = {**data.get("dataset", {}), "name": "mnist", "image_size": 20}
    data["metrics"] = {"features": "classifier", "samples": 200}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_run_without_its_pinned_ruler_stops_before_training_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SUITE_RULERS", str(tmp_path / "no-rulers"))
    monkeypatch.setenv("SUITE_DATA", str(tmp_path / "data"))
    path = mnist_without_its_ruler(tmp_path)
    assert main(["run", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: metrics.features: no pinned ruler classifier:mnist")
    assert "suite ruler train --dataset mnist" in err and not (tmp_path / "r").exists()
    # a dry run still shows the commands, and warns
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--dry-run"]) == 0
    assert "conditional-bce-torch-p1-r0" in capsys.readouterr().out


def test_a_missing_ruler_is_one_line_in_a_fresh_process(tmp_path):
    """The same refusal from the command itself: in a process that has loaded no feature network, the ruler's error
    is still bad input (exit 2, one line), not a traceback."""
    path = mnist_without_its_ruler(tmp_path)
    env = {**os.environ, "SUITE_RULERS": str(tmp_path / "no-rulers"), "SUITE_DATA": str(tmp_path / "data")}
    command = [sys.executable, "-m", "suite", "run", str(path), "--out", str(tmp_path / "r")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()] and "no pinned ruler classifier:mnist" in done.stderr


def test_inception_weights_of_another_hash_stop_the_run_in_one_line_with_both_hashes(tmp_path, capsys):
    from suite.measure.metrics.rulers import PYTORCH_FID_HASH_PREFIX
    from suite.records.integrity import sha256_file

    weights = tmp_path / "pt_inception-2015-12-05-6726825d.pth"
    weights.write_bytes(b"not pytorch-fid's weights")
    path = tmp_path / "s.yaml"
    data = tiny_scenario("s", [{"strategy": "data_parallel", "engine": "torch", "procs": [1]}])
    data["metrics"] = {"features": "inception", "samples": 200, "inception_weights": str(weights)}
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(
        f"error: ruler inception: {weights} has sha256 {sha256_file(weights)}, but {PYTORCH_FID_HASH_PREFIX} is pinned"
    )
    assert not (tmp_path / "r").exists()  # no rank started, nothing written


def test_a_refused_scenario_is_said_without_importing_torch(tmp_path):
    """`suite run` checks a scenario before it needs torch: on a login node's shared file system importing torch takes
    tens of seconds, which a typo should not cost; nor does a results folder it refuses (a link planted at its lock
    file). Nor does the report's code load it (`suite report` reads records)."""
    bad = tiny_scenario("bad", [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}], train={"steps": -1})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    good, planted = tmp_path / "good.yaml", tmp_path / "planted"  # and a results folder with a link at its lock file
    good.write_text(yaml.safe_dump(tiny_scenario("good", [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}])))
    planted.mkdir()
    (planted / LOCK_FILE).symlink_to(tmp_path / "elsewhere")
    code = (
        "import sys\n"
        "from suite.cli import main\n"
        f"code = main(['run', {str(path)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
        f"linked = main(['run', {str(good)!r}, '--out', {str(planted)!r}])\n"
        "import suite.analysis.report\n"
        "print(code, linked, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert "train.steps: must be at least 1, got -1" in done.stderr
    assert f"{planted / LOCK_FILE}: a symbolic link where the suite keeps its own files" in done.stderr
    assert done.stdout.split() == ["2", "2", "False"], done.stderr
