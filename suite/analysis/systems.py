"""A system and its runs: the names a configuration goes by, the runs a headline row reports, and their values per
seed (:mod:`.headline` builds its rows from them; the plots, tables and tools name systems by them)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Callable, Iterable, Protocol

import numpy as np

from ..config.sections import MetricsConfig
from ..config.sweep import sweep_text
from ..records.record import Record
from ..records.scored import Quality
from .markdown import cell
from .stats.speedup import speedup
from .stats.summary import Summary


class Named(Protocol):
    """What names a system: a record, or the run (:class:`suite.config.scenario.Run`) that will write it."""

    @property
    def strategy(self) -> str | None: ...
    @property
    def loss(self) -> str | None: ...
    @property
    def engine(self) -> str | None: ...
    @property
    def label(self) -> str | None: ...
    @property
    def sweep(self) -> dict[str, Any] | None: ...


def system_name(record: Named) -> str:
    """strategy / loss / engine [label]: the system a run trains, whatever its swept settings."""
    name = f"{record.strategy} / {record.loss} / {record.engine}"
    return name + (f" [{record.label}]" if record.label else "")


def config_name(record: Named) -> str:
    """strategy / loss / engine [label] (swept settings): what a headline row describes."""
    swept = sweep_text(record.sweep)
    return system_name(record) + (f" ({swept})" if swept else "")


def mean_of(values: Iterable[Any]) -> float | None:
    numbers = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(numbers)) if numbers else None


def procs_of(record: Record) -> int:
    """The record's ``procs``, which every record read for a report has (:data:`suite.records.codec.IDENTITY`)."""
    assert record.procs is not None, f"record {record.run_id}: procs is missing"
    return record.procs


def main_runs(runs: list[Record]) -> tuple[list[Record], int]:
    """The runs a headline row reports: the strong sweep's largest P (else the weak sweep's)."""
    strong = [r for r in runs if r.scaling == "strong"] or runs
    top = max(procs_of(r) for r in strong)
    return [r for r in strong if r.procs == top], top


def contended(record: Record) -> bool:
    """Whether the record marks its run's timings as taken on a busy host (``host_load.contended``)."""
    return record.host_load is not None and bool(record.host_load.contended)


def quality_reader(metric: str) -> Callable[[Record], float | None]:
    """A record's ``metric`` (fid, kid or label_acc) of its quality block."""
    field = "kid_mean" if metric == "kid" else metric
    return lambda record: getattr(record.quality, field, None) if record.quality is not None else None


def ruler_text(q: Quality, n: int | None = None) -> str:
    """What a score is comparable under: network, the first 12 hex digits of its hash, sample count (``n``, else the
    final model's), the classes scored against where they are not all of the dataset's, and the protocol where it is
    not the default."""
    digest = (q.ruler_sha256 or "")[:12]
    classes = q.classes or []
    subset = f", classes {','.join(map(str, classes))}" if classes and len(classes) < (q.num_classes or 0) else ""
    protocol = q.protocol or MetricsConfig.protocol  # records from before protocols scored as the default does
    named = f", protocol {protocol}" if protocol != MetricsConfig.protocol else ""
    return cell(f"{q.features}" + (f" {digest}" if digest else "") + f", n={n or q.n}{subset}{named}")  # a record's words


def per_seed(runs: list[Record], value: Callable[[Record], Any]) -> list[float | None]:
    """One value per seed: ``value`` of each run, averaged over the seed's repeats (repeats retrain the same model).

    Quality varies with the seed, not the repeat, so a seed counts once however often it ran.
    """
    by_seed: dict[Any, list[float]] = defaultdict(list)
    for r in runs:
        v = value(r)
        by_seed.setdefault(r.seed, [])  # a seed whose runs have no value still counts, as missing
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            by_seed[r.seed].append(float(v))
    return [float(np.mean(values)) if values else None for _, values in sorted(by_seed.items(), key=lambda kv: str(kv[0]))]


def strong_speedup(runs: list[Record], top: int) -> Summary | None:
    """The strong sweep's speedup at ``top`` against its P=1 runs (:func:`suite.analysis.stats.speedup.speedup`, as the scaling table's)."""
    strong = [r for r in runs if r.scaling == "strong"]
    return speedup([r for r in strong if r.procs == 1], [r for r in strong if r.procs == top], top)
