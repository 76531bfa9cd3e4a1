"""Checkpoints inside a run: every rank's training state on a schedule, and the way back to it.

With ``train.checkpoint_every: {steps: N}`` or ``{minutes: M}`` every rank saves its training
state in ``RUN_DIR/checkpoints/``, and ``suite run --resume`` (or a worker started again by
hand) continues an unfinished run from the latest one. Every random draw of training is named
by the seed and the step (see :mod:`suite.gan.seeding`), so a resumed run makes the same steps as an
uninterrupted one and ends with the same generator (bitwise on a CPU).

Files of the k-th checkpoint of rank N:

* ``<k>-rankN.pt``: the strategy's state (:meth:`suite.train.strategies.Strategy.checkpoint`): the
  networks with this rank's BatchNorm statistics, the optimizer states, the position in the
  data, the loss sums, history and snapshots; for cellular runs every cell's individuals with
  their Adam states and learning rates, mixture weights and scores. Then this rank's telemetry
  (:meth:`suite.measure.telemetry.Telemetry.state_dict`) and the run's segments so far.
* ``<k>-rankN.json``, written after the ``.pt``: index, rank, the ranks it trains with, steps,
  window clock, whether training was over, the settings' fingerprint. A checkpoint exists once
  its JSON does; both are written atomically.

Rules:

* Checkpoints fall between two steps of the training window. ``steps: N``: whenever the GAN
  being trained reaches a multiple of N generator steps (cellular: iterations; interleaved class
  GANs: between rounds, when the round reaches a multiple of N). ``minutes: M``:
  by the window's clock, agreed over the ranks that train together (as ``train.budget_s``).
  Set-up and warm-up are never checkpointed: a run that stops before its first checkpoint starts
  again from step 0. When a rank's training is over it saves once more (``done``), so a run that
  stops in finalize or scoring resumes there without training again.
* Saving stops the window's clock; its time is recorded as ``checkpoint_s``.
* A training state that is not finite (a run diverging, see :mod:`suite.gan.divergence`) is not
  saved: the run's last checkpoint is always its last finite one.
* The ranks of a data-parallel group hold the same weights: its first rank saves them, every
  rank saves its own BatchNorm statistics, loss sums and partitioned optimizer state (ZeRO).
* After writing, the ranks of a group agree (a one-integer collective), so none is more than one
  checkpoint ahead of another; each rank keeps its last two checkpoints.
* Resuming: the ranks of each group (a class group of ``label_partitioned``, else all ranks)
  continue from the latest checkpoint that all of them wrote for the same run settings; later
  files, files of other settings and temporaries of interrupted writes are removed. A resumed
  segment makes no warm-up steps. After an ``ok`` record the run's checkpoints are removed.
* Stopping on request: ``suite run``, when signalled, writes ``checkpoints/STOP``. The first rank
  of each group looks for it every 2 seconds; at the next step its group checkpoints and every
  rank exits with :data:`STOPPED_EXIT_CODE`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

import torch

from ..config.scenario import CheckpointEvery, Run
from ..gan.divergence import all_finite
from ..records.failures import write_status
from ..records.record import CheckpointInfo
from ..records.results import CHECKPOINT_DIR, STOP_FILE, atomic_write, atomic_write_text

if TYPE_CHECKING:
    from ..measure.telemetry import Telemetry
    from .engines.base import Engine, Group

log = logging.getLogger(__name__)


class Strategy(Protocol):
    """What a checkpointer saves and restores: a set-up strategy (:class:`suite.train.strategies.base.Strategy`)."""

    def peers(self) -> Group: ...

    def checkpoint(self) -> dict[str, Any]: ...

    def restore(self, load: Callable[[int], dict[str, Any]]) -> None: ...


STOPPED_EXIT_CODE = 75  # EX_TEMPFAIL: stopped on request after a checkpoint; run it again to continue
KEEP = 2  # checkpoints each rank keeps
STOP_POLL_S = 2.0
FORMAT = 1
_FILE = re.compile(r"(\d+)-rank(\d+)\.(pt|json)$")


class StopRequested(Exception):
    """This rank checkpointed because the run was asked to stop (``checkpoints/STOP``)."""


def fingerprint(run: Run) -> str:
    """A digest of the run's settings (placement aside): checkpoints resume only the settings that wrote them."""
    settings = {k: v for k, v in run.to_dict().items() if k not in ("sweep_ranks_per_node", "seed_order")}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _path(folder: Path, index: int, rank: int, suffix: str) -> Path:
    return folder / f"{index:06d}-rank{rank}.{suffix}"


def read_marks(run_dir: Path) -> dict[int, dict[int, dict]]:
    """The description (JSON) of every checkpoint in the run folder, by rank and index."""
    marks: dict[int, dict[int, dict]] = {}
    for path in (Path(run_dir) / CHECKPOINT_DIR).glob("*-rank*.json"):
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        marks.setdefault(meta["rank"], {})[meta["index"]] = meta
    return marks


def resume_plan(run_dir: Path, run: Run) -> dict[int, int | None]:
    """The checkpoint index every rank resumes from (None: from step 0).

    A group resumes from the latest index that all of its ranks wrote for these settings.
    """
    wanted = fingerprint(run)
    marks = {
        rank: {k: m for k, m in by_index.items() if m.get("fingerprint") == wanted}
        for rank, by_index in read_marks(run_dir).items()
    }
    plan: dict[int, int | None] = {}
    for rank in range(run.procs):
        mine = marks.get(rank)
        if not mine:
            plan[rank] = None
            continue
        common = set.intersection(*(set(marks.get(r, {})) for r in mine[max(mine)]["group"]))
        plan[rank] = max(common) if common else None
    return plan


def last_checkpoint(run_dir: Path, run: Run) -> dict | None:
    """The checkpoint a resumed run starts from, as its record names it (rank 0's), or None."""
    plan = resume_plan(run_dir, run)
    first = plan.get(0)
    if first is None:
        return None
    meta = read_marks(run_dir)[0][first]
    return {
        "index": meta["index"],
        "steps": meta["steps"],
        "train_s": meta["clock_s"],
        "done": meta["done"],
        "ranks": sum(index is not None for index in plan.values()),
        "path": str(_path(Path(run_dir) / CHECKPOINT_DIR, meta["index"], 0, "pt")),
    }


def describe(checkpoint: dict | None) -> str:
    """Where ``--resume`` continues: ``checkpoint 3 (step 40, 12 s of training)``."""
    if checkpoint is None:
        return "no checkpoint yet: --resume starts it again from step 0"
    when = "training over" if checkpoint["done"] else f"step {checkpoint['steps']}"
    return f"--resume continues from checkpoint {checkpoint['index']} ({when}, {checkpoint['train_s']:.0f} s of training)"


def remove_stale(run_dir: Path, plan: dict[int, int | None]) -> None:
    """Remove what no resume will read: checkpoints after a rank's planned one or of other settings,
    temporaries of interrupted writes, and a stop request (call only while no rank writes)."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        match = _FILE.match(path.name)
        if match:
            index, rank = int(match[1]), int(match[2])
            planned = plan.get(rank)
            keep = planned is not None and index <= planned
        else:
            keep = False  # ".<name>.<random>" temporaries, STOP
        if not keep:
            path.unlink(missing_ok=True)


def footprint(run: Run) -> tuple[int, int]:
    """About how many bytes (one checkpoint of ``run`` over all its ranks, its finished files) it writes.

    A checkpoint holds each GAN's weights and Adam's two moments once, every rank's BatchNorm
    statistics, and the snapshots; the finished files are the generators of the model (label-partitioned:
    one per class, also handed over once through the run folder; cellular: a mixture and the best
    cell), the record, log and sample grid (1 MB together).
    """
    from ..gan.data import CHANNELS
    from ..gan.models import build_pair

    classes = len(run.dataset.classes) if run.dataset.classes else {"cifar100": 100, "imagenet": 1000}.get(run.dataset.name, 10)
    g, d = build_pair(
        run.dataset.image_size,
        CHANNELS[run.dataset.name],
        run.model.latent_dim,
        num_classes=classes if run.strategy == "conditional" else 0,
        critic_norm=run.critic_norm,
    )
    weights = sum(t.numel() for net in (g, d) for t in net.state_dict().values())
    gan = 4 * (weights + 2 * sum(p.numel() for net in (g, d) for p in net.parameters()))  # + Adam's two moments
    generator = 4 * sum(t.numel() for t in g.state_dict().values())
    buffers = 4 * sum(b.numel() for net in (g, d) for b in net.buffers())
    points = run.metrics.curve_points + 1
    if run.grid is not None:  # cellular
        cells = run.grid[0] * run.grid[1]
        hood = 9 if run.cellular.neighbourhood == "moore" else 5
        return cells * (run.cellular.population * gan + points * generator), (hood + 1) * generator + 2**20
    gans = classes if run.strategy == "label_partitioned" else 1
    outputs = gans * generator * (2 if run.strategy == "label_partitioned" else 1) + 2**20
    return gans * (gan + points * generator) + run.procs * buffers, outputs


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
        self.rank, self.fingerprint = engine.rank, fingerprint(run)
        self.index = 0  # of the last checkpoint written or resumed from
        self.written = 0
        self.last_clock = 0.0  # window clock of the last checkpoint
        self.segments = [{"from_step": 0, "from_train_s": 0.0}]  # the launches that trained this model
        self.resumed_from: dict | None = None
        self._attached: tuple[Strategy, Group] | None = None
        self._next_poll = 0.0

    def attach(self, strategy: Strategy) -> None:
        """The set-up strategy whose state is saved; its peers are the group that checkpoints together."""
        self._attached = strategy, strategy.peers()

    @property
    def strategy(self) -> Strategy:
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
            plan = resume_plan(self.run_dir, self.run)
            remove_stale(self.run_dir, plan)
        plan = self.engine.allgather_object(plan)[0]
        index = plan[self.rank]
        if index is None:
            return None
        loaded: dict[int, dict] = {}

        def load(rank: int) -> dict:
            if rank not in loaded:
                loaded[rank] = torch.load(_path(self.folder, plan[rank], rank, "pt"), map_location="cpu", weights_only=False)
            return loaded[rank]

        mine = load(self.rank)
        self.strategy.restore(lambda rank: load(rank)["strategy"])
        self.telemetry.load_state_dict(mine["telemetry"])
        steps, clock = mine["strategy"]["steps"], mine["telemetry"]["clock_s"]
        self.index, self.last_clock = index, mine["checkpointer"]["last_clock"]
        self.segments = mine["checkpointer"]["segments"] + [{"from_step": steps, "from_train_s": clock}]
        self.resumed_from = {"index": index, "step": steps, "train_s": clock, "done": mine["done"]}
        if self.rank == 0:
            log.info("%s: resumed from checkpoint %d (step %d, %.0f s of training)", self.run.run_id, index, steps, clock)
        return self.resumed_from

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
            path = _path(self.folder, self.index, self.rank, "pt")
            with atomic_write(path) as tmp, open(tmp, "wb") as handle:
                torch.save(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
            meta = {
                "format": FORMAT,
                "index": self.index,
                "rank": self.rank,
                "group": self.group.ranks,
                "steps": strategy["steps"],
                "clock_s": clock,
                "done": done,
                "fingerprint": self.fingerprint,
                "time": time.time(),
                "bytes": path.stat().st_size,
            }
            atomic_write_text(_path(self.folder, self.index, self.rank, "json"), json.dumps(meta))
            if self.group.size > 1 and not done:
                self.engine.any_rank([True], self.group)  # the whole group wrote this one before any rank goes on
            old = self.index - KEEP
            if old > 0:  # the description first: a checkpoint half removed never looks complete
                _path(self.folder, old, self.rank, "json").unlink(missing_ok=True)
                _path(self.folder, old, self.rank, "pt").unlink(missing_ok=True)
        self.last_clock = clock
        self.written += 1

    def finish(self) -> None:
        """This rank's training is over: a last checkpoint, so finalize and scoring can be resumed."""
        if not (self.resumed_from and self.resumed_from["done"]):
            self.save(done=True)
        write_status(self.run_dir, self.rank, "trained")

    def clear(self) -> None:
        """Remove the run's checkpoints (rank 0, once its record is written)."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def fields(self, per_rank: list[dict]) -> dict[str, Any]:
        """Record fields: the schedule, time spent saving, where this segment started, the segments."""
        info = CheckpointInfo(
            checkpoint_every={k: v for k, v in vars(self.every).items() if v is not None},
            checkpoint_s=max(r["checkpoint_s"] for r in per_rank),
            checkpoints_written=self.written,
            resumed_from=self.resumed_from,
            segments=self.segments,
        )
        return dataclasses.asdict(info)
