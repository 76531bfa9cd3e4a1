"""``label_partitioned``: one GAN per class, trained concurrently (seeds 000 and 002).

With C classes on P ranks:

* P <= C: each rank owns a contiguous, balanced share of the classes (sizes differ by at most
  one) and trains one G/D pair per owned class, one after the other (after warming each up),
  with no communication.
* P > C (P a multiple of C): ranks form C groups of P/C consecutive ranks; each group trains
  its class's pair data-parallel inside its own communicator (Horovod process set, torch
  ``new_group`` or MPI ``Comm.Split``). Nothing crosses a class boundary while training.

Loss ``bce`` gives seed 000's distributed DC-CGAN (the DC-GAN networks per class), ``wgan-gp``
seed 002's W-CGAN. After training, the first rank of each group writes its class generators
into the run folder, all at once, and rank 0 assembles the model from those files (each checked
against the sha256 its writer sends, and read as tensors only): with a thousand classes the
generators weigh gigabytes, which a collective would copy to every rank.
The run folder must therefore be on a file system all ranks share (as results folders on
clusters are). The model is sampled by class prior, see :mod:`suite.gan.sampling`.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ...config.plan import TrainingError, class_plan
from ...gan.tensorfiles import load_tensors, save_tensors
from ...records.record import FileDigest, LabelPartitionedFields
from ..flat import cpu_state
from ..training import GanTrainer
from .base import Outcome, Strategy, make_bundle, parameter_digest

if TYPE_CHECKING:
    from ...config.scenario import Run
    from ...gan.data import ImageData
    from ...gan.divergence import Divergence
    from ..engines.base import Group


def _load_classes(scratch: Path, classes: list[int], written: dict[int, FileDigest]) -> list[dict]:
    """The class generators the groups' first ranks wrote, each checked against the digest its writer sent."""
    missing = [c for c in classes if not (scratch / f"class{c}.pt").is_file()]
    if missing:
        raise TrainingError(
            f"the generators of classes {missing} were not found in {scratch}: the run folder must be on a "
            "file system that every rank (every node) can write, e.g. the cluster's shared project space"
        )
    return [load_tensors(scratch / f"class{c}.pt", "class generator", written[c]) for c in classes]


class LabelPartitioned(Strategy):
    """Every rank builds the GANs of its classes, warms each up, then trains them one by one."""

    def setup(self) -> None:
        run, engine = self.run, self.engine
        self.plan = class_plan(self.data.classes, engine.size)
        self.group = engine.split([ranks for ranks, _ in self.plan])
        self.trainers = [
            GanTrainer(
                run,
                engine,
                self.group,
                self.data.of_class(label),
                f"class{label}",
                False,
                run.train.batch_size,
                self.telemetry,
                snapshot_points=run.metrics.curve_points,
                checkpointer=self.checkpointer,
            )
            for label in self.plan[self.group.index][1]
        ]
        self.window_opened = False

    def warm_up(self) -> None:
        for trainer in self.trainers:
            if self.halted():  # a diverged GAN stops its rank's others too: the run is diverged
                return
            trainer.warm_up(self.run.train.warmup_steps)

    def train(self) -> None:
        if not self.window_opened:  # what each class's generator is while the others train first
            for trainer in self.trainers:
                trainer.take_snapshot()
            self.window_opened = True
        budget = self.run.train.budget_s
        for i, trainer in enumerate(self.trainers):  # with a budget, each of this rank's GANs gets an equal share
            if self.halted():
                return
            trainer.train(deadline=None if budget is None else budget * (i + 1) / len(self.trainers))

    def divergence(self) -> Divergence | None:
        return next((t.diverged for t in self.trainers if t.diverged is not None), None)

    def halted(self) -> bool:
        return any(t.halted for t in self.trainers)

    def history_so_far(self) -> dict[str, list[dict]]:
        if self.group.rank != 0:
            return {}
        return {str(label): t.result.history for label, t in zip(self.plan[self.group.index][1], self.trainers)}

    def peers(self) -> Group:
        return self.group  # class groups train independently: each resumes on its own

    def checkpoint(self) -> dict:
        return {
            "steps": sum(t.result.steps for t in self.trainers),
            "window_opened": self.window_opened,
            "trainers": [t.state_dict() for t in self.trainers],
        }

    def restore(self, load: Callable[[int], dict[str, Any]]) -> None:
        mine, first = load(self.engine.rank), load(self.group.ranks[0])
        for trainer, state, leader in zip(self.trainers, mine["trainers"], first["trainers"]):
            trainer.load_state_dict(state, leader["shared"])
        self.window_opened = mine["window_opened"]

    def finalize(self) -> Outcome:
        run, engine, data, scratch, plan = self.run, self.engine, self.data, self.scratch, self.plan
        networks = [net for t in self.trainers for net in (t.generator.network, t.discriminator.network)]
        digests = engine.allgather_object(parameter_digest(*networks))  # after training: not counted
        # The first rank of each group writes its classes' generators; rank 0 reads them all, each
        # checked against the digest its writer sends with the agreement that all are written.
        mine: dict[int, FileDigest] = {}
        if self.group.rank == 0:
            for label, t in zip(plan[self.group.index][1], self.trainers):
                r = t.result
                mine[label] = save_tensors(
                    {
                        "label": label,
                        "state": cpu_state(r.generator),
                        "steps": r.steps,
                        "history": r.history,
                        "snapshots": [
                            (snap["clock_s"], snap["step"], cpu_state(snap["state"]), snap["scheduled"]) for snap in r.snapshots
                        ],
                    },
                    scratch / f"class{label}.pt",
                )
        written = {label: digest for files in engine.allgather_object(mine) for label, digest in files.items()}
        fields = LabelPartitionedFields(
            classes=[int(c) for c in data.classes],
            groups=[{"ranks": ranks, "classes": classes, "digests": [digests[r] for r in ranks]} for ranks, classes in plan],
            replicas_identical=all(len({digests[r] for r in ranks}) == 1 for ranks, _ in plan),
            global_batch=run.train.batch_size,
        )
        if engine.rank != 0:
            return Outcome(None, fields=asdict(fields))
        per_class = _load_classes(scratch, data.classes, written)
        shutil.rmtree(scratch)  # the bundle below holds them all
        keys = {f"class{e['label']}": e["label"] for e in per_class}
        bundle = make_bundle(run, data, "per_class", {f"class{e['label']}": e["state"] for e in per_class}, classes=keys)
        fields.generator_steps = {str(e["label"]): e["steps"] for e in per_class}
        fields.history = {str(e["label"]): e["history"] for e in per_class}
        return Outcome(bundle, _curve(run, data, per_class, keys), asdict(fields))


def _curve(run: Run, data: ImageData, per_class: list[dict], keys: dict[str, int]) -> list:
    """The model as it was at the times the class GANs' snapshots were taken.

    At each time, every class contributes its latest snapshot taken by then: on a rank that
    trains its classes one after another, the later classes are still as the window found them.
    """
    curve = []
    at_steps = [[s for s in e["snapshots"] if s[3]] for e in per_class]  # the evenly spaced ones
    for i in range(min(len(snaps) for snaps in at_steps)):
        clock = max(snaps[i][0] for snaps in at_steps)
        latest = [max((s for s in e["snapshots"] if s[0] <= clock), key=lambda s: (s[0], s[1])) for e in per_class]
        states = {f"class{e['label']}": snap[2] for e, snap in zip(per_class, latest)}
        steps = sum(snap[1] for snap in latest)
        curve.append((clock, steps, make_bundle(run, data, "per_class", states, classes=keys)))
    return curve
