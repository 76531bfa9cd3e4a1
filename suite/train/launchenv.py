"""Find rank, world size and local rank from whichever launcher started this process.

Launchers each announce the process's place in their own variables. The first family
present wins, in this order: torchrun / deepspeed (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``),
Horovod's Gloo launcher (``HOROVOD_*``), Open MPI (``OMPI_COMM_WORLD_*``), IBM's jsrun
(``JSM_NAMESPACE_*``), PMIx (``PMIX_RANK``), MPICH/Intel MPI (``PMI_*``), Slurm (``SLURM_*``).
Without any of them the process is a single rank.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class LaunchInfo:
    """Where this process sits, as its launcher told it."""

    launcher: str
    rank: int
    size: int
    local_rank: int
    local_size: int


def _int(env: Mapping[str, str], *names: str, default: int | None = None) -> int | None:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"environment variable {name}={value!r} is not an integer") from None
    return default


# (launcher name, rank, size, local rank, local size) variable names, in priority order.
_FAMILIES: tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("torchrun", ("RANK",), ("WORLD_SIZE",), ("LOCAL_RANK",), ("LOCAL_WORLD_SIZE", "LOCAL_SIZE")),
    ("horovod", ("HOROVOD_RANK",), ("HOROVOD_SIZE",), ("HOROVOD_LOCAL_RANK",), ("HOROVOD_LOCAL_SIZE",)),
    (
        "openmpi",
        ("OMPI_COMM_WORLD_RANK",),
        ("OMPI_COMM_WORLD_SIZE",),
        ("OMPI_COMM_WORLD_LOCAL_RANK",),
        ("OMPI_COMM_WORLD_LOCAL_SIZE",),
    ),
    ("jsrun", ("JSM_NAMESPACE_RANK",), ("JSM_NAMESPACE_SIZE",), ("JSM_NAMESPACE_LOCAL_RANK",), ("JSM_NAMESPACE_LOCAL_SIZE",)),
    (
        "pmix",
        ("PMIX_RANK",),
        ("PMIX_SIZE", "PMI_SIZE"),
        ("PMIX_LOCAL_RANK", "MPI_LOCALRANKID"),
        ("PMIX_LOCAL_SIZE", "MPI_LOCALNRANKS"),
    ),
    ("pmi", ("PMI_RANK",), ("PMI_SIZE",), ("MPI_LOCALRANKID", "PMI_LOCAL_RANK"), ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE")),
    ("slurm", ("SLURM_PROCID",), ("SLURM_NTASKS",), ("SLURM_LOCALID",), ("SLURM_NTASKS_PER_NODE",)),
)


LAUNCH_VARIABLES = tuple(
    sorted({name for family in _FAMILIES for names in family[1:] for name in names} | {"SLURM_TASKS_PER_NODE", "CROSS_RANK"})
) + ("MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "PYTHONUNBUFFERED")
"""Every variable a rank reads its place (and the torch rendezvous, its threads) from: what a container must be given."""


def detect(env: Mapping[str, str] | None = None) -> LaunchInfo:
    """Read the launcher's variables from ``env`` (default: this process's environment)."""
    env = os.environ if env is None else env
    for launcher, rank_vars, size_vars, local_vars, local_size_vars in _FAMILIES:
        rank = _int(env, *rank_vars)
        if rank is None:
            continue
        if launcher == "torchrun" and "CROSS_RANK" in env and "TORCHELASTIC_RUN_ID" not in env:
            launcher = "deepspeed"  # deepspeed's launcher sets RANK, LOCAL_SIZE and CROSS_RANK
        size = _int(env, *size_vars)
        if size is None:
            raise ValueError(f"{rank_vars[0]} is set but {size_vars[0]} is not: the {launcher} launch environment is incomplete")
        local_rank = _int(env, *local_vars, default=None)
        local_size = _int(env, *local_size_vars, default=None)
        if launcher == "slurm" and local_size is None and env.get("SLURM_TASKS_PER_NODE", "").split("(")[0].isdigit():
            local_size = int(env["SLURM_TASKS_PER_NODE"].split("(")[0])  # "4(x2)": 4 tasks on each of 2 nodes
        if local_rank is None:
            local_rank, local_size = rank, size  # no node information: assume one node
        if local_size is None:
            local_size = size
        if not (0 <= rank < size and 0 <= local_rank < max(local_size, 1)):
            raise ValueError(
                f"inconsistent {launcher} environment: rank {rank} of {size}, local rank {local_rank} of {local_size}"
            )
        return LaunchInfo(launcher, rank, size, local_rank, local_size)
    return LaunchInfo("none", 0, 1, 0, 1)


def node_cores() -> tuple[int, int]:
    """(cores of this node, cores this process may run on)."""
    cores = os.cpu_count() or 1
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return cores, allowed


GPU_RANK_THREADS = 4
"""Most CPU threads a rank that trains on a GPU gets unless ``train.threads`` says otherwise. On an
H100 with 16 cores (docs/gpu.md) the main job's DC-GAN step ran no faster with 16 intra-op threads
than with 1 or 4, while the idle threads' spinning kept 8 to 10 cores busy."""


def threads_per_rank(
    requested: int | None, sweep_ranks_per_node: int, cores: int, allowed: int | None = None, on_gpu: bool = False
) -> int:
    """CPU threads for one rank of a run: the one rule the launcher and the worker share.

    ``train.threads`` (``requested``) wins. A rank that its launcher bound to fewer cores than
    the node has (``jsrun -c``, ``srun --cpus-per-task``, ``mpirun --bind-to``) uses those
    ``allowed`` cores. Otherwise the node's cores are shared by the *sweep's* largest number of
    ranks per node, so every process count of a sweep runs with the same threads per rank and
    P=1 and P=2 differ only in processes. A rank that trains on a GPU (``on_gpu``) takes at most
    :data:`GPU_RANK_THREADS` of them: its CPU only launches kernels.
    """
    if requested:
        return requested
    if allowed is not None and allowed < cores:
        share = max(1, allowed)
    else:
        share = max(1, cores // max(1, sweep_ranks_per_node))
    return min(share, GPU_RANK_THREADS) if on_gpu else share
