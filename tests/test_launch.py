"""Launchers: the command line each one gets, the environment each one leaves, and real runs under them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import launched_runs, run_scenario, tiny_scenario
from suite.config.expansion import expand, parse_scenario
from suite.records.codec import record_data
from suite.running.commands import LaunchError, LaunchOptions, command_for, deepspeed_env_file, forwarded_variables
from suite.train.launchenv import GPU_RANK_THREADS, LaunchInfo, detect, threads_per_rank

PY = "/env/bin/python"


def a_run(engine="horovod", procs=2, strategy="data_parallel"):
    scenario = parse_scenario(
        tiny_scenario("x", [{"strategy": strategy, "engine": engine, "procs": [procs]}], train={"batch_size": 48})
    )
    return expand(scenario)[0]


def cmd(run, **options):
    return command_for(run, Path("/r/RUN"), LaunchOptions(python=PY, **options))


# --- command lines ------------------------------------------------------------------------------------------


def test_a_missing_launcher_is_one_line_naming_the_engine_that_needs_it(monkeypatch):
    from suite.running import planning, preflight

    # Horovod is optional (the pip route leaves it out): without it there is no horovodrun
    monkeypatch.setattr(preflight.shutil, "which", lambda tool: None if tool == "horovodrun" else f"/bin/{tool}")
    opts = LaunchOptions(python=PY)
    preflight.check_tools([planning.plan_run(a_run("torch"), Path("r"), opts)], opts)  # torch's own launcher is there
    with pytest.raises(LaunchError) as error:
        preflight.check_tools([planning.plan_run(a_run(engine), Path("r"), opts) for engine in ("torch", "horovod")], opts)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("launcher not found: horovodrun, for the runs of the horovod engine: install it ")


def test_local_launchers_per_engine():
    assert cmd(a_run("horovod")) == [
        "horovodrun",
        "-np",
        "2",
        "--gloo",
        "-H",
        "localhost:2",
        PY,
        "-m",
        "suite.running.worker",
        "/r/RUN",
    ]
    assert cmd(a_run("torch")) == [
        PY,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc_per_node",
        "2",
        "--log-dir",  # torchrun's logs in the run's folder, not /tmp/torchelastic_*
        "/r/RUN/torchelastic",
        "-m",
        "suite.running.worker",
        "/r/RUN",
    ]
    assert cmd(a_run("deepspeed"))[:3] == [PY, "-m", "torch.distributed.run"]
    local_mpi = cmd(a_run("mpi", procs=4))
    assert local_mpi[:5] == ["mpirun", "-np", "4", "--bind-to", "none"]
    assert ("--oversubscribe" in local_mpi) == (4 > (os.cpu_count() or 1))


def test_mpirun_on_a_cluster(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/site")
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    line = cmd(a_run("torch", procs=8), launcher="mpirun", hosts="n1:4,n2:4", ranks_per_node=4, master_addr="n1")
    assert line[:9] == ["mpirun", "-np", "8", "-H", "n1:4,n2:4", "--map-by", "ppr:4:node", "--bind-to", "none"]
    assert "-x" in line and "PYTHONPATH" in line and "LD_LIBRARY_PATH" not in line
    assert "MASTER_ADDR=n1" in line and line[-3:] == ["-m", "suite.running.worker", "/r/RUN"]


def test_remote_ranks_get_the_suites_variables(monkeypatch, tmp_path):
    """mpirun passes remote ranks only what -x names, DeepSpeed's runner only PYTHON*: the suite's own
    settings (SUITE_*: its cache, device, test knobs) are named too, and written for DS_ENV_FILE."""
    monkeypatch.setenv("SUITE_CACHE", "/shared/cache")
    monkeypatch.setenv("SUITE_DEVICE", "cpu")
    monkeypatch.setenv("SUITE_EMPTY", "")
    line = cmd(a_run("mpi", procs=2), launcher="mpirun", hosts="n1:1,n2:1")
    named = [line[i + 1] for i, word in enumerate(line) if word == "-x"]
    assert {"PATH", "SUITE_CACHE", "SUITE_DEVICE"} <= set(named) and "SUITE_EMPTY" not in named
    env = {"PATH": "/venv/bin:/usr/bin", "PYTHONPATH": "/src", "SUITE_CACHE": "/shared/cache", "HOME": "/root"}
    path = deepspeed_env_file(tmp_path, env)
    assert path.is_absolute() and path.read_text().splitlines() == ["PATH=/venv/bin:/usr/bin", "SUITE_CACHE=/shared/cache"]
    assert forwarded_variables(env) == ["PATH", "PYTHONPATH", "SUITE_CACHE"]


def test_horovodrun_on_a_cluster():
    line = cmd(a_run("horovod", procs=8), launcher="horovodrun", hosts="n1:4,n2:4")
    assert line == [
        "horovodrun",
        "-np",
        "8",
        "-H",
        "n1:4,n2:4",
        "--binding-args=--bind-to none --map-by slot",
        PY,
        "-m",
        "suite.running.worker",
        "/r/RUN",
    ]


def test_torchrun_on_a_cluster():
    line = cmd(a_run("torch", procs=8), launcher="torchrun", nodes=2, master_addr="n1", master_port=29600)
    assert line == [
        PY,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "4",
        "--rdzv_backend",
        "c10d",
        "--rdzv_endpoint",
        "n1:29600",
        "--log-dir",
        "/r/RUN/torchelastic",
        "-m",
        "suite.running.worker",
        "/r/RUN",
    ]
    with pytest.raises(LaunchError, match="--master-addr"):
        cmd(a_run("torch", procs=8), launcher="torchrun", nodes=2)


def test_deepspeed_launcher():
    line = cmd(a_run("deepspeed", procs=8), launcher="deepspeed", nodes=2, hosts="hostfile", master_addr="n1")
    assert line == [
        "deepspeed",
        "--num_nodes",
        "2",
        "--num_gpus",
        "4",
        "--master_port",
        "29500",
        "--hostfile",
        "hostfile",
        "--master_addr",
        "n1",
        "--module",
        "suite.running.worker",
        "/r/RUN",
    ]


def test_jsrun_one_resource_set_per_rank():
    line = cmd(a_run("horovod", procs=12), launcher="jsrun", nodes=2, ranks_per_node=6, gpus_per_rank=1, cpus_per_rank=7)
    assert line == [
        "jsrun",
        "-n",
        "12",
        "-r",
        "6",
        "-a",
        "1",
        "-c",
        "7",
        "-g",
        "1",
        "--bind",
        "packed:7",
        PY,
        "-m",
        "suite.running.worker",
        "/r/RUN",
    ]


def test_srun_uses_only_the_nodes_a_run_needs():
    line = cmd(a_run("mpi", procs=6), launcher="srun", nodes=4, ranks_per_node=4, gpus_per_rank=1)
    assert line[:9] == ["srun", "-N", "2", "-n", "6", "--ntasks-per-node", "4", "--gpus-per-task", "1"]
    with pytest.raises(LaunchError, match="need 3 nodes of 4 ranks, more than --nodes 2"):
        cmd(a_run("mpi", procs=12), launcher="srun", nodes=2, ranks_per_node=4)


def test_launchers_refuse_engines_they_cannot_start():
    with pytest.raises(LaunchError, match="horovodrun cannot start the torch engine"):
        cmd(a_run("torch"), launcher="horovodrun")
    with pytest.raises(LaunchError, match="torchrun cannot start the horovod engine"):
        cmd(a_run("horovod"), launcher="torchrun", master_addr="n1")


def test_dry_run_for_every_launcher(tmp_path, capsys):
    from suite.cli import main

    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "smoke.yaml"
    for launcher, extra in (("local", []), ("mpirun", []), ("jsrun", ["--nodes", "2"]), ("srun", ["--nodes", "2"])):
        assert main(["run", str(scenario), "--out", str(tmp_path / launcher), "--dry-run", "--launcher", launcher, *extra]) == 0
        # each launch: its first run's folder, then the sha256 of the run.json written there, which the rank checks
        # (--run-sha256); then any further run of the launch with its own (--next-run RUN_DIR SHA256)
        launched = launched_runs(capsys.readouterr().out)
        folders = sorted(path.parent.name for path in (tmp_path / launcher).glob("*/run.json"))
        assert sorted(launched) == folders and len(folders) > 10 and all(f.endswith("-r0") for f in launched)
    # engine-specific launchers: a clear error, before anything is written, for runs they cannot start
    assert main(["run", str(scenario), "--out", str(tmp_path / "h"), "--dry-run", "--launcher", "horovodrun"]) == 2
    assert "horovodrun cannot start the torch engine" in capsys.readouterr().err
    assert not (tmp_path / "h").exists()


# --- the environment each launcher leaves --------------------------------------------------------------------


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"},
            LaunchInfo("torchrun", 3, 8, 1, 2),
        ),
        (
            {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_SIZE": "4", "CROSS_RANK": "1"},
            LaunchInfo("deepspeed", 5, 8, 1, 4),
        ),
        (
            {"HOROVOD_RANK": "2", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "0", "HOROVOD_LOCAL_SIZE": "2"},
            LaunchInfo("horovod", 2, 4, 0, 2),
        ),
        (
            {
                "OMPI_COMM_WORLD_RANK": "6",
                "OMPI_COMM_WORLD_SIZE": "12",
                "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "6",
            },
            LaunchInfo("openmpi", 6, 12, 0, 6),
        ),
        (
            {
                "JSM_NAMESPACE_RANK": "7",
                "JSM_NAMESPACE_SIZE": "12",
                "JSM_NAMESPACE_LOCAL_RANK": "1",
                "JSM_NAMESPACE_LOCAL_SIZE": "6",
            },
            LaunchInfo("jsrun", 7, 12, 1, 6),
        ),
        ({"PMIX_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}, LaunchInfo("pmix", 3, 4, 1, 2)),
        ({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}, LaunchInfo("pmi", 1, 2, 1, 2)),
        (
            {"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "4(x4)"},
            LaunchInfo("slurm", 9, 16, 1, 4),
        ),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, LaunchInfo("slurm", 0, 2, 0, 2)),
        ({}, LaunchInfo("none", 0, 1, 0, 1)),
    ],
)
def test_environment_of_each_launcher(env, expected):
    assert detect(env) == expected


def test_launcher_priority_and_bad_values():
    # under horovodrun --gloo or mpirun, torchrun variables win only when present; Open MPI beats Slurm
    both = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    assert detect(both).launcher == "openmpi"
    with pytest.raises(ValueError, match="OMPI_COMM_WORLD_SIZE"):
        detect({"OMPI_COMM_WORLD_RANK": "1"})
    with pytest.raises(ValueError, match="'x' is not an integer"):
        detect({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="rank 4 of 2"):
        detect({"RANK": "4", "WORLD_SIZE": "2"})


def test_a_launch_on_this_node_leaves_the_fabric_transport_out_unless_the_site_chose(monkeypatch):
    from suite.running.launch import child_environment

    run = expand(parse_scenario(tiny_scenario("env", [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}])))[0]
    monkeypatch.delenv("OMPI_MCA_btl", raising=False)
    assert child_environment(run, LaunchOptions())["OMPI_MCA_btl"] == "^ofi"  # shared memory on one node
    assert "OMPI_MCA_btl" not in child_environment(run, LaunchOptions(launcher="mpirun"))  # other nodes: the fabric too
    monkeypatch.setenv("OMPI_MCA_btl", "self,vader,tcp")
    assert child_environment(run, LaunchOptions())["OMPI_MCA_btl"] == "self,vader,tcp"


def test_threads_per_rank_on_cpu_and_on_a_gpu():
    # CPU ranks share the node's cores by the sweep's ranks per node; a binding or train.threads wins
    assert threads_per_rank(None, 2, cores=16) == 8
    assert threads_per_rank(None, 2, cores=16, allowed=3) == 3
    assert threads_per_rank(6, 2, cores=16) == 6
    # a GPU rank only launches kernels: at most GPU_RANK_THREADS, never more than its share, unless asked
    assert threads_per_rank(None, 1, cores=16, on_gpu=True) == GPU_RANK_THREADS < 16
    assert threads_per_rank(None, 8, cores=16, on_gpu=True) == 2
    assert threads_per_rank(16, 1, cores=16, on_gpu=True) == 16


# --- job scripts -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheduler", ["lsf", "slurm"])
def test_jobscript(tmp_path, scheduler):
    from suite.cli import main

    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "mnist-weak.yaml"
    out = tmp_path / "job.sh"
    assert (
        main(
            [
                "jobscript",
                str(scenario),
                "--scheduler",
                scheduler,
                "--out",
                str(out),
                "--account",
                "ABC123",
                "--ranks-per-node",
                "6",
                "--walltime",
                "6:30:00",
            ]
        )
        == 0
    )
    text = out.read_text()
    assert subprocess.run(["bash", "-n", str(out)]).returncode == 0  # valid shell
    if scheduler == "lsf":
        assert "#BSUB -nnodes 2" in text and "#BSUB -W 06:30" in text and "#BSUB -P ABC123" in text
        assert "--launcher jsrun" in text and "LSB_DJOB_HOSTFILE" in text
    else:
        assert "#SBATCH --nodes=2" in text and "#SBATCH --time=06:30:00" in text and "#SBATCH --account=ABC123" in text
        assert "--launcher srun" in text and "SLURM_JOB_NODELIST" in text
    # python3 on the nodes' PATH; a built-in scenario by its absolute path is named by its name, which the nodes resolve
    assert "python3 -m suite run mnist-weak --out results/mnist-weak --resume" in text
    assert "python3 -m suite report results/mnist-weak" in text


@pytest.mark.parametrize(
    "walltime, seconds, slurm, lsf",
    [
        ("90", 5400, "01:30:00", "01:30"),  # minutes
        ("6:30:00", 23400, "06:30:00", "06:30"),  # hours:minutes:seconds
        ("0:45:30", 2730, "00:45:30", "00:46"),  # LSF counts minutes: seconds round up, as Slurm does
        ("48:00:00", 172800, "2-00:00:00", "48:00"),
        ("1-12", 129600, "1-12:00:00", "36:00"),  # days-hours
        ("1-12:30", 131400, "1-12:30:00", "36:30"),  # days-hours:minutes
        ("2-00:00:05", 172805, "2-00:00:05", "48:01"),  # days-hours:minutes:seconds
        ("5400s", 5400, "01:30:00", "01:30"),
        ("90m", 5400, "01:30:00", "01:30"),
        ("6H", 21600, "06:00:00", "06:00"),
        ("1d", 86400, "1-00:00:00", "24:00"),
    ],
)
def test_walltime_takes_slurms_forms_and_is_written_for_each_scheduler(tmp_path, walltime, seconds, slurm, lsf):
    from suite.cli import main
    from suite.running.walltime import parse_walltime

    assert parse_walltime(walltime) == seconds
    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "mnist-weak.yaml"
    for scheduler, line in (("slurm", f"#SBATCH --time={slurm}\n"), ("lsf", f"#BSUB -W {lsf}\n")):
        out = tmp_path / f"job.{scheduler}.sh"
        assert main(["jobscript", str(scenario), "--scheduler", scheduler, "--out", str(out), "--walltime", walltime]) == 0
        assert line in out.read_text()


@pytest.mark.parametrize(
    "walltime, message",
    [
        (
            "06:30",
            "ambiguous: Slurm reads MM:SS, this suite read HH:MM before; write 6:30:00 for 6 h 30 min or 0:06:30 for 6 min 30 s",
        ),
        ("1:75:00", "minutes and seconds after a colon must be below 60"),
        ("1-2:00:60", "minutes and seconds after a colon must be below 60"),
        ("2", "must be longer than the 120 s warning the scheduler sends before it (SIGTERM)"),
        ("0", "must be longer than the 120 s warning the scheduler sends before it (SIGTERM)"),
        *(
            (
                bad,
                "expected MINUTES, HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS "
                "or a number with a unit (90m, 6h, 1d, 5400s)",
            )
            for bad in ("6.5h", "1:2:3:4", "-1-00", "two hours", "")
        ),
    ],
)
def test_a_bad_walltime_is_one_clear_line(tmp_path, capsys, walltime, message):
    from suite.cli import main

    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "mnist-weak.yaml"
    out = tmp_path / "job.sh"
    assert main(["jobscript", str(scenario), "--scheduler", "slurm", "--out", str(out), f"--walltime={walltime}"]) == 2
    assert capsys.readouterr().err == f"error: --walltime {walltime!r}: {message}\n"
    assert not out.exists()


# --- real runs under each launcher --------------------------------------------------------------------------


EXTRA = {"torchrun": ["--master-addr", "127.0.0.1"]}
"""Arguments a launcher needs beside ``--launcher``."""


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """``launched(launcher, engine)``: (exit code, record) of a 2-rank data-parallel run of ``engine`` under
    ``launcher``, each run when a test first asks for it (``make test`` leaves out the matrix)."""
    tmp, done = tmp_path_factory.mktemp("launchers"), {}

    def run(launcher: str, engine: str) -> tuple[int, dict]:
        if (launcher, engine) not in done:
            folder = tmp / f"{launcher}-{engine}"
            folder.mkdir()
            scenario = tiny_scenario("launchers", [{"strategy": "data_parallel", "engine": engine, "procs": [2]}])
            code, records = run_scenario(folder, scenario, "--launcher", launcher, *EXTRA.get(launcher, []))
            done[launcher, engine] = code, records[f"data_parallel-bce-{engine}-p2-r0"]
        return done[launcher, engine]

    return run


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "launcher, engine",
    [
        ("mpirun", "horovod"),
        pytest.param("mpirun", "torch", marks=pytest.mark.matrix),
        pytest.param("mpirun", "deepspeed", marks=pytest.mark.matrix),
        # the engines' own launchers: every other multi-process test launches with them too
        pytest.param("horovodrun", "horovod", marks=pytest.mark.matrix),
        pytest.param("torchrun", "torch", marks=pytest.mark.matrix),
        # DeepSpeed's launcher starts DeepSpeed's engine (about 40 s here): an engine users meet after the first two
        pytest.param("deepspeed", "deepspeed", marks=pytest.mark.matrix),
    ],
)
def test_real_two_process_runs_under_each_launcher(launched, launcher, engine):
    code, r = launched(launcher, engine)
    assert r["status"] == "ok", r.get("error")
    assert r["replicas_identical"] is True and r["comm"]["bytes"] > 0
    expected = {"mpirun": "openmpi", "horovodrun": "openmpi", "torchrun": "torchrun", "deepspeed": "deepspeed"}[launcher]
    assert r["launcher"] == expected  # the worker read its rank from this launcher's variables
    assert code == 0


@pytest.mark.multiproc
def test_a_worker_launched_with_the_wrong_process_count_says_so(tmp_path):
    from suite.cli import main
    from suite.records.results import read_record

    path = tmp_path / "s.yaml"
    import yaml

    path.write_text(yaml.safe_dump(tiny_scenario("s", [{"strategy": "data_parallel", "engine": "mpi", "procs": [2]}])))
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--dry-run"]) == 0
    run_dir = tmp_path / "r" / "data_parallel-bce-mpi-p2-r0"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    mpirun = str(Path(sys.executable).parent / "mpirun")
    done = subprocess.run(
        [mpirun, "-np", "1", sys.executable, "-m", "suite.running.worker", str(run_dir)], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    record = record_data(read_record(run_dir))  # the record's data, as result.json holds it
    assert record["status"] == "failed"
    assert "defined for 2 processes but was launched with 1" in record["error"]
