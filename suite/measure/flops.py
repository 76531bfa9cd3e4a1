"""The device's peak: what achieved FLOP/s is compared with.

Achieved FLOP/s is the FLOPs of a step (counted once, by ``torch.utils.flop_counter``) times the
steps of the window, over the window. Its fraction of peak needs a peak, named with where it came
from: the datasheet's dense FP32 peak for known GPUs (the suite trains in float32), else a ceiling
measured with this rank's threads while the other ranks measure theirs (:data:`CEILING_SIZE`).
A rank that computed faster than its peak proves the peak too low: :func:`peak_use` raises it
(``peak_raised_ranks``), so the fraction is never above 1 (docs/results.md).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # the report reads peak_use and achieved_flops without torch
    import torch
    from torch.utils.flop_counter import FlopCounterMode


CEILING_SIZE = 1024
CEILING_REPEATS = 5
CEILING_SECONDS = 0.2

# Dense FP32 (non-tensor-core) peaks from NVIDIA's datasheets, in FLOP/s, by device name pattern.
# Order matters: the first pattern that matches names the device.
GPU_FP32_PEAKS: list[tuple[str, float, str]] = [
    (r"H200", 67e12, "NVIDIA H200 datasheet, FP32 (SXM)"),
    (r"H100.*PCIe", 51e12, "NVIDIA H100 datasheet, FP32 (PCIe)"),
    (r"H100", 67e12, "NVIDIA H100 datasheet, FP32 (SXM)"),
    (r"A100", 19.5e12, "NVIDIA A100 datasheet, FP32"),
    (r"V100.*PCIe", 14e12, "NVIDIA V100 datasheet, FP32 (PCIe)"),
    (r"V100", 15.7e12, "NVIDIA V100 datasheet, FP32 (SXM2)"),
    (r"L40S", 91.6e12, "NVIDIA L40S datasheet, FP32"),
    (r"\bL4\b", 30.3e12, "NVIDIA L4 datasheet, FP32"),
    (r"A10\b", 31.2e12, "NVIDIA A10 datasheet, FP32"),
    (r"\bT4\b", 8.1e12, "NVIDIA T4 datasheet, FP32"),
    (r"P100", 9.3e12, "NVIDIA P100 datasheet, FP32 (SXM2)"),
]


class _TotalsOnly:
    """Stands in for FlopCounterMode's module tracker: totals only.

    The tracker's per-module backward hooks fail inside ``torch.autograd.grad`` on leaf inputs,
    which is exactly what the WGAN-GP penalty calls; the total count needs no module breakdown.
    """

    parents = {"Global"}

    def __enter__(self) -> "_TotalsOnly":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def flop_counter() -> FlopCounterMode:
    """A ``torch.utils.flop_counter.FlopCounterMode`` that counts totals and prints nothing."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    counter.mod_tracker = _TotalsOnly()  # type: ignore[assignment]  # the tracker's duck-typed stand-in
    return counter


def datasheet_peak(device_name: str) -> tuple[float, str] | None:
    """(FLOP/s, source) for a known GPU name, else None."""
    for pattern, peak, source in GPU_FP32_PEAKS:
        if re.search(pattern, device_name):
            return peak, source
    return None


def measured_ceiling(device: torch.device, size: int = CEILING_SIZE) -> float:
    """Best FLOP/s of a float32 ``size``x``size`` matrix product on ``device`` (after one warm-up).

    At least :data:`CEILING_REPEATS` products over at least :data:`CEILING_SECONDS`: the best of
    them is the ceiling, so a product slowed by another process does not lower it.
    """
    import torch

    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best, spent, repeats = float("inf"), 0.0, 0
    while repeats <= CEILING_REPEATS or spent < CEILING_SECONDS:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
        if repeats:  # the first product pays for allocation and kernel selection
            best, spent = min(best, elapsed), spent + elapsed
        repeats += 1
    return 2 * size**3 / best


def achieved_flops(flops_per_step: float | None, steps: int, step_seconds: float) -> float | None:
    """A rank's FLOP/s in the window: the FLOPs of a step times its window steps over their seconds."""
    if flops_per_step is None or not steps or step_seconds <= 0:
        return None
    return flops_per_step * steps / step_seconds


@dataclass
class PeakUse:
    """The ranks' achieved FLOP/s against their peaks (means over ranks), and the ranks whose peak was raised."""

    achieved: float | None
    peak: float | None
    fraction: float | None
    raised_ranks: list[int] = field(default_factory=list)


def peak_use(achieved: Sequence[float | None], peaks: Sequence[float]) -> PeakUse:
    """Achieved FLOP/s over peak FLOP/s, each a mean over ranks, with no rank's peak below its achieved rate.

    A rank that computed faster than its peak raises that peak to its achieved rate (and is named in
    ``raised_ranks``): the fraction is the mean achieved rate over the mean peak, so it is at most 1
    and is the quotient of the two numbers the report prints beside it.
    """
    raised = [rank for rank, (a, p) in enumerate(zip(achieved, peaks)) if a is not None and a > p]
    peaks = [max(p, a) if a is not None else p for a, p in zip(achieved, peaks)]
    measured = [(a, p) for a, p in zip(achieved, peaks) if a is not None]
    mean_achieved = sum(a for a, _ in measured) / len(measured) if measured else None
    fraction = sum(a for a, _ in measured) / sum(p for _, p in measured) if measured and all(p for _, p in measured) else None
    return PeakUse(mean_achieved, sum(peaks) / len(peaks), fraction, raised)


def device_peak(device: torch.device) -> dict:
    """``{"flops": peak FLOP/s, "source": where it comes from}`` for this rank's device."""
    import torch

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        known = datasheet_peak(name)
        if known:
            return {"flops": known[0], "source": known[1]}
        return {"flops": measured_ceiling(device), "source": f"measured FP32 {CEILING_SIZE}x{CEILING_SIZE} matmul on {name}"}
    threads = torch.get_num_threads()
    return {
        "flops": measured_ceiling(device),
        "source": f"measured FP32 {CEILING_SIZE}x{CEILING_SIZE} matmul, {threads} thread{'s' if threads > 1 else ''} per rank",
    }
