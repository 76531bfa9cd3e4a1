"""``label_partitioned``: one GAN per class, trained concurrently (papers 000 and 002).

With C classes on P ranks: P <= C, each rank trains its contiguous share of the classes with no
communication (``train.class_schedule``: interleaved or sequential, the same generators either way);
P > C (a multiple of C), each group of P/C ranks trains its class data-parallel in its own
communicator. docs/strategies.md gives the budgets' split over the class GANs.

After training, the first rank of each group but rank 0's writes its class generators into the run folder and
rank 0 assembles the model from its own and those files (each checked against its writer's sha256): with a thousand
classes they weigh gigabytes, which a collective would copy to every rank. The run folder must
therefore be on a file system all ranks share.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ...config.plan import SystemSize, TrainingError, class_plan
from ...gan.sampling import PER_CLASS
from ...gan.tensorfiles import load_tensors, save_tensors
from ...records.nofollow import remove_tree
from ...records.record import FileDigest
from ...train.flat import cpu_state
from ...train.gan_plan import GanPlan, TrainerHooks, run_critic_steps
from ...train.strategies.base import Outcome, Strategy, images_budget, make_bundle, parameter_digest
from ...train.training import GanTrainer
from .record import GroupPart, LabelPartitionedFields

if TYPE_CHECKING:
    from ...config.scenario import Run
    from ...gan.data import ImageData
    from ...gan.divergence import Divergence
    from ...train.engines.base import Group


def _load_classes(scratch: Path, classes: list[int], written: dict[int, FileDigest]) -> list[dict]:
    """The class generators the groups' first ranks wrote, each checked against the digest its writer sent."""
    missing = [c for c in classes if not (scratch / f"class{c}.pt").is_file()]
    if missing:
        raise TrainingError(
            f"the generators of classes {missing} were not found in {scratch}: the run folder must be on a "
            "file system that every rank (every node) can write, e.g. the cluster's shared project space"
        )
    return [load_tensors(scratch / f"class{c}.pt", "class generator", written[c]) for c in classes]


def _class_entry(label: int, trainer: GanTrainer) -> dict:
    """What a class GAN hands to rank 0 once trained: its generator, counts, history, EMA generator and snapshots."""
    r = trainer.result
    return {
        "label": label,
        "state": cpu_state(r.generator),
        "steps": r.steps,
        "images": r.images,
        "warmup_images": r.warmup_images,
        "history": r.history,
        "ema": cpu_state(trainer.ema.state) if trainer.ema is not None else None,
        "snapshots": [{**snap, "state": cpu_state(snap["state"])} for snap in r.snapshots],
    }


class LabelPartitioned(Strategy):
    """Every rank builds the GANs of its classes, warms each up, then trains them round-robin (or one by one)."""

    def setup(self) -> None:
        run, engine = self.run, self.engine
        self.plan = class_plan(self.data.classes, engine.size)
        self.group = engine.split([ranks for ranks, _ in self.plan])
        self.interleaved = run.train.class_schedule == "interleaved"
        size = SystemSize(
            run.train.batch_size, engine.size, run.scaling == "weak", run_critic_steps(run), classes=len(self.data.classes)
        )
        self.budget = images_budget(run, size)
        if self.events is not None:
            self.events.count_steps(size)
        labels = self.plan[self.group.index][1]
        self.trainers = [
            GanTrainer(
                run,
                engine,
                GanPlan(
                    f"class{label}",
                    self.data.of_class(label),
                    self.group,
                    run.train.batch_size,
                    max_steps=self.budget.steps if self.budget is not None else None,
                    snapshot_points=run.metrics.curve_points,
                    snapshot_steps=tuple(self.budget.snapshot_steps) if self.budget is not None else None,
                ),
                self.telemetry,
                TrainerHooks(
                    # interleaved GANs are checkpointed together, between rounds
                    checkpointer=None if self.interleaved else self.checkpointer,
                    events=self.events,
                    # the rank's step times once a step of the system: from the GAN that ends each round (interleaved)
                    # and trains last (sequential), so that they include its rank's other GANs
                    rank_times=label == labels[-1],
                ),
            )
            for label in labels
        ]
        self.window_opened = False

    def warm_up(self) -> None:
        for trainer in self.trainers:
            if self.halted():  # a diverged GAN stops its rank's others too: the run is diverged
                return
            trainer.warm_up(self.run.train.warmup_steps)

    def train(self) -> None:
        if self.interleaved:
            self._train_interleaved()
            return
        if not self.window_opened:  # what each class's generator is while the others train first
            for trainer in self.trainers:
                trainer.take_snapshot()
            self.window_opened = True
        for i, trainer in enumerate(self.trainers):  # with a time budget, each of this rank's GANs gets an equal share
            if self.halted():
                return
            trainer.train(deadline=self.deadline((i + 1) / len(self.trainers)))

    def _train_interleaved(self) -> None:
        """Rounds of one window step of each unfinished GAN; checkpoints fall between rounds."""
        self.window_opened = True
        for trainer in self.trainers:
            trainer.open_window(self.deadline())
        while True:
            training = False
            for trainer in self.trainers:
                over = trainer.advance()
                if self.halted():  # a diverged GAN stops its rank's others too: the run is diverged
                    return
                training = training or not over
            if not training:
                return
            if self.checkpointer is not None:
                self.checkpointer.at_boundary(max(t.result.steps for t in self.trainers))

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
        # The first rank of each group other than rank 0's writes its classes' generators; rank 0 keeps its own and
        # reads the others, each checked against the digest its writer sends with the agreement that all are written.
        leader = self.group.rank == 0
        own = {label: _class_entry(label, t) for label, t in zip(plan[self.group.index][1], self.trainers)} if leader else {}
        mine: dict[int, FileDigest] = {}
        if leader and engine.rank != 0:
            mine = {label: save_tensors(entry, scratch / f"class{label}.pt") for label, entry in own.items()}
        written = {label: digest for files in engine.allgather_object(mine) for label, digest in files.items()}
        fields = LabelPartitionedFields(
            classes=[int(c) for c in data.classes],
            groups=[GroupPart(ranks=ranks, classes=classes, digests=[digests[r] for r in ranks]) for ranks, classes in plan],
            replicas_identical=all(len({digests[r] for r in ranks}) == 1 for ranks, _ in plan),
            global_batch=run.train.batch_size,
            class_schedule=run.train.class_schedule,
            budget_steps=self.budget.steps if self.budget is not None else None,
        )
        if engine.rank != 0:
            return Outcome(None, fields=asdict(fields))
        theirs = _load_classes(scratch, [c for c in data.classes if c not in own], written)
        remove_tree(scratch)  # the bundle below holds them all
        by_label = {e["label"]: e for e in [*own.values(), *theirs]}
        per_class = [by_label[c] for c in data.classes]
        keys = {f"class{e['label']}": e["label"] for e in per_class}
        bundle = make_bundle(run, data, PER_CLASS, {f"class{e['label']}": e["state"] for e in per_class}, classes=keys)
        fields.generator_steps = {str(e["label"]): e["steps"] for e in per_class}
        fields.history = {str(e["label"]): e["history"] for e in per_class}
        fields.images_consumed = sum(e["images"] for e in per_class)
        fields.warmup_images_consumed = sum(e["warmup_images"] for e in per_class)
        fields.steps_per_gan, fields.generator_only_steps = min(e["steps"] for e in per_class), 0
        ema = None
        if all(e.get("ema") is not None for e in per_class):  # the EMA generator: every class's averaged generator
            ema = make_bundle(run, data, PER_CLASS, dict(zip(keys, (e["ema"] for e in per_class))), classes=keys)
        return Outcome(bundle, _curve(run, data, per_class, keys), asdict(fields), ema=ema)


def _curve(run: Run, data: ImageData, per_class: list[dict], keys: dict[str, int]) -> list:
    """The model as it was at the times the class GANs' snapshots were taken.

    At each time, every class contributes its latest snapshot taken by then: interleaved class GANs
    took their i-th snapshots in the same round, so every class is trained as far as the others;
    on a rank that trains its classes one after another, the later classes are still as the window
    found them. Under an images budget every class contributes its i-th snapshot, taken at the i-th
    equal fraction of the budget (at the time the last of them was taken).
    """
    curve = []
    at_steps = [[s for s in e["snapshots"] if s["scheduled"]] for e in per_class]  # the evenly spaced ones
    for i in range(min(len(snaps) for snaps in at_steps)):
        clock = max(snaps[i]["clock_s"] for snaps in at_steps)
        if run.train.budget_images is not None:
            latest = [snaps[i] for snaps in at_steps]
        else:
            latest = [
                max((s for s in e["snapshots"] if s["clock_s"] <= clock), key=lambda s: (s["clock_s"], s["step"]))
                for e in per_class
            ]
        states = {f"class{e['label']}": snap["state"] for e, snap in zip(per_class, latest)}
        steps, images = sum(snap["step"] for snap in latest), sum(snap["images"] for snap in latest)
        curve.append((clock, steps, images, make_bundle(run, data, PER_CLASS, states, classes=keys)))
    return curve
