"""``python -m suite.running.visible_gpus WANT VENDOR``: a job script's check that torch sees the GPUs the job asked for.

A generated job script runs it on a compute node before anything is launched (:mod:`suite.running.jobscript`): a CUDA
torch on an AMD node, a CPU-only torch, or a torch too new for the node's driver would otherwise train on the CPUs
without a word. It prints nothing and exits 0 when torch sees at least WANT GPUs of VENDOR (``nvidia``: CUDA,
``amd``: ROCm/HIP), else one line on stderr saying what torch sees and exits 1.
"""

from __future__ import annotations

import sys


def gpu_problem(want: int, vendor: str) -> str | None:
    """Why this node's torch does not see ``want`` GPUs of ``vendor`` (one line), or None."""
    import torch

    hip, cuda = getattr(torch.version, "hip", None), getattr(torch.version, "cuda", None)
    build = f"ROCm {hip}" if hip else f"CUDA {cuda}" if cuda else "CPU-only"
    which = f"torch {torch.__version__} ({build})"
    if vendor == "amd" and not hip:
        return f"{which} is not a ROCm build, and this site's GPUs are AMD"
    if vendor == "nvidia" and not cuda:
        return f"{which} is not a CUDA build, and this site's GPUs are NVIDIA"
    seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if seen < want:
        return f"{which} sees {seen} GPU{'s' if seen != 1 else ''} here, and this job asked for {want} (driver too old for this torch, or no GPU given to the job?)"
    return None


def main(argv: list[str] | None = None) -> int:
    """Check, print the problem on stderr (exit 1) or nothing (exit 0); bad arguments exit 2."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[0].isdigit() or args[1] not in ("nvidia", "amd"):
        print("usage: python -m suite.running.visible_gpus WANT nvidia|amd", file=sys.stderr)
        return 2
    problem = gpu_problem(int(args[0]), args[1])
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
