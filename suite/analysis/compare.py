"""``suite compare NEW BASELINE``: a regression gate between two sets of run records.

Runs are matched by configuration as the report groups them (scaling, its label, process count), repeats pooled.
A change is a **regression** only when it is worse than its tolerance *and* outside the noise of both measurements:
larger than √(h_b² + h_n²), h the 95 % half-widths; a configuration's interval is the envelope of its repeats'. A
failed run in NEW is a regression; an ok run that cannot be compared (no positive throughput, a spread out of range:
:func:`~.comparable.record_problem`) is ``INVALID``, a failure too, since nothing can say it did not regress. The
metrics, tolerances and rules as users read them: docs/benchmarks-and-ci.md (Comparing two saved runs).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..records.record import Record
from ..records.results import RECORD_FILE, read_record, read_records, records_frame
from .columns import COL
from .comparable import finite_number, record_problem, throughput_problem
from .compare_environment import device_kind, environment_differences, values_text
from .metric_table import METRICS
from .report.scaling_tables import config_label as sweep_label  # the configuration label the report's scaling tables group by
from .report.scaling_tables import scaling_table
from .systems import ruler_text

REGRESSION, WITHIN_NOISE, OK, IMPROVED, NOT_COMPARED = "REGRESSION", "within noise", "ok", "improved", "n/a"
INVALID = "INVALID"
"""The verdict on an ok run without a throughput: a failure, like a regression (nothing says it is not one)."""


class CompareError(ValueError):
    """Inputs that cannot be compared (nothing matches, different devices, unreadable files)."""


def parse_tolerances(items: list[str] | None) -> dict[str, float]:
    """Default tolerances updated by ``METRIC=NUMBER`` items; bad items raise :class:`CompareError`."""
    tolerances = {name: metric.tolerance for name, metric in METRICS.items()}
    for item in items or []:
        name, sep, number = item.partition("=")
        if not sep or name not in METRICS:
            raise CompareError(f"--tolerance {item}: expected METRIC=NUMBER with METRIC one of {', '.join(METRICS)}")
        try:
            tolerances[name] = float(number)
        except ValueError:
            raise CompareError(f"--tolerance {item}: {number!r} is not a number") from None
        if not tolerances[name] >= 0:
            raise CompareError(f"--tolerance {item}: must be a non-negative number")
    return tolerances


# --- loading -------------------------------------------------------------------------------------


def load_side(path: Path) -> list[Record]:
    """The records of a results folder, of a JSON list of records, of a folder holding ``records.json``, or the one
    record of a run folder (``suite compare RUN RUN`` compares two runs of the same configuration).

    ``records.json`` is what ``suite report`` writes beside its report (``RESULTS/report/records.json``),
    the usual form of a baseline saved earlier; see :func:`suite.records.results.read_records`.
    """
    try:
        if (path / RECORD_FILE).is_file():
            record = read_record(path)
            return [record] if record is not None else []
        return read_records(path)
    except ValueError as error:  # RecordError too
        raise CompareError(str(error)) from None


# --- configurations and their measurements ---------------------------------------------------------


ComparedConfig = tuple[str, str, int]
"""A configuration: (scaling, report label, procs)."""


@dataclass
class Config:
    """The ok runs (repeats) of one configuration on one side."""

    scaling: str
    label: str
    procs: int
    records: list[Record] = field(default_factory=list)

    @property
    def name(self) -> str:
        """How the comparison names it: ``data_parallel / bce / horovod / P=2``, `` (weak)`` added for weak scaling."""
        return f"{self.label} / P={self.procs}" + (" (weak)" if self.scaling == "weak" else "")


def _invalid_rows(records: list[Record], side: str) -> list[Row]:
    """An :data:`INVALID` row for each ok record of ``side`` that cannot be compared (:func:`record_problem`), naming the
    record and the field."""
    rows = []
    for r in records:
        if r.status == "ok" and (problem := record_problem(r)) is not None:
            rule = "a positive throughput" if throughput_problem(r) else "spreads in range of what they qualify"
            note = f"run {r.run_id} ({side}): {problem}; an ok run records {rule}"
            field = problem.split()[0]  # every problem starts with the field it names
            rows.append(Row(re.sub(r"-r\d+$", "", str(r.run_id)), field, None, None, None, 0.0, INVALID, note))
    return rows


def _configs(records: list[Record]) -> dict[ComparedConfig, Config]:
    """The ok records grouped by (scaling, report label, procs)."""
    ok = [r for r in records if r.status == "ok" and record_problem(r) is None]  # the others: INVALID rows
    if not ok:
        return {}
    frame = records_frame(ok)
    labels = pd.Series(index=frame.index, dtype=object)
    for scaling in frame[COL.scaling].unique():
        rows = frame[COL.scaling] == scaling
        labels[rows] = sweep_label(frame[rows], scaling)
    configs: dict[ComparedConfig, Config] = {}
    for record, scaling, label, procs in zip(ok, frame[COL.scaling], labels, frame[COL.procs], strict=True):
        key = (scaling, label, int(procs))
        configs.setdefault(key, Config(scaling, label, int(procs))).records.append(record)
    return configs


@dataclass(frozen=True)
class Measure:
    """A configuration's value (mean over repeats) and its noise interval [lo, hi]."""

    value: float
    lo: float
    hi: float

    @property
    def relative_half_width(self) -> float:
        """Half the interval's width over the value's magnitude."""
        return (self.hi - self.lo) / 2 / abs(self.value) if self.value else math.inf


def _images_per_s(record: Record) -> tuple[float, float, float] | None:
    value = finite_number(record.images_per_s)
    if value is None:
        return None
    ci = record.images_per_s_ci95
    if not ci:  # no interval recorded (a single timed step): the value alone
        return value, value, value
    lo, hi = finite_number(ci[0]), finite_number(ci[1])  # hi is None when the step-time interval reaches zero
    return value, value if lo is None else lo, math.inf if hi is None else hi


def _step_p50(record: Record) -> tuple[float, float, float] | None:
    t = record.telemetry
    p50, mean, half = (
        (finite_number(t.step_p50), finite_number(t.step_mean), finite_number(t.step_ci95))
        if t is not None
        else (None, None, None)
    )
    if p50 is None:
        return None
    relative = half / mean if half is not None and mean else 0.0
    return p50, p50 * max(0.0, 1 - relative), p50 * (1 + relative)  # a step takes no negative time


def _point(field_of: Callable[[Record], Any]) -> Callable[[Record], tuple[float, float, float] | None]:
    def read(record: Record) -> tuple[float, float, float] | None:
        value = finite_number(field_of(record))
        return None if value is None else (value, value, value)

    return read


def _kid(record: Record) -> tuple[float, float, float] | None:
    q = record.quality
    mean, std = (finite_number(q.kid_mean), finite_number(q.kid_std)) if q is not None else (None, None)
    if mean is None:
        return None
    return mean, mean - (std or 0.0), mean + (std or 0.0)


# metric -> (value, lo, hi) of one run
RUN_READERS: dict[str, Callable[[Record], tuple[float, float, float] | None]] = {
    "images_per_s": _images_per_s,
    "step_p50": _step_p50,
    "comm_share": _point(lambda r: r.telemetry.comm_share if r.telemetry is not None else None),
    "comm_bytes": _point(lambda r: r.comm.bytes if r.comm is not None else None),
    "fid": _point(lambda r: r.quality.fid if r.quality is not None else None),
    "kid": _kid,
}
QUALITY_METRICS = ("fid", "kid")


def measure(config: Config, metric: str) -> Measure | None:
    """Mean over the configuration's repeats and the envelope of their intervals; None when unrecorded."""
    runs = [v for v in (RUN_READERS[metric](r) for r in config.records) if v is not None]
    if not runs:
        return None
    values, los, his = zip(*runs, strict=True)
    return Measure(float(np.mean(values)), min(los), max(his))


def _quality_basis(config: Config) -> str:
    """What a configuration's scores are comparable under (:func:`suite.analysis.systems.ruler_text`: ruler, hash, n, classes).

    Records from before rulers were pinned have no hash: their scores are never compared with pinned ones.
    """
    return " / ".join(sorted({ruler_text(r.quality) for r in config.records if r.quality is not None}))


def scaling_measures(configs: dict[ComparedConfig, Config]) -> dict[tuple[ComparedConfig, str], Measure]:
    """Speedup (strong) or efficiency (weak) per (configuration key, metric) with P > 1, from the report's scaling table.

    The interval is the value times 1 ± the root sum of squares of the relative half-widths of
    the images/s intervals at P and at P = 1 (a ratio of two noisy rates).
    """
    out: dict[tuple[ComparedConfig, str], Measure] = {}
    for scaling, metric in (("strong", "speedup"), ("weak", "efficiency")):
        records = [r for (s, _, _), c in configs.items() if s == scaling for r in c.records]
        if not records:
            continue
        for row in scaling_table(records_frame(records), scaling).itertuples(index=False):
            key, base = (scaling, row.config, int(row.procs)), (scaling, row.config, 1)
            value = finite_number(getattr(row, metric))
            rates = [measure(configs[k], "images_per_s") for k in (key, base) if k in configs]
            known = [m for m in rates if m is not None]
            if row.procs == 1 or value is None or len(known) < 2:
                continue
            half = value * math.hypot(*(m.relative_half_width for m in known))
            out[key, metric] = Measure(value, value - half, value + half)
    return out


# --- the comparison -------------------------------------------------------------------------------------


@dataclass
class Row:
    """One metric of one configuration: both measurements, the change and the verdict."""

    config: str
    metric: str
    baseline: Measure | None
    new: Measure | None
    change: float | None
    tolerance: float
    verdict: str
    note: str = ""

    @property
    def unit(self) -> str:
        """``%`` of the baseline, ``pt`` (percentage points) for shares, nothing for a run's status."""
        if self.metric not in METRICS:
            return ""
        return "pt" if METRICS[self.metric].absolute else "%"

    def as_dict(self) -> dict[str, Any]:
        """The row for ``--json``: both sides as {value, lo, hi}, infinite ends as null."""
        return {
            "config": self.config,
            "metric": self.metric,
            "baseline": _interval_dict(self.baseline),
            "new": _interval_dict(self.new),
            "change": finite_number(self.change),
            "unit": self.unit,
            "tolerance": self.tolerance,
            "verdict": self.verdict,
            "note": self.note,
        }


def _interval_dict(m: Measure | None) -> dict[str, float | None] | None:
    return None if m is None else {"value": m.value, "lo": finite_number(m.lo), "hi": finite_number(m.hi)}


def outside_noise(base: Measure, new: Measure) -> bool:
    """Whether the two values differ by more than their combined noise.

    The difference of two independent measurements with 95 % half-widths h_b and h_n has the
    half-width √(h_b² + h_n²); the half-widths are taken on the sides that face each other.
    """
    if new.value < base.value:
        h_base, h_new = base.value - base.lo, new.hi - new.value
    else:
        h_base, h_new = base.hi - base.value, new.value - new.lo
    return abs(new.value - base.value) > math.hypot(h_base, h_new)


def judge(metric: str, base: Measure, new: Measure, tolerance: float) -> tuple[float, str]:
    """(change, verdict): the change in % of the baseline (points for shares) and what it means.

    A change worse than ``tolerance`` is a regression when it is outside the noise
    (:func:`outside_noise`) and ``within noise`` otherwise; a change better than the tolerance
    and outside the noise is an improvement.
    """
    spec = METRICS[metric]
    if spec.absolute:
        change = (new.value - base.value) * 100
    elif base.value:
        change = (new.value - base.value) / abs(base.value) * 100
    else:
        change = 0.0 if new.value == base.value else math.copysign(math.inf, new.value - base.value)
    worse = -change if spec.higher_is_better else change
    if abs(worse) <= tolerance:
        return change, OK
    if not outside_noise(base, new):
        return change, WITHIN_NOISE if worse > 0 else OK
    return change, REGRESSION if worse > 0 else IMPROVED


def _compare_config(
    key: ComparedConfig,
    base: Config,
    new: Config,
    scaling: dict[str, dict[tuple[ComparedConfig, str], Measure]],
    tolerances: dict[str, float],
) -> list[Row]:
    rows = []
    comparable_quality = _quality_basis(base) == _quality_basis(new)
    for metric in METRICS:
        if metric in RUN_READERS:
            b, n = measure(base, metric), measure(new, metric)
        else:
            b, n = scaling["baseline"].get((key, metric)), scaling["new"].get((key, metric))
        if b is None and n is None:
            continue  # not recorded on either side (KID without KID fields, speedup at P=1, ...)
        row = Row(new.name, metric, b, n, None, tolerances[metric], NOT_COMPARED)
        if metric in QUALITY_METRICS and not comparable_quality:
            row.note = f"different ruler or sample count: {_quality_basis(base)} vs {_quality_basis(new)}"
        elif b is None or n is None:
            row.note = f"not recorded in the {'baseline' if b is None else 'new results'}"
        else:
            row.change, row.verdict = judge(metric, b, n, tolerances[metric])
        rows.append(row)
    return rows


@dataclass
class Comparison:
    """The result of :func:`compare`: environment differences, rows, and what was not compared."""

    new_path: str
    baseline_path: str
    environment: list[dict[str, str]]
    rows: list[Row]
    baseline_only: list[str]
    new_only: list[str]
    ignored_baseline_failures: list[str]

    @property
    def regressions(self) -> list[Row]:
        """The rows whose verdict is a regression."""
        return [r for r in self.rows if r.verdict == REGRESSION]

    @property
    def invalid(self) -> list[Row]:
        """The rows of ok runs without a throughput (:data:`INVALID`)."""
        return [r for r in self.rows if r.verdict == INVALID]

    @property
    def exit_code(self) -> int:
        """1 with a regression or an invalid record, else 0 (inputs that cannot be compared raise :class:`CompareError`)."""
        return 1 if self.regressions or self.invalid else 0

    def as_dict(self) -> dict[str, Any]:
        """The whole comparison for ``--json``."""
        return {
            "new": self.new_path,
            "baseline": self.baseline_path,
            "regressions": len(self.regressions),
            "invalid": len(self.invalid),
            "environment": self.environment,
            "rows": [r.as_dict() for r in self.rows],
            "baseline_only": self.baseline_only,
            "new_only": self.new_only,
            "ignored_baseline_failures": self.ignored_baseline_failures,
        }


def compare(
    new_path: Path, baseline_path: Path, tolerances: dict[str, float] | None = None, allow_different_device: bool = False
) -> Comparison:
    """Compare the records at ``new_path`` with those at ``baseline_path`` (see the module docstring)."""
    tolerances = tolerances or parse_tolerances(None)
    base_records, new_records = load_side(baseline_path), load_side(new_path)
    base_configs, new_configs = _configs(base_records), _configs(new_records)
    matched = {k: (base_configs[k], new_configs[k]) for k in new_configs if k in base_configs}
    failed = [r for r in new_records if r.status != "ok"]
    invalid = _invalid_rows(new_records, f"new results, {new_path}") + _invalid_rows(base_records, f"baseline, {baseline_path}")
    if not matched and not failed and not invalid:
        raise CompareError(
            "nothing to compare: no configuration matches. "
            f"New ({new_path}): {'; '.join(c.name for c in new_configs.values()) or 'no ok run'}. "
            f"Baseline ({baseline_path}): {'; '.join(c.name for c in base_configs.values()) or 'no ok run'}"
        )
    base_ok = [r for r in base_records if r.status == "ok"]
    new_ok = [r for r in new_records if r.status == "ok"]
    devices = values_text(base_ok, device_kind), values_text(new_ok, device_kind)
    if devices[0] != devices[1] and new_ok and not allow_different_device:
        raise CompareError(
            f"the baseline ran on {devices[0]} and the new results on {devices[1]}: timings of different "
            "devices are not comparable; pass --allow-different-device to compare them anyway"
        )
    scaling = {"baseline": scaling_measures(base_configs), "new": scaling_measures(new_configs)}
    rows = [
        Row(
            config=re.sub(r"-r\d+$", "", str(r.run_id)),
            metric="status",
            baseline=None,
            new=None,
            change=None,
            tolerance=0.0,
            verdict=REGRESSION,
            note=f"run {r.run_id} {r.status or 'failed'}: "
            + str(r.error or r.reason or "no error recorded").splitlines()[0],  # diverged: its reason
        )
        for r in failed
    ] + invalid
    for key in sorted(matched):
        rows += _compare_config(key, *matched[key], scaling, tolerances)
    return Comparison(
        new_path=str(new_path),
        baseline_path=str(baseline_path),
        environment=environment_differences(base_ok, new_ok, [(bc.records, nc.records, nc.name) for bc, nc in matched.values()]),
        rows=rows,
        baseline_only=[c.name for k, c in sorted(base_configs.items()) if k not in new_configs],
        new_only=[c.name for k, c in sorted(new_configs.items()) if k not in base_configs],
        ignored_baseline_failures=[str(r.run_id) for r in base_records if r.status != "ok"],
    )
