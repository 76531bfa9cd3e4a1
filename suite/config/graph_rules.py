"""Where ``performance.cuda_graphs`` can work: the rules that refuse it, each in one line naming the field and why,
before any rank starts (run by :mod:`suite.config.validation`). The captured step (:mod:`suite.train.graphs`) holds
one rank's whole training step; it is refused where something in that step runs outside the device's stream or cannot
be repeated by a replay. A machine that trains on the CPU is refused as the runs launch
(:func:`suite.config.validation.device_problem`).
"""

from __future__ import annotations

from .entries import CUDA_GRAPHS, CUDA_GRAPHS_REDUCTION
from .registry import ENGINES, LOSSES
from .scenario import Fail, PerformanceConfig, RunSpec, Scenario, critic_steps, default_loss, entry_section

GRAPH_WARMUP_CALLS = 2
"""Eager calls of the step before it is captured (each a real training step: the first counts FLOPs, both make
Adam's state and pick cuDNN's algorithms), as torch.cuda.graphs asks; the third step is captured and replayed, so
``train.warmup_steps`` must be more than this for the capture to happen before the timed window opens."""


def check_cuda_graphs(spec: RunSpec, settings: PerformanceConfig, path: str, scenario: Scenario, fail: Fail) -> None:
    """``settings`` (an entry's, over the scenario's) ask for CUDA graphs only where the captured step can hold the
    whole training step of entry ``spec`` at ``path``; else ``fail(field, why)``."""
    if not settings.cuda_graphs:
        return
    field = f"{path}.performance.cuda_graphs"
    engine = ENGINES[spec.engine]
    if CUDA_GRAPHS not in engine.capabilities:
        able = ", ".join(e.name for e in ENGINES if CUDA_GRAPHS in e.capabilities)
        fail(
            field, f"the {spec.engine} engine reduces gradients outside the captured step (its own thread or library); use {able}"
        )
    many = [p for p in spec.procs if p > 1]
    if many and CUDA_GRAPHS_REDUCTION not in engine.capabilities:
        fail(
            field,
            f"at procs {many[0]} the {spec.engine} engine averages gradients with host-side work every step (a hook per "
            "bucket), which a graph cannot hold; the captured step is one rank's: procs: [1]",
        )
    loss = spec.loss or default_loss(spec.strategy)
    if (reason := LOSSES[loss].uncapturable) is not None:
        fail(field, f"the {loss} loss cannot be captured: {reason}")
    section = LOSSES[loss].settings
    critics = critic_steps(loss, entry_section(scenario, spec, section, section) if section else None)
    if critics > 1:
        fail(
            field,
            f"{critics} critic steps per generator step: each batch reseeds dropout on the host, which one captured step "
            "cannot repeat",
        )
    if scenario.model.sync_batchnorm:
        fail(field, "synchronised BatchNorm communicates inside the forward pass, which a graph cannot hold")
    if settings.compile:
        fail(field, "the captured step runs the eager networks, not compiled ones: turn performance.compile off beside it")
    warmup = entry_section(scenario, spec, "train", path).warmup_steps
    if warmup <= GRAPH_WARMUP_CALLS:
        fail(
            f"{path}.train.warmup_steps",
            f"{warmup} with performance.cuda_graphs: the step runs eagerly {GRAPH_WARMUP_CALLS} times, then is captured; "
            f"give at least {GRAPH_WARMUP_CALLS + 1} warm-up steps so that the capture is not timed",
        )
