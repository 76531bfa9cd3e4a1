"""Reading the gate's history (:mod:`.gate_history` writes it): every step of every machine, checked as it is read.

A history folder may hold files from elsewhere, so the reader follows no link (every file is opened through the
folder's descriptor with ``O_NOFOLLOW``; no name read from a file becomes a path), reads JSON only, bounded as the
suite reads JSON, names each damaged file in one line and reads the others, and keeps each step's machine and asv
environment (suite version) so that a series mixes neither.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.stats.paired import VERDICTS
from ..config.jsonfile import JsonError
from ..config.safe_text import SAFE_NAME
from .gate_history import BENCHMARKS_FILE, MACHINE_FILE, RESULTS_API
from .gate_steps import HISTORY_FORMAT, QUANTITY_KINDS, additive, read_json_at, t_quantile

HEX40 = re.compile(r"[0-9a-f]{40}")
NAME = re.compile(r"gate\.([A-Za-z0-9][A-Za-z0-9._-]{0,99})\.(" + "|".join(QUANTITY_KINDS) + ")")
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Damaged(ValueError):
    """A history file that is not a step the gate wrote: the field and why."""


@dataclass(frozen=True)
class Value:
    """One quantity of one step, on its additive scale (:mod:`.gate_steps`)."""

    kind: str
    mean: float
    se: float
    n: int
    verdict: str
    margin: float | None


@dataclass(frozen=True)
class GateStep:
    """One gate run: the candidate's commit measured against the baseline's, on one machine and environment."""

    commit: str
    baseline: str
    machine: str
    env: str
    path: str
    values: dict[str, Value]


@dataclass
class GateHistory:
    """Every readable step of a history folder, and one line for each file left out."""

    folder: Path
    steps: list[GateStep] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


LARGEST = 1e9
"""A change (percent, FID points) or margin beyond this is no gate's measurement."""


def _number(value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise Damaged(f"{where}: {str(value)[:40]!r} is not a number")
    if abs(value) > LARGEST:
        raise Damaged(f"{where}: {value:g} is out of range (at most {LARGEST:g} in size)")
    return float(value)


def _single(row: list[Any], columns: dict[str, int], column: str, name: str) -> Any:
    """The one value of a one-parameter asv column (``[x]``), or None where the row has no such column."""
    at = columns.get(column)
    cell = row[at] if at is not None and at < len(row) else None
    if cell is None:
        return None
    if not isinstance(cell, list) or len(cell) != 1:
        raise Damaged(f"results.{name}.{column}: {cell!r} is not a one-value list")
    return cell[0]


def _value(name: str, row: Any, columns: dict[str, int], gate: dict[str, Any]) -> Value | None:
    """A quantity's value from its asv row and the gate's verdict and margin of it; None where the gate gave none."""
    match = NAME.fullmatch(name)
    if match is None:
        raise Damaged(f"results: {name[:80]!r} is not a gated quantity (gate.<run id>.<metric>)")
    kind = QUANTITY_KINDS[match.group(2)]
    if not isinstance(row, list):
        raise Damaged(f"results.{name}: not a list of asv's result columns")
    shown = _single(row, columns, "result", name)
    if shown is None:
        return None
    shown = _number(shown, f"results.{name}.result")
    low = _number(_single(row, columns, "stats_ci_99_a", name), f"results.{name}.stats_ci_99_a")
    high = _number(_single(row, columns, "stats_ci_99_b", name), f"results.{name}.stats_ci_99_b")
    n = _single(row, columns, "stats_repeat", name)
    if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= 100_000:
        raise Damaged(f"results.{name}.stats_repeat: {n!r} is not a count of pairs (2 or more)")
    if not low - 1e-9 <= shown <= high + 1e-9 or (kind == "log" and low <= -100):
        raise Damaged(f"results.{name}: the interval [{low:g}, {high:g}] does not hold the change {shown:g}")
    verdict = gate["verdicts"].get(name)
    if verdict not in VERDICTS:
        raise Damaged(f"gate.verdicts.{name}: {verdict!r} is not one of {', '.join(VERDICTS)}")
    margin = gate["margins"].get(name)
    if margin is not None and not (_number(margin, f"gate.margins.{name}") > 0):
        raise Damaged(f"gate.margins.{name}: {margin!r} is not positive")
    se = (additive(kind, high) - additive(kind, low)) / (2 * t_quantile(0.995, n - 1))
    return Value(kind, additive(kind, shown), max(se, 0.0), n, verdict, margin)


def _gate_key(doc: dict[str, Any]) -> dict[str, Any]:
    """The gate's own key of a results file, checked."""
    gate = doc.get("gate")
    if not isinstance(gate, dict):
        raise Damaged("gate: missing; not a step of the gate's history")
    if gate.get("format") != HISTORY_FORMAT:
        raise Damaged(f"gate.format: {gate.get('format')!r}, not {HISTORY_FORMAT} (a history of another suite version)")
    if not isinstance(gate.get("baseline_commit"), str) or not HEX40.fullmatch(gate["baseline_commit"]):
        raise Damaged("gate.baseline_commit: not a full commit hash")
    for key in ("verdicts", "margins"):
        if not isinstance(gate.get(key), dict):
            raise Damaged(f"gate.{key}: not a mapping")
    return gate


def parse_step(doc: Any, machine: str, path: str) -> GateStep:
    """A step from the data of a results file found in ``machine``'s folder; :class:`Damaged` naming the field."""
    if not isinstance(doc, dict):
        raise Damaged("not a JSON object")
    if doc.get("version") != RESULTS_API:
        raise Damaged(f"version: {doc.get('version')!r}, not asv's results format {RESULTS_API}")
    commit, env, params = doc.get("commit_hash"), doc.get("env_name"), doc.get("params")
    if not isinstance(commit, str) or not HEX40.fullmatch(commit):
        raise Damaged("commit_hash: not a full commit hash")
    if not isinstance(env, str) or not SAFE_NAME.fullmatch(env):
        raise Damaged("env_name: not a safe name")
    if not isinstance(params, dict) or params.get("machine") != machine:
        said = params.get("machine") if isinstance(params, dict) else None
        raise Damaged(f"params.machine: written on machine {str(said)[:100]!r}, found in machine {machine!r}'s folder; not mixed")
    gate = _gate_key(doc)
    columns, results = doc.get("result_columns"), doc.get("results")
    needed = {"result", "stats_ci_99_a", "stats_ci_99_b", "stats_repeat"}
    if not isinstance(columns, list) or not needed <= {c for c in columns if isinstance(c, str)}:
        raise Damaged("result_columns: not asv's result columns")
    if not isinstance(results, dict):
        raise Damaged("results: not a mapping")
    at = {c: i for i, c in enumerate(columns) if isinstance(c, str)}
    values = {name: v for name, row in results.items() if (v := _value(name, row, at, gate)) is not None}
    return GateStep(commit, gate["baseline_commit"], machine, env, path, values)


def _read_machine(history_fd: int, machine: str, folder: Path, history: GateHistory) -> None:
    """Add the steps of one machine's folder to ``history``; each file left out is one line of its problems."""
    fd = os.open(machine, _FOLDER, dir_fd=history_fd)
    try:
        with os.scandir(fd) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".json"))
        for name in names:
            shown = str(folder / machine / name)
            try:
                data = read_json_at(fd, name, shown)
                if name == MACHINE_FILE:
                    if not isinstance(data, dict) or data.get("machine") != machine:
                        raise Damaged(f"machine: not {machine!r}, the folder's name")
                    continue
                history.steps.append(parse_step(data, machine, shown))
            except JsonError as error:
                history.problems.append(f"{error}; left out")
            except Damaged as error:
                history.problems.append(f"{shown}: {error}; left out")
    finally:
        os.close(fd)


def read_history(folder: Path) -> GateHistory:
    """Every step under ``folder`` (an asv results folder); :class:`FileNotFoundError` where there is none."""
    history = GateHistory(folder)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the folder itself: the user's choice
    try:
        with os.scandir(fd) as scanned:
            entries = sorted(scanned, key=lambda e: e.name)
        for entry in entries:
            if entry.is_symlink():
                history.problems.append(f"{folder / entry.name}: a symbolic link; not followed, left out")
            elif entry.is_dir(follow_symlinks=False):
                if not SAFE_NAME.fullmatch(entry.name):
                    history.problems.append(f"{str(folder / entry.name)!r}: not a machine's name; left out")
                    continue
                try:
                    _read_machine(fd, entry.name, folder, history)
                except OSError as error:
                    history.problems.append(f"{folder / entry.name}: {error.strerror or error}; left out")
            elif entry.name != BENCHMARKS_FILE and entry.name.endswith(".json"):
                history.problems.append(f"{folder / entry.name}: a results file outside any machine's folder; left out")
    finally:
        os.close(fd)
    return history
