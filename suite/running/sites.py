"""Site presets of ``suite jobscript --site``: how a known cluster places ranks, CPUs and GPUs.

A preset names the scheduler and its launcher, the ranks per node (one per GPU, or per GCD on
Frontier), the CPU cores of each rank, the GPUs of each rank and how Slurm binds them, and the
network preset (:data:`suite.measure.network.PRESETS`) that ``suite project`` models the site
with. Every value can be overridden on the command line; the figures follow each site's user
guide for one rank per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULER_LAUNCHER = {"lsf": "jsrun", "slurm": "srun"}
"""The launcher a batch script of each scheduler starts its ranks with unless ``--launcher`` says otherwise."""

SLURM_MPI_TYPES = ("pmix", "pmi2", "cray_shasta", "none")
"""``--mpi`` choices: Slurm's MPI plugin for srun (``SLURM_MPI_TYPE``); the site's default when not given."""


@dataclass(frozen=True)
class Site:
    """One cluster's placement for one rank per GPU."""

    name: str
    scheduler: str  # lsf | slurm
    ranks_per_node: int
    cpus_per_rank: int
    gpus_per_rank: int
    network: str  # a key of suite.measure.network.PRESETS (tests check it)
    description: str
    gpu_bind: str | None = None  # Slurm --gpu-bind; LSF binds with jsrun's resource sets (-g)
    constraint: str | None = None  # Slurm -C
    mpi: str | None = None  # Slurm --mpi (SLURM_MPI_TYPE)


SITES = {
    site.name: site
    for site in (
        Site(
            "summit",
            "lsf",
            ranks_per_node=6,
            cpus_per_rank=7,  # 42 usable POWER9 cores (2 of 44 are the system's), 7 per GPU
            gpus_per_rank=1,
            network="summit",
            description="OLCF Summit: LSF and jsrun, 6 V100 and 42 usable cores per node",
        ),
        Site(
            "frontier",
            "slurm",
            ranks_per_node=8,
            cpus_per_rank=7,  # 56 usable cores in low-noise mode (8 of 64 are the system's), 7 per GCD
            gpus_per_rank=1,
            gpu_bind="closest",  # each rank's GCD on its own NUMA domain, as OLCF's guide does
            network="frontier",
            description="OLCF Frontier: Slurm, 8 GCDs (4 MI250X) and 56 usable cores per node",
        ),
        Site(
            "perlmutter",
            "slurm",
            ranks_per_node=4,
            cpus_per_rank=32,  # 64 cores x 2 hardware threads = 128 logical CPUs, 32 per GPU
            gpus_per_rank=1,
            gpu_bind="none",  # every rank sees the node's 4 GPUs, so NCCL can use NVLink (NERSC's advice)
            constraint="gpu",
            network="perlmutter",
            description="NERSC Perlmutter GPU nodes: Slurm with -C gpu, 4 A100 and 128 logical CPUs per node",
        ),
        Site(
            "slurm-gpu",
            "slurm",
            ranks_per_node=4,
            cpus_per_rank=4,
            gpus_per_rank=1,
            gpu_bind="closest",
            network="edr-cluster",
            description="a generic Slurm GPU cluster: 4 GPUs and at least 16 cores per node",
        ),
    )
}
"""The site presets by name."""
