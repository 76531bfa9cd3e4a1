"""Runs that survive what clusters do to them: checkpoints and resume, dead and raising ranks,
signals to `suite run`, and the results folder's lock and room.

The real runs fail a rank at a known step with the worker's test hook (``SUITE_TEST_FAIL_AT_STEP``,
``SUITE_TEST_FAIL_RANK``, ``SUITE_TEST_FAIL_HOW=kill``: the rank sends itself SIGKILL) and run
`suite run` as a subprocess, as a user or a scheduler would.
"""

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
import yaml

from conftest import REPO, finalize_record, run_scenario, tiny_scenario
from suite.cli import main
from suite.config.expansion import expand, parse_scenario
from suite.config.scenario import ScenarioError
from suite.measure.telemetry import CommStats, Telemetry
from suite.records.codec import record_data
from suite.records.failures import Failure, first_failure, launch_problem, launcher_failures, write_status
from suite.records.results import CHECKPOINT_DIR, LOCK_FILE, STOP_FILE, read_record
from suite.running.launched import LogWatch
from suite.running.lock import ResultsLock
from suite.train.resume import describe_checkpoint, remove_stale, resume_plan, settings_fingerprint

HOST = socket.gethostname()


# --- the schema -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "every, error",
    [
        ({}, "train.checkpoint_every: give exactly one of steps or minutes"),
        ({"steps": 5, "minutes": 1}, "train.checkpoint_every: give exactly one of steps or minutes"),
        ({"steps": 0}, "train.checkpoint_every.steps: must be at least 1, got 0"),
        ({"minutes": -1}, "train.checkpoint_every.minutes: must be positive, got -1"),
        ({"hours": 1}, "train.checkpoint_every.hours: unknown field; expected one of steps, minutes"),
    ],
)
def test_checkpoint_every_is_validated(every, error):
    with pytest.raises(ScenarioError, match=error.replace(".", r"\.")):
        parse_scenario(tiny_scenario("s", [{"strategy": "data_parallel", "procs": [1]}], train={"checkpoint_every": every}))


# --- checkpoint state, in one process ---------------------------------------------------------------------------


class Interrupt(Exception):
    pass


class Capture:
    """A checkpointer that keeps the trainer's and the telemetry's state at one step and stops training there."""

    def __init__(self, trainer, telemetry, at: int):
        self.trainer, self.telemetry, self.at, self.state = trainer, telemetry, at, None

    def at_boundary(self, steps):
        if steps == self.at:
            self.state = (self.trainer.state_dict(), self.telemetry.state_dict())
            raise Interrupt


def generator_tensors(trainer):
    return {k: v.clone() for k, v in trainer.generator.network.state_dict().items()}


def test_a_trainer_resumed_from_its_state_makes_the_same_steps():
    from test_training import make_trainer

    whole, telemetry = make_trainer(steps=7, points=3, warmup=1)
    whole.warm_up(1)
    telemetry.open_window()
    whole.train()

    first, telemetry = make_trainer(steps=7, points=3, warmup=1)
    first.checkpointer = Capture(first, telemetry, at=4)
    first.warm_up(1)
    telemetry.open_window()
    with pytest.raises(Interrupt):
        first.train()
    state, measured = first.checkpointer.state

    resumed, telemetry = make_trainer(steps=7, points=3, warmup=1)
    resumed.load_state_dict(state, state["shared"])
    telemetry.load_state_dict(measured)
    telemetry.open_window()
    assert telemetry.clock() >= measured["clock_s"]  # the window's clock goes on
    resumed.train()
    a, b = generator_tensors(whole), generator_tensors(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)  # bitwise
    assert [h["g_loss"] for h in whole.result.history] == [h["g_loss"] for h in resumed.result.history]
    assert [s["step"] for s in whole.result.snapshots] == [s["step"] for s in resumed.result.snapshots] == [3, 5, 7]
    assert telemetry.steps == 7 and resumed.position.finished


def test_telemetry_continues_its_window_and_traffic():
    comm = CommStats()
    first = Telemetry(torch.device("cpu"), comm)
    comm.add(100, 2)  # set-up traffic
    first.open_window()
    for _ in range(3):
        first.begin_step()
        comm.add(10, 2)
        first.end_step(images=4)
    state = first.state_dict()
    comm2 = CommStats()
    second = Telemetry(torch.device("cpu"), comm2)
    comm2.add(100, 2)  # the resumed segment's own set-up
    second.load_state_dict(state)
    second.open_window()
    second.begin_step()
    comm2.add(10, 2)
    second.end_step(images=4)
    second.training_done()
    second.close_window()
    assert second.window.steps == 4 and second.window.images == 16 and second.step_times.count == 4
    assert second.window.comm_bytes == 40  # the window's traffic over both segments
    assert comm2.bytes - second.window.comm_bytes == 200  # both set-ups, outside the window
    assert second.window.seconds >= state["clock_s"]


# --- which checkpoint a run resumes from ------------------------------------------------------------------------


def _mark(folder: Path, run, rank: int, index: int, group: list[int], fp: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    state = f"state {index} of rank {rank}".encode()
    (folder / f"{index:06d}-rank{rank}.pt").write_bytes(state)
    meta = {
        "format": 2,
        "index": index,
        "rank": rank,
        "group": group,
        "steps": 2 * index,
        "clock_s": 1.5 * index,
        "done": False,
        "fingerprint": fp or settings_fingerprint(run),
        "bytes": len(state),
        "sha256": hashlib.sha256(state).hexdigest(),
    }
    (folder / f"{index:06d}-rank{rank}.json").write_text(json.dumps(meta))


def test_each_group_resumes_from_the_latest_checkpoint_all_its_ranks_wrote(tmp_path):
    run = expand(parse_scenario(tiny_scenario("s", [{"strategy": "label_partitioned", "engine": "mpi", "procs": [4]}])))[0]
    folder = tmp_path / CHECKPOINT_DIR
    for index in (1, 2):  # ranks 0 and 1 train together; rank 1 died before writing its third checkpoint
        _mark(folder, run, 0, index, [0, 1])
        _mark(folder, run, 1, index, [0, 1])
    _mark(folder, run, 0, 3, [0, 1])
    (folder / "000003-rank1.pt").write_bytes(b"no description: never finished")
    _mark(folder, run, 2, 5, [2])  # rank 2 trains alone, further on
    _mark(folder, run, 3, 1, [3], fp="other settings")
    (folder / ".000004-rank2.pt.abc.pt").write_bytes(b"half written")
    (folder / STOP_FILE).write_text("stop")
    plan = resume_plan(tmp_path, run)
    assert plan.ranks == {0: 2, 1: 2, 2: 5, 3: None} and plan.skipped == []
    remove_stale(tmp_path, plan.ranks)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"00000{i}-rank{r}.{s}" for i in (1, 2) for r in (0, 1) for s in ("pt", "json")]
        + ["000005-rank2.pt", "000005-rank2.json"]
    )
    assert describe_checkpoint(None) == "no checkpoint yet: --resume starts it again from step 0"
    assert describe_checkpoint(plan.checkpoint()) == (
        "--resume continues from checkpoint 2 (step 4, 3 s of training); rank 3 has none yet and starts again from step 0"
    )


def test_a_class_group_with_a_checkpoint_is_named_when_the_first_has_none(tmp_path):
    """Class groups checkpoint apart: rank 0's may have none yet while rank 2's has one."""
    run = expand(parse_scenario(tiny_scenario("s", [{"strategy": "label_partitioned", "engine": "mpi", "procs": [3]}])))[0]
    folder = tmp_path / CHECKPOINT_DIR
    _mark(folder, run, 2, 1, [2])
    plan = resume_plan(tmp_path, run)
    checkpoint = plan.checkpoint()
    assert plan.ranks == {0: None, 1: None, 2: 1}
    assert checkpoint["rank"] == 2 and checkpoint["ranks"] == 1 and checkpoint["from_start"] == [0, 1]
    assert checkpoint["path"] == str(folder / "000001-rank2.pt")
    assert describe_checkpoint(checkpoint) == (
        "--resume continues from checkpoint 1 of rank 2 (step 2, 2 s of training); "
        "ranks 0, 1 have none yet and start again from step 0"
    )


# --- what ended a run, in one line ------------------------------------------------------------------------------

LAUNCHER_OUTPUT = {
    "openmpi-signal": (
        "prterun noticed that process rank 1 with PID 8662 on node node3 exited on\nsignal 9 (Killed).",
        "rank 1 on node3 was killed by SIGKILL",
    ),
    "openmpi-exit": (
        "thus causing the job to be terminated. The first process to do so was:\n\n   Process name: [prterun-vm-14697@1,1]\n"
        "   Exit code:    1\n",
        "rank 1 exited with code 1",
    ),
    "openmpi-abort": (
        "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\n  Proc: [[6469,1],2]\n  Errorcode: 1\n",
        "rank 2 exited with code 1",
    ),
    "horovodrun": (
        "[1]<stderr>:Killed\nProcess 1 exit with status code 137.\nTerminating remaining workers after failure of Process 1.\n"
        "Process 0 exit with status code 1.",
        "rank 1 was killed by SIGKILL",
    ),
    "torchrun": (
        "Failures:\n[1]:\n  time      : 2026-11-22_02:54:38\n  host      : localhost\n  rank      : 0 (local_rank: 0)\n"
        "  exitcode  : -15 (pid: 8603)\nRoot Cause (first observed failure):\n[0]:\n  time      : 2026-11-22_02:54:38\n"
        "  host      : node2\n  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 8604)  (SIGKILL)\n",
        "rank 1 on node2 was killed by SIGKILL",
    ),
    "srun": (
        "srun: error: nid0007: task 3: Segmentation fault\nsrun: error: nid0007: task 2: Exited with exit code 1",
        "rank 3 on nid0007 was killed by SIGSEGV",
    ),
}


@pytest.mark.parametrize("launcher", LAUNCHER_OUTPUT)
def test_the_first_failed_rank_is_read_from_each_launchers_output(launcher):
    text, line = LAUNCHER_OUTPUT[launcher]
    assert launcher_failures(text)[0].line() == line


LAUNCH_PROBLEMS = {
    # mpirun, horovodrun (ssh's own words), deepspeed (through pdsh), srun and sbatch (Slurm's)
    "unreachable": (
        "ssh: connect to host node3 port 22: No route to host\n-----\nA daemon failed to report back",
        "host node3 is unreachable (ssh: connect to host node3 port 22: No route to host)",
    ),
    "unknown": (
        "nosuchnode: ssh: Could not resolve hostname nosuchnode: Temporary failure in name resolution\n"
        "pdsh@node1: nosuchnode: ssh exited with exit code 255",
        "host nosuchnode is unknown (ssh: Could not resolve hostname nosuchnode: Temporary failure in name resolution)",
    ),
    "partition": (
        "srun: error: invalid partition specified: nosuch\nsrun: error: Unable to allocate resources: Invalid partition name specified",
        "Slurm partition nosuch does not exist (invalid partition specified)",
    ),
}


@pytest.mark.parametrize("problem", LAUNCH_PROBLEMS)
def test_a_host_or_partition_a_launcher_cannot_use_is_named_in_one_line(tmp_path, problem):
    text, line = LAUNCH_PROBLEMS[problem]
    assert launch_problem(text) == line
    assert launch_problem("rank 0 trained\nconnection to node2 established") is None
    # the record's error starts with that line, whatever the launcher's exit code
    run = expand(parse_scenario(tiny_scenario("s", [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}])))[0]
    (tmp_path / "log.txt").write_text(f"$ mpirun ...\n{text}\n")
    record = finalize_record(run, tmp_path, ["mpirun"], 255, 3.0)
    assert record.status == "failed" and record.error.splitlines()[0] == line


def test_the_launch_is_watched_for_an_unreachable_host_as_its_output_grows(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("$ deepspeed ...\nnode3: ssh: connect to host node3 port 22: No rou")
    watch = LogWatch(log)
    assert watch.problem() is None  # not a whole line yet
    with open(log, "a") as f:
        f.write("te to host\n")
    assert watch.problem() == "host node3 is unreachable (ssh: connect to host node3 port 22: No route to host)"
    assert watch.problem() is None  # read once


def test_status_files_name_the_host_and_the_exception(tmp_path):
    write_status(tmp_path, 1, "failed", error="ValueError: bad batch", traceback="...")
    write_status(tmp_path, 0, "running")
    torchrun = LAUNCHER_OUTPUT["torchrun"][0].replace("-9 (pid: 8604)  (SIGKILL)", "1 (pid: 8604)").replace("node2", "localhost")
    assert first_failure(tmp_path, torchrun).line() == f"rank 1 on {HOST} exited with code 1: ValueError: bad batch"
    assert first_failure(tmp_path, "").line() == f"rank 1 on {HOST} exited with code 1: ValueError: bad batch"
    assert Failure(None, None, None, 6).line() == "a rank was killed by SIGABRT"


LOST_PEER = "RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:10147: Connection reset by peer."
TORCHRUN_ROOT_RANK0 = (
    "Failures:\n[1]:\n  time      : 2026-11-22_04:40:01\n  host      : localhost\n  rank      : 1 (local_rank: 1)\n"
    "  exitcode  : -9 (pid: 8604)\nRoot Cause (first observed failure):\n[0]:\n  time      : 2026-11-22_04:40:01\n"
    "  host      : localhost\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 8603)\n"
)


def test_a_rank_that_lost_its_peer_is_not_named_as_the_cause(tmp_path):
    # rank 1 was killed; rank 0 then failed of the lost connection, and torchrun saw rank 0 first
    write_status(tmp_path, 1, "running")
    write_status(tmp_path, 0, "failed", error=LOST_PEER, traceback="...")
    assert first_failure(tmp_path, TORCHRUN_ROOT_RANK0).line() == f"rank 1 on {HOST} was killed by SIGKILL"
    # rank 1 raised first: its own error names the cause, whatever the launcher saw first
    write_status(tmp_path, 1, "failed", error="RuntimeError: injected failure", traceback="...", time=1.0)
    launcher = TORCHRUN_ROOT_RANK0.replace("-9 (pid: 8604)", "1 (pid: 8604)")
    assert first_failure(tmp_path, launcher).line() == f"rank 1 on {HOST} exited with code 1: RuntimeError: injected failure"
    # only lost peers and no launcher word: the first to fail is still named
    write_status(tmp_path, 1, "failed", error=LOST_PEER, traceback="...", time=2.0)
    assert first_failure(tmp_path, "").rank == 1


OPENMPI_PEER_LOST = """--------------------------------------------------------------------------
An MPI communication peer process has unexpectedly disconnected.  This
usually indicates a failure in the peer process (e.g., a crash or
otherwise exiting without calling MPI_FINALIZE first).

  Local host: node1
  Local PID:  10380
  Peer host:  node2
--------------------------------------------------------------------------
 [node1:00000] *** An error occurred in Socket closed
[node1:00000] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,
--------------------------------------------------------------------------
prterun has exited due to process rank 0 with PID 0 on node node1 calling
"abort". This may have caused other processes in the application to be
"""


def test_a_rank_killed_on_another_node_is_named_when_mpirun_ends_first(tmp_path):
    # Seen in make cluster-test: rank 1 on node2 killed by SIGKILL; rank 0 on node1 aborts inside Open MPI (no
    # status of its own) and mpirun exits before node2's daemon reports the signal. The rank that went silent on
    # the peer host is the cause, not the rank that reported the disconnection.
    write_status(tmp_path, 0, "running", host="node1")
    write_status(tmp_path, 1, "running", host="node2")
    failure = first_failure(tmp_path, OPENMPI_PEER_LOST)
    assert failure is not None and (failure.rank, failure.host, failure.signal) == (1, "node2", None)
    assert failure.line().startswith("rank 1 on node2 died without a word: its MPI peer on node1 saw the connection drop")
    # Open MPI does not always print its help message; the aborting rank's own lines still say where it ran
    without_help = OPENMPI_PEER_LOST[OPENMPI_PEER_LOST.index(" [node1:00000]") :]
    assert first_failure(tmp_path, without_help).line() == failure.line()
    # ...but with two silent ranks elsewhere there is no telling which went first: no rank is named
    write_status(tmp_path, 2, "running", host="node3")
    assert first_failure(tmp_path, without_help) is None
    # a rank on node2 that raised an error of its own is named by that error instead
    write_status(tmp_path, 1, "failed", host="node2", error="RuntimeError: injected failure", traceback="...")
    assert (
        first_failure(tmp_path, OPENMPI_PEER_LOST).line() == "rank 1 on node2 exited with code 1: RuntimeError: injected failure"
    )


# --- the results folder -----------------------------------------------------------------------------------------


def _scenario_file(tmp_path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("s", [{"strategy": "data_parallel", "engine": "mpi", "procs": [1]}])))
    return path


def test_a_second_suite_run_on_a_locked_folder_is_refused(tmp_path, capsys):
    path, out = _scenario_file(tmp_path), tmp_path / "results"
    with ResultsLock(out):
        assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert f"{out} is in use by suite run (pid {os.getpid()} on {HOST}, since " in err and "choose another --out" in err
        assert not list(out.glob("*/run.json"))  # nothing written
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 0  # released
    assert (out / LOCK_FILE).read_text() == ""  # an unlocked lock file names no holder


def test_a_stale_lock_is_taken_over(tmp_path, caplog):
    path, out = _scenario_file(tmp_path), tmp_path / "results"
    gone = subprocess.Popen(["true"])
    gone.wait()
    out.mkdir()
    (out / LOCK_FILE).write_text(
        json.dumps({"host": HOST, "pid": gone.pid, "started": "yesterday", "command": "suite run s.yaml"})
    )
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 0
    assert f"taking over the lock of suite run (pid {gone.pid} on {HOST}, since yesterday" in caplog.text


def test_a_full_or_unwritable_folder_is_refused_before_the_first_run(tmp_path, capsys, monkeypatch):
    import collections
    import errno

    path, out = _scenario_file(tmp_path), tmp_path / "results"
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr("suite.running.lock.shutil.disk_usage", lambda folder: usage(2**30, 2**30 - 50 * 2**20, 50 * 2**20))
    assert main(["run", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out} has 50 MB free, but these 1 runs need about" in err and "MB of checkpoints" in err
    assert not list(out.glob("*/log.txt"))  # nothing was launched

    def read_only(**kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr("suite.running.lock.tempfile.NamedTemporaryFile", read_only)
    assert main(["run", str(path), "--out", str(out)]) == 2
    assert f"{out} is not writable (Read-only file system)" in capsys.readouterr().err


@pytest.mark.parametrize("scheduler, warning", [("slurm", "#SBATCH --signal=B:TERM@120"), ("lsf", "#BSUB -wa TERM -wt 2")])
def test_job_scripts_resume_and_pass_the_walltime_warning_to_suite_run(tmp_path, scheduler, warning):
    out = tmp_path / "job.sh"
    assert main(["jobscript", str(REPO / "scenarios" / "mnist-weak.yaml"), "--scheduler", scheduler, "--out", str(out)]) == 0
    text = out.read_text()
    assert warning in text and "--resume" in text and "--grace 60" in text
    assert "trap 'kill -TERM \"$runner\" 2>/dev/null' TERM INT" in text
    assert subprocess.run(["bash", "-n", str(out)]).returncode == 0


# --- real runs: a rank dies, a rank raises, the run resumes -------------------------------------------------------

# MPI runs die and resume as label-partitioned (raising) and cellular (killed) runs, under mpirun
RUNS = [{"strategy": "data_parallel", "engine": e, "procs": [2]} for e in ("horovod", "torch", "deepspeed")] + [
    {"strategy": "label_partitioned", "engine": "mpi", "procs": [2]},
    {"strategy": "cellular", "engine": "mpi", "grid": [2, 2], "procs": [2]},
]
# 6 generator steps (cellular: 4 iterations), the first a warm-up step, a checkpoint every 2
SCENARIO = tiny_scenario(
    "reliability",
    RUNS,
    dataset={"classes": [0, 1, 2]},
    train={"steps": 6, "epochs": 2, "batch_size": 16, "threads": 1, "checkpoint_every": {"steps": 2}},
    cellular={"iterations": 4, "batches_per_iteration": 1, "fitness_samples": 40, "mixture_samples": 40},
)


class Uninterrupted:
    """The runs of SCENARIO without interruption, each run when a test first asks for it: the generators a resumed
    run must reproduce (only those of the selected tests are trained; ``make test`` leaves out the matrix)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.records = folder, {}

    def __getitem__(self, run_id: str) -> dict:
        if run_id not in self.records:
            (self.folder / run_id).mkdir()
            code, records = run_scenario(self.folder / run_id, SCENARIO, "--only", run_id)
            assert code == 0 and run_id in records, {k: r.get("error") for k, r in records.items()}
            self.records[run_id] = records[run_id]
        return self.records[run_id]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return Uninterrupted(tmp_path_factory.mktemp("uninterrupted"))


def survivors(run_dir: Path) -> list[int]:
    """Processes whose command line names the run folder."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if str(run_dir) in " ".join(p.info["cmdline"] or []):
            found.append(p.pid)
    return found


def suite_run(tmp_path: Path, scenario: dict, *extra: str, **env: str) -> subprocess.Popen:
    """`suite run` on ``scenario`` as a subprocess (into tmp_path/results), with ``env`` added."""
    path = tmp_path / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "suite", "run", str(path), "--out", str(tmp_path / "results"), "-q", "--timeout", "600", *extra],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _ended(status: dict) -> float | None:
    """When a rank ended: its failure's time, or now if its process is gone."""
    if status["status"] == "failed":
        return status["time"]
    try:
        if psutil.Process(status["pid"]).status() != psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        pass
    return time.time()


def watched(proc: subprocess.Popen, run_dir: Path, rank: int = 1) -> tuple[int, dict, float | None]:
    """Wait for `suite run`: (exit code, the run's record, seconds from ``rank``'s end to the record)."""
    from suite.records.failures import read_statuses

    ended = None
    while proc.poll() is None:
        status = read_statuses(run_dir).get(rank)
        if ended is None and status is not None:
            ended = _ended(status)
        time.sleep(0.2)
    output = proc.stdout.read()
    record = record_data(read_record(run_dir))  # the record's data, as result.json holds it
    assert record is not None, output
    return proc.returncode, record, ((run_dir / "result.json").stat().st_mtime - ended) if ended else None


def assert_same_model(record: dict, reference: dict) -> None:
    assert record["status"] == "ok", record.get("error")
    assert record["model_digest"] == reference["model_digest"]  # bitwise the same generators (and mixture weights)
    assert record["telemetry"]["timed_steps"] == reference["telemetry"]["timed_steps"]  # the window's steps of all segments
    assert record["checkpoint_s"] > 0


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "engine", ["horovod", pytest.param("torch", marks=pytest.mark.matrix)]
)  # raising ranks: the DeepSpeed (torchrun) and MPI runs below
def test_a_killed_rank_ends_the_run_and_resuming_gives_the_same_generator(uninterrupted, tmp_path, engine):
    from test_logs import _events, _series

    run_id = f"data_parallel-bce-{engine}-p2-r0"
    run_dir, tb = tmp_path / "results" / run_id, ("--tensorboard", str(tmp_path / "tb"))  # events change no training
    # rank 1 is killed after step 3, a step after the first checkpoint
    code, record, seconds = watched(
        suite_run(tmp_path, SCENARIO, "--only", run_id, *tb, SUITE_TEST_FAIL_AT_STEP="3", SUITE_TEST_FAIL_HOW="kill"),
        run_dir,
    )
    # the killed run keeps the events training wrote: rank 0's losses at step 2 at least, on the images axis (16 a step)
    killed = _series(_events(tmp_path / "tb" / run_id), "loss/d_loss")
    assert killed and killed[0][0] == 32 and {s for s, _ in killed} <= {32, 48}
    lines = record["error"].splitlines()
    assert code == 1 and record["status"] == "failed"
    assert lines[0] == f"rank 1 on {HOST} was killed by SIGKILL"
    assert (
        lines[1].startswith("--resume continues from checkpoint 1 (step 2, ")
        and lines[2] == f"launcher output: {run_dir / 'log.txt'}"
    )
    assert record["failure"] == {"rank": 1, "host": HOST, "exit_code": None, "signal": "SIGKILL", "message": None}
    assert seconds is not None and seconds < 30
    assert not survivors(run_dir)
    # resumed, to the end: the uninterrupted run's generator, bit for bit
    code, record, _ = watched(suite_run(tmp_path, SCENARIO, "--only", run_id, *tb, "--resume"), run_dir)
    reference = uninterrupted[run_id]
    assert code == 0
    assert_same_model(record, reference)
    assert [h["g_loss"] for h in record["history"]] == [h["g_loss"] for h in reference["history"]]
    # the new attempt replaced the killed one's events and wrote the restored history again: the record's, once
    events = _events(tmp_path / "tb" / run_id)
    assert _series(events, "loss/g_loss") == [(16 * h["step"], pytest.approx(h["g_loss"], rel=1e-6)) for h in record["history"]]
    assert record["resumed_from"]["step"] == 2 and [s["from_step"] for s in record["segments"]] == [0, 2]
    assert 0 < record["train_s"] and not (run_dir / CHECKPOINT_DIR).exists() and not (run_dir / "ranks").exists()


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "run_id, how, rank, step",
    [
        pytest.param("data_parallel-bce-deepspeed-p2-r0", "raise", 1, 3, marks=pytest.mark.matrix),
        # resuming the class GANs: also tests/test_budgets.py (in make test). The class GANs of the two ranks train
        # independently, so only the failing rank's own checkpoint is certain: rank 0 (classes 0 and 1, whose
        # checkpoint the record names) fails after its 5th step (the 2 warm-up steps, round 1, which brings both GANs to
        # step 2 and checkpoint 1, then a step of round 2); rank 1 (class 2) may be anywhere by then, and resumes from
        # its own latest checkpoint.
        pytest.param("label_partitioned-bce-mpi-p2-r0", "raise", 0, 5, marks=pytest.mark.matrix),
        pytest.param("cellular-mustangs-mpi-p2-g2x2-r0", "kill", 1, 3, marks=pytest.mark.matrix),
    ],
)
def test_deepspeed_label_partitioned_and_cellular_runs_resume_to_the_same_generator(
    uninterrupted, tmp_path, run_id, how, rank, step
):
    run_dir = tmp_path / "results" / run_id
    proc = suite_run(
        tmp_path,
        SCENARIO,
        "--only",
        run_id,
        SUITE_TEST_FAIL_AT_STEP=str(step),
        SUITE_TEST_FAIL_RANK=str(rank),
        SUITE_TEST_FAIL_HOW=how,
    )
    code, record, seconds = watched(proc, run_dir, rank=rank)
    expected = (
        "was killed by SIGKILL" if how == "kill" else f"exited with code 1: RuntimeError: injected failure after step {step}"
    )
    assert code == 1 and record["error"].splitlines()[0].startswith(f"rank {rank} on {HOST} {expected}")
    assert record["checkpoint"] is not None and seconds is not None and seconds < 30
    assert not survivors(run_dir)
    code, record, _ = watched(suite_run(tmp_path, SCENARIO, "--only", run_id, "--resume"), run_dir)
    assert code == 0 and len(record["segments"]) == 2
    assert_same_model(record, uninterrupted[run_id])


# --- real runs: signals to suite run -------------------------------------------------------------------------------


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.2)


@pytest.mark.multiproc
@pytest.mark.parametrize("engine, signum, checkpoints", [("horovod", signal.SIGTERM, True), ("torch", signal.SIGINT, False)])
def test_a_signal_to_suite_run_stops_every_process_and_records_the_run(tmp_path, engine, signum, checkpoints):
    train = {"steps": 30, "checkpoint_every": {"steps": 5}} if checkpoints else {"steps": 1000}
    scenario = tiny_scenario("signals", [{"strategy": "data_parallel", "engine": engine, "procs": [2]}], train=train)
    run_dir = tmp_path / "results" / f"data_parallel-bce-{engine}-p2-r0"
    proc = suite_run(tmp_path, scenario, "--grace", "30")
    if checkpoints:  # training: the first checkpoint is written
        _wait_for(lambda: list((run_dir / CHECKPOINT_DIR).glob("*.json")), proc)
    else:  # both ranks started
        _wait_for(lambda: len(list((run_dir / "ranks").glob("rank*.json"))) == 2, proc)
    assert survivors(run_dir)
    proc.send_signal(signum)
    code = proc.wait(timeout=120)
    record = record_data(read_record(run_dir))  # the record's data, as result.json holds it
    assert code == 128 + signum
    assert not survivors(run_dir)  # no rank, launcher or helper outlives the runner
    assert record["status"] == "interrupted" and record["error"].startswith(
        f"interrupted by {signal.Signals(signum).name} after "
    )
    assert not [p for p in run_dir.rglob(".*")]  # no temporaries of unfinished writes
    assert (tmp_path / "results" / LOCK_FILE).read_text() == ""
    if not checkpoints:
        assert record["checkpoint"] is None and "no checkpoint yet: --resume starts it again from step 0" in record["error"]
        return
    stopped = record["checkpoint"]  # the checkpoint the ranks saved when asked to stop, after the periodic ones
    assert stopped["index"] >= 2 and f"--resume continues from checkpoint {stopped['index']}" in record["error"]
    code, records = run_scenario(tmp_path, scenario, "--resume")
    resumed = records[run_dir.name]
    assert code == 0 and resumed["status"] == "ok" and resumed["resumed_from"]["step"] == stopped["steps"]
    assert resumed["telemetry"]["timed_steps"] == 29  # 30 steps, the first a warm-up step
