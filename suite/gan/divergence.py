"""Divergence: when training stops being a measurement of anything, and how a run notices.

A run diverges when, on any rank, a loss is not finite or exceeds :func:`loss_bound`, or a network's
parameter norm is not finite or exceeds :data:`PARAMETER_NORM_BOUND` (a non-finite gradient shows up
one step later, through Adam, as both). The trainer keeps each step's losses on the device
(:class:`LossWatch`) and reads them only at check points (every :data:`CHECK_EVERY` generator steps,
deferred by one on a GPU), so no step makes the device synchronise; the ranks that train one model
vote there and stop after the same step. The run is recorded as ``diverged`` with its first
divergence and scores nothing (docs/results.md, "Diverged runs").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

import torch

from ..config.entries import LossEntry
from ..config.registry import LOSSES

CHECK_EVERY = 10
"""Generator steps between two divergence checks of a trainer (its progress points check too)."""
LOSS_BOUND = LossEntry.loss_bound
"""Largest loss magnitude of the bounded-score losses (bce, minimax, heuristic, mse): the default of a loss's
``loss_bound`` trait (:class:`suite.config.entries.LossEntry`); ``wgan-gp``'s is 1e6 (Wasserstein scores are
unbounded)."""
PARAMETER_NORM_BOUND = 1e5
"""Largest L2 norm of all parameters of one network (G or D)."""


def loss_bound(loss: str) -> float:
    """The loss magnitude beyond which a run with loss ``loss`` has diverged."""
    return LOSSES[loss].loss_bound


@dataclass
class Divergence:
    """The first value one rank saw out of bounds: at which step, of what, how large."""

    step: int
    """Generator step (cellular: iteration) after which the value was seen."""
    rank: int
    """World rank that saw it."""
    quantity: str
    """``discriminator loss``, ``generator loss``, ``generator parameter norm``, ..."""
    value: float
    bound: float
    where: str | None = None
    """The GAN (``class3``) or cell (``cell 0,1``) where a run trains several; None for one GAN."""
    unit: str = "step"

    def line(self) -> str:
        """``diverged at step 12 on rank 0: discriminator loss inf``."""
        what = f"{self.where} {self.quantity}" if self.where else self.quantity
        value = f"{self.value:.3g}" + (f" beyond the bound {self.bound:g}" if math.isfinite(self.value) else "")
        return f"diverged at {self.unit} {self.step} on rank {self.rank}: {what} {value}"

    def as_dict(self) -> dict[str, Any]:
        """The record's ``diverged`` field (a non-finite value is written as null; ``reason`` names it)."""
        return asdict(self)


def out_of_bounds(value: float, bound: float) -> bool:
    """Whether ``value`` is not finite or its magnitude exceeds ``bound``."""
    return not math.isfinite(value) or abs(value) > bound


def first_divergence(verdicts: Iterable[Divergence | None]) -> Divergence | None:
    """The earliest divergence of those the ranks saw (lowest step, then lowest rank), or None."""
    seen = [v for v in verdicts if v is not None]
    return min(seen, key=lambda v: (v.step, v.rank)) if seen else None


def check_values(values: Mapping[str, Sequence[float]], bound: float, **where: Any) -> Divergence | None:
    """The first of ``values`` (quantity -> numbers) out of bounds, as a :class:`Divergence` with ``where``'s fields."""
    for quantity, numbers in values.items():
        for value in numbers:
            if out_of_bounds(value, bound):
                return Divergence(quantity=quantity, value=float(value), bound=bound, **where)
    return None


def parameter_norm(module: torch.nn.Module) -> torch.Tensor:
    """L2 norm of all of ``module``'s parameters, on their device (no read)."""
    norms = [torch.linalg.vector_norm(p.detach()) for p in module.parameters()]
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros(())


def all_finite(state: Any) -> bool:
    """Whether every floating-point tensor in a nested state (dicts, lists, tuples) is finite (other values are not looked at)."""
    if isinstance(state, torch.Tensor):
        return not state.is_floating_point() or bool(torch.isfinite(state).all())
    if isinstance(state, dict):
        return all(all_finite(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return all(all_finite(v) for v in state)
    return True  # numbers beside the tensors (clocks, scores that start at inf) are not training state


class LossWatch:
    """Each step's losses, kept on the device between check points, and the check of them.

    ``columns`` names what a step records (``discriminator loss`` per critic step, then
    ``generator loss``); :meth:`row` is the buffer row the current step writes its losses into
    (device-side copies, no read); :meth:`check` reads the rows since the last check (deferred on
    a GPU, see the module) together with the parameter norms passed to it.
    """

    def __init__(self, device: torch.device, columns: list[str], bound: float, rank: int, where: str | None = None):
        self.device, self.columns, self.bound, self.rank, self.where = device, columns, bound, rank, where
        self.deferred = device.type == "cuda"
        self._values = torch.zeros(CHECK_EVERY, len(columns), device=device)
        self._steps: list[int] = []  # the step of each filled row
        self._pending: tuple[torch.Tensor, list[int], int, Any] | None = None  # a copy on its way to the host

    def row(self) -> torch.Tensor:
        """The row the next step writes its losses into (the buffer grows when checks are further apart)."""
        if len(self._steps) == len(self._values):
            self._values = torch.cat([self._values, torch.zeros_like(self._values)])
        return self._values[len(self._steps)]

    def done(self, step: int) -> None:
        """The step that wrote the current row is over (``step``: its number)."""
        self._steps.append(step)

    def _snapshot(self, norms: torch.Tensor | None) -> torch.Tensor:
        rows = self._values[: len(self._steps)].reshape(-1)
        return torch.cat([rows, norms.reshape(-1).to(rows.dtype)]) if norms is not None else rows

    def check(self, step: int, norms: torch.Tensor | None = None, final: bool = False) -> Divergence | None:
        """The first value out of bounds since the last check, or None.

        ``norms`` are the parameter norms of G and D at ``step``. On a GPU, unless ``final``, this
        starts copying the current values and looks at the previous check's copy (long arrived).
        """
        current = (self._snapshot(norms), list(self._steps), step)
        self._steps = []
        if not self.deferred:
            return self._verdict(current[0].tolist(), current[1], current[2])
        earlier = self._take_pending()
        if final:
            return earlier or self._verdict(current[0].tolist(), current[1], current[2])
        host = torch.empty(current[0].shape, dtype=current[0].dtype, pin_memory=True)
        host.copy_(current[0], non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self._pending = (host, current[1], current[2], event)
        return earlier

    def _take_pending(self) -> Divergence | None:
        if self._pending is None:
            return None
        host, steps, step, event = self._pending
        self._pending = None
        event.synchronize()  # recorded a check point ago: already complete
        return self._verdict(host.tolist(), steps, step)

    def _verdict(self, values: list[float], steps: list[int], step: int) -> Divergence | None:
        """The first value out of bounds: losses row by row (in step order), then the norms at ``step``."""
        width = len(self.columns)
        for i, value in enumerate(values[: len(steps) * width]):
            if out_of_bounds(value, self.bound):
                return Divergence(steps[i // width], self.rank, self.columns[i % width], value, self.bound, self.where)
        for name, value in zip(("generator parameter norm", "discriminator parameter norm"), values[len(steps) * width :]):
            if out_of_bounds(value, PARAMETER_NORM_BOUND):
                return Divergence(step, self.rank, name, value, PARAMETER_NORM_BOUND, self.where)
        return None
