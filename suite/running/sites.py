"""Site presets of ``suite jobscript --site``: how a known cluster places ranks, CPUs and GPUs, as its user guide writes it.

A preset names the scheduler, ranks per node (one per GPU, or per GCD on Frontier), each rank's CPUs and GPUs and how
Slurm binds them, what the site asks every job to say, its guide's ``module load`` lines, its conda module, its GPUs'
vendor and the network preset ``suite project`` models it with (:data:`suite.measure.network.PRESETS`); the command
line overrides every value. It also knows its queues' walltime and node limits (:class:`QueueLimits`), so that
``suite jobscript`` refuses, in one line, a job the scheduler would refuse (docs/clusters.md).
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
class SizeBin:
    """One row of a queue's limits: a job of ``min_nodes`` to ``max_nodes`` nodes may ask for up to ``max_hours``."""

    min_nodes: int
    max_nodes: int
    max_hours: float


@dataclass(frozen=True)
class QueueLimits:
    """The limits of one partition, QOS or LSF queue of a site, as the page ``source`` gives them."""

    name: str  # as the job names it: -p batch, -q debug, #BSUB -q batch
    kind: str  # "partition", "QOS" or "queue": what the refusal calls it
    bins: tuple[SizeBin, ...]  # by node count; a job above every bin's max_nodes is refused
    source: str  # the page the numbers come from (quoted in the refusal)

    def max_seconds(self, nodes: int) -> int | None:
        """The longest walltime a job of ``nodes`` nodes may ask for here, or None where no row takes that many nodes."""
        row = next((b for b in self.bins if b.min_nodes <= nodes <= b.max_nodes), None)
        return None if row is None else round(row.max_hours * 3600)

    def nodes_problem(self, site: str, nodes: int) -> str | None:
        """Why a job of ``nodes`` nodes cannot run here (one line naming the limit and its page), or None."""
        largest = max(b.max_nodes for b in self.bins)
        if nodes <= largest:
            return None
        return f"{site}'s {self.name} {self.kind} takes at most {largest:,} node{'s' if largest != 1 else ''} and this job needs {nodes:,} ({self.source})"

    def walltime_problem(self, site: str, nodes: int, seconds: int) -> str | None:
        """Why ``seconds`` of walltime is past this queue's limit for ``nodes`` nodes (one line naming it), or None."""
        row = next((b for b in self.bins if b.min_nodes <= nodes <= b.max_nodes), None)
        if row is None or seconds <= row.max_hours * 3600:
            return None
        span = f"{row.min_nodes:,}-{row.max_nodes:,} nodes" if row.min_nodes != row.max_nodes else f"{row.max_nodes} node"
        return (
            f"{site}'s {self.name} {self.kind} allows at most {_hours(row.max_hours)} for {span} (this job: {nodes:,} "
            f"node{'s' if nodes != 1 else ''}; {self.source})"
        )


def _hours(hours: float) -> str:
    """``2 h``, ``30 min``."""
    return f"{hours:g} h" if hours >= 1 else f"{hours * 60:g} min"


# Where the numbers below come from, and how far they were checked (docs/clusters.md, "Queue limits", says the same):
# - Frontier: OLCF's user guide, "Job Priority by Node Count" (bins 1-5), "extended Partition (queue) Policy" (24 h,
#   64 nodes) and "debug Quality of Service Class" (at most 2 h), checked against the guide's source,
#   https://github.com/olcf/olcf-user-docs/blob/master/systems/frontier_user_guide.rst (the 2 h debug line:
#   https://github.com/olcf/olcf-user-docs/pull/1018).
# - Summit: OLCF's user guide, "Job Priority by Processor Count" (batch), "batch-hm", "killable" and "debug Queue
#   Policy", checked against https://github.com/olcf/olcf-user-docs/blob/master/systems/summit_user_guide.rst.
# - Perlmutter: NERSC's QOS page. Its tables could not be read here; the walltimes (debug 30 min, regular and shared
#   48 h) were checked against `sacctmgr show qos` on Perlmutter as quoted in
#   https://github.com/doe-iri/iri-facility-api-python/issues/49 (gpu_debug 00:30:00, gpu_regular and gpu_shared
#   2-00:00:00); the node counts and preempt's 48 h are the page's as this preset was first written, not re-checked.
OLCF_FRONTIER = "OLCF's Frontier user guide, scheduling policy: https://docs.olcf.ornl.gov/systems/frontier_user_guide.html"
OLCF_SUMMIT = "OLCF's Summit user guide, scheduling policy: https://docs.olcf.ornl.gov/systems/summit_user_guide.html"
NERSC_QOS = "NERSC's QOS limits for Perlmutter GPU nodes: https://docs.nersc.gov/jobs/policy/"


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
    limits: tuple[QueueLimits, ...] = ()  # its partitions', QOSes' or queues' walltime and node limits
    default_queue: str | None = None  # the LSF queue a job without -q lands in (its limits apply)

    def limits_of(self, name: str | None, kind: str | None = None) -> QueueLimits | None:
        """The limits of the partition, QOS or queue ``name`` (None where this preset does not know them); with ``kind``
        only a partition, QOS or queue of that name (Frontier's ``debug`` is a QOS, not a partition)."""
        return next((limit for limit in self.limits if limit.name == name and kind in (None, limit.kind)), None)


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
            default_queue="batch",
            limits=(
                QueueLimits(
                    "batch",
                    "queue",
                    (
                        SizeBin(1, 45, 2),
                        SizeBin(46, 91, 6),
                        SizeBin(92, 921, 12),
                        SizeBin(922, 2764, 24),
                        SizeBin(2765, 4608, 24),
                    ),
                    OLCF_SUMMIT,
                ),
                QueueLimits("batch-hm", "queue", (SizeBin(1, 54, 24),), OLCF_SUMMIT),  # the 54 high-memory nodes
                # preemptable after bin 5's 2 h or bin 4's 6 h; only those bins (at most 91 nodes) are taken
                QueueLimits("killable", "queue", (SizeBin(1, 45, 24), SizeBin(46, 91, 24)), OLCF_SUMMIT),
                QueueLimits("debug", "queue", (SizeBin(1, 4608, 2),), OLCF_SUMMIT),  # any size, at most 2 h
            ),
            # OLCF's PyTorch-on-Summit guide (https://docs.olcf.ornl.gov/software/python/pytorch_summit.html): the modules
            # its POWER9 torch wheels were built with, and conda from miniforge3
            setup=(
                "module load DefApps-2023",
                "module load gcc/11.2.0",
                "module load cuda/11.7.1",
                "module load magma/2.7.2-cuda117",
                "module load openblas/0.3.17-omp",
            ),
            conda_module="miniforge3/23.11.0",
            works=(
                "a conda environment only (--conda ENV --module miniforge3/23.11.0): Summit is POWER9 (ppc64le), for which "
                "PyPI has no torch wheel, so a --venv cannot install torch; make the environment with conda and OLCF's "
                "POWER9 torch wheel (conda create -p ENV python=3.11; pip install the wheel of /sw/summit/pytorch/wheel_dist, "
                "then the suite), or load OLCF's pytorch module"
            ),
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
            # the versions OLCF's PyTorch-on-Frontier guide pins (https://docs.olcf.ornl.gov/software/python/pytorch_frontier.html)
            setup=(
                "module load PrgEnv-gnu/8.5.0",
                "module load rocm/5.7.1",
                "module load craype-accel-amd-gfx90a",
                "export NCCL_SOCKET_IFNAME=hsn0  # RCCL over the Slingshot interfaces (OLCF's PyTorch guide)",
                # MIOpen's kernel database and cache on node-local storage, not the shared home (OLCF's PyTorch guide)
                'export MIOPEN_USER_DB_PATH="/tmp/miopen-cache-${SLURM_JOB_ID:-$$}"',
                'export MIOPEN_CUSTOM_CACHE_DIR="$MIOPEN_USER_DB_PATH"',
                'srun --ntasks-per-node=1 mkdir -p "$MIOPEN_USER_DB_PATH"  # on every node of the job',
            ),
            conda_module="miniforge3/23.11.0-0",
            gpu_vendor="amd",
            limits=(
                QueueLimits(
                    "batch",
                    "partition",
                    (
                        SizeBin(1, 91, 2),
                        SizeBin(92, 183, 6),
                        SizeBin(184, 1881, 12),
                        SizeBin(1882, 5644, 12),
                        SizeBin(5645, 9472, 12),
                    ),
                    OLCF_FRONTIER,
                ),
                QueueLimits("extended", "partition", (SizeBin(1, 64, 24),), OLCF_FRONTIER),
                # -q debug: a QOS on top of the partition (its bins still apply), at most 2 h at any size
                QueueLimits("debug", "QOS", (SizeBin(1, 9472, 2),), OLCF_FRONTIER),
            ),
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
            # the GPU nodes' QOSes (1,792 nodes in all); regular and preempt to the whole machine as the page lists them
            limits=(
                QueueLimits("regular", "QOS", (SizeBin(1, 1792, 48),), NERSC_QOS),
                QueueLimits("debug", "QOS", (SizeBin(1, 8, 0.5),), NERSC_QOS),
                QueueLimits("shared", "QOS", (SizeBin(1, 1, 48),), NERSC_QOS),
                QueueLimits("preempt", "QOS", (SizeBin(1, 128, 48),), NERSC_QOS),
            ),
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
