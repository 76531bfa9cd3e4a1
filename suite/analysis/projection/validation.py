"""The projection's validation: each ok run's timed training window predicted by a model fitted on its configuration's
other process counts (or on the ones asked for) against what it measured, one row a run (:class:`ValidationColumns`),
with the runs not fitted or not validated and why."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...measure.network import Network
from ...records.record import Record
from ..columns import column_names, names_of
from .fit import config_key, fit, given_value, model_name, not_projected, problem_of, usable
from .model import CellularModel, GanModel, predict


def _local(net: Network, record: Record) -> Network:
    """``net`` with the record's own ranks per node (where its ranks really sat)."""
    return dataclasses.replace(net, ranks_per_node=record.ranks_per_node or net.ranks_per_node)


def _oversubscribed(record: Record) -> str:
    threads = record.threads_per_rank
    return (
        f"oversubscribed ({record.ranks_per_node} ranks x {threads} thread{'s' if threads != 1 else ''} on "
        f"{record.cores_per_node} cores): measures contention; not fitted, not validated"
    )


def cpu_share(record: Record) -> float | None:
    """Of the cores its threads could use, the share a CPU run's ranks got (mean over ranks); None on GPUs.

    Well below 1 outside oversubscription, other processes were using the machine: the run's time
    measures them too, which no model of the strategy predicts.
    """
    util = record.telemetry.cpu_util_mean if record.telemetry else None
    if record.device != "cpu" or util is None or not record.threads_per_rank:
        return None
    return util / 100 / record.threads_per_rank


def timed_window(record: Record) -> float | None:
    """The part of a run's training window that its timed steps took: ``train_s`` less its warm-up (``warmup_s``),
    which is on the clock but not among the steps the model fits (:mod:`suite.measure.telemetry`)."""
    train_s = record.train_s
    return None if train_s is None else train_s - (record.warmup_s or 0.0)


@dataclass(frozen=True)
class ValidationColumns:
    """The columns of the projection's validation table (:func:`validate`), one run a row."""

    config: str
    run_id: str
    procs: str
    scaling: str
    measured_s: str
    """The run's timed training window (:func:`timed_window`)."""
    predicted_s: str
    error: str
    """``predicted_s / measured_s - 1`` (None where either is missing)."""
    cpu_share: str
    role: str
    """Held out, fitted in-sample, or why the run is not fitted or validated."""
    fitted_on: str


V = column_names(ValidationColumns)
"""The validation table's column names: ``V.error == "error"``."""


def validate(records: list[Record], net: Network, fit_procs: list[int] | None = None, algorithm: str = "best") -> pd.DataFrame:
    """Predicted against measured training windows, one row per ok run (:class:`ValidationColumns`).

    Without ``fit_procs`` each process count is held out in turn: its runs are predicted by a
    model fitted on the configuration's other process counts. With ``fit_procs`` the model is
    fitted on those and predicts the rest. ``net`` is the network the runs were measured on.
    """
    rows: list[dict[str, Any]] = []
    ok = [r for r in records if r.status == "ok" and r.telemetry is not None]
    for key in sorted({config_key(r) for r in ok}, key=str):
        runs = sorted((r for r in ok if config_key(r) == key), key=lambda r: (given_value(r.procs), given_value(r.run_id)))
        fittable = [r for r in runs if usable(r)]
        models: dict[tuple[int, ...], GanModel | CellularModel] = {}

        def model_without(
            procs: int | None,
            fittable: list[Record] = fittable,
            models: dict[tuple[int, ...], GanModel | CellularModel] = models,
        ) -> tuple[tuple[int, ...], GanModel | CellularModel | None]:
            chosen = tuple(
                sorted({given_value(r.procs) for r in fittable if (r.procs in fit_procs if fit_procs else r.procs != procs)})
            )
            if chosen and chosen not in models:
                models[chosen] = fit([r for r in fittable if r.procs in chosen], records)
            return chosen, models.get(chosen)

        for r in runs:
            row: dict[str, Any] = {
                V.config: model_name(key),
                V.run_id: r.run_id,
                V.procs: r.procs,
                V.scaling: r.scaling,
                V.measured_s: timed_window(r),
                V.predicted_s: None,
                V.error: None,
                V.cpu_share: cpu_share(r),
                V.role: "",
                V.fitted_on: "",
            }
            if not_projected(r):
                rows.append({**row, V.role: not_projected(r)})
                continue
            if not usable(r):
                chosen, model = model_without(None)
                row[V.role] = _oversubscribed(r) if r.oversubscribed else "not fitted: no per-rank window times"
            else:
                chosen, model = model_without(r.procs)
                in_fit = r.procs in (fit_procs or [])
                row[V.role] = "fitted (in-sample)" if in_fit else "held out"
            if model is None:
                row[V.role] = (row[V.role] + "; " if not usable(r) else "") + "not validated: no other process count to fit on"
            else:
                outcome = predict(model, problem_of(r), given_value(r.procs), _local(net, r), algorithm, weak=False)
                row[V.predicted_s] = outcome.time
                row[V.fitted_on] = json.dumps(list(chosen))  # the process counts fitted on, a JSON list: [1, 2]
                measured = timed_window(r)
                if usable(r) and outcome.time is not None and measured:
                    row[V.error] = outcome.time / measured - 1
                elif outcome.note:
                    row[V.role] += f"; {outcome.note}"
            rows.append(row)
    return pd.DataFrame(rows, columns=names_of(ValidationColumns))
