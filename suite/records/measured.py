"""The parts of a record that say what the run measured of itself: its phases' seconds (:class:`Timing`), its
throughput, its communication, its ranks' telemetry and its summary, its host's load and the machine it ran on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import Field

from .fields import Count, Seconds, column


@dataclass
class Communication:
    """``comm``: what the engine moved inside the training window."""

    bytes: Count | None = column("comm_bytes")
    """Payload bytes handed to collectives by all ranks inside the window."""
    bytes_outside_window: int | None = None
    seconds: Seconds | None = column("comm_s")
    """Mean over ranks of the seconds each was blocked in communication, over the whole window
    (``telemetry.comm_wait_s`` is the same wait per window step)."""
    largest_group: int | None = None
    per_rank_bytes: list[Count] | None = None
    per_rank_seconds: list[Seconds] | None = None


@dataclass
class StepTimesPart:
    """``step_times`` of a rank's telemetry: the count, mean and spread of its window steps and a sample of them."""

    OPEN: ClassVar[bool] = True  # keys it does not declare are passed over (the parts of telemetry grow)
    count: Count | None = None
    mean: float | None = None
    std: float | None = None
    sample: list[float] | None = None


@dataclass
class WarmupPart:
    """``warmup`` of a rank's telemetry: its warm-up steps, images and seconds."""

    OPEN: ClassVar[bool] = True
    steps: Count | None = None
    images: Count | None = None
    seconds: Seconds | None = None


@dataclass
class WindowPart:
    """``window`` of a rank's telemetry: its timed steps, images, seconds and where the seconds went."""

    OPEN: ClassVar[bool] = True
    steps: Count
    step_seconds: Seconds
    seconds: Seconds | None = None
    images: Count | None = None
    busy_seconds: Seconds | None = None
    data: Seconds | None = None
    comm: Seconds | None = None
    compute: Seconds | None = None
    comm_bytes: Count | None = None


@dataclass
class PeakPart:
    """``peak`` of a rank's telemetry: the FLOP/s it could reach, and how that was found."""

    OPEN: ClassVar[bool] = True
    flops: float | None
    source: str | None = None


@dataclass
class SampledPart:
    """A quantity a rank's sampler read over its run (:func:`suite.measure.telemetry.summary`): its mean and 95th
    percentile."""

    OPEN: ClassVar[bool] = True
    mean: float | None = None
    p95: float | None = None


@dataclass
class RankTelemetry:
    """One entry of ``telemetry.per_rank`` (:meth:`suite.measure.telemetry.Telemetry.as_dict`): every field it writes
    is checked; keys it does not declare (a newer suite's) are kept as they are."""

    OPEN: ClassVar[bool] = True
    rank: Count | None = None
    host: str | None = None
    steps: Count | None = None
    images: Count | None = None
    setup_s: Seconds | None = None
    paused_s: Seconds | None = None
    checkpoint_s: Seconds | None = None
    images_per_s: float | None = None
    flops_per_step: float | None = None
    comm_bytes: Count | None = None
    peak: PeakPart | None = None
    window: WindowPart | None = None
    warmup: WarmupPart | None = None
    step_times: StepTimesPart | None = None
    device: str | None = None
    """This rank's device (``cpu``, ``cuda:1``)."""
    timeline: str | None = None
    """How its steps were timed: ``host_clock`` or ``cuda_events``."""
    train_images: Count | None = None
    eval_images: Count | None = None
    host_load: dict[str, Any] | None = None
    """The load of its host over the training clock (:meth:`suite.measure.hostload.HostLoadSampler.as_dict`)."""
    cpu_util: SampledPart | None = None
    host_mem_peak_bytes: Count | None = None
    gpu_util: SampledPart | None = None
    gpu_mem_used_bytes: SampledPart | None = None
    gpu_mem_peak_bytes: Count | None = None
    gpu_note: str | None = None
    comm_largest_group: int | None = None
    budget_window_s: Seconds | None = None


@dataclass
class TelemetrySummary:
    """``telemetry``: the ranks' step timers and samplers, summarised (see :mod:`suite.measure.telemetry`)."""

    warmup_steps_per_rank: list[Count] | None = None
    timed_steps: Count | None = column()
    """Window steps of the rank that made the fewest."""
    step_s: float | None = column()
    step_p50: float | None = column()
    step_p95: float | None = column()
    step_mean: float | None = None
    step_ci95: float | None = column()
    data_s: float | None = column()
    compute_s: float | None = column()
    comm_wait_s: float | None = column()
    """Seconds per window step blocked in communication (mean over ranks)."""
    comm_share: float | None = column()
    steps: Count | None = None
    work_images_per_rank: list[Count] | None = column()
    work_steps_per_rank: list[Count] | None = column()
    busy_s_per_rank: list[Seconds] | None = None
    flops_per_step: float | None = column()
    flops_per_step_per_rank: list[float | None] | None = None
    achieved_flops_per_rank: float | None = column("achieved_flops")
    peak_flops_per_rank: float | None = column("peak_flops")
    peak_source: str | None = column()
    peak_raised_ranks: list[int] | None = column()
    """Ranks that computed faster than their measured or datasheet peak, whose peak is their achieved rate
    (:func:`suite.measure.flops.peak_use`)."""
    fraction_of_peak: float | None = column()
    cpu_util_mean: float | None = column()
    host_mem_peak_mb: float | None = column()
    gpu_util_mean: float | None = column()
    gpu_util_p95: float | None = column()
    gpu_mem_used_mb: float | None = column()
    gpu_mem_peak_mb: float | None = column()
    gpu_note: str | None = None
    per_rank: list[RankTelemetry] | None = None
    """Each rank's raw telemetry (:meth:`suite.measure.telemetry.Telemetry.as_dict`), read as :class:`RankTelemetry`."""


@dataclass
class Timing:
    """Seconds of each phase (the slowest rank's; set-up, finalize and scoring rank 0's); ``train_s`` is the training
    clock: the warm-up (``warmup_s``) and the timed steps after it, the same for every system."""

    setup_s: Seconds | None = column()
    warmup_s: Seconds | None = column()
    budget_window_s: Seconds | None = column()
    """Under ``train.budget_s``: the training window the budget left after the slowest rank's warm-up."""
    train_s: Seconds | None = column()
    eval_s: Seconds | None = column()
    """Scoring during training (stop_at_target), with the window's clock stopped."""
    finalize_s: Seconds | None = column()
    score_s: Seconds | None = column()
    worker_s: Seconds | None = None
    wall_s: Seconds | None = column()
    """The launch, as ``suite run`` timed it."""


@dataclass
class Throughput:
    """Training images per second of the training clock, and the work counted the same way for every strategy
    (:mod:`suite.measure.telemetry`)."""

    images_per_s: float | None = column()
    """Training images (real images that reach a discriminator update) per second of ``train_s``, warm-up
    included, all ranks."""
    images_per_s_ci95: Annotated[list[float | None], Field(min_length=2, max_length=2)] | None = column()
    images_per_s_per_rank: float | None = column()
    train_images: int | None = column()
    """Training images of the run, all ranks, warm-up included: what ``images_per_s`` counts (and
    ``train.budget_images`` charges)."""
    eval_images: int | None = column()
    """Evaluation images: images that networks scored without an update during training (cellular's fitness
    and mixture evaluation), all ranks; 0 for a strategy that scores nothing while it trains."""


@dataclass
class HostLoad:
    """``host_load``: the host's load over the run's training clock (:mod:`suite.measure.hostload`), on its busiest host."""

    contended: bool | None = column()
    """The run's timings were taken while other processes used its cores, or steal took the CPUs
    (:func:`suite.measure.hostload.contention`); None: unknown (no ``/proc/stat``)."""
    contention: str | None = None
    """Why, in a few words."""
    outside_cores: float | None = column()
    """Cores that processes outside the run kept busy, on average over its training clock."""
    outside_share: float | None = None
    """``outside_cores`` as a share of the host's cores (of the window's core-seconds, those others used)."""
    free_cores: float | None = None
    """The host's cores that the run's ranks did not claim (its cores less their threads)."""
    cores: int | None = None
    steal_share: float | None = column()
    """CPU steal as a share of the host's CPU time."""
    load_avg: list[float | None] | None = column()
    """The host's 1-minute load average as the training clock started and as it stopped."""
    hosts: list[dict] | None = None
    """The same per host, for a run over several nodes."""


@dataclass
class Machine:
    """``machine``: what computed the run (:func:`suite.measure.env.machine`), for telling which runs should agree bitwise."""

    cpu_model: str | None = None
    cores: int | None = None
    cpu_capability: str | None = None
    """The kernel set torch dispatches to (``torch.backends.cpu.get_cpu_capability()``, e.g. AVX512, AVX2)."""
    onednn_max_isa: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: int | None = None
    nccl: str | None = None
    mpi: str | None = None
    gpu: str | None = None
    gpu_driver: str | None = None
    fingerprint: str | None = column("machine")
    """A digest of the fields that identify the machine (:data:`suite.measure.env.MACHINE_IDENTITY`), not of those
    that depend on the launch (``cpu_capability``, ``onednn_max_isa``, ``mpi``, ``host``). Records written before
    it left those out digest every field above; the report and ``suite compare`` recompute it."""
    host: str | None = None
    numerics: str | None = column()
    """A digest of one fixed forward and backward pass on the run's device and threads (:func:`suite.measure.env.numerics_digest`)."""
