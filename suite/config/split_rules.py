"""The rules of a run entry's system at each of its process counts, run by validation: the global batch splits over
the ranks that share it, label-partitioned ranks map onto classes, and an images budget leaves a timed step."""

from __future__ import annotations

from .plan import SystemSize, TrainingError, budget_steps, class_plan, local_batch
from .registry import LOSSES, STRATEGIES
from .scenario import Fail, RunSpec, Scenario, critic_steps, default_loss, entry_section, run_train


def check_batch_split(spec: RunSpec, path: str, scaling: str, scenario: Scenario, fail: Fail) -> None:
    """The global batch must split over the ranks that share it; label-partitioned ranks must map onto classes.

    The rules are the runtime's own (:func:`suite.config.plan.local_batch`,
    :func:`suite.config.plan.class_plan`); their errors are re-raised under the entry's field.
    """
    batch = run_train(scenario, spec, f"{path}.train").batch_size
    if STRATEGIES[spec.strategy].data_parallel and scaling == "strong":
        for p in spec.procs:
            try:
                local_batch(batch, p)
            except TrainingError as error:
                fail(f"{path}.procs", f"{error}; use process counts that divide it, or weak scaling")
    classes = scenario.dataset.class_labels  # the dataset's own classes where dataset.classes is not given
    if STRATEGIES[spec.strategy].partitions_classes and classes:
        selected = "selected" if scenario.dataset.classes else f"in {scenario.dataset.name}"
        for p in spec.procs:
            if scaling == "weak" and p > len(classes):
                fail(
                    f"{path}.procs",
                    f"weak scaling trains one class per rank, but only {len(classes)} classes are {selected} ({p} processes)",
                )
            try:
                for ranks, _ in class_plan(classes, p):
                    local_batch(batch, len(ranks))
            except TrainingError as error:  # the class plan names its field (procs); the batch split does not
                fail(
                    f"{path}.procs",
                    f"{p} processes for {len(classes)} classes: {error.reason}"
                    if error.field
                    else f"{error} (each class group at {p} processes)",
                )


def system_size(spec: RunSpec, procs: int, grid: list[int] | None, scaling: str, scenario: Scenario) -> SystemSize:
    """What the settings say about one step of an entry's system at ``procs`` processes (see :class:`SystemSize`)."""
    train, dataset = run_train(scenario, spec, "train"), scenario.dataset
    classes = dataset.class_count
    if scaling == "weak" and classes is not None:  # weak label-partitioned runs train one class per rank
        classes = min(classes, procs)
    loss = spec.loss or default_loss(spec.strategy)
    settings = LOSSES[loss].settings
    own = entry_section(scenario, spec, settings, settings) if settings else None  # the entry's over the scenario's
    strategy = STRATEGIES[spec.strategy]
    step = {}  # what the strategy's own section says of its step (its step_settings trait)
    if strategy.step_settings is not None and strategy.settings is not None:
        step = strategy.step_settings(entry_section(scenario, spec, strategy.settings, strategy.settings))
    return SystemSize(
        batch_size=train.batch_size,
        procs=procs,
        weak=scaling == "weak",
        critic_steps=critic_steps(loss, own),
        classes=classes,
        cells=grid[0] * grid[1] if grid else None,
        **step,
    )


def check_images_budget(spec: RunSpec, path: str, scaling: str, scenario: Scenario, fail: Fail) -> None:
    """An entry's ``train.budget_images``: a system that can honour it, and at least one step of it after the warm-up
    steps (``train.warmup_steps``) at every process count, so that every run has a timed step.

    Where only the data tells the size of a step (a cellular full pass, ImageNet's classes) the
    strategy checks it when it sets up, before training.
    """
    train = run_train(scenario, spec, f"{path}.train")
    budget = train.budget_images
    if budget is None:
        return
    where = f"{path}.train.budget_images" if "budget_images" in (spec.train or {}) else "train.budget_images"
    if scaling == "weak":  # a weak sweep holds each rank's work fixed; an images budget is the whole system's
        fail(
            where,
            f"an images budget is the whole system's work, so it cannot hold a weak sweep's work per rank ({path} is weak); give train.budget_s or epochs instead",
        )
    rule = STRATEGIES[spec.strategy].step_images
    if rule is None:
        fail(where, f"{spec.strategy} ({path}) cannot stop at an images budget; give it train.budget_s or epochs instead")
    grids = spec.grids if scaling == "weak" and spec.grids else [spec.grid] * len(spec.procs)
    for procs, grid in zip(spec.procs, grids):
        step = rule(system_size(spec, procs, grid, scaling, scenario))
        if step is None:
            continue
        try:
            budget_steps(budget, step, f"{spec.strategy} at P = {procs} ({path})", train.warmup_steps)
        except TrainingError as error:
            fail(where, error.reason)
