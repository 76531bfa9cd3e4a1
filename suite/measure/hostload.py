"""The host's load while a run trains, and the one rule that calls a timing *contended*.

A run's timings measure the strategy only if nothing else used the cores it ran on. Every rank reads
the load average, the host's CPU times (busy, steal) and its own over its training clock
(:class:`HostLoadMeter`); rank 0 sums them per host (:func:`host_load`). The rule (:func:`contention`,
also the regression gate's) and the reasons for its limits, :data:`BUSY_SHARE` and :data:`STEAL_SHARE`,
are in docs/results.md ("A busy host is named"). Without ``/proc/stat`` (not Linux) nothing is known and nothing is marked.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from ..records.measured import HostLoad

BUSY_SHARE = 0.05
"""Of the host's cores: how many more than the run left free other processes may keep busy before the run is contended."""
STEAL_SHARE = 0.05
"""Of the host's CPU time: how much steal (CPU time the hypervisor gave to other guests) a run may see before it is contended."""
PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTimes:
    """The host's CPU seconds since boot, summed over its CPUs (``/proc/stat``'s first line)."""

    busy: float
    """User, nice, system, irq, softirq (and guest, inside user): work of the host's own processes and kernel."""
    steal: float
    """Time the hypervisor ran another guest on these CPUs."""
    total: float
    """Everything: busy, idle, iowait and steal."""
    cpus: int
    """CPUs the host lists."""


def read_cpu_times(path: Path = PROC_STAT) -> CpuTimes | None:
    """The host's CPU times now, or None where there is no ``/proc/stat`` (or it cannot be read)."""
    try:
        lines = path.read_text().splitlines()
        fields = [int(v) for v in lines[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    fields += [0] * (8 - len(fields))
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    tick = os.sysconf("SC_CLK_TCK")
    cpus = sum(1 for line in lines[1:] if line.startswith("cpu") and line[3:4].isdigit())
    return CpuTimes(
        busy=(user + nice + system + irq + softirq) / tick,
        steal=steal / tick,
        total=(user + nice + system + idle + iowait + irq + softirq + steal) / tick,
        cpus=cpus or (os.cpu_count() or 1),
    )


def own_cpu_seconds() -> float:
    """CPU seconds of this process, its finished children and its live ones (e.g. data-loading workers)."""
    t = os.times()
    seconds = t.user + t.system + t.children_user + t.children_system
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                times = child.cpu_times()
                seconds += times.user + times.system
            except psutil.Error:  # it ended meanwhile (then counted above once it was waited for)
                pass
    except ImportError:
        pass
    return seconds


def load_average() -> float | None:
    """The host's 1-minute load average, or None where the system has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


class HostLoadMeter:
    """What one rank reads of its host between :meth:`start` and :meth:`stop` (the run's training clock)."""

    def __init__(self) -> None:
        self._start: tuple[float, CpuTimes | None, float, float | None] | None = None
        self._end: tuple[float, CpuTimes | None, float, float | None] | None = None

    @staticmethod
    def _read() -> tuple[float, CpuTimes | None, float, float | None]:
        return time.monotonic(), read_cpu_times(), own_cpu_seconds(), load_average()

    def start(self) -> None:
        if self._start is None:
            self._start = self._read()

    def stop(self) -> None:
        if self._start is not None:
            self._end = self._read()

    def as_dict(self) -> dict[str, Any] | None:
        """This rank's readings (:func:`host_load` sums them per host); None before :meth:`stop`."""
        if self._start is None or self._end is None:
            return None
        (t0, cpu0, own0, load0), (t1, cpu1, own1, load1) = self._start, self._end
        host = None
        if cpu0 is not None and cpu1 is not None:
            host = {
                "busy_s": cpu1.busy - cpu0.busy,
                "steal_s": cpu1.steal - cpu0.steal,
                "total_s": cpu1.total - cpu0.total,
                "cpus": cpu1.cpus,
            }
        return {"wall_s": t1 - t0, "own_cpu_s": own1 - own0, "load_avg": [load0, load1], "host": host}


def contention(
    outside_cores: float | None, free_cores: float, cores: int, steal_share: float | None, limit: float | None = None
) -> str | None:
    """Why a timing taken while others kept ``outside_cores`` busy (``free_cores`` of the host's ``cores`` left free by
    the run) and steal took ``steal_share`` of the CPU time is contended, in a few words, or None where it is not.

    ``limit``: the cores beyond the free ones that others may keep busy (default :data:`BUSY_SHARE` of ``cores``).
    """
    allowed = BUSY_SHARE * cores if limit is None else limit
    if steal_share is not None and steal_share > STEAL_SHARE:
        return f"CPU steal took {steal_share:.0%} of the host's CPU time (above {STEAL_SHARE:.0%})"
    if outside_cores is not None and outside_cores - free_cores > allowed:
        return (
            f"other processes kept {outside_cores:.2f} cores busy, {outside_cores - free_cores:.2f} more than the "
            f"{free_cores:g} the run left free (above {allowed:.2f})"
        )
    return None


def host_load(ranks: Iterable[tuple[str, dict[str, Any] | None, int]]) -> dict[str, Any]:
    """The run's :class:`suite.records.measured.HostLoad` (as a dict) from each rank's ``(host, HostLoadMeter.as_dict(), threads)``."""
    hosts: dict[str, dict[str, Any]] = {}
    for name, reading, threads in ranks:
        if reading is None:
            continue
        entry = hosts.setdefault(name, {"reading": reading, "own_cpu_s": 0.0, "claimed": 0})
        entry["own_cpu_s"] += reading["own_cpu_s"]
        entry["claimed"] += threads
    per_host = []
    for name, entry in hosts.items():
        reading, host = entry["reading"], entry["reading"]["host"]
        row: dict[str, Any] = {"host": name, "load_avg": reading["load_avg"], "claimed_cores": entry["claimed"]}
        if host is not None and reading["wall_s"] > 0:
            cores = host["cpus"]
            outside = max(0.0, host["busy_s"] - entry["own_cpu_s"]) / reading["wall_s"]
            free = max(0.0, cores - entry["claimed"])
            steal = host["steal_s"] / host["total_s"] if host["total_s"] > 0 else None
            row.update(
                cores=cores,
                outside_cores=outside,
                outside_share=outside / cores,
                free_cores=free,
                steal_share=steal,
                contention=contention(outside, free, cores, steal),
            )
        per_host.append(row)
    known = [row for row in per_host if "outside_cores" in row]
    if not known:
        loads = per_host[0]["load_avg"] if per_host else None
        return asdict(HostLoad(load_avg=loads, hosts=per_host or None))
    worst = max(known, key=lambda row: (row["contention"] is not None, row["outside_cores"] - row["free_cores"]))
    reason = worst["contention"]
    if reason is not None and len(per_host) > 1:
        reason = f"{worst['host']}: {reason}"
    summary = HostLoad(
        contended=any(row["contention"] is not None for row in known),
        contention=reason,
        outside_cores=worst["outside_cores"],
        outside_share=worst["outside_share"],
        free_cores=worst["free_cores"],
        cores=worst["cores"],
        steal_share=max((row["steal_share"] for row in known if row["steal_share"] is not None), default=None),
        load_avg=worst["load_avg"],
        hosts=per_host,
    )
    return asdict(summary)
