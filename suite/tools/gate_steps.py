"""One gate run as a step of the history: each gated quantity's mean change and standard error, on a scale where the
steps of a series add up (:mod:`.gate_history` writes them, :mod:`.gate_history_read` reads them back).

Scales, per kind of quantity (:data:`QUANTITY_KINDS`):

- ``log`` (images/s, step time): the log of B's time over A's, the gate's own difference; shown as percent slower,
  ``100 (e^x - 1)``: five steps of +5 % add up to ``5 log 1.05``, shown as +27.6 %;
- ``rel`` (bytes moved): the relative change, shown as percent;
- ``abs`` (FID): B's FID minus A's, shown as it is.

A step's standard error comes from the verdict the gate gave: its mean and its one-sided ``1 - alpha`` Student-t
upper bound over ``n`` pairs, ``se = (upper - mean) / t(1 - alpha, n - 1)``, so the history holds what the gate
decided on, not a second estimate.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import stat
from pathlib import Path
from typing import Any

from ..analysis.metric_table import METRICS
from ..analysis.stats import paired
from ..config.jsonfile import JsonError, json_from_bytes
from .gate_files import GateResult

HISTORY_FORMAT = 1
"""The version of what the gate adds to asv's results files (its ``gate`` key, the ``gate.<run>.<metric>`` names)."""
QUANTITY_KINDS = {"images_per_s": "log", "step_p50": "log", "comm_bytes": "rel", "fid": "abs"}
"""Each gated quantity's scale (above)."""
ASV_COLUMNS = (
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
    "profile",
)
"""asv's result columns (a results file's ``result_columns``, API version 2), in asv's order."""
MAX_FILE_BYTES = 4 << 20
"""A history file larger than this is not one the gate wrote (one gate run writes a few kB)."""


def additive(kind: str, shown: float) -> float:
    """A change as shown (percent, or FID points) on the scale where steps add up."""
    if kind == "log":
        return math.log1p(shown / 100)
    return shown / 100 if kind == "rel" else shown


def display(kind: str, value: float) -> float:
    """A change on the additive scale as shown: percent worse, or FID points."""
    if kind == "log":
        return 100 * math.expm1(value)
    return 100 * value if kind == "rel" else value


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (the normal one for infinite ``df``)."""
    from scipy import stats

    return float(stats.norm.ppf(p)) if math.isinf(df) else float(stats.t.ppf(p, df))


def margin_of(metric: str, threshold: float) -> float:
    """The threshold (percent worse) on ``metric``'s additive scale (the gate's own margin)."""
    return paired.threshold_margin(METRICS[metric], threshold)


def _mean_se(v: dict[str, Any], kind: str, alpha: float) -> tuple[float, float] | None:
    """A verdict row's mean and standard error on the additive scale, or None where it gave no number."""
    n = v.get("pairs") or 0
    if kind == "abs":
        if v.get("change") is None:
            return (0.0, 0.0) if v.get("note") == "identical models" else None
        mean, upper = float(v["change"]), v.get("upper")
    else:
        if v.get("change_pct") is None:
            return None
        mean, upper = additive(kind, float(v["change_pct"])), v.get("upper_pct")
        upper = None if upper is None else additive(kind, float(upper))
    if upper is None or n < 2:
        return None
    return mean, max(0.0, (float(upper) - mean) / t_quantile(1 - alpha, n - 1))


def _samples(result: GateResult, run_id: str, metric: str) -> list[float] | None:
    """The pairs' own changes of ``metric`` as shown, or None where a pair lacks a value."""
    shown = []
    for pair in result.pairs:
        a, b = pair["A"].get(run_id, {}).get(metric), pair["B"].get(run_id, {}).get(metric)
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a <= 0 or b < 0:
            return None
        shown.append(display(QUANTITY_KINDS[metric], paired.difference(METRICS[metric], a, b)))
    return shown or None


def step_values(result: GateResult) -> dict[str, dict[str, Any]]:
    """Each gated quantity of a gate run, ``gate.<run id>.<metric>``: kind, mean, se, pairs, verdict, margin and the
    pairs' changes; a quantity the gate gave no number for (one seed, a broken record) is left out."""
    alpha, threshold = float(result.settings["alpha"]), float(result.settings["threshold"])
    values: dict[str, dict[str, Any]] = {}
    for v in result.verdicts:
        kind = QUANTITY_KINDS.get(v["metric"])
        got = None if kind is None else _mean_se(v, kind, alpha)
        if kind is None or got is None:
            continue
        margin = v.get("margin") if kind == "abs" else margin_of(v["metric"], threshold)
        values[f"gate.{v['run_id']}.{v['metric']}"] = {
            "kind": kind,
            "mean": got[0],
            "se": got[1],
            "n": int(v["pairs"]),
            "verdict": v["verdict"],
            "margin": margin,
            "samples": None if kind == "abs" else _samples(result, v["run_id"], v["metric"]),
        }
    return values


def read_json_at(dir_fd: int, name: str, shown: str) -> Any:
    """The JSON of the regular file ``name`` in the folder open as ``dir_fd``, opened without following a link and
    bounded as the suite reads JSON (:func:`suite.config.jsonfile.json_from_bytes`); :class:`JsonError` naming
    ``shown`` for a link, a FIFO or anything else that is not such a file."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as error:
        reason = "a symbolic link; not followed" if error.errno == errno.ELOOP else error.strerror or "unreadable"
        raise JsonError(shown, reason) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise JsonError(shown, "not a regular file")
        data = handle.read(MAX_FILE_BYTES + 1)
    return json_from_bytes(data, shown, MAX_FILE_BYTES)


def read_benchmarks(path: Path | str) -> dict[str, Any]:
    """The entries of an asv ``benchmarks.json`` (without its ``version``); {} where there is none, and, with a
    warning line naming it, where it is damaged (the gate then writes it anew)."""
    path = Path(path)
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        data = read_json_at(folder, path.name, str(path))
    except FileNotFoundError:
        return {}
    except (JsonError, OSError) as error:
        logging.getLogger(__name__).warning("gate history: %s; written anew", error)
        return {}
    finally:
        os.close(folder)
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if k != "version" and isinstance(v, dict)}
