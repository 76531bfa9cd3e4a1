"""Results folders prepared by someone else: nothing under ``--out`` is followed, and signals end ``suite run`` cleanly.

A results folder may hold a symbolic link, a FIFO or a socket where the suite is about to write: put
there before its owner runs the suite in it (results folders are no longer group-writable, and the suite
refuses one that others can write: ``tests/test_races.py``; a folder copied or unpacked from elsewhere, or
prepared while it was still shared, can hold one all the same). Each case plants one and runs the
real command as a subprocess, under a time limit, and checks the exact outcome: the exit code, the one
line on stderr (no traceback), the victim's files byte for byte (sha256) and that nothing was created
outside ``--out``. The victim is a folder standing for someone's home, holding ``.bashrc`` and ``.netrc``.
The in-process tests below them check the defences behind the first refusal (a link planted after it):
deletion never leaves its folder, an atomic write never writes through a link.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_hostile_files import tiny_bundle

from conftest import REPO, tiny_scenario
from suite.cli import main
from suite.records import nofollow
from suite.records.codec import record_data
from suite.records.results import CHECKPOINT_DIR, LOCK_FILE, atomic_write_text, new_record, read_record, write_record
from suite.running.launched import remove_temporaries

RUN_ID = "data_parallel-bce-torch-p1-r0"
REFUSED = "where the suite keeps its own files; it follows no link and opens no FIFO, socket or device there: remove it"
LIMIT_S = 120
"""The most seconds a refused command may take (a FIFO that blocked it would take forever)."""


def victim(tmp_path: Path) -> Path:
    """Someone's home: two secrets that a followed link would let the suite overwrite or delete."""
    home = tmp_path / "victim"
    home.mkdir()
    (home / ".bashrc").write_text("export PATH=$HOME/bin:$PATH\n")
    (home / ".netrc").write_text("machine cluster login me password hunter2\n")
    return home


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (not following links) by its sha256: compared before and after."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def scenario_file(tmp_path: Path, **train) -> Path:
    """One data-parallel run of one torch rank (:data:`RUN_ID`), a few steps of 20 px digits."""
    path = tmp_path / "s.yaml"
    runs = [{"strategy": "data_parallel", "engine": "torch", "procs": [1]}]
    path.write_text(yaml.safe_dump(tiny_scenario("s", runs, **({"train": train} if train else {}))))
    return path


def environment() -> dict[str, str]:
    """A launched ``suite``'s environment: this checkout, and the venv's launchers on the PATH."""
    return {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def suite(*args: str, cwd: Path | None = None, timeout: float = LIMIT_S) -> subprocess.CompletedProcess:
    """``suite ARGS`` as a subprocess, killed after ``timeout`` seconds (a test that hangs fails, it does not wait)."""
    return subprocess.run(
        [sys.executable, "-m", "suite", *args], cwd=cwd, env=environment(), capture_output=True, text=True, timeout=timeout
    )


def assert_refused(done: subprocess.CompletedProcess, entry: Path, what: str) -> None:
    """Exit code 2 and one line naming ``entry`` and what it is."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"error: {entry}: {what} {REFUSED} (someone else may have put it there) or choose another --out"
    ]


def outside(tmp_path: Path, out: Path) -> set[str]:
    """The names in ``tmp_path`` and its subfolders that are not under ``out`` (and not the victim's)."""
    return {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if out not in (p, *p.parents)}


# --- links and FIFOs planted before suite run ---------------------------------------------------------------------


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
def test_a_link_at_the_lock_file_is_refused_and_its_target_left_as_it_was(tmp_path, dry):
    home, out = victim(tmp_path), tmp_path / "results"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(home / ".bashrc")
    path = scenario_file(tmp_path)
    before, others = fingerprint(home), outside(tmp_path, out)
    done = suite("run", str(path), "--out", str(out), *(["--dry-run"] if dry else []))
    assert_refused(done, out / LOCK_FILE, "a symbolic link")
    assert fingerprint(home) == before and outside(tmp_path, out) == others
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing written


@pytest.mark.parametrize(
    "planted",
    ["log.txt", "checkpoints", "partial", "ranks", "samples", "mllog.txt", "horovod-timeline.json", "result.json"],
)
def test_a_link_in_a_run_folder_is_refused_before_anything_is_written(tmp_path, planted):
    home, out = victim(tmp_path), tmp_path / "results"
    (out / RUN_ID).mkdir(parents=True)
    target = home if "." not in planted else home / ".netrc"
    (out / RUN_ID / planted).symlink_to(target)
    path = scenario_file(tmp_path)
    before, others = fingerprint(home), outside(tmp_path, out)
    done = suite("run", str(path), "--out", str(out))
    assert_refused(done, out / RUN_ID / planted, "a symbolic link")
    assert fingerprint(home) == before and sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]
    assert outside(tmp_path, out) == others
    assert sorted(p.name for p in (out / RUN_ID).iterdir()) == [planted]  # no run.json, no log: nothing started
    assert not (out / "scenario.yaml").exists()


def test_a_link_deeper_in_a_run_folder_is_named(tmp_path):
    home, out = victim(tmp_path), tmp_path / "results"
    (out / RUN_ID / CHECKPOINT_DIR).mkdir(parents=True)
    (out / RUN_ID / CHECKPOINT_DIR / "000001-rank0.pt").symlink_to(home / ".bashrc")
    before = fingerprint(home)
    done = suite("run", str(scenario_file(tmp_path)), "--out", str(out), "--dry-run")
    assert_refused(done, out / RUN_ID / CHECKPOINT_DIR / "000001-rank0.pt", "a symbolic link")
    assert fingerprint(home) == before


def test_a_run_folder_that_is_a_link_is_refused(tmp_path):
    home, out = victim(tmp_path), tmp_path / "results"
    out.mkdir()
    (out / RUN_ID).symlink_to(home)
    before = fingerprint(home)
    done = suite("run", str(scenario_file(tmp_path)), "--out", str(out), "--dry-run")
    assert_refused(done, out / RUN_ID, "a symbolic link")
    assert fingerprint(home) == before and sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]


def test_a_fifo_at_the_log_does_not_block_suite_run(tmp_path):
    out = tmp_path / "results"
    (out / RUN_ID).mkdir(parents=True)
    os.mkfifo(out / RUN_ID / "log.txt")
    started = time.monotonic()
    done = suite("run", str(scenario_file(tmp_path)), "--out", str(out), timeout=60)  # a hang raises TimeoutExpired
    assert_refused(done, out / RUN_ID / "log.txt", "a FIFO")
    assert time.monotonic() - started < 60


def test_a_socket_in_a_run_folder_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "results"
    (out / RUN_ID / "ranks").mkdir(parents=True)
    path = scenario_file(tmp_path)
    monkeypatch.chdir(out / RUN_ID / "ranks")  # a socket's path is limited to 108 bytes: bound by its name
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind("rank0.json")
        done = suite("run", str(path), "--out", str(out), "--dry-run")
    assert_refused(done, out / RUN_ID / "ranks" / "rank0.json", "a socket")


# --- the report folder and the jobs folder -------------------------------------------------------------------------


def _one_record(out: Path) -> None:
    from test_report import record

    write_record(out / "dp-p1-r0", new_record(record("dp-p1-r0")))


@pytest.mark.parametrize("given", [False, True], ids=["default", "--out"])
def test_a_link_at_the_report_folder_is_refused(tmp_path, given):
    home, out = victim(tmp_path), tmp_path / "results"
    _one_record(out)
    report = out / "report" if not given else tmp_path / "mine"
    report.symlink_to(home)
    before, others = fingerprint(home), outside(tmp_path, out)
    done = suite("report", str(out), *(["--out", str(report)] if given else []))
    assert_refused(done, report, "a symbolic link")
    assert fingerprint(home) == before and sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]
    assert outside(tmp_path, out) == others


def test_a_link_inside_the_report_folder_is_not_written_through(tmp_path):
    home, out = victim(tmp_path), tmp_path / "results"
    _one_record(out)
    (out / "report").mkdir()
    (out / "report" / "details").symlink_to(home)
    before = fingerprint(home)
    done = suite("report", str(out))
    assert_refused(done, out / "report" / "details", "a symbolic link")
    assert fingerprint(home) == before and sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]


def test_a_link_at_the_jobs_folder_is_refused(tmp_path):
    home = victim(tmp_path)
    (tmp_path / "jobs").symlink_to(home)
    before = fingerprint(home)
    done = suite("jobscript", str(scenario_file(tmp_path)), "--scheduler", "slurm", cwd=tmp_path)
    assert_refused(done, Path("jobs"), "a symbolic link")
    assert fingerprint(home) == before and sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]


def test_the_jobs_folder_is_made_and_the_script_is_executable(tmp_path):
    done = suite("jobscript", str(scenario_file(tmp_path)), "--scheduler", "slurm", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = tmp_path / "jobs" / "s.slurm.sh"
    assert done.stdout == f"job script written to {Path('jobs') / 's.slurm.sh'}\n"
    assert os.access(script, os.X_OK) and not script.is_symlink()


# --- behind the first refusal: links planted while a run goes on ---------------------------------------------------


@pytest.mark.parametrize("folder", ["ranks", "checkpoints", "partial"])
def test_removing_temporaries_never_leaves_the_run_folder(tmp_path, folder):
    home, run_dir = victim(tmp_path), tmp_path / "results" / RUN_ID
    run_dir.mkdir(parents=True)
    (run_dir / folder).symlink_to(home)
    (run_dir / ".result.json.tmp1").write_text("{")  # a temporary a killed writer left: removed
    before = fingerprint(home)
    with nofollow.confine(tmp_path / "results"):
        remove_temporaries(run_dir)
    assert fingerprint(home) == before and sorted(p.name for p in home.iterdir()) == [".bashrc", ".netrc"]
    assert sorted(p.name for p in run_dir.iterdir()) == [folder]


@pytest.mark.parametrize("python", [(3, 10), sys.version_info], ids=["python-3.10-walk", "rmtree-dir_fd"])
def test_removing_a_tree_never_follows_a_link_inside_it(tmp_path, monkeypatch, python):
    home, ranks = victim(tmp_path), tmp_path / "results" / RUN_ID / "ranks"
    (ranks / "rank0" / "deep").mkdir(parents=True)
    (ranks / "rank0" / "deep" / "result.json").write_text("{}")
    (ranks / "rank0" / "home").symlink_to(home)
    (ranks / "netrc").symlink_to(home / ".netrc")
    before = fingerprint(home)
    monkeypatch.setattr(nofollow.sys, "version_info", python)  # Python 3.10's rmtree has no dir_fd: walked by hand
    nofollow.remove_tree(ranks)
    assert not ranks.exists() and (tmp_path / "results" / RUN_ID).is_dir() and fingerprint(home) == before


def test_an_atomic_write_below_a_confined_folder_is_refused_through_a_link(tmp_path):
    home, run_dir = victim(tmp_path), tmp_path / "results" / RUN_ID
    run_dir.mkdir(parents=True)
    (run_dir / "samples").symlink_to(home)
    with nofollow.confine(tmp_path / "results"), pytest.raises(nofollow.UnsafeEntry) as refused:
        atomic_write_text(run_dir / "samples" / ".bashrc", "rm -rf ~\n")
    assert str(refused.value).startswith(f"{run_dir / 'samples'}: a symbolic link {REFUSED}")
    assert (home / ".bashrc").read_text() == "export PATH=$HOME/bin:$PATH\n"
    atomic_write_text(run_dir / "result.json", "{}")  # a link at the file itself is replaced, not written through
    (run_dir / "log.txt").symlink_to(home / ".netrc")
    with nofollow.confine(tmp_path / "results"):
        atomic_write_text(run_dir / "log.txt", "mine\n")
    assert not (run_dir / "log.txt").is_symlink() and (home / ".netrc").read_text().startswith("machine cluster")


def test_a_stale_checkpoint_sweep_never_leaves_its_folder(tmp_path):
    from suite.train.resume import remove_stale

    home, run_dir = victim(tmp_path), tmp_path / "results" / RUN_ID
    run_dir.mkdir(parents=True)
    (run_dir / CHECKPOINT_DIR).symlink_to(home)
    before = fingerprint(home)
    with nofollow.confine(tmp_path / "results"):
        remove_stale(run_dir, {0: None})  # every file but planned checkpoints would go
    assert fingerprint(home) == before


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "log.txt")
    signal.alarm(20)  # a blocking open would end the test process here, not hang it
    try:
        for flags in (os.O_WRONLY | os.O_CREAT | os.O_TRUNC, os.O_RDONLY):
            with pytest.raises(nofollow.UnsafeEntry, match="a FIFO"):
                nofollow.open_regular(tmp_path / "log.txt", flags)
    finally:
        signal.alarm(0)


# --- a run refused before it starts leaves nothing behind ------------------------------------------------------------


@pytest.mark.parametrize("existed", [False, True], ids=["new folder", "folder with a run"])
def test_a_run_refused_for_room_leaves_no_file_it_made(tmp_path, capsys, monkeypatch, existed):
    import collections

    out = tmp_path / "results"
    if existed:
        write_record(out / "other-run", new_record({"run_id": "other-run", "status": "ok"}))
    path = scenario_file(tmp_path)
    before = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")}
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr("suite.running.lock.shutil.disk_usage", lambda folder: usage(3 * 2**20, 0, 3 * 2**20))  # 3 MB tmpfs
    assert main(["run", str(path), "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {out} has 3 MB free, but these 1 runs need about ")
    assert {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")} == before  # no run.json, scenario.yaml or lock


# --- sample --out, the hint, SIGHUP --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x", "x.npz", "x.data"])
def test_sample_writes_exactly_the_path_it_was_given(tmp_path, capsys, name):
    import numpy as np

    run_dir = tmp_path / "run"
    written = tiny_bundle().save(run_dir / "generator.pt")
    write_record(run_dir, new_record({"run_id": "r", "status": "ok", "model_files": {"generator.pt": vars(written)}}))
    out = tmp_path / "smp" / name
    assert main(["sample", str(run_dir), "--n", "4", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == [name]  # no .npz added, no hidden temporary left
    with np.load(out) as data:
        assert data["images"].shape == (4, 1, 20, 20) and data["labels"].shape == (4,)
    named = "" if name.endswith(".npz") else ", named as given"
    assert capsys.readouterr().out.startswith(f"4 samples written to {out} (an .npz archive{named}: images (4, 1, 20, 20)")


@pytest.mark.multiproc
def test_the_next_step_hint_quotes_the_results_folder(tmp_path, capsys):
    out = tmp_path / "my results; echo pwned"
    assert main(["run", str(scenario_file(tmp_path)), "--out", str(out), "-q", "--timeout", "600"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.endswith(f"Next: suite report {shlex.quote(str(out))}")
    assert shlex.split(last.split("Next: ")[1]) == ["suite", "report", str(out)]


@pytest.mark.multiproc
def test_sighup_stops_suite_run_as_sigterm_does(tmp_path):
    out = tmp_path / "results"
    run_dir = out / RUN_ID
    path = scenario_file(tmp_path, epochs=50, steps=2000, checkpoint_every={"steps": 5})
    proc = subprocess.Popen(
        [sys.executable, "-m", "suite", "run", str(path), "--out", str(out), "-q", "--grace", "30", "--timeout", "600"],
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not list((run_dir / CHECKPOINT_DIR).glob("*.json")):  # training: the first checkpoint is written
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGHUP)  # the ssh session it ran in went away
    _, err = proc.communicate(timeout=120)
    record = record_data(read_record(run_dir))  # the record's data, as result.json holds it
    assert proc.returncode == 129, err
    assert "Traceback" not in err
    assert any(line.startswith(f"stopped by SIGHUP; {RUN_ID}: interrupted by SIGHUP after ") for line in err.splitlines())
    assert record["status"] == "interrupted" and record["error"].startswith("interrupted by SIGHUP after ")
    stopped = record["checkpoint"]  # the checkpoint the rank saved when asked to stop, after the periodic ones
    assert stopped is not None and f"--resume continues from checkpoint {stopped['index']}" in record["error"]
    assert (out / LOCK_FILE).read_text() == ""  # released
    assert not [p for p in run_dir.rglob(".*")]  # no temporaries of unfinished writes
