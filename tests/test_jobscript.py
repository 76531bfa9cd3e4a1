"""`suite jobscript`: site presets, the preamble, the interpreter and working folder, the launcher
inside the allocation, and one placement rule under jsrun and srun (the scripts as text; `make
cluster-test` has sbatch accept each Slurm preset's script, tests/cluster/test_cluster.py)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import tiny_scenario
from suite.cli import main
from suite.config.expansion import expand, load_scenario
from suite.measure.network import PRESETS
from suite.running.commands import LaunchOptions, command_for
from suite.running.sites import SITES


def scenario(tmp_path: Path, procs: list[int], engine: str = "mpi", name: str = "js") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario(name, [{"strategy": "data_parallel", "engine": engine, "procs": procs}])))
    return path


ENVIRONMENTS = ("--venv", "--conda", "--module", "--preamble")


def with_environment(options: tuple[str, ...] | list[str]) -> list[str]:
    """A site preset's options with what it requires besides: a Python environment (``--venv venv`` unless one is
    given) and Summit's account (``--account p1``)."""
    options = list(options)
    if "--site" in options and not any(option in options for option in ENVIRONMENTS):
        options += ["--venv", "venv"]
    if "summit" in options and "--account" not in options:
        options += ["--account", "p1"]
    return options


def script(tmp_path: Path, path: Path, *options: str) -> str:
    """The script written with ``options`` (and :func:`with_environment`'s); it must pass `bash -n`."""
    out = tmp_path / "job.sh"
    assert main(["jobscript", str(path), "--out", str(out), *with_environment(options), "--force"]) == 0
    assert subprocess.run(["bash", "-n", str(out)]).returncode == 0  # valid shell
    return out.read_text()


def directives(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("#SBATCH", "#BSUB"))]


def run_line(text: str) -> str:
    return next(line for line in text.splitlines() if " -m suite run " in line)


WARNING = "#SBATCH --signal=B:TERM@120  # SIGTERM to this script 120 s before the walltime"


@pytest.mark.parametrize(
    "site, lines, placement",
    [
        (
            "summit",
            [
                "#BSUB -J js",
                "#BSUB -nnodes 3",
                "#BSUB -W 02:00",
                "#BSUB -o js.%J.out",
                "#BSUB -e js.%J.err",
                "#BSUB -wa TERM -wt 2  # SIGTERM 2 minutes before the walltime",
                "#BSUB -P ABC123",
            ],
            "--launcher jsrun --nodes 3 --ranks-per-node 6 --gpus-per-rank 1 --cpus-per-rank 7",
        ),
        (
            "frontier",
            [
                "#SBATCH --job-name=js",
                "#SBATCH --nodes=2",
                "#SBATCH --ntasks-per-node=8",
                "#SBATCH --time=02:00:00",
                "#SBATCH --output=js.%j.out",
                WARNING,
                "#SBATCH --gpus-per-task=1",
                "#SBATCH --gpu-bind=closest",
                "#SBATCH --cpus-per-task=7",
                "#SBATCH --account=ABC123",
                "#SBATCH --partition=batch",
            ],
            "--launcher srun --nodes 2 --ranks-per-node 8 --gpus-per-rank 1 --cpus-per-rank 7",
        ),
        (
            "perlmutter",
            [
                "#SBATCH --job-name=js",
                "#SBATCH --nodes=4",
                "#SBATCH --ntasks-per-node=4",
                "#SBATCH --time=02:00:00",
                "#SBATCH --output=js.%j.out",
                WARNING,
                "#SBATCH --gpus-per-node=4",
                "#SBATCH --gpu-bind=none",
                "#SBATCH --cpus-per-task=32",
                "#SBATCH --account=ABC123",
                "#SBATCH --qos=regular",
                "#SBATCH --constraint=gpu",
            ],
            "--launcher srun --nodes 4 --ranks-per-node 4 --gpus-per-rank 1 --cpus-per-rank 32",
        ),
        (
            "slurm-gpu",
            [
                "#SBATCH --job-name=js",
                "#SBATCH --nodes=4",
                "#SBATCH --ntasks-per-node=4",
                "#SBATCH --time=02:00:00",
                "#SBATCH --output=js.%j.out",
                WARNING,
                "#SBATCH --gpus-per-task=1",
                "#SBATCH --gpu-bind=closest",
                "#SBATCH --cpus-per-task=4",
                "#SBATCH --account=ABC123",
            ],
            "--launcher srun --nodes 4 --ranks-per-node 4 --gpus-per-rank 1 --cpus-per-rank 4",
        ),
    ],
)
def test_each_site_preset_writes_its_placement(tmp_path, site, lines, placement):
    text = script(tmp_path, scenario(tmp_path, [2, 16]), "--site", site, "--account", "ABC123")
    assert directives(text) == lines
    assert run_line(text) == (
        f"python3 -m suite run {tmp_path / 'js.yaml'} --out results/js --resume --quiet --grace 60 {placement} "
        '--master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" &'
    )
    network = SITES[site].network
    assert PRESETS[network].ranks_per_node == SITES[site].ranks_per_node  # the projection places ranks as the site does
    assert f"its network for the projection: suite project results/js --network {network}" in text


def test_tasks_per_node_follow_the_largest_run(tmp_path):
    """A scenario of at most 2 ranks asks for 2 tasks on one node, with or without a site."""
    path = scenario(tmp_path, [1, 2])
    for options in (
        ["--scheduler", "slurm"],
        ["--site", "frontier", "--account", "p1"],
        ["--site", "slurm-gpu", "--ranks-per-node", "6"],
    ):
        text = script(tmp_path, path, *options)
        assert "#SBATCH --nodes=1" in directives(text) and "#SBATCH --ntasks-per-node=2" in directives(text)
        assert "--nodes 1 --ranks-per-node 2 " in run_line(text)
    text = script(tmp_path, path, "--scheduler", "lsf")
    assert "#BSUB -nnodes 1" in directives(text) and "--nodes 1 --ranks-per-node 2 " in run_line(text)
    # without a site or --ranks-per-node the largest run spreads evenly over --nodes
    text = script(tmp_path, scenario(tmp_path, [1, 8]), "--scheduler", "slurm", "--nodes", "2")
    assert "#SBATCH --nodes=2" in directives(text) and "#SBATCH --ntasks-per-node=4" in directives(text)


def test_jsrun_and_srun_place_ranks_by_the_same_rule(tmp_path):
    """Inside the script's allocation (6 ranks per node, 2 nodes) a run of 2 ranks fills one node under
    jsrun and srun alike, and a run of 8 fills the first node and puts the rest on the second."""
    runs = {r.procs: r for r in expand(load_scenario(scenario(tmp_path, [2, 8])))}
    for launcher in ("jsrun", "srun"):
        opts = LaunchOptions(launcher=launcher, nodes=2, ranks_per_node=6, gpus_per_rank=1, cpus_per_rank=7)
        two, eight = (command_for(runs[p], tmp_path / "run", opts) for p in (2, 8))
        if launcher == "jsrun":  # -r: resource sets (ranks) per host
            assert two[:11] == ["jsrun", "-n", "2", "-r", "2", "-a", "1", "-c", "7", "-g", "1"]
            assert eight[:5] == ["jsrun", "-n", "8", "-r", "6"]
        else:
            assert two[:7] == ["srun", "-N", "1", "-n", "2", "--ntasks-per-node", "2"]
            assert eight[:7] == ["srun", "-N", "2", "-n", "8", "--ntasks-per-node", "6"]


def test_summit_jsrun_gets_the_sites_cores_per_rank(tmp_path):
    """jsrun's -c is the site's 7 cores per rank (it was 1), and --cpus-per-rank overrides it."""
    text = script(tmp_path, scenario(tmp_path, [8]), "--site", "summit")
    assert "--cpus-per-rank 7" in run_line(text)
    text = script(tmp_path, scenario(tmp_path, [8]), "--site", "summit", "--cpus-per-rank", "4", "--gpus-per-rank", "0")
    assert "--gpus-per-rank 0 --cpus-per-rank 4 " in run_line(text)


def test_slurm_options_and_overrides(tmp_path):
    text = script(
        tmp_path,
        scenario(tmp_path, [4]),
        *["--site", "slurm-gpu", "--qos", "regular", "-C", "gpu&hbm80g", "--gpu-bind", "map_gpu:0,1,2,3"],
        *["--mpi", "pmix", "--queue", "debug"],
    )
    assert directives(text)[-5:] == [
        "#SBATCH --gpu-bind=map_gpu:0,1,2,3",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --partition=debug",
        "#SBATCH --qos=regular",
        "#SBATCH --constraint=gpu&hbm80g",
    ]
    assert "export SLURM_MPI_TYPE=pmix  # srun --mpi=pmix" in text.splitlines()
    # no GPUs: no GPU request and no binding, whatever the site binds
    text = script(tmp_path, scenario(tmp_path, [4]), "--site", "frontier", "--account", "p1", "--gpus-per-rank", "0")
    assert not [line for line in directives(text) if "gpu" in line]


@pytest.mark.parametrize(
    "options, message",
    [
        (["--site", "summit", "--qos", "q"], "--qos: a Slurm setting; this is an LSF script"),
        (["--scheduler", "lsf", "--gpu-bind", "closest"], "--gpu-bind: a Slurm setting; this is an LSF script"),
        (["--scheduler", "lsf", "--mpi", "pmix"], "--mpi: a Slurm setting; this is an LSF script"),
        (["--scheduler", "lsf", "-C", "gpu"], "--constraint: a Slurm setting; this is an LSF script"),
        ([], "--scheduler: give --scheduler lsf|slurm or a --site preset"),
        (["--site", "frontier", "--scheduler", "lsf"], "--scheduler lsf: site frontier runs slurm"),
        (["--site", "frontier", "--nodes", "0"], "--nodes 0: must be at least 1"),
        (["--site", "frontier", "--ranks-per-node", "0"], "--ranks-per-node 0: must be at least 1"),
        (["--site", "summit", "--cpus-per-rank", "0"], "--cpus-per-rank 0: must be at least 1"),
        (["--scheduler", "slurm", "--gpus-per-rank", "-1"], "--gpus-per-rank -1: must be at least 0"),
        (["--preamble", "nonexistent.sh", "--scheduler", "slurm"], "--preamble nonexistent.sh: no such file"),
        (
            ["--site", "frontier", "--launcher", "jsrun"],
            "--launcher jsrun: a Slurm job script starts its runs inside its allocation with srun, mpirun, "
            "horovodrun; jsrun is not one of them",
        ),
        (
            ["--site", "summit", "--launcher", "srun"],
            "--launcher srun: an LSF job script starts its runs inside its allocation with jsrun, mpirun, horovodrun; "
            "srun is not one of them",
        ),
        (
            ["--site", "frontier", "--account", "p1", "--venv", "v", "--launcher", "horovodrun"],
            "horovodrun cannot start the mpi engine of data_parallel-bce-mpi-p2-r0; use one of: mpirun, jsrun, srun",
        ),
    ],
)
def test_what_a_job_script_cannot_do_is_refused_in_one_line(tmp_path, monkeypatch, capsys, options, message):
    path = scenario(tmp_path, [2])
    monkeypatch.chdir(tmp_path)
    assert main(["jobscript", str(path), *options]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "jobs").exists()


@pytest.mark.parametrize("scheduler, hosts", [("slurm", "scontrol show hostnames"), ("lsf", 'sort -u "$LSB_DJOB_HOSTFILE"')])
def test_horovodrun_and_mpirun_start_the_runs_inside_the_allocation(tmp_path, scheduler, hosts):
    path = scenario(tmp_path, [2, 4], engine="horovod")
    text = script(tmp_path, path, "--scheduler", scheduler, "--launcher", "horovodrun", "--ranks-per-node", "2")
    host_line = next(line for line in text.splitlines() if line.startswith("hosts="))
    assert host_line.startswith(f"hosts=$({hosts}") and host_line.endswith("| sed 's/$/:2/' | paste -sd, -)  # horovodrun -H")
    assert run_line(text).endswith(
        "--launcher horovodrun --nodes 2 --ranks-per-node 2 --gpus-per-rank 1 "
        '--master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" --hosts "$hosts" &'
    )
    text = script(tmp_path, path, "--scheduler", scheduler, "--launcher", "mpirun", "--ranks-per-node", "2")
    assert "--launcher mpirun --nodes 2 " in run_line(text) and "hosts=" not in text


def test_the_preamble_interpreter_and_folder(tmp_path):
    """The preamble is copied as it is before `set -u` and runs before suite; --python and --workdir are used, quoted."""
    preamble = tmp_path / "site env.sh"
    body = 'module load rocm/5.7 2>/dev/null || true\nexport MARK="preamble ran"\necho "$MARK $UNSET_IN_PREAMBLE"'
    preamble.write_text(body)  # no final newline, and an unset variable: fine before `set -u`
    work = tmp_path / "work dir"
    work.mkdir()
    text = script(
        tmp_path,
        scenario(tmp_path, [2]),
        *["--scheduler", "slurm", "--preamble", str(preamble), "--python", "/bin/echo", "--workdir", str(work)],
    )
    lines = text.splitlines()
    start = lines.index(f'# --- preamble "{preamble}", as it is ---')
    assert lines[start + 1 : start + 5] == [*body.splitlines(), "# --- end of the preamble ---"]
    assert lines[start + 5 : start + 7] == ["set -euo pipefail", f"cd '{work}'"]
    env = {**os.environ, "SLURM_JOB_NODELIST": "n1", "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "scontrol").write_text('#!/bin/sh\necho "$3"\n')  # scontrol show hostnames LIST
    (tmp_path / "bin" / "scontrol").chmod(0o755)
    done = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert printed[0] == "preamble ran "
    assert printed[1].startswith(f"-m suite run {tmp_path / 'js.yaml'} --out results/js ")
    assert printed[1].endswith("--master-addr n1 --master-port 29500")
    assert printed[2] == "-m suite report results/js"


def test_defaults_do_not_name_this_checkout(tmp_path):
    """python3 on the nodes' PATH and the folder the job was submitted from; --master-addr is used as given."""
    text = script(tmp_path, scenario(tmp_path, [2]), "--site", "summit", "--master-addr", "h1", "--master-port", "29600")
    assert str(Path.cwd()) not in text.replace(str(tmp_path), "")
    assert "/.venv/" not in text
    lines = text.splitlines()
    assert 'cd "${LS_SUBCWD:-$PWD}"' in lines
    assert "export MASTER_ADDR=h1  # torch/deepspeed rendezvous (--master-addr)" in lines
    assert "export MASTER_PORT=${MASTER_PORT:-29600}" in lines
    assert lines[-2] == "python3 -m suite report results/js"
    text = script(tmp_path, scenario(tmp_path, [2]), "--site", "frontier", "--account", "p1")
    assert 'cd "${SLURM_SUBMIT_DIR:-$PWD}"' in text.splitlines()


@pytest.mark.parametrize("option, shown", [("--constraint", "-C/--constraint"), ("--gpu-bind", "--gpu-bind")])
@pytest.mark.parametrize("value", ["gpu\n#SBATCH --exclusive", "gpu $(touch x)", "a'b", ""])
def test_a_directive_value_with_a_space_newline_quote_or_dollar_is_refused(tmp_path, capsys, option, shown, value):
    with pytest.raises(SystemExit) as stop:
        main(["jobscript", str(scenario(tmp_path, [2])), "--site", "frontier", option, value])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"suite jobscript: error: argument {shown}: {value!r} cannot go into a job script directive: use ASCII "
        "letters, digits and . _ - : , & | * ( ) [ ] + (no space, quote or $), at most 200 characters"
    )


# --- issue 47: the sites as their guides write a job, arrays, containers -------------------------------------------


def test_each_preset_writes_its_sites_setup_and_what_runs_there(tmp_path):
    """Frontier: its modules and RCCL's interface, what runs on its AMD GPUs (Horovod's GPU path refused); Perlmutter:
    `module load pytorch` and srun's --cpu-bind=cores as SLURM_CPU_BIND (sbatch has no such option); the generic site
    none; --no-site-setup leaves them out; the setup comes before the preamble and before `set -u`."""
    path = scenario(tmp_path, [2, 16])
    frontier = script(tmp_path, path, "--site", "frontier", "--account", "p1").splitlines()
    start = frontier.index("# --- frontier's setup, as its user guide writes it (leave out: --no-site-setup) ---")
    assert frontier[start + 1 : start + 5] == [  # pinned as OLCF's PyTorch-on-Frontier guide pins them
        "module load PrgEnv-gnu/8.5.0",
        "module load rocm/5.7.1",
        "module load craype-accel-amd-gfx90a",
        "export NCCL_SOCKET_IFNAME=hsn0  # RCCL over the Slingshot interfaces (OLCF's PyTorch guide)",
    ]
    # MIOpen's kernel database on node-local storage (OLCF's PyTorch guide), made on every node of the job
    assert frontier[start + 5 : start + 8] == [
        'export MIOPEN_USER_DB_PATH="/tmp/miopen-cache-${SLURM_JOB_ID:-$$}"',
        'export MIOPEN_CUSTOM_CACHE_DIR="$MIOPEN_USER_DB_PATH"',
        'srun --ntasks-per-node=1 mkdir -p "$MIOPEN_USER_DB_PATH"  # on every node of the job',
    ]
    assert frontier.index("set -euo pipefail") == start + 8
    works = next(line for line in frontier if line.startswith("# What runs on frontier's GPUs: "))
    assert "the torch engine on RCCL" in works and "AMD SMI" in works and "Horovod's GPU operations are refused" in works
    perlmutter = script(tmp_path, path, "--site", "perlmutter").splitlines()
    assert "module load pytorch" in perlmutter
    assert "export SLURM_CPU_BIND=cores  # srun --cpu-bind=cores, as the site's guide does" in perlmutter
    assert "NCCL_SOCKET_IFNAME" not in "\n".join(perlmutter) and "# What runs on perlmutter's GPUs: a CUDA torch" in "\n".join(
        perlmutter
    )
    generic = script(tmp_path, path, "--site", "slurm-gpu")
    assert "module load" not in generic and "SLURM_CPU_BIND" not in generic
    preamble = tmp_path / "env.sh"
    preamble.write_text("module load rocm/6.2.4\n")
    bare = script(tmp_path, path, "--site", "frontier", "--account", "p1", "--no-site-setup", "--preamble", str(preamble))
    assert "module load rocm/5.7.1\n" not in bare and "module load rocm/6.2.4\n" in bare


def test_perlmutters_queue_is_its_qos(tmp_path, capsys):
    """NERSC's regular, debug and preempt are QOSes: --queue writes -q there, never a partition; the QOS defaults to
    regular; --queue and a different --qos are refused in one line."""
    path = scenario(tmp_path, [4])
    lines = directives(script(tmp_path, path, "--site", "perlmutter", "--queue", "debug"))
    assert "#SBATCH --qos=debug" in lines and not [line for line in lines if "partition" in line]
    assert "#SBATCH --qos=regular" in directives(script(tmp_path, path, "--site", "perlmutter"))
    assert main(["jobscript", str(path), "--site", "perlmutter", "--venv", "v", "--queue", "debug", "--qos", "regular"]) == 2
    assert (
        capsys.readouterr().err == "error: --queue debug: on perlmutter a queue is a QOS (-q), and --qos says regular; give one\n"
    )
    # elsewhere --queue is the partition, over the site's (frontier: batch)
    lines = directives(script(tmp_path, path, "--site", "frontier", "--account", "p1", "--queue", "extended"))
    assert "#SBATCH --partition=extended" in lines and "#SBATCH --partition=batch" not in lines


def test_frontier_refuses_a_job_without_an_account(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["jobscript", str(scenario(tmp_path, [2])), "--site", "frontier"]) == 2
    assert (
        capsys.readouterr().err
        == "error: --account: site frontier refuses a job without an account (-A); give --account PROJECT\n"
    )
    assert not (tmp_path / "jobs").exists()


def test_the_file_name_carries_the_site(tmp_path, monkeypatch):
    """The Slurm presets, the same scenario without a site and as an array: five files, none overwritten."""
    monkeypatch.chdir(tmp_path)
    path = scenario(tmp_path, [2])
    for options in (
        ["--site", "perlmutter"],
        ["--site", "frontier", "--account", "p1"],
        ["--site", "slurm-gpu"],
        ["--scheduler", "slurm"],
        ["--site", "frontier", "--account", "p1", "--array"],
    ):
        assert main(["jobscript", str(path), *with_environment(options)]) == 0
    written = sorted(p.name for p in (tmp_path / "jobs").iterdir())
    assert written == [
        "js.frontier.array.slurm.sh",
        "js.frontier.slurm.sh",
        "js.perlmutter.slurm.sh",
        "js.slurm-gpu.slurm.sh",
        "js.slurm.sh",
    ]
    assert "--partition=batch" in (tmp_path / "jobs" / "js.frontier.slurm.sh").read_text()
    assert "--constraint=gpu" in (tmp_path / "jobs" / "js.perlmutter.slurm.sh").read_text()


def test_a_sweep_as_a_job_array_runs_one_run_per_task(tmp_path, capsys):
    """--array: one task per run (in the scenario's order), one at a time; task i runs `suite run --only RUN_i`, then the
    report; run with a stand-in scontrol and /bin/echo as python, task 1 selects the second run."""
    path = scenario(tmp_path, [1, 2, 4])
    text = script(tmp_path, path, "--site", "slurm-gpu", "--array", "--python", "/bin/echo")
    ids = [run.run_id for run in expand(load_scenario(path))]
    lines = directives(text)
    assert "#SBATCH --array=0-2%1  # one task per run, one at a time" in lines and "#SBATCH --output=js.%A_%a.out" in lines
    assert f"runs=({' '.join(ids)})  # task i runs runs[i]" in text.splitlines()
    assert run_line(text).endswith('--only "$run_id" &')
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "scontrol").write_text('#!/bin/sh\necho "$3"\n')
    (tmp_path / "bin" / "scontrol").chmod(0o755)
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "activate").write_text("")  # the --venv with_environment gives
    env = {
        **os.environ,
        "SLURM_JOB_NODELIST": "n1",
        "SLURM_ARRAY_TASK_ID": "1",
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
    }
    done = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(f"--master-addr n1 --master-port 29500 --only {ids[1]}")
    assert done.stdout.splitlines()[1] == "-m suite report results/js"
    # an LSF script has no arrays here
    assert main(["jobscript", str(path), "--site", "summit", "--account", "p1", "--array", "--out", str(tmp_path / "l.sh")]) == 2
    assert capsys.readouterr().err == "error: --array: a Slurm setting; this is an LSF script\n"


@pytest.mark.parametrize(
    "options, gpus",
    [
        (["--site", "frontier", "--account", "p1"], "amd"),
        (["--site", "perlmutter"], "nvidia"),
        (["--site", "slurm-gpu", "--gpus-per-rank", "0"], "none"),
    ],
)
def test_a_container_wraps_each_rank_and_is_told_the_sites_gpus(tmp_path, options, gpus):
    text = script(tmp_path, scenario(tmp_path, [2]), *options, "--container", "apptainer", "/sw/suite.sif")
    assert f" --container apptainer /sw/suite.sif --container-gpus {gpus} " in run_line(text)


def test_the_container_words_under_each_runtime(tmp_path, monkeypatch):
    from suite.running.commands import Container, LaunchError
    from suite.train.launchenv import LAUNCH_VARIABLES

    monkeypatch.chdir(tmp_path)
    run = expand(load_scenario(scenario(tmp_path, [2], engine="torch")))[0]
    apptainer = LaunchOptions(
        launcher="srun", nodes=1, gpus_per_rank=1, python="python3", container=Container("apptainer", "a b.sif", "amd")
    )
    command = command_for(run, tmp_path / "results" / "r", apptainer)
    start = command.index("apptainer")
    assert command[start:] == [
        "apptainer",
        "exec",
        "--rocm",
        "a b.sif",
        "python3",
        "-m",
        "suite.running.worker",
        str(tmp_path / "results" / "r"),
    ]
    assert command[:start][-1] == "--kill-on-bad-exit=1"  # srun's own options first
    elsewhere = tmp_path.parent / "shared-results" / "r"
    podman = LaunchOptions(
        launcher="srun",
        nodes=1,
        gpus_per_rank=1,
        python="python3",
        container=Container("podman-hpc", "docker.io/me/suite:1", "nvidia"),
    )
    command = command_for(run, elsewhere, podman)
    start = command.index("podman-hpc")
    here = str(tmp_path)
    assert command[start : start + 13] == [
        "podman-hpc", "run", "--rm", "--mpi", "--gpu", "--net", "host",
        "-v", f"{here}:{here}", "-v", f"{elsewhere.parent}:{elsewhere.parent}", "-w", here,
    ]  # fmt: skip
    passed = command[start + 13 : command.index("docker.io/me/suite:1")]
    assert passed == [word for name in LAUNCH_VARIABLES for word in ("-e", name)]
    assert {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "MASTER_ADDR", "MASTER_PORT"} <= set(LAUNCH_VARIABLES)
    torchrun = LaunchOptions(launcher="torchrun", nodes=1, container=Container("apptainer", "x.sif"))
    with pytest.raises(LaunchError, match=r"^--container: torchrun starts its own agents on each node"):
        command_for(run, tmp_path / "r", torchrun)


@pytest.mark.parametrize("image", ["$(touch PWNED).sif", 'a\'b "c"; touch PWNED #'])
def test_a_hostile_image_is_one_quoted_word(tmp_path, image):
    text = script(tmp_path, scenario(tmp_path, [2]), "--site", "slurm-gpu", "--container", "apptainer", image)
    assert f" --container apptainer {shlex.quote(image)} " in run_line(text)
    assert text.count(shlex.quote(image)) == 1  # nowhere else
    words = shlex.split(run_line(text))
    assert words[words.index("--container") + 2] == image  # one word, as given


def test_a_container_option_is_checked(tmp_path, capsys):
    """An unknown runtime, an image with a control character or one read as an option: one line naming --container,
    from the command line or from Python (render checks its options itself)."""
    from suite.running.jobplan import JobOptions
    from suite.running.jobscript import render

    path = scenario(tmp_path, [2])
    assert (
        main(["jobscript", str(path), "--site", "slurm-gpu", "--container", "docker", "x.sif", "--out", str(tmp_path / "j.sh")])
        == 2
    )
    assert capsys.readouterr().err == "error: --container 'docker': choose one of apptainer, podman-hpc\n"
    assert not (tmp_path / "j.sh").exists()
    for image, message in (
        ("-v", "--container '-v': starts with '-', which would be read as an option; write it as ./NAME"),
        ("a\nb", "--container 'a\\nb' holds U+000A, a control character, at character 2"),
    ):
        with pytest.raises(ValueError) as refused:
            render(path, JobOptions(site="slurm-gpu", container=("apptainer", image)))
        assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


# --- issue 54: a job script runs on its first submission ------------------------------------------------------------


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_site_preset_without_a_python_environment_is_refused_in_one_line(tmp_path, monkeypatch, capsys, site):
    """The sites' modules do not hold the suite: a preset asks for --venv, --conda, --module or a --preamble."""
    monkeypatch.chdir(tmp_path)
    assert main(["jobscript", str(scenario(tmp_path, [2])), "--site", site, "--account", "p1"]) == 2
    assert capsys.readouterr().err == (
        f"error: --venv: site {site}'s modules do not hold the suite; say which Python environment does: --venv DIR "
        "(a virtual environment with the suite installed), --conda ENV, --module NAME, or a --preamble FILE that "
        "activates one\n"
    )
    assert not (tmp_path / "jobs").exists()
    for given in (["--venv", "v"], ["--conda", "c"], ["--module", "m"]):
        assert main(["jobscript", str(scenario(tmp_path, [2])), "--site", site, "--account", "p1", *given]) == 0
        capsys.readouterr()
        for path in (tmp_path / "jobs").iterdir():
            path.unlink()
    # without a site python3 on the nodes' PATH stays the default
    assert main(["jobscript", str(scenario(tmp_path, [2])), "--scheduler", "slurm"]) == 0


def test_summit_refuses_a_job_without_its_project(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["jobscript", str(scenario(tmp_path, [2])), "--site", "summit", "--venv", "v"]) == 2
    assert capsys.readouterr().err == (
        "error: --account: site summit refuses a job without an account (-P); give --account PROJECT\n"
    )
    assert not (tmp_path / "jobs").exists()


def test_an_existing_script_is_replaced_only_with_force(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = scenario(tmp_path, [2])
    assert main(["jobscript", str(path), "--scheduler", "slurm"]) == 0
    written = tmp_path / "jobs" / "js.slurm.sh"
    written.write_text("#!/bin/bash\n# edited by hand\n")
    capsys.readouterr()
    assert main(["jobscript", str(path), "--scheduler", "slurm", "--walltime", "1:00:00"]) == 2
    assert capsys.readouterr().err == (
        "error: 'jobs/js.slurm.sh' exists; give --force to replace it, or --out FILE to write another\n"
    )
    assert written.read_text() == "#!/bin/bash\n# edited by hand\n"
    assert main(["jobscript", str(path), "--scheduler", "slurm", "--walltime", "1:00:00", "--force"]) == 0
    assert "#SBATCH --time=01:00:00" in written.read_text()


def test_horovod_on_an_amd_sites_gpus_is_refused_when_the_script_is_written(tmp_path, capsys):
    """Frontier's GPUs are AMD: a Horovod run on them is refused by `suite jobscript`, whatever torch wrote the script;
    on its CPUs (--gpus-per-rank 0) and on an NVIDIA site it is written."""
    path = scenario(tmp_path, [2], engine="horovod")
    frontier = ["--site", "frontier", "--account", "p1", "--venv", "v", "--out", str(tmp_path / "job.sh")]
    assert main(["jobscript", str(path), *frontier]) == 2
    assert capsys.readouterr().err == (
        "error: data_parallel-bce-horovod-p2-r0: the horovod engine on GPUs needs an NVIDIA GPU: its GPU operations are "
        "checked only for Horovod's CUDA NCCL build (ci/build_horovod_nccl.sh; a ROCm Horovod with RCCL is untested "
        "here); site frontier's GPUs are AMD; the torch engine runs on AMD GPUs (RCCL behind the nccl backend) "
        "(--gpus-per-rank 0 runs it on the CPUs)\n"
    )
    assert not (tmp_path / "job.sh").exists()
    assert main(["jobscript", str(path), *frontier, "--gpus-per-rank", "0"]) == 0
    script(tmp_path, path, "--site", "perlmutter")
    script(tmp_path, scenario(tmp_path, [2], engine="torch"), "--site", "frontier", "--account", "p1")


def test_a_dry_run_on_a_rocm_torch_refuses_horovod_on_gpus(tmp_path, monkeypatch, capsys):
    """A login node's ROCm torch is its GPU nodes': `suite run --dry-run` refuses what the run would (no GPU needed);
    SUITE_DEVICE=cpu keeps the runs on the CPUs, where Horovod runs."""
    import torch

    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    path, out = scenario(tmp_path, [2], engine="horovod"), tmp_path / "results"
    assert main(["run", str(path), "--out", str(out), "--dry-run", "--launcher", "srun", "--gpus-per-rank", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("error: data_parallel-bce-horovod-p2-r0: the horovod engine on GPUs needs an NVIDIA GPU: ")
    assert err[-1].endswith(
        "this torch is a ROCm build (HIP 6.2.41133); the torch engine runs on AMD GPUs (RCCL behind the nccl backend)"
    )
    monkeypatch.setenv("SUITE_DEVICE", "cpu")
    assert main(["run", str(path), "--out", str(out), "--dry-run", "--launcher", "srun", "--gpus-per-rank", "0"]) == 0


def _site_shell(tmp_path: Path, python_imports: bool = True) -> dict[str, str]:
    """A site-like environment to run a script in: `module` a shell function (as Lmod's) that logs what it loads,
    stand-ins for scontrol and srun (which runs its command once), no suite importable but from the environment
    the script activates: a venv whose python3 imports the suite (or fails to, as a venv without it does) and echoes
    what it is asked to run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "$3"\n')
    (bin_dir / "srun").write_text('#!/bin/sh\nshift\nexec "$@"\n')  # srun --ntasks-per-node=1 CMD...: CMD once
    failing = "echo 'Traceback (most recent call last):'; echo \"ModuleNotFoundError: No module named 'suite'\"; exit 1"
    (bin_dir / "python3").write_text(f"#!/bin/sh\n{failing}\n")  # the system's python3, without the suite
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True, exist_ok=True)
    (venv_bin / "activate").write_text(f'export PATH="{venv_bin}:$PATH"; export ACTIVATED=venv\n')
    imports = 'echo "suite imported by $ACTIVATED"' if python_imports else failing
    (venv_bin / "python3").write_text(f'#!/bin/sh\nif [ "$1" = -c ]; then {imports}; exit 0; fi\necho "$@"\n')
    for tool in (bin_dir / "scontrol", bin_dir / "srun", bin_dir / "python3", venv_bin / "python3"):
        tool.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SLURM_JOB_NODELIST": "n1",
        "SLURM_JOB_ID": f"js{os.getpid()}",
        "MODULE_LOG": str(tmp_path / "modules.log"),
        "BASH_FUNC_module%%": '() {  echo "$*" >> "$MODULE_LOG"; [ "$2" != missing ]; }',
    }


def test_a_frontier_script_loads_its_modules_and_venv_and_runs(tmp_path):
    """Run as the site would: the site's modules, then --module, then --venv (relative to the working folder); the
    MIOpen cache folder made on the node; the suite's run and report with the venv's python3."""
    text = script(
        tmp_path,
        scenario(tmp_path, [2], engine="torch"),
        "--site",
        "frontier",
        "--account",
        "p1",
        "--module",
        "cray-python",
        "--venv",
        "venv",
    )
    env = _site_shell(tmp_path)
    done = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "modules.log").read_text().splitlines() == [
        "load PrgEnv-gnu/8.5.0",
        "load rocm/5.7.1",
        "load craype-accel-amd-gfx90a",
        "load cray-python",
    ]
    miopen = Path(f"/tmp/miopen-cache-{env['SLURM_JOB_ID']}")
    assert miopen.is_dir()
    miopen.rmdir()
    printed = done.stdout.splitlines()
    assert printed[0].startswith("-m suite run ") and printed[1] == "-m suite report results/js", printed
    assert (
        text.index("source venv/bin/activate")
        < text.index("why=$(python3 -c 'import suite' 2>&1)")
        < text.index(" -m suite run ")
    )


@pytest.mark.parametrize(
    "options, python_imports, line",
    [
        (
            ["--venv", "venv"],
            False,
            "error: python3 on HOST cannot import the suite (ModuleNotFoundError: No module named 'suite'): install it "
            "into the environment of --venv (pip install the suite there), or write this script again with --venv DIR, "
            "--conda ENV or --module NAME of an environment that holds it",
        ),
        (
            ["--venv", "no such venv"],
            True,
            "error: no virtual environment at no such venv on HOST (--venv, read from TMP): make it there (python3 -m venv "
            "DIR; DIR/bin/pip install the suite) or write this script again with --venv DIR",
        ),
        (
            ["--module", "missing"],
            True,
            "error: module load missing failed on HOST (--module): see module avail",
        ),
        (
            ["--conda", "suite-env"],
            True,
            "error: conda is not on PATH on HOST (--conda): load the module that gives it first (--module conda on perlmutter)",
        ),
        (
            ["--preamble", "PREAMBLE"],
            True,
            "error: python3 on HOST cannot import the suite (ModuleNotFoundError: No module named 'suite'): install it "
            "into the environment the job "
            "was given (pip install the suite there), or write this script again with --venv DIR, --conda ENV or "
            "--module NAME of an environment that holds it",
        ),
    ],
)
def test_a_job_without_the_suite_ends_before_the_launch_in_one_line(tmp_path, options, python_imports, line):
    """Whatever fails in setting the environment up, the job ends at once (exit 2) with one line naming the fix,
    before anything is launched."""
    preamble = tmp_path / "pre.sh"
    preamble.write_text("echo preamble\n")
    options = [str(preamble) if option == "PREAMBLE" else option for option in options]
    script(tmp_path, scenario(tmp_path, [2], engine="torch"), "--site", "perlmutter", *options)
    env = _site_shell(tmp_path, python_imports)
    done = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    err = done.stderr.replace(os.uname().nodename, "HOST").replace(str(tmp_path), "TMP")
    assert err.splitlines()[-1] == line, err
    assert " -m suite" not in done.stdout


def test_conda_is_activated_with_its_shell_hook(tmp_path):
    """--conda ENV: conda's bash hook, then `conda activate ENV` (a stand-in conda whose activate puts the venv's
    python3 first); a failed activation ends the job in one line."""
    script(tmp_path, scenario(tmp_path, [2], engine="torch"), "--site", "slurm-gpu", "--conda", "suite env")
    env = _site_shell(tmp_path)
    conda = tmp_path / "bin" / "conda"
    venv_bin = tmp_path / "venv" / "bin"
    hook = f'conda() {{ [ "$1 $2" = "activate suite env" ] && export PATH="{venv_bin}:$PATH" ACTIVATED=conda; }}'
    conda.write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'shell.bash hook' ] && echo '{hook}'\n")
    conda.chmod(0o755)
    done = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("-m suite run ")
    script(tmp_path, scenario(tmp_path, [2], engine="torch"), "--site", "slurm-gpu", "--conda", "other")
    done = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert (
        done.stderr.splitlines()[-1]
        == f"error: conda activate other failed on {os.uname().nodename} (--conda): see conda env list"
    )
