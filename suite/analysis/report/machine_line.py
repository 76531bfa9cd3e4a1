"""The first page's first lines: what the numbers ran on, and whether the host was busy.

Images/s, times and speedups mean nothing without the machine: a 2-core CPU at one thread per rank and a GPU node
give other numbers from the same code. :func:`machine_lines` says it from the records alone: per kind of machine
(``machine`` in the record), the GPU model and how many GPUs the runs used, or the CPU model, its cores and the
threads per rank; then whether the host was quiet, by the contention rule of :mod:`suite.measure.hostload`
(``host_load.contended`` in the record; :func:`suite.analysis.systems.contended`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...records.measured import Machine
from ...records.record import Record
from ..markdown import cell
from ..systems import contended

TIMED = ("ok", "diverged")
"""The statuses of runs whose timings the report shows."""


def _span(values: list[int], unit: str) -> str:
    """``1 thread``, ``2 threads`` or ``1-4 threads``: one number where every run has the same."""
    low, high = min(values), max(values)
    return _plural(low, unit) if low == high else f"{low}-{high} {unit}s"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _number(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _kind(record: Record) -> tuple[str, str]:
    """(the device this run computed on, the host's CPU), as the records name them."""
    machine = record.machine or Machine()
    cpu = cell(machine.cpu_model or "unknown CPU")  # a record's strings are data on the page
    cores = _number(machine.cores) or _number(record.cores_per_node)
    host = f"{cpu}, {_plural(cores, 'core')}" if cores else cpu
    device = str(record.device or "cpu")
    if device == "cpu":
        return "cpu", host
    return cell(machine.gpu or device), host


def device_line(records: list[Record]) -> str:
    """What the timed runs computed on: per kind of machine, the GPU model and the GPUs used, or the CPU model, its
    cores and the threads per rank (an empty string where no run was timed)."""
    runs = [r for r in records if r.status in TIMED]
    kinds: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in runs:
        kinds[_kind(r)].append(r)
    parts = []
    for (device, host), group in sorted(kinds.items()):
        threads = [t for r in group if (t := _number(r.threads_per_rank))]
        procs = [p for r in group if (p := _number(r.procs))]
        per_rank = f", {_span(threads, 'thread')} per rank" if threads else ""
        if device == "cpu":
            ranks = f", {_span(procs, 'rank')}" if procs else ""
            parts.append(f"CPU only: {host}{per_rank}{ranks}")
        else:
            gpus = f"{_span(procs, 'GPU')} (one per rank)" if procs else "GPUs"
            parts.append(f"{gpus}: {device}; host {host}{per_rank}")
    if not parts:
        return ""
    return "**Ran on** " + "; and ".join(parts) + f" ({_plural(len(runs), 'timed run')})."


def host_line(records: list[Record]) -> str:
    """Whether the host was busy while the runs were timed: how many were contended, or quiet, or not measured."""
    runs = [r for r in records if r.status in TIMED]
    if not runs:
        return ""
    measured = [r for r in runs if r.host_load is not None]
    busy = [r for r in measured if contended(r)]
    unmeasured = len(runs) - len(measured)
    unknown = f"; not measured for {unmeasured} (no host_load in their records)" if unmeasured and measured else ""
    if not measured:
        return "**Host load** not measured (no host_load in the records): whether other processes shared the cores is unknown."
    if busy:
        return (
            f"**Busy host**: {len(busy)} of {len(measured)} measured runs were contended (other processes used their "
            f"cores while they trained){unknown}: their times, images/s and speedups measure the host too."
        )
    return f"**Quiet host**: none of the {len(measured)} measured runs was contended{unknown}."


def machine_lines(records: list[Record]) -> list[str]:
    """The first page's lines on the machine: :func:`device_line` and :func:`host_line`, one paragraph."""
    said = [line for line in (device_line(records), host_line(records)) if line]
    return [" ".join(said) + " [Environment](details/environment.md).\n"] if said else []
