"""Hostile conditions: a runner killed with SIGKILL, full, read-only and vanishing disks, stale library locks.

The disk tests mount small tmpfs file systems (root only; skipped, with the reason, where mounting is
not permitted) and unmount them afterwards. Processes are found by the mark ``suite run`` puts in the
environment of everything it starts (``SUITE_RUN_OWNER``), read here from ``/proc`` directly.
"""

import errno
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from test_reliability import suite_run, survivors
from test_report import record

from conftest import tiny_scenario
from suite.cli import main
from suite.config.expansion import expand, parse_scenario
from suite.records.failures import read_statuses
from suite.records.results import LOCK_FILE, WriteFailed, new_record, staged_folder, write_record
from suite.running import buildlocks
from suite.running.processes import OWNER_VARIABLE, ProcessId

HOST = socket.gethostname()


def marked_pids(mark: str) -> list[int]:
    """Pids of this host whose environment holds ``SUITE_RUN_OWNER=mark`` (read from /proc, not by the suite's code)."""
    wanted = f"{OWNER_VARIABLE}={mark}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (
                    wanted in (entry / "environ").read_bytes().split(b"\0")
                    and (entry / "stat").read_text().split(") ")[1][0] != "Z"
                ):
                    pids.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return pids


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(0.2)


def sleeper(mark: str | None = None, ignore_term: bool = False, **popen) -> subprocess.Popen:
    """A process that sleeps for a minute, marked as started by ``mark``, optionally deaf to SIGTERM."""
    env = {k: v for k, v in os.environ.items() if k != OWNER_VARIABLE}
    if mark is not None:
        env[OWNER_VARIABLE] = mark
    code = "import signal, time\n" + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "") + "time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code], env=env, **popen)


# --- who a process is --------------------------------------------------------------------------------------------


def test_a_process_is_named_by_pid_and_start_time_so_a_reused_pid_is_not_it():
    child = sleeper()
    me = ProcessId.of(child.pid)
    assert me is not None and me.alive() and ProcessId.parse(me.mark()) == me
    assert not ProcessId(HOST, child.pid, me.start + 1).alive()  # same pid, another start: another process
    os.kill(child.pid, signal.SIGKILL)
    stat = Path(f"/proc/{child.pid}/stat")
    wait_for(lambda: stat.read_text().split(") ")[1][0] == "Z", 10, "a zombie")  # dead, not yet reaped
    assert not me.alive()
    child.wait()
    assert ProcessId.of(child.pid) is None and not me.alive()
    assert ProcessId.parse("not-a-mark") is None


@pytest.mark.multiproc
def test_the_reaper_ends_every_marked_process_once_its_runner_is_killed(tmp_path):
    runner = sleeper()
    mark = ProcessId.of(runner.pid).mark()
    marked = [sleeper(mark), sleeper(mark, ignore_term=True), sleeper(mark, start_new_session=True)]
    bystander = sleeper()  # not marked: left alone
    wait_for(lambda: len(marked_pids(mark)) == 3, 30, "three marked processes")
    reaper = subprocess.Popen(
        [sys.executable, "-m", "suite.running.reaper", mark], stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    time.sleep(1.0)
    assert reaper.poll() is None and len(marked_pids(mark)) == 3  # nothing ends while the runner lives
    runner.kill()
    runner.wait()
    wait_for(lambda: not marked_pids(mark), 10, "end of the marked processes")
    assert reaper.wait(timeout=10) == 0
    pids = ", ".join(str(p.pid) for p in sorted(marked, key=lambda p: p.pid))
    assert reaper.stderr.read() == (
        f"suite run (pid {runner.pid}) ended without stopping its launch; ended the processes it had started (pids {pids})\n"
    )
    assert bystander.poll() is None
    bystander.kill()
    for process in (*marked, bystander):
        process.wait()


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "engine", [pytest.param("mpi", marks=pytest.mark.matrix), pytest.param("torch", marks=pytest.mark.matrix), "horovod"]
)  # under mpirun, torchrun and horovodrun (mpirun's ranks: horovodrun's, one level up)
def test_kill_9_of_suite_run_leaves_no_process_of_the_run(tmp_path, engine):
    scenario = tiny_scenario("orphans", [{"strategy": "data_parallel", "engine": engine, "procs": [2]}], train={"steps": 100000})
    run_dir = tmp_path / "results" / f"data_parallel-bce-{engine}-p2-r0"
    runner = suite_run(tmp_path, scenario)
    wait_for(lambda: len(read_statuses(run_dir)) == 2 or runner.poll() is not None, 600, "two ranks")
    assert runner.poll() is None, runner.stdout.read()
    holder = json.loads((tmp_path / "results" / LOCK_FILE).read_text())
    mark = holder["mark"]
    launched = marked_pids(mark)
    assert {status["pid"] for status in read_statuses(run_dir).values()} <= set(launched)  # the ranks carry the mark
    runner.kill()
    runner.wait()
    wait_for(lambda: not marked_pids(mark), 10, "end of every process of the run")
    assert not survivors(run_dir)
    # the lock's holder is gone with all its processes: the next suite run takes it over at once
    path = tmp_path / "orphans.yaml"
    assert main(["run", str(path), "--out", str(tmp_path / "results"), "--resume", "--dry-run"]) == 0


def _lock_of_a_gone_holder(out: Path, mark: str) -> dict:
    gone = subprocess.Popen(["true"])
    gone.wait()
    holder = {"host": HOST, "pid": gone.pid, "start": 1, "mark": mark, "started": "yesterday", "command": "suite run s.yaml"}
    out.mkdir(parents=True)
    (out / LOCK_FILE).write_text(json.dumps(holder))
    return holder


def _scenario_file(tmp_path: Path, runs: list[dict] | None = None, **sections) -> Path:
    path = tmp_path / "s.yaml"
    runs = runs or [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}]
    path.write_text(yaml.safe_dump(tiny_scenario("s", runs, **sections)))
    return path


@pytest.mark.multiproc
def test_a_stale_lock_is_taken_over_only_once_its_holders_processes_are_gone(tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.setattr("suite.running.lock.TAKEOVER_WAIT_S", 1.0)
    path, out = _scenario_file(tmp_path), tmp_path / "results"
    mark = f"{HOST}:999999:1"
    holder = _lock_of_a_gone_holder(out, mark)
    orphan = sleeper(mark)
    wait_for(lambda: marked_pids(mark) == [orphan.pid], 30, "the marked orphan")
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"error: {out}: suite run (pid {holder['pid']} on {HOST}, since yesterday: suite run s.yaml) is gone, but 1 of its "
        f"processes still run after 1 s (pids {orphan.pid}) and would write beside this run; stop them "
        f"(`kill -9 {orphan.pid}`) or choose another --out\n"
    )
    assert not (out / "scenario.yaml").exists()
    orphan.kill()
    orphan.wait()
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 0
    assert f"taking over the lock of suite run (pid {holder['pid']} on {HOST}" in caplog.text


def test_without_flock_a_holder_is_checked_by_pid_and_start_time(tmp_path, capsys, caplog, monkeypatch):
    def no_flock(handle, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr("suite.running.lock.fcntl.flock", no_flock)
    path, out = _scenario_file(tmp_path), tmp_path / "results"
    me = ProcessId.current()
    out.mkdir()
    # this pid with another start time: a process that ended and whose pid was reused
    (out / LOCK_FILE).write_text(json.dumps({"host": HOST, "pid": me.pid, "start": me.start - 1, "started": "then"}))
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 0
    assert f"taking over the lock of suite run (pid {me.pid} on {HOST}, since then" in caplog.text
    (out / LOCK_FILE).write_text(json.dumps({"host": HOST, "pid": me.pid, "start": me.start, "started": "now"}))
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 2
    assert f"{out} is in use by suite run (pid {me.pid} on {HOST}, since now" in capsys.readouterr().err


# --- disks ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(size, name)``: a tmpfs of ``size`` mounted at tmp_path/name; unmounted afterwards."""
    mounted = []

    def mount(size: str, name: str = "disk") -> Path:
        folder = tmp_path / name
        folder.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {(done.stderr.strip() or 'mount failed').splitlines()[0]}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in reversed(mounted):
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], check=True)  # still busy: detach it now, free it when idle


def fill(folder: Path) -> None:
    """Write zeros into ``folder/filler`` until its file system has no byte left."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (2**20, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as error:
                assert error.errno == errno.ENOSPC
    finally:
        os.close(fd)


def digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_full_disk_refuses_suite_run_in_one_line(tmp_path, tmpfs, capsys):
    disk = tmpfs("2m")
    fill(disk)
    out = disk / "results"
    assert main(["run", str(_scenario_file(tmp_path)), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"error: could not write {out / LOCK_FILE} (No space left on device); it needs free space on its file system\n"
    )
    assert captured.out == ""


def test_a_read_only_results_folder_refuses_suite_run_in_one_line(tmp_path, tmpfs, capsys):
    disk = tmpfs("2m")
    out = disk / "results"
    out.mkdir()
    (out / "scenario.yaml").write_text("the earlier sweep's\n")
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    path = _scenario_file(tmp_path)
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"error: could not write {out / LOCK_FILE} (Read-only file system); it needs a file system mounted read-write\n"
    )
    assert main(["run", str(path), "--out", str(disk / "new")]) == 2
    assert capsys.readouterr().err == (
        f"error: could not write {disk / 'new'} (Read-only file system); it needs a file system mounted read-write\n"
    )
    assert (out / "scenario.yaml").read_text() == "the earlier sweep's\n"


@pytest.mark.multiproc
def test_a_disk_filled_mid_run_stops_the_sweep_in_one_line_and_keeps_every_earlier_file(tmp_path, tmpfs, capsys, monkeypatch):
    monkeypatch.setattr("suite.running.lock.MARGIN", 0)  # the runs' own estimate only: the disk is tiny
    disk = tmpfs("8m")
    out = disk / "results"
    runs = [
        {"strategy": "data_parallel", "engine": "mpi", "procs": [1]},
        {"strategy": "data_parallel", "engine": "mpi", "procs": [1], "loss": "wgan-gp", "train": {"steps": 500}},
    ]
    path = _scenario_file(tmp_path, runs, train={"threads": 1})
    path.write_text(path.read_text() + "".join(f"# padding line {i:04d}: a scenario longer than one page\n" for i in range(120)))
    earlier, filled = expand(parse_scenario(yaml.safe_load(path.read_text()), str(path)))[0], {}
    # the first run finished in an earlier sweep: --resume keeps it
    write_record(out / earlier.run_id, new_record(record(earlier.run_id, engine="mpi")))
    (out / earlier.run_id / "generator.pt").write_bytes(os.urandom(2**20))
    second = out / "data_parallel-wgan-gp-mpi-p1-r0"

    def fill_once_the_second_run_trains():
        while not read_statuses(second):
            time.sleep(0.1)
        filled.update(digests(out))
        fill(disk)

    filler = threading.Thread(target=fill_once_the_second_run_trains, daemon=True)
    filler.start()
    code = main(["run", str(path), "--out", str(out), "--resume", "-q", "--timeout", "600"])
    filler.join(timeout=5)
    captured = capsys.readouterr()
    assert code == 1, captured
    assert captured.err == (
        f"error: run 2 of 2, {second.name}, has no record: could not write {second / 'result.json'} (No space left on "
        "device); it needs free space on its file system; the sweep stops here, and `suite run ... --resume` continues "
        "once that is fixed\n"
    )
    assert "Traceback" not in captured.out
    kept = {
        name: digest for name, digest in filled.items() if "/log.txt" not in name and "/ranks/" not in name and name != LOCK_FILE
    }
    assert {"scenario.yaml", f"{earlier.run_id}/result.json", f"{earlier.run_id}/generator.pt", f"{second.name}/run.json"} <= set(
        kept
    )
    now = digests(out)
    assert {name: now.get(name) for name in kept} == kept  # every earlier file intact
    assert not [p for p in out.rglob(".*") if p.name != LOCK_FILE]  # no half-written temporaries
    # again on the disk, full once more (the failed run's temporaries were freed): refused at the lock, before
    # anything else is written, and scenario.yaml stays as it was
    fill(disk)
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"error: could not write {out / LOCK_FILE} (No space left on device); it needs free space on its file system\n"
    )
    assert digests(out)["scenario.yaml"] == kept["scenario.yaml"]


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (
            errno.ENOSPC,
            "could not write {out} (No space left on device); it needs free space on its file system; choose another --out",
        ),
        (errno.EACCES, "{out} is not writable (Permission denied); choose another --out or fix its permissions"),
    ],
)
def test_a_results_folder_that_takes_no_file_is_refused_with_what_it_needs(tmp_path, monkeypatch, code, reason):
    from suite.running.lock import ResultsFolderError, check_room

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr("suite.running.lock.tempfile.NamedTemporaryFile", refuse)
    with pytest.raises(ResultsFolderError) as refused:
        check_room(tmp_path, [])
    assert str(refused.value) == reason.format(out=tmp_path)


def test_a_folder_of_files_written_on_a_full_disk_keeps_its_previous_files(tmp_path):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "report.md").write_text("the previous report\n")
    with pytest.raises(WriteFailed) as failure:
        with staged_folder(folder) as staging:
            (staging / "report.md").write_text("half of the new")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert str(failure.value) == f"could not write {folder} (No space left on device); it needs free space on its file system"
    assert [p.name for p in tmp_path.iterdir()] == ["report"] and (folder / "report.md").read_text() == "the previous report\n"
    with staged_folder(folder) as staging:
        (staging / "samples").mkdir()
        (staging / "samples" / "a.png").write_bytes(b"png")
        (staging / "report.md").write_text("the new report\n")
    assert (folder / "report.md").read_text() == "the new report\n" and (folder / "samples" / "a.png").read_bytes() == b"png"
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_a_run_folder_that_vanished_before_its_launch_stops_the_sweep_in_one_line(tmp_path, capsys, monkeypatch):
    path, out = _scenario_file(tmp_path), tmp_path / "results"
    run_dir = out / "data_parallel-bce-mpi-p1-r0"
    # the run folders are written, then the run's folder goes (a cleaner, an unmounted disk) before its launch
    from suite.running import launch

    environment = launch.child_environment
    monkeypatch.setattr("suite.running.preflight.check_tools", lambda runs, opts: None)
    monkeypatch.setattr(
        "suite.running.launch.child_environment", lambda run, opts: (shutil.rmtree(run_dir), environment(run, opts))[1]
    )
    assert main(["run", str(path), "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"error: run 1 of 1, {run_dir.name}, has no record: could not write {run_dir / 'log.txt'} (No such "
        "file or directory); it needs its folder, which is gone; the sweep stops here, and `suite run ... --resume` "
        "continues once that is fixed\n"
    )


def test_a_shared_launch_whose_record_cannot_be_written_names_its_runs_and_places(tmp_path, capsys, monkeypatch):
    """Runs of one launch (one engine, process count and launcher): a record that could not be written stops the sweep
    in one line naming the launch's runs and their places in the sweep; nothing is launched after it."""
    runs = [{"strategy": "data_parallel", "engine": "mpi", "procs": [1], "train": {"seeds": [0, 1]}}]
    path, out = _scenario_file(tmp_path, runs), tmp_path / "results"
    launched = []

    def full_disk(group, *args, **kwargs):
        launched.append([one.run.run_id for one in group])
        raise OSError(f"could not write {group[1].run_dir / 'result.json'} (No space left on device)")

    monkeypatch.setattr("suite.running.preflight.check_tools", lambda runs, opts: None)
    monkeypatch.setattr("suite.running.launch.launch_runs", full_disk)
    assert main(["run", str(path), "--out", str(out)]) == 1
    (group,) = launched
    assert len(group) == 2
    assert capsys.readouterr().err == (
        f"error: a run of the launch of runs 1-2 of 2 ({', '.join(group)}) has no record: could not write "
        f"{out / group[1] / 'result.json'} (No space left on device); the sweep stops here, and `suite run ... --resume` "
        "continues once that is fixed\n"
    )


# --- stale library locks -------------------------------------------------------------------------------------------


def _extension_lock(root: Path, name: str, age_s: float) -> Path:
    """``root/NAME/lock`` as torch's FileBaton leaves it, ``age_s`` seconds old."""
    lock = root / name / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    os.utime(lock, (time.time() - age_s, time.time() - age_s))
    return lock


def test_a_stale_extension_build_lock_is_named_with_the_command_that_clears_it(tmp_path, capsys, monkeypatch):
    root = tmp_path / "torch_extensions"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    lock = _extension_lock(root / "py311_cpu", "deepspeed_shm_comm", age_s=3 * 3600)  # torch's default layout
    path = _scenario_file(tmp_path, [{"strategy": "data_parallel", "engine": "deepspeed", "procs": [2]}])
    assert main(["run", str(path), "--out", str(tmp_path / "results")]) == 2
    assert capsys.readouterr().err == (
        f"error: stale torch extension build lock {lock} (left 3 h ago; no process builds there): runs of the deepspeed "
        f"engine would wait for it forever; clear with `rm -f {lock}`\n"
    )
    assert not list((tmp_path / "results").glob("*/log.txt"))  # nothing was launched
    # runs that build no extension do not wait on it
    buildlocks.check_build_locks(
        expand(parse_scenario(tiny_scenario("m", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}]), "m"))
    )


def test_a_build_lock_that_a_process_works_on_is_not_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(buildlocks, "STALE_AFTER_S", 1.0)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    old = _extension_lock(tmp_path / "ext", "busy", age_s=3600)
    builder = sleeper(cwd=old.parent)  # as ninja runs, in the extension's folder
    young = _extension_lock(tmp_path / "ext", "young", age_s=0)
    try:
        wait_for(lambda: buildlocks.worked_in([old.parent]) == {old.parent}, 30, "the builder")
        # the young lock that no process works on is watched until it is old enough, then named
        assert [lock.path for lock in buildlocks.stale_build_locks()] == [young]
    finally:
        builder.kill()
        builder.wait()
    assert [lock.path for lock in buildlocks.stale_build_locks()] == [old, young]
