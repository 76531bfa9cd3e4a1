"""The carry folder for a GPU machine without a registry (ci/gpu/carry.py) and its one command there (ci/gpu/run.py):
the refusals of a folder built for another Python or torch, the size limit, and the packing of results. No downloads,
no GPU: fake wheels (only their names are read) and a fake Python that answers the machine's facts."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


carry = _load("gpu_carry", ROOT / "ci" / "gpu" / "carry.py")
runner = _load("gpu_run", ROOT / "ci" / "gpu" / "run.py")

PINS = carry.lock_pins()


def fake_wheels(folder: Path, python: str = "3.12") -> Path:
    """A wheel file (empty: carry.py reads names only) of every carried package at its pinned version."""
    folder.mkdir(parents=True, exist_ok=True)
    tag = "cp" + python.replace(".", "")
    for name in carry.CARRIED:
        dist = name.replace("-", "_")
        pytag = f"{tag}-{tag}-manylinux_2_17_x86_64" if name == "pydantic-core" else "py3-none-any"
        (folder / f"{dist}-{PINS[name]}-{pytag}.whl").write_bytes(name.encode())
    return folder


def horovod_wheel(cache: Path, torch: str = "2.11.0_cu130", py: str = "312", ops: str = "NCCL") -> Path:
    folder = cache / f"horovod-{carry.HOROVOD_VERSION}-torch{torch}-py{py}-mpi0-gpu{ops}"
    folder.mkdir(parents=True)
    wheel = folder / f"horovod-{carry.HOROVOD_VERSION}-cp{py}-cp{py}-linux_x86_64.whl"
    wheel.write_bytes(b"horovod")
    return wheel


def build(tmp_path: Path, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "carry"
    argv = ["--out", str(out), "--no-checkout", "--wheels-from", str(fake_wheels(tmp_path / "src")), *extra]
    return carry.main(argv), out


# --- carry.py -------------------------------------------------------------------------------------------------------


def test_carry_folder_holds_the_pinned_wheels_the_cached_horovod_and_a_manifest(tmp_path):
    cache = tmp_path / "cache"
    wheel = horovod_wheel(cache)
    horovod_wheel(cache, torch="2.10.0_cu128")  # another torch's build is not taken
    code, out = build(tmp_path, "--wheel-cache", str(cache))
    assert code == 0
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert (manifest["python"], manifest["torch"]) == ("3.12", "2.11.0")
    assert manifest["horovod"] == {
        "file": f"wheels/{wheel.name}",
        "python": "3.12",
        "torch": "2.11.0+cu130",
        "gpu_operations": "NCCL",
        "mpi": False,
    }
    names = sorted(Path(w["file"]).name for w in manifest["wheels"])
    assert names == sorted(p.name for p in (out / "wheels").iterdir())
    assert len(names) == len(carry.CARRIED) + 1 and not any("torch-" in n or n.startswith("nvidia") for n in names)
    for entry in manifest["wheels"]:
        assert entry["sha256"] == hashlib.sha256((out / entry["file"]).read_bytes()).hexdigest()
    assert "run.py" in (out / "run.sh").read_text() and os.access(out / "run.sh", os.X_OK)


def test_carry_refuses_a_horovod_wheel_for_another_python_or_torch_naming_both(tmp_path, capsys):
    wheel = horovod_wheel(tmp_path / "cache", torch="2.13.0_cu130", py="311")
    code, out = build(tmp_path, "--horovod-wheel", str(wheel))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and not out.exists()
    assert "built for Python 3.11 and torch 2.13.0+cu130" in err and "the target is Python 3.12 and torch 2.11.0" in err


def test_carry_without_a_cached_horovod_says_where_to_get_one(tmp_path, capsys):
    code, _ = build(tmp_path, "--wheel-cache", str(tmp_path / "empty"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "ci/build_horovod_nccl.sh" in err and "--horovod-wheel" in err and "--without-horovod" in err


def test_carry_refuses_a_cpu_horovod_build_and_a_wheel_outside_the_cache_without_its_torch(tmp_path, capsys):
    cpu = horovod_wheel(tmp_path / "cache", ops="none")
    assert build(tmp_path, "--horovod-wheel", str(cpu))[0] == 2
    assert "GPU operations none, not NCCL" in capsys.readouterr().err
    loose = tmp_path / cpu.name
    loose.write_bytes(b"horovod")
    assert build(tmp_path, "--horovod-wheel", str(loose))[0] == 2
    assert "--horovod-torch" in capsys.readouterr().err
    assert build(tmp_path, "--horovod-wheel", str(loose), "--horovod-torch", "2.11.0+cu130")[0] == 0


def test_carry_refuses_a_folder_over_its_size_limit_and_leaves_nothing(tmp_path, capsys):
    code, out = build(tmp_path, "--without-horovod", "--max-mib", "0.0001")
    err = capsys.readouterr().err
    assert code == 2 and "over the 0.0001 MiB limit" in err and not out.exists()
    assert not list(tmp_path.glob("carry.partial-*"))


def test_carry_refuses_wheels_for_another_python(tmp_path, capsys):
    fake_wheels(tmp_path / "src", python="3.11")
    code = carry.main(
        ["--out", str(tmp_path / "c"), "--no-checkout", "--without-horovod", "--wheels-from", str(tmp_path / "src")]
    )
    assert code == 2 and "no wheel of pydantic-core" in capsys.readouterr().err


# --- run.py: the install step's refusals ----------------------------------------------------------------------------


def manifest(python: str = "3.12", torch: str = "2.11.0", horovod_torch: str | None = "2.11.0+cu130") -> dict:
    horovod = {"file": "wheels/horovod-0.28.1-cp312-cp312-linux_x86_64.whl", "python": python, "torch": horovod_torch}
    return {
        "format": runner.MANIFEST_FORMAT,
        "python": python,
        "torch": torch,
        "wheels": [{"file": "wheels/pydantic_core-2.50.4-cp312-cp312-manylinux_2_17_x86_64.whl"}],
        "horovod": horovod if horovod_torch else None,
    }


def test_run_refuses_a_folder_for_another_python_or_torch_in_one_line_naming_both():
    runner.check_manifest(manifest(), "3.12", "2.11.0+cu130")  # the machine's own: accepted
    with pytest.raises(runner.Refused) as refused:
        runner.check_manifest(manifest(), "3.11", "2.13.0+cu130")
    line = str(refused.value)
    assert "\n" not in line
    assert "Python 3.12 and torch 2.11.0" in line and "Python 3.11 with torch 2.13.0+cu130" in line
    assert "carry.py --python 3.11 --torch 2.13.0" in line
    with pytest.raises(runner.Refused, match=r"torch 2\.11\.0\+cu128"):  # another CUDA build of the same release
        runner.check_manifest(manifest(), "3.12", "2.11.0+cu128")


def test_run_refuses_a_horovod_wheel_built_against_another_torch():
    with pytest.raises(runner.Refused) as refused:
        runner.check_manifest(manifest(horovod_torch="2.10.0+cu130"), "3.12", "2.11.0+cu130")
    assert "Horovod horovod-0.28.1-cp312-cp312-linux_x86_64.whl: Python 3.12, torch 2.10.0+cu130" in str(refused.value)
    assert "torch 2.11.0+cu130" in str(refused.value)


def test_run_refuses_changed_unlisted_or_escaping_files(tmp_path):
    (tmp_path / "wheels").mkdir()
    wheel = tmp_path / "wheels" / "hjson-3.1.0-py3-none-any.whl"
    wheel.write_bytes(b"hjson")
    listed = {"format": 1, "wheels": [{"file": "wheels/" + wheel.name, "sha256": hashlib.sha256(b"hjson").hexdigest()}]}
    assert runner.check_files(tmp_path, listed) == [wheel]
    (tmp_path / "wheels" / "extra-1.0-py3-none-any.whl").write_bytes(b"x")
    with pytest.raises(runner.Refused, match="not in MANIFEST.json"):
        runner.check_files(tmp_path, listed)
    (tmp_path / "wheels" / "extra-1.0-py3-none-any.whl").unlink()
    wheel.write_bytes(b"changed")
    with pytest.raises(runner.Refused, match="a changed file"):
        runner.check_files(tmp_path, listed)
    with pytest.raises(runner.Refused, match="is not a file"):
        runner.check_files(tmp_path, {"wheels": [{"file": "../outside.whl", "sha256": ""}]})


def fake_python(tmp_path: Path, python: str, torch: str) -> Path:
    """An executable that answers run.py's probe as a machine with ``python`` and ``torch`` would (no GPU)."""
    facts = {"python": python, "python_full": python + ".0", "torch": torch, "cuda": "13.0", "gpu": False}
    script = tmp_path / "python3"
    script.write_text(f"#!/bin/sh\necho '{json.dumps(facts)}'\n")
    script.chmod(0o755)
    return script


def test_run_refuses_before_installing_and_packs_the_refusal(tmp_path, capsys):
    folder = tmp_path / "carry"
    (folder / "wheels").mkdir(parents=True)
    (folder / "MANIFEST.json").write_text(json.dumps(manifest()))
    out, target = tmp_path / "out", tmp_path / "site"
    argv = [str(out), "--carry", str(folder), "--target", str(target), "--work", str(tmp_path / "work")]
    code = runner.main([*argv, "--python", str(fake_python(tmp_path, "3.11", "2.13.0+cu130"))])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Python 3.11 with torch 2.13.0+cu130" in err[0]
    assert not target.exists()  # nothing installed
    assert "refused" in (out / "summary.txt").read_text() and "Python 3.12 and torch 2.11.0" in (out / "summary.txt").read_text()


# --- run.py: steps, time limits and packing -------------------------------------------------------------------------


def test_a_step_past_its_limit_is_stopped_and_what_it_wrote_is_packed(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "MIN_STEP_S", 0.0)
    session = runner.Session(tmp_path / "out", tmp_path / "work", budget_s=60.0)
    results = session.work / "digits-gpu"
    (results / "run-a").mkdir(parents=True)
    (results / "run-a" / "result.json").write_text("{}")
    (results / "run-a" / "model.pt").write_bytes(b"weights")
    (results / "run-a" / "link").symlink_to("/etc/passwd")
    session.packed["digits.tgz"] = results
    slow = [sys.executable, "-c", "import time; print('run-a finished', flush=True); time.sleep(60)"]
    code = runner.run_step(session, "digits", slow, 1.0, dict(os.environ))
    runner.pack(session)
    assert code == runner.STOPPED and session.failed == ["digits"]
    assert "step digits: exit 124" in session.lines[-1] and "stopped at its time limit" in session.lines[-1]
    with tarfile.open(session.out / "digits.tgz") as tar:
        assert tar.getnames() == ["digits-gpu", "digits-gpu/run-a", "digits-gpu/run-a/result.json"]  # no weights, no link
    with tarfile.open(session.out / "logs.tgz") as tar:
        log = tar.extractfile("logs/digits.log")
        assert log is not None and b"run-a finished" in log.read()
    assert sorted(p.name for p in session.out.iterdir()) == ["digits.tgz", "logs.tgz", "summary.txt"]


def test_a_missing_gpu_is_not_a_failure_and_an_empty_step_leaves_no_file(tmp_path):
    session = runner.Session(tmp_path / "out", tmp_path / "work", budget_s=60.0)
    session.packed["steps.tgz"] = session.work / "steps"
    no_gpu = [sys.executable, "-c", "import sys; print('step_overhead: --device cuda: no CUDA GPU visible'); sys.exit(4)"]
    assert runner.run_step(session, "steps", no_gpu, 30.0, dict(os.environ)) == runner.NO_GPU
    runner.pack(session)
    assert session.failed == [] and "no GPU: step_overhead: --device cuda: no CUDA GPU visible" in session.lines[-1]
    assert sorted(p.name for p in session.out.iterdir()) == ["logs.tgz", "summary.txt"]


def test_a_step_without_time_left_is_skipped(tmp_path):
    session = runner.Session(tmp_path / "out", tmp_path / "work", budget_s=runner.PACK_RESERVE_S + 1)
    assert runner.run_step(session, "check", [sys.executable, "-c", "pass"], 100.0, dict(os.environ)) == runner.STOPPED
    assert "step check: skipped" in session.lines[-1] and not (session.work / "logs" / "check.log").exists()


def test_gpu_check_takes_the_engines_that_fit_the_time_left():
    counts = {"torch": 5, "horovod": 5}
    assert runner.fitting_engines(counts, 100.0, ("torch", "horovod")) == []
    assert runner.fitting_engines(counts, 130.0, ("torch", "horovod")) == ["torch"]
    assert runner.fitting_engines(counts, 300.0, ("torch", "horovod")) == ["torch", "horovod"]
    assert runner.fitting_engines({"torch": 5}, 300.0, ("torch", "horovod")) == ["torch"]  # no count: not run


def test_run_options_are_checked_in_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        runner.parse_args(["/tmp/out", "--steps", "steps,train"])
    assert stop.value.code == 2 and "--steps: train: choose from" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        runner.parse_args(["/tmp/out", "--engines", "torch,nccl"])
    assert "--engines torch,nccl" in capsys.readouterr().err


def test_a_stopped_session_packs_what_it_has_and_stops_the_step_in_progress(tmp_path):
    """run.py as the device tool runs it, stopped by SIGTERM during a step: exit 143, the step named, its log packed,
    its process gone. The machine is a fake Python: facts without a GPU, a pip that installs nothing, a step that hangs."""
    import signal
    import subprocess
    import time

    folder = tmp_path / "carry"
    (folder / "wheels").mkdir(parents=True)
    (folder / "MANIFEST.json").write_text(json.dumps({**manifest(), "wheels": [], "horovod": None}))
    facts = {"python": "3.12", "python_full": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "gpu": False}
    pid_file = tmp_path / "step.pid"
    script = tmp_path / "python3"
    script.write_text(
        "#!/bin/sh\n"
        f"case \"$1\" in\n  -c) echo '{json.dumps(facts)}' ;;\n  -m) exit 0 ;;\n"
        f"  *) echo $$ > {pid_file}; echo measuring; exec sleep 30 ;;\nesac\n"
    )
    script.chmod(0o755)
    out, work = tmp_path / "out", tmp_path / "work"
    argv = [str(out), "--carry", str(folder), "--target", str(tmp_path / "site"), "--work", str(work), "--steps", "steps"]
    session = subprocess.Popen([sys.executable, str(ROOT / "ci" / "gpu" / "run.py"), *argv, "--python", str(script)])
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline and session.poll() is None:
        time.sleep(0.05)
    time.sleep(0.2)  # the step has written its first line
    session.send_signal(signal.SIGTERM)
    assert session.wait(timeout=60) == 128 + signal.SIGTERM
    summary = (out / "summary.txt").read_text()
    assert "stopped by SIGTERM during step steps" in summary and "no CUDA GPU visible" in summary
    with tarfile.open(out / "logs.tgz") as tar:
        log = tar.extractfile("logs/steps.log")
        assert log is not None and b"measuring" in log.read()
    step_pid = int(pid_file.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(step_pid, 0)  # the step's process was stopped with the session


def test_step_overhead_on_cuda_without_a_gpu_ends_in_one_line(monkeypatch, capsys, tmp_path):
    overhead = _load("step_overhead", ROOT / "ci" / "step_overhead.py")
    monkeypatch.setattr(overhead.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", ["step_overhead.py", "--device", "cuda", "--out", str(tmp_path / "o")])
    assert overhead.main() == 4
    err = capsys.readouterr().err.strip()
    assert err.startswith("step_overhead: --device cuda: no CUDA GPU visible (torch ") and err.endswith("nothing measured")
    assert "\n" not in err and not (tmp_path / "o").exists()
    monkeypatch.setattr(sys, "argv", ["step_overhead.py", "--cuda-graphs", "--out", str(tmp_path / "o")])
    assert overhead.main() == 2
    assert capsys.readouterr().err.strip() == "step_overhead: --cuda-graphs: CUDA graphs need --device cuda"


def test_step_overhead_gives_the_horovod_runs_the_settings_asked_for(monkeypatch, capsys, tmp_path):
    import yaml

    from suite.config.expansion import expand, parse_scenario
    from suite.records import results

    overhead = _load("step_overhead", ROOT / "ci" / "step_overhead.py")
    written: list[dict] = []
    run = overhead.subprocess.run

    def suite_run(command, **options):  # the suite's runs are not made, only their scenarios kept
        if command[1:4] != ["-m", "suite", "run"]:
            return run(command, **options)
        written.append(yaml.safe_load(Path(command[4]).read_text()))

    monkeypatch.setattr(overhead.subprocess, "run", suite_run)
    monkeypatch.setattr(results, "iter_records", lambda folder: iter(()))  # the runs are not made: only their scenarios
    threads: list[int] = []
    monkeypatch.setattr(overhead.torch, "set_num_threads", threads.append)  # the script's own, not this process's
    argv = ["step_overhead.py", "--skip-arms", "--warm-cache", "--engine-repeats", "2", "--horovod", "cycle_time_ms=5"]
    monkeypatch.setattr(sys, "argv", [*argv, "--horovod", "groups=1", "--out", str(tmp_path / "o")])
    assert overhead.main() == 0 and threads == [1]
    assert [[r["engine"] for r in spec["runs"]] for spec in written] == [["horovod", "torch"], ["torch", "horovod"]]
    runs = expand(parse_scenario(written[0]))
    settings = {r.engine: r.horovod for r in runs}
    assert (settings["horovod"].cycle_time_ms, settings["horovod"].groups) == (5, 1)
    assert "Horovod settings: cycle_time_ms: 5, groups: 1" in (tmp_path / "o" / "step-overhead.md").read_text()
    for options, first_line in (
        (["--horovod", "cycle_time_ms"], "step_overhead: --horovod 'cycle_time_ms': expected FIELD=VALUE, e.g. cycle_time_ms=5"),
        (
            ["--skip-engines", "--horovod", "groups=1"],
            "step_overhead: --horovod: no Horovod run to give them to (--skip-engines)",
        ),
        (["--skip-arms", "--horovod", "cycle_tme_ms=5"], "step_overhead: --horovod: "),
    ):
        monkeypatch.setattr(sys, "argv", ["step_overhead.py", *options, "--out", str(tmp_path / "p")])
        assert overhead.main() == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(first_line) and "\n" not in err, err
    assert "cycle_tme_ms" in err and len(written) == 2  # the misspelt field is named before any run
