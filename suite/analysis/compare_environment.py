"""What differs between the two sides of a comparison besides their numbers: the device, the machine and its kernel set,
the ruler, package versions, and per matched configuration its workload settings (`suite compare` lists them above
its table)."""

from __future__ import annotations

import json
from typing import Any, Callable

from ..config.escape import one_line
from ..measure.env import fingerprint
from ..records.record import Record


def device_kind(record: Record) -> str:
    """The device a record ran on, a CPU with its cores per node (comparisons refuse different ones unless asked)."""
    device = str(record.device)
    return f"{device} ({record.cores_per_node} cores)" if device == "cpu" else device


Reader = Callable[[Record], Any]
"""How to read an item of the environment differences from a record."""
# (item, how to read it from a record) for the environment differences listed per configuration
CONFIG_SETTINGS: tuple[tuple[str, Reader], ...] = (
    ("threads per rank", lambda r: r.threads_per_rank),
    ("dataset", lambda r: r.dataset.name if r.dataset is not None else None),
    ("image size", lambda r: r.dataset.image_size if r.dataset is not None else None),
    ("global batch", lambda r: r.global_batch),
    ("generator steps", lambda r: json.dumps(r.generator_steps, sort_keys=True)),
)


def values_text(records: list[Record], read: Reader) -> str:
    """The values ``read`` gives for ``records``, sorted, each on one line with its controls escaped (records' words)."""
    return ", ".join(sorted({one_line(read(r)) for r in records}))


def _version(package: str) -> Reader:
    return lambda r: (r.env or {}).get(package)


def environment_differences(
    base: list[Record], new: list[Record], matched: list[tuple[list[Record], list[Record], str]]
) -> list[dict[str, str]]:
    """What differs between the two sides: device, package versions, and per matched configuration (its runs on each
    side and its name) the settings."""
    rows = []
    packages = sorted({k for r in base + new for k in (r.env or {})})
    items: list[tuple[str, Reader]] = [
        ("device", device_kind),
        ("machine fingerprint", lambda r: fingerprint(r.machine) if r.machine is not None else None),
        ("CPU kernel set", lambda r: r.machine.cpu_capability if r.machine is not None else None),
        (
            "numerics digest (equal: the same seed gives the same model bit for bit; different: it need not)",
            lambda r: r.machine.numerics if r.machine is not None else None,
        ),
        ("ruler sha256", lambda r: r.quality.ruler_sha256 if r.quality is not None else None),
    ] + [(f"version of {p}", _version(p)) for p in packages]
    for item, read in items:
        b, n = values_text(base, read), values_text(new, read)
        if b != n:
            rows.append({"item": item, "baseline": b, "new": n})
    for item, read in CONFIG_SETTINGS:
        changed: dict[tuple[str, str], list[str]] = {}
        for base_runs, new_runs, name in matched:
            b, n = values_text(base_runs, read), values_text(new_runs, read)
            if b != n:
                changed.setdefault((b, n), []).append(name)
        for (b, n), names in changed.items():
            rows.append({"item": f"{item} ({'; '.join(names)})", "baseline": b, "new": n})
    return rows
