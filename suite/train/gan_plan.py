"""What one GAN trains and for how long: its plan (the data, the group, the batch, the schedule), the hooks its
trainer is offered, what it leaves behind, and the arithmetic of its steps (optimiser settings, critic steps, generator
steps, a time budget's window, evenly spaced points)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..config.plan import TrainingError
from ..config.registry import LOSSES
from ..config.scenario import Run
from ..config.scenario import critic_steps as scenario_critic_steps
from ..gan.data import ImageData
from . import graphs
from .engines.base import Group

if TYPE_CHECKING:
    from ..measure.tensorboard_writer import EventWriter
    from .checkpoint import Checkpointer

log = logging.getLogger(__name__)
UNLIMITED = 2**62  # steps of a GAN that trains to a time budget without train.steps


@dataclass
class GanResult:
    """What one trained GAN leaves behind on this rank."""

    key: str
    generator: torch.nn.Module
    steps: int = 0
    images: int = 0  # real images drawn into its training batches, over its whole group (see suite.config.plan)
    warmup_images: int = 0  # the part of images that warm-up steps consumed
    history: list[dict] = field(default_factory=list)  # at progress points: mean losses, step, clock
    snapshots: list[dict] = field(default_factory=list)  # generator weights along the way


def optimizer_settings(run: Run) -> tuple[float, tuple[float, float]]:
    """Adam learning rate and betas for this run's loss."""
    section = run.section(LOSSES[run.loss].optimizer)  # the loss's trait: train or wgan_gp (or a plugin's section)
    beta1, beta2 = section.betas
    return section.lr, (beta1, beta2)


def run_critic_steps(run: Run) -> int:
    """Discriminator steps per generator step: the loss's ``critic_steps`` trait (``wgan_gp.n_critic`` under WGAN-GP), else one."""
    settings = LOSSES[run.loss].settings
    return scenario_critic_steps(run.loss, run.section(settings) if settings else None)


def generator_steps(run: Run, images: int, global_batch: int) -> int:
    """Generator steps of one GAN: ``train.epochs`` passes (capped by ``train.steps``).

    A pass over ``images`` makes ``images // global_batch`` discriminator steps; WGAN-GP makes
    ``n_critic`` of them per generator step.
    """
    steps = run.train.epochs * (images // global_batch) // run_critic_steps(run)
    return min(steps, run.train.steps) if run.train.steps else steps


def window_seconds(budget_s: float | None, warmup_s: float) -> float | None:
    """The training window of a time budget: ``budget_s`` less the slowest rank's warm-up (None without a budget).

    Warm-up counts inside the budget, so that a system with a long warm-up gets no more time.
    """
    if budget_s is None:
        return None
    if warmup_s >= budget_s:
        log.warning("warm-up took %.1f s of the %.1f s budget: the window makes one step", warmup_s, budget_s)
    return max(0.0, budget_s - warmup_s)


def evenly_spaced_steps(total: int, points: int) -> list[int]:
    """``points`` step counts spread evenly over ``total`` steps, ending at ``total``.

    >>> evenly_spaced_steps(10, 3)
    [3, 7, 10]
    """
    points = min(points, total)
    if points < 1:
        return []
    return sorted({max(1, int(round(total * (i + 1) / points))) for i in range(points)})


def step_counts(run: Run, images: int, global_batch: int, key: str, max_steps: int | None) -> tuple[int, int, int]:
    """A GAN's batches per epoch, critic steps per generator step and generator steps (``max_steps`` where given,
    else the run's budget); :class:`TrainingError` naming the field where it would make no step."""
    if images < global_batch:
        raise TrainingError(
            f"train.batch_size: GAN '{key}' has {images} training images, fewer than one batch of "
            f"{global_batch}; lower train.batch_size or select more data"
        )
    batches_per_epoch = images // global_batch
    n_critic = run_critic_steps(run)
    if max_steps is None:
        budgeted = run.train.budget_s is not None
        max_steps = (run.train.steps or UNLIMITED) if budgeted else generator_steps(run, images, global_batch)
    if max_steps < 1:
        raise TrainingError(
            f"train.epochs: GAN '{key}' would make no generator step ({batches_per_epoch} batches per "
            f"epoch, {n_critic} critic steps per generator step); train longer or use smaller batches"
        )
    return batches_per_epoch, n_critic, max_steps


@dataclass(frozen=True)
class GanPlan:
    """One GAN a strategy trains: what it learns, which ranks train it, and for how long.

    Parameters
    ----------
    key:
        Names the GAN in seeds (``"all"``, ``"class3"``): the same key gives the same GAN
        whichever ranks train it.
    data:
        The images this GAN learns (all classes, or one class for label-partitioned training).
    group:
        Who trains this GAN together; a group of one rank communicates nothing.
    global_batch:
        Images per step over the whole group.
    conditional:
        Build the label-conditioned pair (Tables 3 and 4).
    max_steps:
        Train exactly this many generator steps, however many epochs that takes (weak
        scaling keeps the one-rank run's step count); default: :func:`generator_steps`, or
        ``train.steps`` (else no limit) when the run trains to a time budget.
    snapshot_points:
        Keep this many generator snapshots, at evenly spaced steps of the window (or times, with a deadline).
    snapshot_steps:
        Take the snapshots at these generator steps instead, warm-up steps included (an images budget's
        fractions, :func:`suite.config.plan.budget_fraction_steps`).
    gradient_group:
        The ranks whose gradients are averaged every step (default: ``group``). A strategy that averages its models
        itself every few steps (local SGD) gives each rank a group of its own here.
    """

    key: str
    data: ImageData
    group: Group
    global_batch: int
    conditional: bool = False
    max_steps: int | None = None
    snapshot_points: int = 0
    snapshot_steps: tuple[int, ...] | None = None
    gradient_group: Group | None = None


@dataclass(frozen=True)
class TrainerHooks:
    """What a trainer is offered between steps besides its telemetry; each optional.

    Parameters
    ----------
    evaluate:
        Called at every snapshot with the trainer when training should stop at a quality
        target; returns whether the target is met (only the group's first rank needs to know).
    checkpointer:
        Offered every step boundary of the window (see :mod:`suite.train.checkpoint`); None: no checkpoints.
    capture:
        How ``performance.cuda_graphs`` captures the step (default: :class:`suite.train.graphs.CudaGraphs` on the
        rank's GPU); the tests give one that runs on the CPU.
    events:
        This rank's TensorBoard writer where the run asks for events: the group's first rank writes the GAN's losses,
        epochs and its step times at every progress point, curve point (snapshot) and epoch end, between steps.
    rank_times:
        Whether this GAN's events carry its rank's step times (default); a rank that trains several GANs gives it to
        one of them (label-partitioned: its last class GAN), so that the rank's tag has one point a step.
    """

    evaluate: Callable[[Any], bool] | None = None  # called with the GanTrainer
    checkpointer: Checkpointer | None = None
    capture: graphs.Capture | None = None
    events: EventWriter | None = None
    rank_times: bool = True
