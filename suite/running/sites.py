"""Site presets of ``suite jobscript --site``: how a known cluster places ranks, CPUs and GPUs, as its user guide writes it.

A preset names the scheduler and its launcher, the ranks per node (one per GPU, or per GCD on
Frontier), the CPU cores of each rank, the GPUs of each rank and how Slurm binds them, what the
site asks every job to say (Frontier: an account and ``-p batch``; Perlmutter: ``-C gpu`` and a QOS,
``-q``), the ``module load`` lines its guide starts a PyTorch job with (Frontier's also put MIOpen's kernel cache on
node-local storage), the module that gives conda, its GPUs' vendor, and the
network preset (:data:`suite.measure.network.PRESETS`) that ``suite project`` models the site with.
Every value can be overridden on the command line. The figures follow NERSC's Perlmutter and OLCF's
Frontier user guides for one rank per GPU (GCD); Summit (retired) is kept as an LSF example.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULER_LAUNCHER = {"lsf": "jsrun", "slurm": "srun"}
"""The launcher a batch script of each scheduler starts its ranks with unless ``--launcher`` says otherwise."""

SLURM_MPI_TYPES = ("pmix", "pmi2", "cray_shasta", "none")
"""``--mpi`` choices: Slurm's MPI plugin for srun (``SLURM_MPI_TYPE``); the site's default when not given."""

GPU_VENDORS = ("nvidia", "amd")
"""The GPU vendors a site's nodes carry: what a container runtime is told to bring in (``--nv`` or ``--rocm``)."""


@dataclass(frozen=True)
class Site:
    """One cluster's placement for one rank per GPU, and what its jobs must say."""

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
    partition: str | None = None  # Slurm -p written unless --queue names another
    qos: str | None = None  # Slurm -q written unless --qos names another
    queue_is_qos: bool = False  # --queue is the site's QOS (NERSC's regular, debug, ...), written as -q
    account_required: bool = False  # the site refuses a job without -A
    gpus_per_node: bool = False  # ask --gpus-per-node (the site's guide) rather than --gpus-per-task
    cpu_bind: str | None = None  # srun --cpu-bind, written as SLURM_CPU_BIND (sbatch has no such option)
    setup: tuple[str, ...] = ()  # module load / export lines of the site's guide, before the user's preamble
    gpu_vendor: str = "nvidia"  # one of GPU_VENDORS
    works: str = ""  # what runs on the site's GPUs with this suite, said in the script and the docs
    conda_module: str | None = None  # the module that puts conda on PATH (named where --conda finds no conda)


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
            account_required=True,  # OLCF: every job names its project (-P)
            description="OLCF Summit (retired 2024; kept as an LSF example): LSF and jsrun, 6 V100 and 42 usable cores per node",
        ),
        Site(
            "frontier",
            "slurm",
            ranks_per_node=8,
            cpus_per_rank=7,  # 56 usable cores in low-noise mode (8 of 64 are the system's), 7 per GCD
            gpus_per_rank=1,
            gpu_bind="closest",  # each rank's GCD on its own NUMA domain, as OLCF's guide does
            network="frontier",
            partition="batch",
            account_required=True,
            setup=(
                "module load PrgEnv-gnu",
                "module load rocm",
                "module load craype-accel-amd-gfx90a",
                "export NCCL_SOCKET_IFNAME=hsn0  # RCCL over the Slingshot interfaces (OLCF's PyTorch guide)",
                # MIOpen's kernel database and cache on node-local storage, not the shared home (OLCF's PyTorch guide)
                'export MIOPEN_USER_DB_PATH="/tmp/miopen-cache-${SLURM_JOB_ID:-$$}"',
                'export MIOPEN_CUSTOM_CACHE_DIR="$MIOPEN_USER_DB_PATH"',
                'srun --ntasks-per-node=1 mkdir -p "$MIOPEN_USER_DB_PATH"  # on every node of the job',
            ),
            conda_module="miniforge3",
            gpu_vendor="amd",
            works=(
                "a ROCm torch (torch.version.hip): the torch engine on RCCL (torch.distributed's nccl backend), "
                "the mpi engine on host buffers, GPU busy share and memory from AMD SMI (the amdsmi package) where "
                "installed; Horovod's GPU operations are refused (this suite checks only its CUDA NCCL build)"
            ),
            description="OLCF Frontier: Slurm (-A required, -p batch), 8 GCDs (4 AMD MI250X) and 56 usable cores per node",
        ),
        Site(
            "perlmutter",
            "slurm",
            ranks_per_node=4,
            cpus_per_rank=32,  # 64 cores x 2 hardware threads = 128 logical CPUs, 32 per GPU
            gpus_per_rank=1,
            gpu_bind="none",  # every rank sees the node's 4 GPUs, so NCCL can use NVLink (NERSC's advice)
            constraint="gpu",
            qos="regular",
            queue_is_qos=True,
            gpus_per_node=True,
            cpu_bind="cores",
            setup=("module load pytorch",),
            conda_module="conda",
            network="perlmutter",
            works="a CUDA torch: every engine, NVML sampling, Horovod with its NCCL build",
            description="NERSC Perlmutter GPU nodes: Slurm with -C gpu and a QOS (-q regular), 4 NVIDIA A100 and "
            "128 logical CPUs per node",
        ),
        Site(
            "slurm-gpu",
            "slurm",
            ranks_per_node=4,
            cpus_per_rank=4,
            gpus_per_rank=1,
            gpu_bind="closest",
            network="edr-cluster",
            works="a CUDA torch: every engine, NVML sampling, Horovod with its NCCL build",
            description="a generic Slurm cluster of NVIDIA GPUs: 4 GPUs and at least 16 cores per node",
        ),
    )
}
"""The site presets by name."""
