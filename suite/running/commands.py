"""The launch command of each launcher: one run's ranks as ``mpirun``, ``horovodrun``, ``torchrun``,
``deepspeed``, ``jsrun`` or ``srun`` starts them (docs/clusters.md tabulates each command); ``local`` picks one per
engine, on this machine.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..config.registry import ENGINES, launcher_engines
from ..config.scenario import Run
from ..records.results import TORCHRUN_LOGS, atomic_write_text

LAUNCHERS = ("local", "mpirun", "horovodrun", "torchrun", "deepspeed", "jsrun", "srun")
ENV_FILE_LAUNCHERS = frozenset({"deepspeed"})
"""Launchers (not engines) that start ranks on other nodes over ssh with the environment of a file (DS_ENV_FILE)."""


class LaunchError(ValueError):
    """A launcher cannot start this run; the message says why."""


LOCAL_PROCS_PER_CORE = 8
"""A local launch starts at most this many ranks per core of this machine unless ``--max-local-procs`` says more:
each rank is a Python process holding torch (hundreds of MB), and oversubscribing a core 8-fold already measures
the scheduler more than the strategy."""


def machine_cores() -> int:
    """The cores this process may run on (its affinity; else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_procs_problem(run: Run, procs: int, opts: LaunchOptions) -> str | None:
    """Why a local launch of ``procs`` ranks of ``run`` is refused (more than the machine holds), or None."""
    cores = machine_cores()
    limit = opts.max_local_procs or cores * LOCAL_PROCS_PER_CORE
    if procs <= limit:
        return None
    per_core = f"{cores} core{'s' if cores != 1 else ''} x {LOCAL_PROCS_PER_CORE} ranks per core"
    reason = "--max-local-procs" if opts.max_local_procs else per_core
    return (
        f"{run.run_id}: {procs} ranks on this machine, more than the {limit:,} it holds ({reason}); lower procs, use a "
        "cluster launcher, or raise --max-local-procs"
    )


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
    container: Container | None = None  # each rank starts inside it (mpirun, jsrun, srun)
    max_local_procs: int | None = None  # the most ranks a local launch starts (None: LOCAL_PROCS_PER_CORE per core)


CONTAINER_LAUNCHERS = ("srun", "mpirun", "jsrun")
"""The launchers that start each rank itself, so that a rank can start inside a container (``--container``)."""
CONTAINER_RUNTIMES = ("apptainer", "podman-hpc")
"""``--container`` runtimes: Apptainer (OLCF, most Slurm sites) and NERSC's podman-hpc (Perlmutter)."""


@dataclass(frozen=True)
class Container:
    """The image each rank starts in, its runtime, and the vendor of the GPUs it is given (None: no GPU)."""

    runtime: str  # one of CONTAINER_RUNTIMES
    image: str  # an image file (apptainer's .sif) or a registry name
    gpus: str | None = None  # nvidia | amd (suite.running.sites.GPU_VENDORS) | None


def container_words(container: Container, cwd: Path, run_dir: Path) -> list[str]:
    """The words that start a rank inside ``container``, before its interpreter.

    Apptainer passes the environment (the launcher's rank variables, ``MASTER_ADDR``) and binds the working folder
    itself; ``--nv`` or ``--rocm`` brings in the host's GPU driver. podman-hpc is told to run in the host's network
    (``--net host``, for the rendezvous), with MPI and GPUs (``--mpi``, ``--gpu``: NERSC's modules), the working folder
    bound at its own path (and the results folder, where it lies outside it), and each variable a rank reads
    (:data:`suite.train.launchenv.LAUNCH_VARIABLES`) passed.
    """
    if container.runtime == "apptainer":
        gpu = {"nvidia": ["--nv"], "amd": ["--rocm"], None: []}[container.gpus]
        return ["apptainer", "exec", *gpu, container.image]
    if container.runtime == "podman-hpc":
        from ..train.launchenv import LAUNCH_VARIABLES

        passed = [word for name in LAUNCH_VARIABLES for word in ("-e", name)]
        gpu = ["--gpu"] if container.gpus else []
        folders = [cwd, *([run_dir.parent] if run_dir.is_absolute() and not run_dir.is_relative_to(cwd) else [])]
        binds = [word for folder in folders for word in ("-v", f"{folder}:{folder}")]
        return ["podman-hpc", "run", "--rm", "--mpi", *gpu, "--net", "host", *binds, "-w", str(cwd), *passed, container.image]
    raise LaunchError(f"--container {container.runtime}: choose one of {', '.join(CONTAINER_RUNTIMES)}")


def _worker(opts: LaunchOptions, run_dir: Path) -> list[str]:
    wrapper = container_words(opts.container, Path.cwd(), run_dir) if opts.container else []
    return [*wrapper, opts.python, "-m", "suite.running.worker", str(run_dir)]


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


RUN_DIGEST_OPTION = "--run-sha256"
"""The worker's option that names the sha256 of the ``run.json`` bytes ``suite run`` wrote: the rank refuses a
``run.json`` that is not those bytes (:func:`suite.running.worker.read_run`). A hand launch leaves it out."""


NEXT_RUN_OPTION = "--next-run"
"""The worker's option that hands a launch a further run, ``--next-run RUN_DIR SHA256``: once the run before it is
recorded, the same ranks go on to train it (:mod:`.launchgroups`; the digest as :data:`RUN_DIGEST_OPTION`'s)."""
RUN_MARK = "next run of this launch: "
"""What a rank logs as it starts a run of a launch that carries several, before the run id: where the launch's output
is cut into each run's ``log.txt``."""


def command_for(run: Run, run_dir: Path, opts: LaunchOptions, run_digest: str | None = None) -> list[str]:
    """The command that starts ``run``'s ranks under ``opts.launcher``; with ``run_digest`` (the sha256 of the
    ``run.json`` it will read) the worker is given it (:data:`RUN_DIGEST_OPTION`), last on the line."""
    launcher = ENGINES[run.engine].local_launcher if opts.launcher == "local" else opts.launcher
    if launcher not in LAUNCHERS:
        raise LaunchError(f"--launcher: unknown launcher '{launcher}'; choose one of {', '.join(LAUNCHERS)}")
    starts = launcher_engines()
    if launcher in starts and run.engine not in starts[launcher]:
        able = ["mpirun", "jsrun", "srun", *ENGINES[run.engine].launchers]
        raise LaunchError(f"{launcher} cannot start the {run.engine} engine of {run.run_id}; use one of: {', '.join(able)}")
    if opts.container is not None and launcher not in CONTAINER_LAUNCHERS:
        raise LaunchError(
            f"--container: {launcher} starts its own agents on each node, not the ranks, so they cannot be started in "
            f"a container; use --launcher {' or '.join(CONTAINER_LAUNCHERS)}"
        )
    command = LAUNCH_COMMANDS[launcher](run, run_dir, opts, opts.launcher == "local")
    return command + ([RUN_DIGEST_OPTION, run_digest] if run_digest is not None else [])  # the worker's words come last


def _mpirun_command(run: Run, run_dir: Path, opts: LaunchOptions, local: bool) -> list[str]:
    """Open MPI's mpirun (local: no binding, oversubscribed past the cores)."""
    p = run.procs
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
        for variable in forwarded_variables():  # Open MPI passes remote ranks only what -x names
            cmd += ["-x", variable]
        if ENGINES[run.engine].rendezvous:
            cmd += ["-x", f"MASTER_ADDR={opts.master_addr or socket.gethostname()}", "-x", f"MASTER_PORT={opts.master_port}"]
    return cmd + opts.extra + _worker(opts, run_dir)


FORWARDED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH")
"""Variables a launcher that starts ranks over ssh must pass on (with every ``SUITE_*`` one):
where the tools and the suite are, and the suite's own settings (its cache, device, test knobs)."""


def forwarded_variables(env: dict[str, str] | None = None) -> list[str]:
    """The names of :data:`FORWARDED` and ``SUITE_*`` variables set (non-empty) in ``env`` (default: this process's)."""
    env = dict(os.environ) if env is None else env
    suite_own = sorted(name for name in env if name.startswith("SUITE_"))
    return [name for name in (*FORWARDED, *suite_own) if env.get(name)]


def deepspeed_env_file(run_dir: Path, env: dict[str, str]) -> Path:
    """Write the variables that DeepSpeed's multi-node runner does not pass on by itself (it passes
    ``PYTHON*``) to ``RUN_DIR/deepspeed_env``, which ``DS_ENV_FILE`` names; returns the path.

    The runner reads ``KEY=VALUE`` lines and exports them on every node before the ranks start.
    """
    path = Path(run_dir).resolve() / "deepspeed_env"
    lines = [
        f"{name}={env[name]}" for name in forwarded_variables(env) if not name.startswith("PYTHON") and "\n" not in env[name]
    ]
    atomic_write_text(path, "".join(f"{line}\n" for line in lines))
    return path


def _horovodrun_command(run: Run, run_dir: Path, opts: LaunchOptions, local: bool) -> list[str]:
    """horovodrun (local: Gloo on localhost)."""
    p = run.procs
    cmd = [_tool("horovodrun", opts.python), "-np", str(p)]
    if local:
        cmd += ["--gloo", "-H", f"localhost:{p}"]
    else:
        # horovodrun's default "-bind-to none -map-by slot" is rejected by Open MPI 5; the
        # double-dash spelling works with Open MPI 4 and 5 (ignored for MPICH / Intel MPI).
        cmd += (["-H", opts.hosts] if opts.hosts else []) + ["--binding-args=--bind-to none --map-by slot"]
    return cmd + opts.extra + _worker(opts, run_dir)


def _torchrun_command(run: Run, run_dir: Path, opts: LaunchOptions, local: bool) -> list[str]:
    """torchrun (local: standalone rendezvous; else c10d at --master-addr)."""
    p = run.procs
    cmd = [opts.python, "-m", "torch.distributed.run"]
    if local:
        cmd += ["--standalone", "--nnodes", "1", "--nproc_per_node", str(p)]
    else:
        if not opts.master_addr:
            raise LaunchError("torchrun needs --master-addr HOST (the rendezvous endpoint, e.g. the first node)")
        nodes, per_node = placement(run, opts)
        if nodes * per_node != p:
            raise LaunchError(
                f"{run.run_id}: torchrun starts the same number of ranks on every node; {p} ranks are not a multiple of {per_node}"
            )
        cmd += [
            "--nnodes",
            str(nodes),
            "--nproc_per_node",
            str(per_node),
            "--rdzv_backend",
            "c10d",
            "--rdzv_endpoint",
            f"{opts.master_addr}:{opts.master_port}",
        ]
    # torchrun's own logs and error files in the run's folder, not a new /tmp/torchelastic_* per run
    cmd += ["--log-dir", str(run_dir / TORCHRUN_LOGS)]
    return cmd + opts.extra + ["-m", "suite.running.worker", str(run_dir)]


def _deepspeed_command(run: Run, run_dir: Path, opts: LaunchOptions, local: bool) -> list[str]:
    """DeepSpeed's launcher."""
    nodes, per_node = placement(run, opts)
    cmd = [
        _tool("deepspeed", opts.python),
        "--num_nodes",
        str(nodes),
        "--num_gpus",
        str(per_node),
        "--master_port",
        str(opts.master_port),
    ]
    if opts.hosts:
        cmd += ["--hostfile", opts.hosts]
    if opts.master_addr:
        cmd += ["--master_addr", opts.master_addr]
    return cmd + opts.extra + ["--module", "suite.running.worker", str(run_dir)]


def _jsrun_command(run: Run, run_dir: Path, opts: LaunchOptions, local: bool) -> list[str]:
    """jsrun: one resource set per rank with its cores and GPUs."""
    p = run.procs
    # one resource set per rank: 1 task, its cores and its GPUs; -r resource sets per host
    cpus = opts.cpus_per_rank or 1
    _, per_node = placement(run, opts)
    cmd = [
        "jsrun",
        "-n",
        str(p),
        "-r",
        str(per_node),
        "-a",
        "1",
        "-c",
        str(cpus),
        "-g",
        str(opts.gpus_per_rank),
        "--bind",
        f"packed:{cpus}",
    ]
    return cmd + opts.extra + _worker(opts, run_dir)


def _srun_command(run: Run, run_dir: Path, opts: LaunchOptions, local: bool) -> list[str]:
    """srun, ending the step when a rank fails."""
    p = run.procs
    nodes, per_node = placement(run, opts)
    cmd = ["srun", "-N", str(nodes), "-n", str(p), "--ntasks-per-node", str(per_node)]
    if opts.gpus_per_rank:
        cmd += ["--gpus-per-task", str(opts.gpus_per_rank)]
    if opts.cpus_per_rank:
        cmd += ["--cpus-per-task", str(opts.cpus_per_rank)]
    cmd += ["--kill-on-bad-exit=1"]  # a rank that fails ends the step, as mpirun, horovodrun and torchrun do
    return cmd + opts.extra + _worker(opts, run_dir)


LAUNCH_COMMANDS = {
    "mpirun": _mpirun_command,
    "horovodrun": _horovodrun_command,
    "torchrun": _torchrun_command,
    "deepspeed": _deepspeed_command,
    "jsrun": _jsrun_command,
    "srun": _srun_command,
}
"""The command builder of each launcher but ``local`` (which picks one per engine)."""
