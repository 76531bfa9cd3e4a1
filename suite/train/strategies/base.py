"""What every strategy is and returns, and helpers to package generators."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch

from ...config.plan import SystemSize, TrainingError, budget_fraction_steps, budget_steps
from ...config.registry import STRATEGIES
from ...config.scenario import Run
from ...gan.data import ImageData
from ...gan.sampling import GeneratorBundle

if TYPE_CHECKING:
    from ...gan.divergence import Divergence
    from ...measure.telemetry import Telemetry
    from ...measure.tensorboard_writer import EventWriter
    from ..checkpoint import Checkpointer
    from ..engines.base import Engine, Group


@dataclass
class Outcome:
    """A strategy's result. ``bundle`` and ``curve`` are complete on rank 0 only.

    ``curve`` holds (training-window seconds, generator step, images consumed, bundle) snapshots taken
    during training, scored after training for the quality-over-time plot (a strategy that scores
    during training puts its scored points in ``fields["curve"]`` instead) and drawn as the sample grids
    over training (:mod:`suite.gan.grids`). ``fields`` are merged into the record;
    ``extra_bundles`` are further models worth saving and scoring (``generator_<name>.pt``,
    ``quality_<name>`` in the record). ``ema`` is the EMA generator of the model (``train.ema_half_life``,
    :mod:`suite.train.ema`): the same kind of bundle with the averaged weights, saved as ``generator_ema.pt`` and
    scored on ``metrics.ema_samples`` (``quality.ema_fid``); None without one.
    """

    bundle: GeneratorBundle | None
    curve: list[tuple[float, int, int, GeneratorBundle]] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    extra_bundles: dict[str, GeneratorBundle] = field(default_factory=dict)  # e.g. cellular's best cell
    ema: GeneratorBundle | None = None


class Strategy(ABC):
    """One rank's part of a training strategy, in the phases the worker times apart.

    Between window steps a strategy offers its :attr:`checkpointer` (set by the worker before
    :meth:`setup` when the run checkpoints) a boundary; :meth:`checkpoint` and :meth:`restore`
    are this rank's training state and its return from a checkpoint.
    """

    checkpointer: Checkpointer | None = None  # None: no checkpoints
    events: EventWriter | None = None
    """This rank's TensorBoard writer where the run asks for events (set by the worker before :meth:`setup`, which tells
    it the size of the system's step); the ranks that keep history points write them while training."""
    window_s: float | None = None
    """Under ``train.budget_s``: the window's seconds, the budget less the slowest rank's warm-up (set by the worker
    as the window opens; every rank gets the same)."""
    window_opens_s: float = 0.0
    """The training clock's reading as the window opened: the slowest rank's warm-up seconds (set by the worker;
    the clock starts with the warm-up, :mod:`suite.measure.telemetry`)."""

    def deadline(self, share: float = 1.0) -> float | None:
        """Under ``train.budget_s``: the training clock's reading at which ``share`` of the window is over (None
        without a time budget)."""
        return None if self.window_s is None else self.window_opens_s + share * self.window_s

    def __init__(self, run: Run, engine: Engine, data: ImageData, telemetry: Telemetry, scratch: Path):
        """The entry point of every strategy (see :func:`create`)."""
        self.run, self.engine, self.data, self.telemetry, self.scratch = run, engine, data, telemetry, scratch

    @abstractmethod
    def setup(self) -> None:
        """Build everything training needs: groups, networks, engine wrappers, feature networks."""

    @abstractmethod
    def warm_up(self) -> None:
        """The first ``train.warmup_steps`` steps of every GAN (they train; they are not timed)."""

    @abstractmethod
    def train(self) -> None:
        """The remaining steps: everything inside the training window."""

    @abstractmethod
    def finalize(self) -> Outcome:
        """Gather, hand off and package the trained model (complete on rank 0)."""

    def divergence(self) -> Divergence | None:
        """The first divergence this rank saw while training (see :mod:`suite.gan.divergence`), or None."""
        return None

    def halted(self) -> bool:
        """Whether this rank's group stopped training because one of its ranks diverged."""
        return False

    def history_so_far(self) -> Any:
        """This rank's part of the record's ``history`` as training left it (for a diverged run, which is
        not finalized): the history of a single model on rank 0, ``{key: history}`` of the models whose
        history this rank keeps, None where it keeps none."""
        return None

    def peers(self) -> Group:
        """The group of ranks that communicate with this one while training: they resume from the same checkpoint."""
        return self.engine.world()

    @abstractmethod
    def checkpoint(self) -> dict[str, Any]:
        """This rank's training state between two window steps (CPU tensors), with ``"steps"``:
        the generator steps (cellular: iterations) made so far."""

    @abstractmethod
    def restore(self, load: Callable[[int], dict[str, Any]]) -> None:
        """Continue from a checkpoint, after :meth:`setup`; ``load(rank)`` is any rank's :meth:`checkpoint` of it."""


def make_bundle(
    run: Run,
    data: ImageData,
    kind: str,
    generators: dict[str, dict[str, torch.Tensor]],
    conditional: bool = False,
    weights: dict[str, float] | None = None,
    classes: dict[str, int] | None = None,
) -> GeneratorBundle:
    """Package generators with what is needed to sample them."""
    return GeneratorBundle(
        kind=kind,
        image_size=run.dataset.image_size,
        channels=data.channels,
        latent_dim=run.model.latent_dim,
        architecture=run.model.architecture,
        num_classes=data.num_classes,
        conditional=conditional,
        generators=generators,
        class_prior=data.class_prior(),
        weights=weights,
        classes=classes,
    )


def parameter_digest(*modules: torch.nn.Module) -> str:
    """SHA-256 of the modules' parameters: equal digests mean bitwise-identical replicas."""
    h = hashlib.sha256()
    for module in modules:
        for name, p in module.named_parameters():
            h.update(name.encode())
            h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class ImagesBudget:
    """How a system honours ``train.budget_images`` (see :mod:`suite.config.plan`): whole steps of its own size."""

    steps: int
    """Steps the budget buys, warm-up included (generator steps of each GAN; cellular: iterations)."""
    step_images: int
    """Real images one step of the system draws."""
    snapshot_steps: list[int]
    """The steps at equal fractions of the budget, one per curve point."""


def images_budget(run: Run, size: SystemSize) -> ImagesBudget | None:
    """The run's images budget as steps of its strategy's registered size (None without ``train.budget_images``).

    Raises :class:`TrainingError` naming ``train.budget_images`` where the budget buys no whole step.
    """
    budget = run.train.budget_images
    if budget is None:
        return None
    rule = STRATEGIES[run.strategy].step_images
    step = rule(size) if rule is not None else None
    if step is None:
        raise TrainingError(f"{run.strategy} cannot stop at an images budget", "train.budget_images")
    steps = budget_steps(budget, step, f"{run.strategy} at P = {run.procs}", run.train.warmup_steps)
    return ImagesBudget(steps, step, budget_fraction_steps(budget, step, run.metrics.curve_points))


def create(run: Run, engine: Engine, data: ImageData, telemetry: Telemetry, scratch: Path) -> Strategy:
    """The strategy of ``run`` on this rank (not set up yet), the class its registry entry names.

    ``scratch`` is a folder inside the run folder where strategies may exchange large results
    through the file system (see label_partitioned).
    """
    strategy_class: type[Strategy] = STRATEGIES[run.strategy].load()
    return strategy_class(run, engine, data, telemetry, scratch)
