"""``suite gate``: a paired, interleaved A/B regression gate on one host (docs/benchmarks-and-ci.md).

The baseline revision (A) is checked out in a git worktree beside the candidate (B: this clean checkout), with the
candidate's environment or, where ``ci/requirements.lock`` differs, its own. After one uncounted warm-up run of each
side the regression workload runs on both alternately, ``A B B A ...``, pair ``i`` on seed ``seeds[i % len(seeds)]``;
:func:`suite.analysis.stats.paired.paired_verdict` turns each metric's per-pair ratios into PASS, FAIL or
INCONCLUSIVE, and the gate stops once every metric is decided (from ``--min-pairs``), at ``--max-pairs`` or before
``--max-minutes``. Quality is ``identical`` where every pair's models have the same digest; otherwise B's FID minus A's,
pair by pair, is tested against the seed spread of A's FID (never one draw).
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import shutil
import statistics
import subprocess
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from ..analysis.metric_table import GATED, METRICS, Metric
from ..analysis.stats import paired
from ..config.exitcodes import ExitCode
from ..config.yamlfile import YamlError, load_yaml
from ..measure.hostload import contention, read_cpu_times
from ..records.codec import IDENTITY, record_field
from ..records.record import Record
from ..records.results import RECORD_FILE, atomic_write_text, read_record
from .gate_files import GateResult, markdown, summary_line, write_pairs_csv
from .gate_history import default_machine, record_history
from .gate_settings import GateError, Settings
from .gate_sides import (
    Side,
    baseline_commit,
    baseline_side,
    candidate_side,
    check_side_imports,
    remove_worktree,
    repository,
    side_env,
)

log = logging.getLogger(__name__)


VERDICT_EXIT_CODES = {paired.PASS: ExitCode.OK, paired.FAIL: ExitCode.FAILED, paired.INCONCLUSIVE: ExitCode.INCONCLUSIVE}
"""The exit code gate.json records for each verdict: ``suite.cli.exitcodes``'s table (a test keeps them equal)."""


EXIT_BAD_INPUT = ExitCode.BAD_INPUT


GATED_METRICS = tuple(METRICS[name] for name in GATED)
"""The metrics the gate tests (:data:`.metric_table.GATED`)."""


GATED_QUALITY = "fid"


def _read_workload(scenario: Path) -> dict[str, Any]:
    """The workload scenario's data (the suite's YAML reader); :class:`GateError` naming the file where it is not one."""
    try:
        data = load_yaml(scenario) or {}
    except YamlError as error:
        raise GateError(str(error)) from None
    if not isinstance(data, dict):
        raise GateError(f"{scenario}: expected a scenario (a mapping with name, train, ... and runs)")
    return data


def workload_seeds(scenario: Path) -> list[int]:
    """The seeds the pairs cycle through: ``train.seeds``, else ``[train.seed]`` (default 0)."""
    data = _read_workload(scenario)
    train = data.get("train") or {}
    seeds = train.get("seeds") or [train.get("seed", 0)]
    if not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise GateError(f"{scenario}: train.seeds must be non-negative integers, got {seeds}")
    return list(seeds)


def seed_scenario(scenario: Path, seed: int, folder: Path) -> Path:
    """The workload with one seed (``train.seed``, no ``seeds``), which older revisions also read."""
    data = _read_workload(scenario)
    train = dict(data.get("train") or {})
    train.pop("seeds", None)
    train["seed"] = seed
    data["train"] = train
    path = folder / f"{scenario.stem}-seed{seed}.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))
    return path


def run_workload(side: Side, scenario: Path, out: Path, timeout: float) -> dict[str, Record]:
    """Run the workload once on ``side`` into ``out``: its records by run id; :class:`GateError` if one failed."""
    command = [str(side.python), "-m", "suite", "run", str(scenario.resolve()), "--out", str(out.resolve()), "-q"]
    command += ["--timeout", str(timeout)]
    # every workload run is a fresh one: an earlier gate's runs in this folder (another revision's settings) would be refused
    shutil.rmtree(out, ignore_errors=True)
    try:
        done = subprocess.run(command, cwd=side.src, env=side_env(side), capture_output=True, text=True, timeout=timeout * 4)
    except subprocess.TimeoutExpired:
        raise GateError(f"{side.name} side: the workload did not finish within {timeout * 4:.0f} s ({out})") from None
    atomic_write_text(out / "gate-run.log", done.stdout + done.stderr)
    records: dict[str, Record] = {}
    for path in sorted(out.glob(f"*/{RECORD_FILE}")):
        try:  # the suite's checked reader: a record that is not one is named, never a traceback
            record = read_record(path.parent, IDENTITY)
        except ValueError as error:
            raise GateError(f"{side.name} side ({side.label}): {error}") from None
        if record is not None and record.run_id is not None:  # IDENTITY: a record read names its run
            records[record.run_id] = record
    failed = [rid for rid, r in records.items() if r.status != "ok"]
    if done.returncode != 0 or failed or not records:
        rid = failed[0] if failed else None
        why = (records[rid].reason or records[rid].error or records[rid].status) if rid else None
        why = why or (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise GateError(f"{side.name} side ({side.label}): {'run ' + rid if rid else 'the workload'} failed: {why} ({out})")
    return records


def values_of(records: dict[str, Record]) -> dict[str, dict[str, Any]]:
    """Run id -> the gate's metrics and the model digest, read from the records."""
    return {
        rid: {**{m.name: record_field(r, m.path) for m in GATED_METRICS}, "model_digest": r.model_digest}
        for rid, r in records.items()
    }


def _unusable(metric: Metric, rid: str, pairs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A verdict row for a metric some run of ``rid`` recorded as no value can be (:meth:`Metric.problem`), naming
    the record: FAIL where the candidate's (B) is, else INCONCLUSIVE (the baseline's); None where every value is usable."""
    for key, verdict in (("B", paired.FAIL), ("A", paired.INCONCLUSIVE)):
        for p in pairs:
            if (problem := metric.problem(p[key][rid][metric.name])) is not None:
                where = Path(p["dirs"][key]) / rid / RECORD_FILE
                side = "candidate" if key == "B" else "baseline"
                note = f"{side} ({key}), pair {p['pair']}: {problem} in {where}"
                return {
                    "run_id": rid,
                    "metric": metric.name,
                    "verdict": verdict,
                    "pairs": len(pairs),
                    "problem": note,
                    "note": note,
                }
    return None


def speed_verdicts(pairs: list[dict[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    """One verdict per run id and speed metric over the pairs."""
    rows = []
    for rid in pairs[0]["A"]:
        for metric in GATED_METRICS:
            values = [(p["A"][rid][metric.name], p["B"][rid][metric.name]) for p in pairs]
            if (bad := _unusable(metric, rid, pairs)) is not None:
                rows.append(bad)
                continue
            if any(a is None or b is None for a, b in values):
                continue  # a metric this revision does not record (comm.bytes of a run that moves none)
            diffs = [paired.difference(metric, a, b) for a, b in values]
            v = paired.paired_verdict(diffs, paired.threshold_margin(metric, settings.threshold), settings.alpha)
            rows.append(
                {
                    "run_id": rid,
                    "metric": metric.name,
                    "verdict": v.verdict,
                    "pairs": v.n,
                    "median_a": statistics.median([a for a, _ in values]),
                    "median_b": statistics.median([b for _, b in values]),
                    "change_pct": paired.change_pct(metric, v.mean),
                    "upper_pct": paired.change_pct(metric, v.upper) if math.isfinite(v.upper) else None,
                    "p_value": v.p_value,
                    "more_pairs": v.more_pairs,
                }
            )
    return rows


def quality_verdicts(pairs: list[dict[str, Any]], settings: Settings, scorer: Side) -> list[dict[str, Any]]:
    """Per run id: ``identical`` when every pair's models match, else FID over the same seeds against the seed spread."""
    rows = []
    for rid in pairs[0]["A"]:
        digests = [(p["A"][rid]["model_digest"], p["B"][rid]["model_digest"]) for p in pairs]
        if all(a is not None and a == b for a, b in digests):
            rows.append(
                {"run_id": rid, "metric": GATED_QUALITY, "verdict": paired.PASS, "pairs": len(pairs), "note": "identical models"}
            )
            continue
        fids = [
            (score_fid(scorer, p["dirs"]["A"] / rid, settings), score_fid(scorer, p["dirs"]["B"] / rid, settings)) for p in pairs
        ]
        by_seed: dict[int, list[float]] = {}
        for p, (a, _) in zip(pairs, fids):
            by_seed.setdefault(p["seed"], []).append(a)
        seed_means = [sum(v) / len(v) for v in by_seed.values()]
        row: dict[str, Any] = {"run_id": rid, "metric": GATED_QUALITY, "pairs": len(pairs)}
        spread = float(statistics.stdev(seed_means)) if len(seed_means) > 1 else 0.0
        if spread == 0:  # nothing to judge the models' difference by
            note = (
                "models differ and the workload has one seed: no seed spread to judge by"
                if len(seed_means) < 2
                else "models differ but A's seeds score alike: no seed spread"
            )
            rows.append({**row, "verdict": paired.INCONCLUSIVE, "note": note})
            continue
        v = paired.paired_verdict([b - a for a, b in fids], spread, settings.alpha)
        rows.append(
            {
                **row,
                "verdict": v.verdict,
                "median_a": statistics.median([a for a, _ in fids]),
                "median_b": statistics.median([b for _, b in fids]),
                "change": v.mean,
                "upper": v.upper if math.isfinite(v.upper) else None,
                "p_value": v.p_value,
                "margin": spread,
                "note": f"FID B - A against A's seed spread {spread:.3g}",
            }
        )
    return rows


def score_fid(scorer: Side, run_dir: Path, settings: Settings) -> float:
    """FID of a run's saved generator on the candidate's pinned classifier ruler."""
    command = [str(scorer.python), "-m", "suite", "score", "--run", str(run_dir), "--features", "classifier"]
    command += ["--n", str(settings.score_samples), "--json"]
    done = subprocess.run(command, cwd=scorer.src, env=side_env(scorer), capture_output=True, text=True)
    if done.returncode != 0:
        raise GateError(f"quality: scoring {run_dir} failed: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    fid = json.loads(done.stdout).get("fid")
    if fid is None:
        raise GateError(f"quality: {run_dir} has no FID on the classifier ruler")
    return float(fid)


def run_gate(settings: Settings) -> GateResult:
    """Run the gate and write ``gate.json``, ``gate.md`` and ``pairs.csv`` into ``settings.out``."""
    settings.check()
    repo = repository()
    candidate = candidate_side(repo, settings)
    label, commit = baseline_commit(repo, settings.baseline)
    settings.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    pairs: list[dict[str, Any]] = []
    discarded: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    sides = {"B": candidate}
    try:
        baseline = sides["A"] = baseline_side(repo, label, commit, settings.out)
        for side in sides.values():
            check_side_imports(side)
        seeds = workload_seeds(settings.scenario)
        scenarios = {s: seed_scenario(settings.scenario, s, settings.out / "scenarios") for s in seeds}
        log.info(
            "gate: A = %s (%s), B = %s (%s); warming up", baseline.label, commit[:10], candidate.label, candidate.commit[:10]
        )
        for key in "AB":
            run_workload(sides[key], scenarios[seeds[0]], settings.out / "warmup" / key, settings.timeout)
        verdict = paired.INCONCLUSIVE
        while len(pairs) < settings.max_pairs and len(discarded) <= settings.max_pairs:
            i, ran = len(pairs), pairs + discarded
            if ran:
                elapsed = time.monotonic() - start
                per_pair = sum(p["seconds"] for p in ran) / len(ran)
                if elapsed + per_pair > settings.max_minutes * 60:
                    log.info("gate: stopping at %d pairs: another would pass --max-minutes %g", i, settings.max_minutes)
                    break
            attempt = sum(1 for p in discarded if p["pair"] == i)
            pair = run_pair(sides, i, seeds[i % len(seeds)], scenarios, settings, attempt)
            if disturbed(pair, settings):
                log.info("gate: pair %d discarded: other processes kept %s cores busy", i, pair["foreign_cores"])
                discarded.append(pair)
                continue
            pairs.append(pair)
            if len(pairs) >= settings.min_pairs:
                verdicts = speed_verdicts(pairs, settings)
                verdict = paired.overall([v["verdict"] for v in verdicts])
                log.info("gate: %d pairs: %s", len(pairs), verdict)
                if verdict != paired.INCONCLUSIVE:
                    break
        if len(pairs) < settings.min_pairs:
            reason = (
                f"INCONCLUSIVE: the host was busy: {len(pairs)} undisturbed pairs of the {settings.min_pairs} needed, "
                f"{len(discarded)} discarded because other processes kept more than {settings.max_foreign_cores:g} "
                "cores busy; rerun on a quiet machine"
            )
            return finish(settings, paired.INCONCLUSIVE, reason, sides, pairs, [], start, discarded)
        verdicts = speed_verdicts(pairs, settings) + quality_verdicts(pairs, settings, candidate)
        verdict = paired.overall([v["verdict"] for v in verdicts])
        reason = summary_line(verdict, verdicts, settings.threshold)
        result = finish(settings, verdict, reason, sides, pairs, verdicts, start, discarded)
        record_history(settings.history, result, settings.machine or default_machine(), repo)
        return result
    except GateError as error:
        finish(settings, "ERROR", str(error), sides, pairs, verdicts, start, discarded)
        raise
    finally:
        remove_worktree(repo, settings.out / "baseline-src")


def host_cpu_seconds() -> float | None:
    """CPU seconds the whole host has been busy since boot, steal included (:func:`suite.measure.hostload.read_cpu_times`),
    or None where there is no ``/proc/stat``."""
    times = read_cpu_times()
    return None if times is None else times.busy + times.steal


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished children and their descendants (the workload's processes)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def foreign_cores(run: Any) -> tuple[Any, float | None]:
    """``run()``'s result and the cores that processes other than its own kept busy meanwhile (None: unknown)."""
    host0, own0, t0 = host_cpu_seconds(), children_cpu_seconds(), time.monotonic()
    result = run()
    host1, own1, wall = host_cpu_seconds(), children_cpu_seconds(), time.monotonic() - t0
    if host0 is None or host1 is None or wall <= 0:
        return result, None
    return result, max(0.0, (host1 - host0) - (own1 - own0)) / wall


def run_pair(
    sides: dict[str, Side], i: int, seed: int, scenarios: dict[int, Path], settings: Settings, attempt: int = 0
) -> dict[str, Any]:
    """Pair ``i``: both sides on one seed, A first on even pairs and B first on odd ones (A B B A ...).

    ``foreign_cores`` says, per side, how many cores other processes kept busy during its run.
    """
    order = "AB" if i % 2 == 0 else "BA"
    began = time.monotonic()
    values, dirs, foreign = {}, {}, {}
    for key in order:
        dirs[key] = settings.out / (f"pair{i:02d}" + (f"-again{attempt}" if attempt else "")) / key
        records, foreign[key] = foreign_cores(partial(run_workload, sides[key], scenarios[seed], dirs[key], settings.timeout))
        values[key] = values_of(records)
    if set(values["A"]) != set(values["B"]):
        raise GateError(f"the two sides ran different runs: A {sorted(values['A'])}, B {sorted(values['B'])}")
    return {
        "pair": i,
        "seed": seed,
        "order": order,
        "A": values["A"],
        "B": values["B"],
        "dirs": dirs,
        "seconds": time.monotonic() - began,
        "foreign_cores": foreign,
    }


def disturbed(pair: dict[str, Any], settings: Settings) -> bool:
    """Whether other processes used more of the host than ``max_foreign_cores`` during either run of ``pair``: the
    suite's one rule of contention (:func:`suite.measure.hostload.contention`), the workload taking every core."""
    cores = os.cpu_count() or 1
    return any(
        contention(v, 0.0, cores, None, limit=settings.max_foreign_cores) is not None for v in pair["foreign_cores"].values()
    )


def host_info() -> dict[str, Any]:
    """Where the gate ran (the two sides always share it)."""
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()}


def finish(
    settings: Settings,
    verdict: str,
    reason: str,
    sides: dict[str, Side],
    pairs: list[dict[str, Any]],
    verdicts: list[dict[str, Any]],
    start: float,
    discarded: list[dict[str, Any]] | None = None,
) -> GateResult:
    """Write the gate's files and return its result (its exit code the verdict's; ERROR: bad input)."""
    result = GateResult(
        verdict=verdict,
        exit_code=VERDICT_EXIT_CODES.get(verdict, EXIT_BAD_INPUT),
        reason=reason,
        sides={k: s.describe() for k, s in sides.items()},
        settings={k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
        host=host_info(),
        pairs=[{k: v for k, v in p.items() if k != "dirs"} for p in pairs],
        discarded=[{k: v for k, v in p.items() if k not in ("dirs", "A", "B")} for p in discarded or []],
        verdicts=verdicts,
        minutes=(time.monotonic() - start) / 60,
    )
    settings.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(settings.out / "gate.json", json.dumps(asdict(result), indent=2))
    write_pairs_csv(settings.out / "pairs.csv", pairs)
    atomic_write_text(settings.out / "gate.md", markdown(result))
    return result
