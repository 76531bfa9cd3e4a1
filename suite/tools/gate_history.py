"""The gate's history: each ``suite gate`` run appends its paired changes to an asv results folder, in asv's layout
(results format, API version 2), with :mod:`json` only; docs/benchmarks-and-ci.md, "The gate's history", gives the
files and columns. The changes are the gate's own verdict rows, from which a reader recovers each step's mean and
standard error on the additive scale (:mod:`.gate_steps`; :mod:`.gate_series` chains them per commit).

A run is appended only where it measured a commit against another one: not with uncommitted changes, an injected
slowdown, an A/A run or without verdicts. A history that cannot be written is one warning line; the gate's verdict
stands.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from .. import __version__
from ..analysis.stats.paired import VERDICTS
from ..config.safe_text import SAFE_NAME
from ..records.results import atomic_write_text
from .gate_files import GateResult
from .gate_steps import ASV_COLUMNS, HISTORY_FORMAT, QUANTITY_KINDS, display, read_benchmarks, step_values, t_quantile

log = logging.getLogger(__name__)

ENV_PREFIX = "gate-suite"
"""A step's asv environment name is this and the suite's version: another version is another environment."""
BENCHMARK_VERSION = f"gate-{HISTORY_FORMAT}"
MACHINE_FILE, BENCHMARKS_FILE = "machine.json", "benchmarks.json"
MACHINE_API, RESULTS_API, BENCHMARKS_API = 1, 2, 2
"""asv's API versions of machine.json, of a results file and of benchmarks.json."""


def env_name(version: str = __version__) -> str:
    """The asv environment name of steps written by suite ``version``."""
    return f"{ENV_PREFIX}{version}"


def default_machine() -> str:
    """This host's name as asv takes it (``platform.node()``), with characters a folder name cannot hold as ``_``."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", platform.node() or "unknown").lstrip("._-")[:100]
    return name or "unknown"


def _first(path: str, key: str) -> str:
    """The value of the first ``key: value`` line of a /proc file, or ""."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.split(":", 1)[0].strip() == key:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def machine_info(name: str) -> dict[str, str]:
    """asv's machine fields for this host, under the machine ``name``."""
    return {
        "machine": name,
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": _first("/proc/cpuinfo", "model name"),
        "num_cpu": str(os.cpu_count() or ""),
        "ram": _first("/proc/meminfo", "MemTotal").split(" ")[0],
    }


def _row(value: dict[str, Any], started_ms: int, seconds: float) -> list[Any]:
    """One quantity's row in asv's result columns (:data:`.gate_steps.ASV_COLUMNS`)."""
    kind, mean, se, n = value["kind"], value["mean"], value["se"], value["n"]
    half = t_quantile(0.995, n - 1) * se
    row = [
        [display(kind, mean)],
        [],
        BENCHMARK_VERSION,
        started_ms,
        seconds,
        [display(kind, mean - half)],
        [display(kind, mean + half)],
        None,
        None,
        [1],
        [n],
        [value["samples"]] if value.get("samples") else None,
    ]
    while row and row[-1] is None:
        row.pop()
    return row


def step_document(result: GateResult, machine: dict[str, str], commit_ms: int | None) -> dict[str, Any]:
    """The asv results file of one gate run (:func:`.gate_steps.step_values` gives its quantities)."""
    values = step_values(result)
    now = datetime.datetime.now(datetime.timezone.utc)
    started = int(now.timestamp() * 1000)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return {
        "commit_hash": result.sides["B"]["commit"],
        "env_name": env_name(),
        "date": commit_ms if commit_ms is not None else started,
        "params": {**machine, "python": python},
        "python": python,
        "requirements": {},
        "env_vars": {},
        "result_columns": list(ASV_COLUMNS),
        "results": {name: _row(v, started, result.minutes * 60) for name, v in values.items()},
        "durations": {},
        "gate": {
            "format": HISTORY_FORMAT,
            "suite_version": __version__,
            "baseline_commit": result.sides["A"]["commit"],
            "verdict": result.verdict,
            "threshold": result.settings["threshold"],
            "alpha": result.settings["alpha"],
            "verdicts": {name: v["verdict"] for name, v in values.items()},
            "margins": {name: v["margin"] for name, v in values.items() if v.get("margin") is not None},
        },
        "version": RESULTS_API,
    }


def benchmark_entry(name: str) -> dict[str, Any]:
    """asv's description of one gated quantity (a ``track`` benchmark: asv graphs the value it is given)."""
    metric = name.rsplit(".", 1)[-1]
    unit = "FID" if QUANTITY_KINDS.get(metric) == "abs" else "%"
    return {
        "name": name,
        "pretty_name": f"{name} (change B vs A, {unit}; positive is worse)",
        "type": "track",
        "unit": unit,
        "params": [],
        "param_names": [],
        "version": BENCHMARK_VERSION,
        "code": "suite gate: the paired change of the candidate against its baseline (docs/benchmarks-and-ci.md)",
        "timeout": 0,
    }


def skip_reason(result: GateResult) -> str | None:
    """Why this gate run is not a step of the history (None: it is one)."""
    settings, sides = result.settings, result.sides
    if not result.verdicts or result.verdict not in VERDICTS:
        return f"the gate gave no verdicts ({result.verdict})"
    if "uncommitted" in sides["B"].get("label", ""):
        return "the candidate has uncommitted changes: not the commit's measurement"
    if settings.get("inject_slowdown"):
        return "--inject-slowdown measures the gate, not a commit"
    if sides["A"]["commit"] == sides["B"]["commit"]:
        return "an A/A run (the baseline is the candidate's commit)"
    return None


def commit_time_ms(repo: Path, commit: str) -> int | None:
    """The commit's date as a JavaScript timestamp (what asv keys a result's ``date`` by), or None."""
    done = subprocess.run(["git", "-C", str(repo), "show", "-s", "--format=%ct", commit], capture_output=True, text=True)
    return int(done.stdout.strip()) * 1000 if done.returncode == 0 and done.stdout.strip().isdigit() else None


def append_step(history: Path, result: GateResult, machine: str, commit_ms: int | None = None) -> Path:
    """Write ``result`` as one step of ``history`` on ``machine``: its results file, the machine's machine.json and
    the quantities in benchmarks.json (kept with the others there). Returns the results file."""
    if not SAFE_NAME.fullmatch(machine):
        raise ValueError(f"--machine: {machine!r} is not a safe name (ASCII letters, digits, '.', '_', '-')")
    machine_fields = machine_info(machine)
    document = step_document(result, machine_fields, commit_ms)
    folder = history / machine
    atomic_write_text(folder / MACHINE_FILE, json.dumps({**machine_fields, "version": MACHINE_API}, indent=4))
    path = folder / f"{document['commit_hash'][:8]}-{document['env_name']}.json"
    atomic_write_text(path, json.dumps(document))
    known = read_benchmarks(history / BENCHMARKS_FILE)
    known.update({name: benchmark_entry(name) for name in document["results"]})
    atomic_write_text(history / BENCHMARKS_FILE, json.dumps({**known, "version": BENCHMARKS_API}, indent=4, sort_keys=True))
    return path


def record_history(history: Path | None, result: GateResult, machine: str, repo: Path) -> Path | None:
    """Append ``result`` to ``history`` where it is a step (:func:`skip_reason`); one log line either way. A history
    that cannot be written is a warning, never the gate's failure."""
    if history is None:
        return None
    if (why := skip_reason(result)) is not None:
        log.info("gate history: not appended: %s", why)
        return None
    try:
        path = append_step(history, result, machine, commit_time_ms(repo, result.sides["B"]["commit"]))
    except (OSError, ValueError) as error:
        log.warning("gate history: not appended to %s: %s", history, " ".join(str(error).split()))
        return None
    log.info("gate history: appended %s", path)
    return path
