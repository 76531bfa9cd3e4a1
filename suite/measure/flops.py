"""The device's peak: what achieved FLOP/s is compared with.

Achieved FLOP/s is the FLOPs of a step (counted once, by ``torch.utils.flop_counter``, which
counts matrix multiplications and convolutions, forward and backward, as MFU calculations do)
times the steps of the window, over the window. Its *fraction of peak* needs a peak, named
with where it came from:

* known GPUs: the datasheet's dense FP32 peak (non-tensor-core), since the suite trains in
  float32. cuDNN may run convolutions in TF32 on Ampere and later, which can exceed it; the
  fraction then says so by going above 1 rather than hiding it behind a larger peak.
* CPUs and unknown GPUs: a measured ceiling: the best of a few float32 matrix multiplications
  of :data:`CEILING_SIZE` squared matrices with this rank's threads, while the other ranks of
  the run measure theirs (so each rank's ceiling is its share of the machine).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch.utils.flop_counter import FlopCounterMode


CEILING_SIZE = 1024

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


def measured_ceiling(device: torch.device, size: int = CEILING_SIZE, repeats: int = 5) -> float:
    """Best FLOP/s of a float32 ``size``x``size`` matrix product on ``device`` (after one warm-up)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best = float("inf")
    for i in range(repeats + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i:  # the first product pays for allocation and kernel selection
            best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def device_peak(device: torch.device) -> dict:
    """``{"flops": peak FLOP/s, "source": where it comes from}`` for this rank's device."""
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
