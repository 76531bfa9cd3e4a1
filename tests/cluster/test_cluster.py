"""Every launcher across two nodes of a real (if small) cluster: `make cluster-test`.

`ci/cluster/run.sh` builds the cluster (`ci/cluster/cluster.sh up`: two network namespaces
joined by a shaped veth pair, sshd, munge and Slurm on each) and runs this file with
``SUITE_CLUSTER_STATE`` naming the cluster's folder; without it this file is not collected
(tests/conftest.py), so `make test` never runs it.

Each test runs a tiny scenario through ``suite run`` on node1 with one launcher and checks the
record: ok, one rank on each node (``telemetry.per_rank[].host``), payload bytes counted
(``comm.bytes``), and that bytes crossed the link (the veth's counters). Each prints one line
(``CLUSTER <launcher>: ...``) that `make cluster-test` shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from conftest import REPO, tiny_scenario
from suite.records.record import Record
from suite.records.results import iter_records
from suite.running.sites import SITES

pytestmark = pytest.mark.cluster

STATE = Path(os.environ.get("SUITE_CLUSTER_STATE", "/nonexistent"))
CLUSTER = REPO / "ci" / "cluster" / "cluster.sh"
PY = sys.executable
VENV_BIN = Path(PY).parent
RUN_TIMEOUT = 300  # suite run --timeout, per run
NODES = ("node1", "node2")


def node_env(**extra: str) -> dict[str, str]:
    """The environment of commands on a node: the cluster's ssh first on PATH, this checkout's suite, its Slurm."""
    env = dict(os.environ)
    env["PATH"] = f"{STATE / 'bin'}:{VENV_BIN}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    env["SLURM_CONF"] = str(STATE / "slurm.conf")
    env.update(extra)
    return env


def on(node: str, *cmd: object, timeout: float = RUN_TIMEOUT + 120, cwd: Path | None = None, **extra: str):
    """Run ``cmd`` on ``node`` (its network, hostname and /etc/hosts); the completed process."""
    full = ["bash", str(CLUSTER), "on", str(STATE), node, *map(str, cmd)]
    return subprocess.run(full, env=node_env(**extra), cwd=cwd, capture_output=True, text=True, timeout=timeout)


def start_on(node: str, *cmd: object, cwd: Path | None = None, log: Path, **extra: str) -> subprocess.Popen:
    full = ["bash", str(CLUSTER), "on", str(STATE), node, *map(str, cmd)]
    with open(log, "w") as out:
        return subprocess.Popen(full, env=node_env(**extra), cwd=cwd, stdout=out, stderr=subprocess.STDOUT)


def link_bytes() -> int:
    """Bytes sent plus received by node1's end of the link (everything that crossed it, both ways)."""
    out = subprocess.run(
        ["ip", "-n", "suite-node1", "-s", "-j", "link", "show", "eth1"], capture_output=True, text=True, check=True
    )
    stats = json.loads(out.stdout)[0]["stats64"]
    return int(stats["rx"]["bytes"]) + int(stats["tx"]["bytes"])


def scenario_file(tmp_path: Path, name: str, engine: str, strategy: str = "data_parallel") -> Path:
    scenario = tiny_scenario(name, [{"strategy": strategy, "engine": engine, "procs": [2]}])
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def suite_run(scenario: Path, out: Path, *placement: object) -> list[object]:
    return [PY, "-m", "suite", "run", scenario, "--out", out, "-q", "--timeout", RUN_TIMEOUT, *placement]


def the_record(out: Path, proc: subprocess.CompletedProcess | None = None) -> Record:
    records = list(iter_records(out)) if out.is_dir() else []
    detail = ""
    if proc is not None:
        detail = f"\nexit {proc.returncode}\nstdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}"
    for log in out.glob("*/log.txt"):
        detail += f"\n{log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
    assert len(records) == 1, f"expected one record in {out}{detail}"
    record = records[0]
    assert record.status == "ok", f"{record.error}{detail}"
    return record


def check_across(launcher: str, record: Record, crossed: int) -> None:
    """Both nodes ran a rank, collectives moved bytes, and bytes crossed the link; say so in one line."""
    assert record.telemetry is not None and record.telemetry.per_rank, f"{launcher}: no per-rank telemetry"
    hosts = [rank.host for rank in record.telemetry.per_rank]
    assert sorted(hosts) == list(NODES), f"{launcher}: ranks ran on {hosts}, not one on each node"
    payload = record.comm.bytes if record.comm else None
    assert payload and payload > 0, f"{launcher}: no payload bytes recorded (comm.bytes {payload})"
    assert crossed > payload / len(hosts) / 2, f"{launcher}: only {crossed} bytes crossed the link for {payload} payload bytes"
    print(
        f"\nCLUSTER {launcher}: {record.engine} engine, ranks on {'+'.join(hosts)}; comm.bytes {payload:,} "
        f"(link: {crossed:,} bytes both ways); step p50 {(record.telemetry.step_p50 or 0) * 1000:.1f} ms; "
        f"wall {record.wall_s or 0:.1f} s; link {(STATE / 'rate').read_text().strip()}"
    )


def test_cluster_is_up():
    """The two nodes name themselves, reach each other over ssh, and Slurm sees both idle."""
    assert on("node1", "hostname").stdout.strip() == "node1"
    assert on("node2", "hostname").stdout.strip() == "node2"
    assert on("node1", "ssh", "node2", "hostname").stdout.strip() == "node2"
    sinfo = on("node1", "sinfo", "-h", "-N", "-p", "debug", "-o", "%N %t").stdout.split()  # also in partition batch
    assert sinfo == ["node1", "idle", "node2", "idle"], sinfo
    srun = on("node1", "srun", "-N", "2", "-n", "2", "hostname", timeout=60)
    assert sorted(srun.stdout.split()) == list(NODES), srun.stderr
    print("\nCLUSTER up: node1 and node2, ssh and srun reach both")


def test_mpirun(tmp_path):
    scenario, out = scenario_file(tmp_path, "mpirun", "mpi"), tmp_path / "results"
    before = link_bytes()
    proc = on("node1", *suite_run(scenario, out, "--launcher", "mpirun", "--hosts", "node1:1,node2:1"), cwd=tmp_path)
    check_across("mpirun", the_record(out, proc), link_bytes() - before)


def test_horovodrun(tmp_path):
    scenario, out = scenario_file(tmp_path, "horovodrun", "horovod"), tmp_path / "results"
    before = link_bytes()
    proc = on("node1", *suite_run(scenario, out, "--launcher", "horovodrun", "--hosts", "node1:1,node2:1"), cwd=tmp_path)
    check_across("horovodrun", the_record(out, proc), link_bytes() - before)


def test_torchrun(tmp_path):
    """torchrun runs on every node: `suite run` starts node1's agent, the same command starts node2's."""
    scenario, out = scenario_file(tmp_path, "torchrun", "torch"), tmp_path / "results"
    placement = "--launcher torchrun --nodes 2 --ranks-per-node 1 --master-addr node1 --master-port 29511".split()
    before = link_bytes()
    first = start_on("node1", *suite_run(scenario, out, *placement), cwd=tmp_path, log=tmp_path / "node1.txt")
    try:
        deadline = time.monotonic() + 60
        logs: list[Path] = []
        while time.monotonic() < deadline and not logs:
            logs = [p for p in out.glob("*/log.txt") if p.read_text().startswith("$ ")]
            time.sleep(0.2)
        assert logs, f"suite run on node1 started no launch: {(tmp_path / 'node1.txt').read_text()}"
        command = shlex.split(logs[0].read_text().splitlines()[0][2:])
        second = on("node2", *command, cwd=tmp_path)
        assert second.returncode == 0, f"torchrun on node2: {second.stdout[-2000:]}{second.stderr[-2000:]}"
        first.wait(timeout=RUN_TIMEOUT + 60)
    finally:
        if first.poll() is None:
            first.terminate()
            first.wait(timeout=60)
    check_across("torchrun", the_record(out), link_bytes() - before)


def test_deepspeed(tmp_path):
    scenario, out = scenario_file(tmp_path, "deepspeed", "deepspeed"), tmp_path / "results"
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node1 slots=1\nnode2 slots=1\n")
    placement = ["--launcher", "deepspeed", "--hosts", hostfile, *"--nodes 2 --ranks-per-node 1 --master-port 29512".split()]
    before = link_bytes()
    proc = on("node1", *suite_run(scenario, out, *placement), cwd=tmp_path)
    check_across("deepspeed", the_record(out, proc), link_bytes() - before)


def test_srun_in_allocation(tmp_path):
    """salloc's shell on node1 runs `suite run --launcher srun`; the torch engine meets at the first node."""
    scenario, out = scenario_file(tmp_path, "srun", "torch"), tmp_path / "results"
    run = suite_run(scenario, out, "--launcher", "srun", "--nodes", "2", "--ranks-per-node", "1", "--gpus-per-rank", "0")
    script = (
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) MASTER_PORT=29513; exec '
        + shlex.join(map(str, run))
    )
    before = link_bytes()
    proc = on("node1", "salloc", "-N", "2", "-n", "2", "--ntasks-per-node", "1", "bash", "-c", script, cwd=tmp_path)
    check_across("srun", the_record(out, proc), link_bytes() - before)


def test_sbatch_jobscript(tmp_path):
    """`suite jobscript --scheduler slurm` output, submitted with sbatch, completes with a record and a report; its
    preamble runs on the first node, and `python3` is the one on the nodes' PATH (the default --python)."""
    scenario, out = scenario_file(tmp_path, "sbatch", "torch"), tmp_path / "results"
    job, preamble = tmp_path / "job.sh", tmp_path / "preamble.sh"
    preamble.write_text('echo "preamble ran on $(hostname) with $(command -v python3)"\n')
    written = on(
        "node1",
        *[PY, "-m", "suite", "jobscript", scenario, "--scheduler", "slurm", "--out", job, "--results", out],
        *["--nodes", "2", "--ranks-per-node", "1", "--gpus-per-rank", "0", "--walltime", "10m", "--preamble", preamble],
        cwd=tmp_path,
    )
    assert written.returncode == 0, written.stderr
    before = link_bytes()
    submitted = on("node1", "sbatch", "--wait", job, cwd=tmp_path)
    outputs = "\n".join(p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("sbatch.*.out"))
    assert submitted.returncode == 0, f"sbatch: {submitted.stdout}{submitted.stderr}\njob output:\n{outputs}"
    assert f"preamble ran on node1 with {VENV_BIN / 'python3'}" in outputs, outputs
    check_across("sbatch", the_record(out), link_bytes() - before)


@pytest.mark.parametrize("site", [name for name, site in SITES.items() if site.scheduler == "slurm"])
def test_site_presets_pass_sbatch(tmp_path, site):
    """Each Slurm site preset's script, for a scenario whose largest run fills both nodes, is accepted by
    `sbatch --test-only` with the preset's tasks per node, CPUs per task, GPUs, GPU binding, partition, QOS and
    constraint, also written as a job array (--array) and with each rank in a container
    (the cluster's nodes are declared as large as a GPU site's: ci/cluster/cluster.sh); one asking for more
    GPUs or a feature the nodes lack is refused, so the script's directives are what sbatch judged."""
    preset = SITES[site]
    procs = 2 * preset.ranks_per_node
    scenario = tmp_path / f"{site}.yaml"
    runs = [{"strategy": "data_parallel", "engine": "mpi", "procs": [2, procs]}]
    scenario.write_text(yaml.safe_dump(tiny_scenario(site, runs)))

    def test_only(*extra: str) -> subprocess.CompletedProcess:
        job = tmp_path / "job.sh"
        options = [
            "--site",
            site,
            "--out",
            job,
            "--force",
            "--account",
            "acct",
            "--venv",
            "venv",
            "--walltime",
            "1:00:00",
            *extra,
        ]
        written = on("node1", PY, "-m", "suite", "jobscript", scenario, *options, cwd=tmp_path, timeout=60)
        assert written.returncode == 0, written.stderr
        return on("node1", "sbatch", "--test-only", job, cwd=tmp_path, timeout=60)

    cpus = procs * preset.cpus_per_rank
    partition = preset.partition or "debug"  # frontier's -p batch; the others the cluster's default
    expected = rf"sbatch: Job \d+ to start at \S+ using {cpus} processors on nodes node\[1-2\] in partition {partition}"
    # the preset as it is (its QOS, -p, -C, GPUs per task or node), the sweep as a job array, each rank in a container
    for extra in ((), ("--array",), ("--container", "apptainer", "suite image.sif")):
        tested = test_only(*extra)
        assert tested.returncode == 0 and re.search(expected, tested.stderr), f"{extra}: {tested.stdout}{tested.stderr}"
    too_many_gpus = test_only("--gpus-per-rank", str(8 // preset.ranks_per_node + 1))  # above 8 per node
    no_such_feature = test_only("--constraint", "nosuchfeature")
    assert too_many_gpus.returncode != 0 and no_such_feature.returncode != 0
    assert "Invalid feature specification" in no_such_feature.stderr, no_such_feature.stderr
    print(
        f"\nCLUSTER sbatch --test-only ({site}, also as a job array and in a container): {tested.stderr.strip()}; "
        f"more GPUs than the nodes have: {too_many_gpus.stderr.strip()}; an unknown feature: {no_such_feature.stderr.strip()}"
    )


# --- each site preset's script, run as on its site: its modules, the suite's environment, a record ----------------

SITE_ENVIRONMENTS = {
    "frontier": ("--venv", str(VENV_BIN.parent)),  # the suite's venv, activated by its own activate script
    "perlmutter": ("--module", "suite-env"),  # a module that puts the suite on the path (the stand-in module's)
    "slurm-gpu": ("--conda", "suite"),  # conda's shell hook and `conda activate suite` (a stand-in conda)
    "summit": ("--venv", str(VENV_BIN.parent)),
}
"""How each preset's script is given the suite's Python environment here, one of each kind."""

JSRUN = """#!/bin/bash
# jsrun -n P -r K -a 1 -c C -g G --bind packed:C CMD...: the same ranks, one resource set each, started by srun
# (this cluster has no LSF: the Summit script runs inside a Slurm allocation, LSF's variables set)
while [ $# -gt 0 ]; do
    case $1 in -n) n=$2; shift 2 ;; -r) r=$2; shift 2 ;; -a | -c | -g | --bind) shift 2 ;; *) break ;; esac
done
exec srun -N $(((n + r - 1) / r)) -n "$n" --ntasks-per-node "$r" "$@"
"""


def site_like(tmp_path: Path) -> dict[str, str]:
    """A site's environment on the nodes: `module` a shell function (as Lmod's, here from BASH_ENV) that logs what it
    loads, where loading `suite-env` puts the suite on the path; a `conda` whose hook activates `suite` the same way;
    `jsrun` for the LSF script; and no suite on PATH or PYTHONPATH until the script sets its environment up."""
    log, tools = tmp_path / "modules.log", tmp_path / "site-bin"
    tools.mkdir()
    suite_on_path = f'export PATH="{VENV_BIN}:$PATH" PYTHONPATH={shlex.quote(str(REPO))}'
    (tmp_path / "modules.sh").write_text(
        f'module() {{ echo "$*" >> {shlex.quote(str(log))}; [ "$1 $2" != "load suite-env" ] || {suite_on_path}; }}\n'
    )
    hook = f'conda() {{ [ "$1 $2" = "activate suite" ] && {suite_on_path}; }}'
    (tools / "conda").write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'shell.bash hook' ] && echo {shlex.quote(hook)}\n")
    (tools / "jsrun").write_text(JSRUN)
    for tool in ("conda", "jsrun"):
        (tools / tool).chmod(0o755)
    paths = [p for p in os.environ.get("PATH", "").split(":") if p and Path(p) != VENV_BIN]
    # SUITE_DEVICE=cpu: the nodes' GPUs are Slurm's count only, so the script's check that torch sees them is skipped
    # (tests/test_jobscript_first_submission.py runs that check) and the runs stay on the CPUs
    return {
        "PATH": ":".join([str(STATE / "bin"), str(tools), *paths]),
        "BASH_ENV": str(tmp_path / "modules.sh"),
        "SUITE_DEVICE": "cpu",
    }


@pytest.mark.parametrize("site", sorted(SITES))
def test_each_site_preset_runs_to_a_record(tmp_path, site):
    """Each preset's script, written with the suite's environment (--venv, --module or --conda), submitted as on its
    site (sbatch --wait; the LSF one with bash inside a two-node allocation, jsrun started by srun): the site's
    module lines and the environment's run on node1, the suite imports only once the script has set it up, one rank
    runs on each node and the job ends with its record and report. The GPUs are the preset's (counted by Slurm,
    unopened); one CPU per rank keeps the run short."""
    preset = SITES[site]
    scenario, out = scenario_file(tmp_path, site, "torch"), tmp_path / "results"
    job = tmp_path / "job.sh"
    option, value = SITE_ENVIRONMENTS[site]
    written = on(
        "node1",
        *[PY, "-m", "suite", "jobscript", scenario, "--site", site, "--account", "acct", option, value, "--out", job],
        *["--results", out, "--ranks-per-node", "1", "--cpus-per-rank", "1", "--walltime", "10m"],
        cwd=tmp_path,
    )
    assert written.returncode == 0, written.stderr
    env = site_like(tmp_path)
    bare = on("node1", "bash", "-c", "python3 -c 'import suite'", cwd=tmp_path, PYTHONPATH="", **env)
    assert bare.returncode != 0, "the suite imports without the script's environment: the test would prove nothing"
    job_id = f"{site}-{os.getpid()}"
    before = link_bytes()
    if preset.scheduler == "slurm":
        ran = on("node1", "sbatch", "--wait", job, cwd=tmp_path, PYTHONPATH="", **env)
        outputs = "\n".join(p.read_text(errors="replace")[-3000:] for p in tmp_path.glob(f"{site}.*.out"))
    else:
        hosts = tmp_path / "lsf-hosts"
        hosts.write_text("batch1\nnode1\nnode2\n")  # LSF's host file: the launch node, then the compute hosts
        lsf = {"LSB_DJOB_HOSTFILE": str(hosts), "LS_SUBCWD": str(tmp_path), "LSB_JOBID": job_id}
        allocation = ["salloc", "-N", "2", "-n", "2", "--ntasks-per-node", "1", "bash", job]
        ran = on("node1", *allocation, cwd=tmp_path, PYTHONPATH="", **env, **lsf)
        outputs = ""
    assert ran.returncode == 0, f"{site}: {ran.stdout[-3000:]}{ran.stderr[-3000:]}\njob output:\n{outputs}"
    loaded = (tmp_path / "modules.log").read_text().splitlines() if (tmp_path / "modules.log").exists() else []
    expected = [line.split(" #")[0].removeprefix("module ") for line in preset.setup if line.startswith("module load ")]
    expected += ["load suite-env"] if option == "--module" else []
    assert loaded == expected, loaded
    record = the_record(out)
    check_across(f"{site} job script", record, link_bytes() - before)
    assert (out / "report" / "report.md").is_file(), f"{site}: no report\n{outputs}"
    miopen = [line for line in preset.setup if "MIOPEN_USER_DB_PATH=" in line]
    if miopen:
        made = list(Path("/tmp").glob("miopen-cache-*"))
        assert made, f"{site}: no MIOpen cache folder on the nodes' /tmp"
        for folder in made:
            folder.rmdir()
    print(
        f"\nCLUSTER {site} job script: {option} {Path(value).name}, modules {', '.join(m.split()[-1] for m in loaded) or 'none'}; "
        f"record {record.status}, report written"
    )


# --- bad input: one line naming what is wrong, a record, no hang --------------------------------------------

BAD_INPUT_LIMIT_S = 60  # each of these must end, with its record, within this many seconds


def leftovers(out: Path) -> list[str]:
    """Processes of the runs under ``out`` still running, on either node (the nodes share one process table)."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if str(out) in line and process.info["pid"] != os.getpid():
            found.append(f"{process.info['pid']}: {line[:200]}")
    return found


def failed_fast(launcher: str, out: Path, proc: subprocess.CompletedProcess, seconds: float, first_line: str) -> None:
    records = list(iter_records(out))
    assert len(records) == 1, f"{launcher}: no record\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    error = records[0].error or ""
    assert records[0].status == "failed" and error.splitlines()[0] == first_line, error
    assert seconds < BAD_INPUT_LIMIT_S, f"{launcher}: took {seconds:.0f} s"
    assert proc.returncode != 0
    assert not leftovers(out), leftovers(out)
    print(f"\nCLUSTER bad input ({launcher}): {first_line} [{seconds:.0f} s, exit {proc.returncode}]")


def test_a_node_that_is_down(tmp_path):
    scenario, out = scenario_file(tmp_path, "down", "mpi"), tmp_path / "results"
    start = time.monotonic()
    proc = on("node1", *suite_run(scenario, out, "--launcher", "mpirun", "--hosts", "node1:1,node3:1"), cwd=tmp_path)
    line = "host node3 is unreachable (ssh: connect to host node3 port 22: No route to host)"
    failed_fast("mpirun", out, proc, time.monotonic() - start, line)


def test_a_hostfile_naming_an_unknown_host(tmp_path):
    scenario, out = scenario_file(tmp_path, "unknown", "deepspeed"), tmp_path / "results"
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node1 slots=1\nnosuchnode slots=1\n")
    placement = ["--launcher", "deepspeed", "--hosts", hostfile, *"--nodes 2 --ranks-per-node 1 --master-port 29514".split()]
    start = time.monotonic()
    proc = on("node1", *suite_run(scenario, out, *placement), cwd=tmp_path)
    records = list(iter_records(out))
    assert records, proc.stderr
    first = (records[0].error or "").splitlines()[0]
    assert first.startswith("host nosuchnode is unknown (ssh: Could not resolve hostname nosuchnode"), first
    failed_fast("deepspeed", out, proc, time.monotonic() - start, first)


def test_a_slurm_partition_that_does_not_exist(tmp_path):
    scenario, out = scenario_file(tmp_path, "partition", "torch"), tmp_path / "results"
    run = suite_run(scenario, out, "--launcher", "srun", "--nodes", "2", "--ranks-per-node", "1", "--gpus-per-rank", "0")
    start = time.monotonic()
    proc = on("node1", *run, cwd=tmp_path, SLURM_PARTITION="nosuch")  # srun's own variable for -p
    line = "Slurm partition nosuch does not exist (invalid partition specified)"
    failed_fast("srun", out, proc, time.monotonic() - start, line)
    # a job script for it is refused by sbatch at once, in one line naming the partition
    job = tmp_path / "job.sh"
    on(
        "node1",
        PY,
        "-m",
        "suite",
        "jobscript",
        scenario,
        "--scheduler",
        "slurm",
        "--out",
        job,
        "--queue",
        "nosuch",
        "--gpus-per-rank",
        "0",
        cwd=tmp_path,
    )
    submitted = on("node1", "sbatch", job, cwd=tmp_path, timeout=60)
    assert submitted.returncode != 0 and "invalid partition specified: nosuch" in submitted.stderr, submitted.stderr


# --- a node's ranks killed mid-run ------------------------------------------------------------------------------


def test_a_rank_killed_on_the_other_node(tmp_path):
    """Rank 1, on node2, is killed by SIGKILL after its second step: the record names it and its node (and the
    signal, when mpirun lives to hear it) within 30 s of the kill, and nothing of the run is left on either node."""
    scenario, out = scenario_file(tmp_path, "killed", "mpi"), tmp_path / "results"
    knobs = {"SUITE_TEST_FAIL_AT_STEP": "2", "SUITE_TEST_FAIL_RANK": "1", "SUITE_TEST_FAIL_HOW": "kill"}
    run = suite_run(scenario, out, "--launcher", "mpirun", "--hosts", "node1:1,node2:1")
    runner = start_on("node1", *run, cwd=tmp_path, log=tmp_path / "suite.txt", **knobs)
    killed_at, pid = None, None
    deadline = time.monotonic() + RUN_TIMEOUT
    while runner.poll() is None and time.monotonic() < deadline:
        status = next(out.glob("*/ranks/rank1.json"), None)
        if status is not None and pid is None:
            with contextlib.suppress(ValueError, OSError):
                pid = json.loads(status.read_text())["pid"]
        if pid is not None and killed_at is None and not psutil.pid_exists(pid):
            killed_at = time.monotonic()
        time.sleep(0.1)
    ended_at = time.monotonic()
    if runner.poll() is None:
        runner.kill()
    assert killed_at is not None, (tmp_path / "suite.txt").read_text()
    record = next(iter_records(out))
    first = (record.error or "").splitlines()[0]
    assert record.status == "failed" and ended_at - killed_at < 30, f"recorded {ended_at - killed_at:.0f} s after the kill"
    assert not leftovers(out), leftovers(out)
    print(f"\nCLUSTER fault (mpirun): {first}; recorded {ended_at - killed_at:.1f} s after the kill; nothing left on either node")
    # Across nodes rank 0 sees the TCP connection close at once and aborts inside Open MPI, and mpirun usually
    # ends before node2's daemon reports rank 1's signal: the record then names the silent rank and its node.
    assert first == "rank 1 on node2 was killed by SIGKILL" or first.startswith("rank 1 on node2 died without a word: "), first
