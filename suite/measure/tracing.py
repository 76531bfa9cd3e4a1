"""Traces on demand (``suite run --trace``, ``runs[].trace: true``): what a traced run writes.

Every rank writes ``trace-rank<N>.json``, a ``torch.profiler`` trace of :data:`PROFILED_STEPS` steady steps
of the training window in the Chrome trace format; Horovod and DeepSpeed add their own logs (docs/engine-settings.md).
The profiler wraps the strategy's ``train()`` and is advanced by a hook on the telemetry's ``end_step``,
so training code is untouched. Tracing costs time: the record marks traced runs (``traced``).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Protocol

from ..records.nofollow import check_entry
from ..records.results import PROFILER_TRACE

if TYPE_CHECKING:
    import torch

    from .telemetry import Telemetry


class Rank(Protocol):
    """The rank being profiled: an engine (:class:`suite.train.engines.base.Engine`)."""

    name: str
    rank: int
    size: int
    device: torch.device


PROFILED_STEPS = 3
"""Window steps recorded by the profiler, after one warm-up step of the profiler itself."""


@contextmanager
def profiled_steps(trace: bool, run_dir: Path, engine: Rank, telemetry: Telemetry) -> Iterator[None]:
    """Profile the enclosed steps of ``engine``'s rank when ``trace`` is set (else do nothing).

    Steps are counted by ``telemetry.end_step``; the trace is written to ``run_dir`` when the
    last recorded step ends (or when the block ends inside the recording).
    """
    if not trace:
        yield
        return
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    path = Path(run_dir) / PROFILER_TRACE.format(rank=engine.rank)
    check_entry(path)  # the profiler opens it itself, following a link: refuse one (or a FIFO) there first
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if engine.device.type == "cuda" else [])
    profiler = profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=PROFILED_STEPS, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    )
    if not torch.distributed.is_initialized():  # torch.distributed engines get theirs from the profiler itself
        profiler.preset_metadata_json(
            "distributedInfo", json.dumps({"backend": engine.name, "rank": engine.rank, "world_size": engine.size})
        )
    end_step = telemetry.end_step

    def end_step_and_advance(images: int, train_images: int = 0, eval_images: int = 0) -> None:
        end_step(images, train_images, eval_images)
        profiler.step()

    telemetry.end_step = end_step_and_advance  # type: ignore[method-assign]  # this object only; removed below
    try:
        with profiler:
            yield
    finally:
        del telemetry.end_step
