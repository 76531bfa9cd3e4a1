"""The whole training step as one CUDA graph (``performance.cuda_graphs``, docs/gpu.md).

The shared trainer (:class:`suite.train.training.GanTrainer`) writes its step as a function of static
inputs (:class:`StaticInputs`), into which each step's batch, labels and noise are copied.
:class:`GraphedStep` runs it eagerly for its first calls (so that Adam's state, cuDNN's choices and
autograd's streams exist), then captures it once and replays it. What the capture is is injected
(:class:`Capture`): :class:`CudaGraphs` on a GPU, a replay that calls the function again in the tests.
The noise is drawn as eager draws it, and dropout's generator is seeded before each replay as eager
seeds it, so a graphed run trains on the same draws as an eager one.
"""

from __future__ import annotations

from typing import Callable, Protocol

import torch

from ..config.graph_rules import GRAPH_WARMUP_CALLS
from ..config.plan import TrainingError
from ..gan.losses import Loss
from .engines.base import Replica

Step = Callable[[], torch.Tensor]
"""A step of static inputs: it reads only :class:`StaticInputs` and the model, and returns its losses."""


class Captured(Protocol):
    """A captured step: :meth:`replay` runs it again, writing into the same :attr:`outputs`."""

    @property
    def outputs(self) -> torch.Tensor: ...

    def replay(self) -> None: ...


class Capture(Protocol):
    """How a step is run before capture (:meth:`warm`) and captured (:meth:`capture`, which does not run it)."""

    def warm(self, step: Step) -> torch.Tensor: ...

    def capture(self, step: Step) -> Captured: ...


class _CudaCaptured:
    def __init__(self, graph: torch.cuda.CUDAGraph, outputs: torch.Tensor):
        self.graph, self._outputs = graph, outputs

    @property
    def outputs(self) -> torch.Tensor:
        return self._outputs

    def replay(self) -> None:
        self.graph.replay()


class CudaGraphs:
    """:class:`Capture` with ``torch.cuda.graphs``: warm-up calls on a side stream, then one ``CUDAGraph``.

    The capture checks only the capturing thread (``thread_local``): the telemetry's NVML sampler and a data
    loader's threads may call CUDA meanwhile on their own streams.
    """

    def __init__(self, device: torch.device):
        if device.type != "cuda":
            raise TrainingError("CUDA graphs need a GPU, and this rank trains on the CPU", "performance.cuda_graphs")
        self.device = device
        self._side: torch.cuda.Stream | None = None

    def warm(self, step: Step) -> torch.Tensor:
        if self._side is None:
            self._side = torch.cuda.Stream(self.device)
        current = torch.cuda.current_stream(self.device)
        self._side.wait_stream(current)  # the static inputs were filled on the current stream
        with torch.cuda.stream(self._side):
            outputs = step()
        current.wait_stream(self._side)
        return outputs

    def capture(self, step: Step) -> Captured:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            outputs = step()
        return _CudaCaptured(graph, outputs)


class StaticInputs:
    """A step's inputs at fixed addresses: every step copies its batch and noise into the same tensors.

    The first :meth:`fill` allocates each input like the value given (its shape, type, device and memory
    format); later ones copy into it, and a value of another shape or type is refused (every batch is whole,
    so the shapes never change and the step is captured once).
    """

    def __init__(self) -> None:
        self._held: dict[str, torch.Tensor] = {}

    def fill(self, **values: torch.Tensor | None) -> None:
        """Copy each value into its input (a None value leaves its input out: an unconditional pair's labels)."""
        for name, value in values.items():
            if value is None:
                continue
            held = self._held.get(name)
            if held is None:
                held = self._held[name] = torch.empty_like(value)
            elif held.shape != value.shape or held.dtype != value.dtype:
                raise RuntimeError(
                    f"static input {name} holds {tuple(held.shape)} {held.dtype}, not {tuple(value.shape)} {value.dtype}"
                )
            held.copy_(value, non_blocking=True)

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._held[name]

    def get(self, name: str) -> torch.Tensor | None:
        """The input ``name``, or None where none was filled."""
        return self._held.get(name)


class GraphedStep:
    """Runs a step of static inputs: eagerly for its first ``warmup`` calls, then captured once and replayed.

    Each call returns the step's losses; after capture, always the same tensor (the capture's outputs),
    overwritten by each replay: read it (or copy it) before the next call.
    """

    def __init__(self, capture: Capture, warmup: int = GRAPH_WARMUP_CALLS):
        self.capture, self.warmup = capture, warmup
        self.calls = 0  # eager calls since the last capture was dropped
        self.captured: Captured | None = None
        self.captures = 0  # how many times the step was captured

    def __call__(self, step: Step, eager: bool = False) -> torch.Tensor:
        """One step: eager while warming up, or where ``eager`` asks (the step that counts FLOPs under a dispatch
        mode, before capture); the capture's replay otherwise (capturing it first)."""
        if self.captured is None:
            if self.calls < self.warmup or eager:
                self.calls += 1
                return self.capture.warm(step)
            self.captured = self.capture.capture(step)
            self.captures += 1
        self.captured.replay()
        return self.captured.outputs

    def reset(self) -> None:
        """Drop the capture (the model's optimizer state was replaced, by loading a checkpoint): warm up and capture anew."""
        self.captured, self.calls = None, 0


def check_capturable(replicas: tuple[Replica, Replica], loss: Loss, critic_steps: int) -> None:
    """Raise :class:`TrainingError` (naming ``performance.cuda_graphs``) where this trainer's step cannot be captured.

    Scenario validation refuses these before any rank starts (:mod:`suite.config.graph_rules`); this is the
    trainer's own guard, for a plugin strategy or engine that lets one through.
    """
    field = "performance.cuda_graphs"
    for replica in replicas:
        if type(replica) is not Replica:
            raise TrainingError(
                f"the network is kept in step by {type(replica).__name__}, whose gradient reduction the captured step cannot hold",
                field,
            )
    if loss.needs_penalty:
        raise TrainingError(
            f"the {loss.name} loss's gradient penalty takes a double backward, which the captured step does not hold", field
        )
    if critic_steps != 1:
        raise TrainingError(f"{critic_steps} critic steps per generator step: each reseeds dropout on the host", field)
