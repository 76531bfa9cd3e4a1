"""How far one GAN's training has come: its place in the data, its warm-up steps and its training window's schedule
(:class:`Position`), and the losses summed since the last progress point (:class:`LossSums`).

The trainer (:mod:`.training`) moves them on step by step; their states are the ``position``, ``loss_sums`` and
``loss_steps`` of the trainer's checkpoint, beside the step and image counts of the GAN's :class:`.gan_plan.GanResult`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .gan_plan import GanResult, evenly_spaced_steps

PROGRESS_POINTS = 10


@dataclass
class Position:
    """A GAN's place in the data and in its training window (a resumed GAN keeps the window's schedule it had).

    ``snapshot_points`` snapshots fall in the window: on ``fixed_steps`` where the plan names them, else on evenly spaced
    steps, or evenly spaced times up to a budget's deadline."""

    snapshot_points: int = 0
    fixed_steps: set[int] | None = None
    epoch: int = 0  # the next batch's epoch
    batch: int = 0  # and its place in that epoch
    warmup_steps: int = 0
    first_step: int | None = None  # the step at which this GAN's window opened
    clock0: float = 0.0  # the window clock then
    deadline: float | None = None  # window-clock seconds at which a budgeted GAN stops
    times: dict[str, list[float]] = field(default_factory=dict)  # budgeted: window-clock times of snapshots and progress lines
    finished: bool = False  # train() is over for this GAN
    snapshot_steps: set[int] = field(default_factory=set)
    progress_steps: set[int] = field(default_factory=set)

    def open(self, steps: int, clock: Callable[[], float], deadline: float | None, max_steps: int) -> None:
        """The window opens at ``steps`` (where it had not opened before, at ``clock()``): its step or time schedule of
        snapshots and progress lines."""
        self.deadline = deadline
        if self.first_step is None:
            self.first_step, self.clock0 = steps, clock()
            if deadline is not None:
                start, span = self.clock0, deadline - self.clock0
                self.times = {
                    "snapshot": [start + span * (k + 1) / max(1, self.snapshot_points) for k in range(self.snapshot_points)],
                    "progress": [start + span * (k + 1) / PROGRESS_POINTS for k in range(PROGRESS_POINTS)],
                }
        first = self.first_step
        window_steps = max_steps - first
        self.snapshot_steps = self.fixed_steps or {first + k for k in evenly_spaced_steps(window_steps, self.snapshot_points)}
        self.progress_steps = {first + k for k in evenly_spaced_steps(window_steps, PROGRESS_POINTS)}

    def due(self, name: str, clock: float) -> bool:
        """Whether a budgeted GAN passed its next time for ``name`` (dropping every time passed)."""
        times = self.times[name]
        passed = bool(times) and clock >= times[0]
        while times and clock >= times[0]:
            times.pop(0)
        return passed

    def state_dict(self, result: GanResult) -> dict[str, Any]:
        """The checkpoint's ``position``: this and ``result``'s counts."""
        return {
            "epoch": self.epoch,
            "batch": self.batch,
            "steps": result.steps,
            "images": result.images,
            "warmup_images": result.warmup_images,
            "warmup_steps": self.warmup_steps,
            "window_first_step": self.first_step,
            "window_clock0": self.clock0,
            "times": copy.deepcopy(self.times),
            "finished": self.finished,
        }

    def load_state_dict(self, position: dict[str, Any], result: GanResult) -> None:
        """Continue from :meth:`state_dict`'s ``position``, ``result``'s counts with it."""
        self.epoch, self.batch = position["epoch"], position["batch"]
        result.steps, self.warmup_steps = position["steps"], position["warmup_steps"]
        result.images, result.warmup_images = position["images"], position["warmup_images"]
        self.first_step, self.clock0 = position["window_first_step"], position["window_clock0"]
        self.times, self.finished = copy.deepcopy(position["times"]), position["finished"]


class LossSums:
    """D's and G's losses summed on the device since the last progress point, and how many steps of each were summed."""

    def __init__(self, device: torch.device) -> None:
        self.sums = torch.zeros(2, device=device)
        self.steps = [0, 0]

    def counted(self, critic_steps: int) -> None:
        """One generator step and its ``critic_steps`` discriminator steps summed."""
        self.steps[0] += critic_steps
        self.steps[1] += 1

    def means(self) -> tuple[float, float]:
        """D's and G's mean losses since the last call (a read of the device), the sums then started afresh."""
        d_sum, g_sum = self.sums.tolist()
        means = d_sum / max(1, self.steps[0]), g_sum / max(1, self.steps[1])
        self.sums.zero_()
        self.steps = [0, 0]
        return means

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint's ``loss_sums`` (a CPU tensor) and ``loss_steps``."""
        return {"loss_sums": self.sums.cpu().clone(), "loss_steps": list(self.steps)}

    def load_state_dict(self, state: dict[str, Any], device: torch.device) -> None:
        """Continue from :meth:`state_dict`'s part of ``state``."""
        self.sums = state["loss_sums"].to(device)
        self.steps = list(state["loss_steps"])
