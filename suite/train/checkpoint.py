"""Checkpoints inside a run: every rank's training state on a schedule, and the way back to it.

Every random draw of training is named by the seed and the step (:mod:`suite.gan.seeding`), so no random
state is saved and a resumed run ends with the same generator as an uninterrupted one. The k-th
checkpoint of rank N is ``<k>-rankN.pt`` (the strategy's state, its telemetry and segments, read back with
``weights_only``: loading never runs code) and its description ``<k>-rankN.json`` (:class:`Mark`), written
after it; a checkpoint exists once its JSON does. docs/reliability.md ("Checkpoints") gives the rules:
when they fall, what a data-parallel group saves, which checkpoint a resume continues from.

Saving stops the window's clock (``checkpoint_s``); a state that is not finite is not saved; after
writing, a group's ranks agree (a one-integer collective), so none is more than one checkpoint ahead.
Stopping on request: ``suite run``, when signalled, writes ``checkpoints/STOP``; each group's first rank
looks for it every :data:`STOP_POLL_S` seconds, and at the next step its group checkpoints and every rank
exits with :data:`STOPPED_EXIT_CODE`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..config.plan import ModelBytes
from ..config.registry import STRATEGIES
from ..config.scenario import Run
from ..config.sections import CheckpointEvery
from ..config.shown import shown
from ..gan.divergence import all_finite
from ..gan.tensorfiles import load_tensors, save_tensors
from ..records.failures import write_status
from ..records.nofollow import remove_entry, remove_tree
from ..records.record import CheckpointInfo
from ..records.results import CHECKPOINT_DIR, STOP_FILE, atomic_write_text
from .resume import FORMAT, CheckpointError, Mark, checkpoint_path, remove_stale, resume_plan, settings_fingerprint

if TYPE_CHECKING:
    from ..measure.telemetry import Telemetry
    from .engines.base import Engine, Group

log = logging.getLogger(__name__)


class CheckpointedStrategy(Protocol):
    """What a checkpointer saves and restores: a set-up strategy (:class:`suite.train.strategies.base.Strategy`)."""

    def peers(self) -> Group: ...

    def checkpoint(self) -> dict[str, Any]: ...

    def restore(self, load: Callable[[int], dict[str, Any]]) -> None: ...


STOPPED_EXIT_CODE = 75  # EX_TEMPFAIL: stopped on request after a checkpoint; run it again to continue
KEEP = 2  # checkpoints each rank keeps
STOP_POLL_S = 2.0
_STATE_KEYS = ("done", "strategy", "telemetry", "checkpointer")


class StopRequested(Exception):
    """This rank checkpointed because the run was asked to stop (``checkpoints/STOP``)."""


def _state_problem(state: dict[str, Any]) -> str | None:
    """Why a checkpoint's state lacks what resuming reads before the strategy's own part (the step, the clocks, the
    segments), naming the field; None where it has it."""

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0

    strategy, telemetry, mine = state["strategy"], state["telemetry"], state["checkpointer"]
    if not isinstance(state["done"], bool):
        return f"done: expected true or false, got {shown(state['done'])}"
    if not isinstance(strategy, dict) or not isinstance(strategy.get("steps"), int) or isinstance(strategy["steps"], bool):
        return "strategy.steps: expected a whole number of steps"
    if strategy["steps"] < 0:
        return f"strategy.steps: must not be negative, got {strategy['steps']}"
    if not isinstance(telemetry, dict) or not number(telemetry.get("clock_s")):
        return "telemetry.clock_s: expected a finite number of seconds, not negative"
    if not isinstance(mine, dict) or not number(mine.get("last_clock")):
        return "checkpointer.last_clock: expected a finite number of seconds, not negative"
    segments = mine.get("segments")
    if not isinstance(segments, list) or not all(isinstance(s, dict) for s in segments) or len(segments) > 10_000:
        return "checkpointer.segments: expected a list of the run's segments"
    return None


def footprint(run: Run) -> tuple[int, int]:
    """About how many bytes (one checkpoint of ``run`` over all its ranks, its finished files) it writes.

    A checkpoint holds each GAN's weights and Adam's two moments once, every rank's BatchNorm
    statistics, and the snapshots; the finished files are the generators of the model (label-partitioned:
    one per class, also handed over once through the run folder), the record, log and sample grid (1 MB
    together); a strategy with a ``footprint`` trait sizes its own from the networks' bytes (cellular: a mixture
    and the best cell).
    """
    from ..gan.data import CHANNELS
    from ..gan.models import build_pair

    strategy = STRATEGIES[run.strategy]
    # where only the dataset's files tell its classes (ImageNet's folders), a room estimate takes ImageNet's 1,000
    classes = run.dataset.class_count or 1000
    g, d = build_pair(
        run.dataset.image_size,
        CHANNELS[run.dataset.name],
        run.model.latent_dim,
        num_classes=classes if strategy.conditional else 0,
        critic_norm=run.critic_norm,
        architecture=run.model.architecture,
    )
    weights = sum(t.numel() for net in (g, d) for t in net.state_dict().values())
    sizes = ModelBytes(
        gan=4 * (weights + 2 * sum(p.numel() for net in (g, d) for p in net.parameters())),  # + Adam's two moments
        generator=4 * sum(t.numel() for t in g.state_dict().values()),
        buffers=4 * sum(b.numel() for net in (g, d) for b in net.buffers()),
        snapshots=run.metrics.curve_points + 1,
        classes=classes,
    )
    if strategy.footprint is not None:  # a system of its own (cellular: a grid of cells)
        return strategy.footprint(run, sizes)
    gans = classes if strategy.partitions_classes else 1
    outputs = gans * sizes.generator * (2 if strategy.partitions_classes else 1) + 2**20  # handed over once, then saved
    # a strategy whose ranks keep models of their own between synchronisations keeps one per rank
    models = run.procs if strategy.replicas_differ else gans
    return models * sizes.gan + gans * sizes.snapshots * sizes.generator + run.procs * sizes.buffers, outputs


class Checkpointer:
    """This rank's checkpoints: saved at the strategy's step boundaries, restored after set-up.

    The worker creates it after the engine starts, sets it on the strategy before set-up and
    :meth:`attach` es the set-up strategy; the strategy calls :meth:`at_boundary` between window steps.
    """

    def __init__(self, run: Run, run_dir: Path, engine: Engine, telemetry: Telemetry):
        assert run.train.checkpoint_every is not None, "a run without train.checkpoint_every has no checkpointer"
        self.run, self.engine, self.telemetry = run, engine, telemetry
        self.every: CheckpointEvery = run.train.checkpoint_every
        self.run_dir, self.folder = Path(run_dir), Path(run_dir) / CHECKPOINT_DIR
        self.rank, self.fingerprint = engine.rank, settings_fingerprint(run)
        self.index = 0  # of the last checkpoint written or resumed from
        self.written = 0
        self.last_clock = 0.0  # window clock of the last checkpoint
        self.segments = [{"from_step": 0, "from_train_s": 0.0}]  # the launches that trained this model
        self.resumed_from: dict | None = None
        self.skipped: list[str] = []  # newer checkpoints passed over when resuming (damaged)
        self._attached: tuple[CheckpointedStrategy, Group] | None = None
        self._next_poll = 0.0

    def attach(self, strategy: CheckpointedStrategy) -> None:
        """The set-up strategy whose state is saved; its peers are the group that checkpoints together."""
        self._attached = strategy, strategy.peers()

    @property
    def strategy(self) -> CheckpointedStrategy:
        """The attached strategy."""
        assert self._attached is not None, "attach() the strategy first"
        return self._attached[0]

    @property
    def group(self) -> Group:
        """The ranks that checkpoint and resume together (the strategy's peers)."""
        assert self._attached is not None, "attach() the strategy first"
        return self._attached[1]

    # --- resuming ---------------------------------------------------------------------------------
    def restore(self) -> dict | None:
        """Bring this rank back to the run's latest checkpoint (collective, after set-up).

        Returns what it resumed from (index, step, training seconds), or None for a fresh start.
        """
        plan = None
        if self.engine.rank == 0:  # one rank plans and tidies; no rank writes before the barrier after set-up
            resume = resume_plan(self.run_dir, self.run)  # a malformed description fails this rank: one line
            remove_stale(self.run_dir, resume.ranks)
            for line in resume.skipped:
                log.warning("%s: skipped %s", self.run.run_id, line)
            plan = resume.ranks, resume.skipped
        ranks, self.skipped = self.engine.allgather_object(plan)[0]
        index = ranks[self.rank]
        if index is None:
            return None
        loaded: dict[int, dict] = {}

        def load(rank: int) -> dict:
            if rank not in loaded:
                loaded[rank] = self._load(checkpoint_path(self.folder, ranks[rank], rank, "pt"))
            return loaded[rank]

        mine = load(self.rank)
        path = checkpoint_path(self.folder, index, self.rank, "pt")
        try:  # a state of other networks or another layout (its description and sha256 may be forged too): one line
            self.strategy.restore(lambda rank: load(rank)["strategy"])
            self.telemetry.load_state_dict(mine["telemetry"])
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError, AttributeError) as error:
            if isinstance(error, CheckpointError):
                raise
            first = (" ".join(str(error).split()) or type(error).__name__)[:200]
            raise CheckpointError(
                f"{path}: resuming from it failed ({type(error).__name__}: {first}); if it is not this run's training "
                f"state, delete {self.folder} to start the run again from step 0"
            ) from None
        steps, clock = mine["strategy"]["steps"], mine["telemetry"]["clock_s"]
        self.index, self.last_clock = index, mine["checkpointer"]["last_clock"]
        self.segments = mine["checkpointer"]["segments"] + [{"from_step": steps, "from_train_s": clock}]
        self.resumed_from = {"index": index, "step": steps, "train_s": clock, "done": mine["done"]}
        if self.rank == 0:
            log.info("%s: resumed from checkpoint %d (step %d, %.0f s of training)", self.run.run_id, index, steps, clock)
        return self.resumed_from

    def _load(self, path: Path) -> dict:
        """A checkpoint's state: tensors, plain data and the engine's own classes only (see the module)."""
        state = load_tensors(
            path,
            "checkpoint",
            allowed=self.engine.checkpoint_types(),
            hint=f"delete {self.folder} to start the run again from step 0",
        )
        if not isinstance(state, dict) or not all(key in state for key in _STATE_KEYS):
            raise CheckpointError(f"{path}: not a checkpoint of this suite (it lacks {', '.join(_STATE_KEYS)})")
        if (problem := _state_problem(state)) is not None:
            raise CheckpointError(f"{path}: not a checkpoint of this suite ({problem}); delete {self.folder} to start again")
        return state

    # --- saving -----------------------------------------------------------------------------------
    def at_boundary(self, steps: int) -> None:
        """Between two window steps (``steps`` made by the GAN being trained): save when due; stop after
        saving when the run was asked to stop (raises :class:`StopRequested`)."""
        due = self.every.steps is not None and steps % self.every.steps == 0
        late = self.every.minutes is not None and self.telemetry.clock() - self.last_clock >= 60 * self.every.minutes
        stop = self._stop_requested()
        if self.group.size > 1:  # every rank of the group decides alike
            late, stop = self.engine.any_rank([late, stop], self.group)
        if due or late or stop:
            self.save()
        if stop:
            raise StopRequested(f"stopped on request after checkpoint {self.index} (step {steps})")

    def _stop_requested(self) -> bool:
        """The group's first rank looks for the stop request now and then; its group hears it in the vote."""
        now = time.monotonic()
        if self.group.rank != 0 or now < self._next_poll:
            return False
        self._next_poll = now + STOP_POLL_S
        return (self.folder / STOP_FILE).exists()

    def save(self, done: bool = False) -> None:
        """Write this rank's next checkpoint (the window's clock stops meanwhile)."""
        with self.telemetry.checkpointing():
            strategy = self.strategy.checkpoint()
            finite = all_finite(strategy)  # a diverged state is never saved: the last checkpoint stays the last finite one
            if self.group.size > 1:
                finite = not self.engine.any_rank([not finite], self.group)[0]
            if not finite:
                log.warning("%s: not saving checkpoint %d: the training state is not finite", self.run.run_id, self.index + 1)
                return
            self.index += 1
            telemetry = self.telemetry.state_dict()
            clock = telemetry["clock_s"]
            state = {
                "format": FORMAT,
                "fingerprint": self.fingerprint,
                "rank": self.rank,
                "index": self.index,
                "done": done,
                "strategy": strategy,
                "telemetry": telemetry,
                "checkpointer": {"last_clock": clock, "segments": self.segments},
            }
            written = save_tensors(state, checkpoint_path(self.folder, self.index, self.rank, "pt"))
            mark = Mark(
                index=self.index,
                rank=self.rank,
                group=list(self.group.ranks),
                steps=strategy["steps"],
                clock_s=clock,
                done=done,
                fingerprint=self.fingerprint,
                bytes=written.bytes,
                sha256=written.sha256,
                format=FORMAT,
                time=time.time(),
            )
            atomic_write_text(checkpoint_path(self.folder, self.index, self.rank, "json"), json.dumps(dataclasses.asdict(mark)))
            if self.group.size > 1 and not done:
                self.engine.any_rank([True], self.group)  # the whole group wrote this one before any rank goes on
            old = self.index - KEEP
            if old > 0:  # the description first: a checkpoint half removed never looks complete
                remove_entry(checkpoint_path(self.folder, old, self.rank, "json"))
                remove_entry(checkpoint_path(self.folder, old, self.rank, "pt"))
        self.last_clock = clock
        self.written += 1

    def finish(self) -> None:
        """This rank's training is over: a last checkpoint, so finalize and scoring can be resumed."""
        if not (self.resumed_from and self.resumed_from["done"]):
            self.save(done=True)
        write_status(self.run_dir, self.rank, "trained")

    def clear(self) -> None:
        """Remove the run's checkpoints (rank 0, once its record is written)."""
        remove_tree(self.folder)

    def part(self, checkpoint_s: float) -> CheckpointInfo:
        """The record's part: the schedule, time spent saving (the slowest rank's ``checkpoint_s``), where this segment
        started, the segments."""
        return CheckpointInfo(
            checkpoint_every={k: v for k, v in vars(self.every).items() if v is not None},
            checkpoint_s=checkpoint_s,
            checkpoints_written=self.written,
            resumed_from=self.resumed_from,
            checkpoints_skipped=self.skipped or None,
            segments=self.segments,
        )
