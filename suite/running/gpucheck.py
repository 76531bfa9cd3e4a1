"""``suite gpu-check``: the self-check to run first on a GPU node (docs/clusters.md, "Checking a GPU node").

It trains each strategy on each installed engine that runs it on GPUs for a few seconds, at P = 1 and P = the
visible GPUs, through ``suite run``; then checks every record (ok, ranks on distinct CUDA devices, plausible NVML or
AMD SMI samples, CUDA-event timings, quality scored on the GPU, and what the run's engine checks of its own) and writes
``gpu-check.md`` and ``gpu-check.json``, one line per check with its evidence.

Exit codes: :data:`EXIT_PASS` 0, :data:`EXIT_FAIL` 1, 2 bad input, :data:`EXIT_NO_GPU` 4: no CUDA GPU visible, one
line on stderr, so that CI on machines without a GPU can tell a skip from a failure.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from ..config.exitcodes import ExitCode
from ..measure.gpu_platform import current as current_platform
from ..records.measured import RankTelemetry, SampledPart
from ..records.record import Record

EXIT_PASS, EXIT_FAIL, EXIT_NO_GPU = ExitCode.OK, ExitCode.FAILED, ExitCode.NO_GPU
RUN_SECONDS = 4.0
"""Training window of every run: NVML is sampled every 0.2 s, so it sees about 20 samples per rank."""


@dataclass
class Check:
    """One checked property of one run (``subject`` its run id) or of the machine."""

    subject: str
    name: str
    ok: bool
    evidence: str

    def line(self) -> str:
        """``PASS|FAIL subject name: evidence``."""
        return f"{'PASS' if self.ok else 'FAIL'} {self.subject} {self.name}: {self.evidence}"


def no_gpu_reason() -> str | None:
    """Why there is nothing to check, in one line, or None when a CUDA GPU is visible."""
    import torch

    with warnings.catch_warnings(record=True) as caught:  # torch warns about a missing or old driver
        warnings.simplefilter("always")
        if torch.cuda.is_available():
            return None
    from ..measure.env import _guard, _nvml

    nvml = _guard(_nvml)
    parts = [
        "torch.cuda.is_available() is False",
        f"CUDA build {torch.version.cuda or 'none (CPU-only torch)'}",
        f"driver: {nvml.get('driver') or 'none'}",
    ]
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        parts.append(f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r}")
    parts += [" ".join(str(w.message).split())[:200] for w in caught[:1]]
    return f"gpu-check: no CUDA GPU visible ({'; '.join(parts)}): nothing to check"


def unknown_engines(asked: Sequence[str]) -> str | None:
    """One line naming the engines in ``asked`` that are not registered, or None when every one is."""
    from ..config.registry import ENGINES

    unknown = [e for e in asked if e not in ENGINES]
    if not unknown:
        return None
    return f"gpu-check: engines: {', '.join(unknown)} not an engine (choose from {', '.join(e.name for e in ENGINES)})"


def gpu_engines(caps: dict[str, Any], asked: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """The engines that can train on GPUs here (from :func:`suite.measure.env.capabilities`), and why others are left
    out: each engine's ``gpu_ready`` trait, and on a ROCm torch its class's NVIDIA-only refusal
    (:meth:`suite.train.engines.base.Engine.gpu_refusal`); with ``asked``, only those of them (the others: not asked)."""
    from ..config.registry import ENGINES

    engines, skipped = [], []
    rocm = bool(caps["torch"].get("hip_build"))
    for engine in ENGINES:
        reason = engine.gpu_ready(caps) if engine.gpu_ready is not None else f"{engine.name}: no GPU check of its own"
        if reason is None and rocm:
            reason = engine.load().gpu_refusal()
        if reason is None and asked is not None and engine.name not in asked:
            reason = f"{engine.name}: not asked (engines {', '.join(asked)})"
        if reason is None:
            engines.append(engine.name)
        else:
            skipped.append(reason)
    return engines, skipped


def scenario_for(gpus: int, engines: Sequence[str]) -> dict[str, Any]:
    """The scenario the check runs: what each strategy's ``gpu_check`` trait names, on each of ``engines`` that runs
    it, at P = 1 and ``gpus``, for :data:`RUN_SECONDS` each on 20x20 digits."""
    from ..config.entries import GPU_CHECK_DATASET
    from ..config.registry import LOSSES, STRATEGIES, engines_for

    runs: list[dict[str, Any]] = []
    for strategy in STRATEGIES:
        for entry in strategy.gpu_check(gpus) if strategy.gpu_check is not None else []:
            runs += [{"strategy": strategy.name, "engine": e, **entry} for e in engines_for(strategy.name) if e in engines]
    return {
        "name": "gpu-check",
        "description": f"suite gpu-check: every strategy on every installed GPU engine at P = {sorted({1, gpus})}, "
        f"{RUN_SECONDS:g} s each.",
        "dataset": {"name": GPU_CHECK_DATASET, "image_size": 20},
        "train": {"batch_size": 32 * gpus, "seed": 0, "warmup_steps": 1, "budget_s": RUN_SECONDS},
        **{e.settings: e.gpu_check_settings for e in LOSSES if e.settings and e.gpu_check_settings},  # wgan_gp's
        "metrics": {"features": "classifier", "samples": 200, "curve_points": 2},
        "scaling": "strong",
        "runs": runs,
    }


def _nvml_check(rid: str, per_rank: list[RankTelemetry]) -> Check:
    missing = [i for i, r in enumerate(per_rank) if not _sampled(r.gpu_util) or not _sampled(r.gpu_mem_used_bytes)]
    if missing or not per_rank:
        notes = {str(r.gpu_note) for r in per_rank if r.gpu_note}
        monitor = current_platform().monitor  # NVML, or AMD SMI on a ROCm torch
        return Check(rid, "nvml", False, f"no {monitor} samples on ranks {missing}: {'; '.join(sorted(notes)) or 'no note'}")
    util = [(r.gpu_util.mean or 0.0, r.gpu_util.p95 or 0.0) for r in per_rank if r.gpu_util is not None]
    used = [(r.gpu_mem_used_bytes.mean or 0.0) / 2**20 for r in per_rank if r.gpu_mem_used_bytes is not None]
    values = [v for u in util for v in u]
    mean = sum(m for m, _ in util) / len(util)
    ok = 0 < mean and 0 <= min(values) and max(values) <= 100 and min(used) > 0
    ranks = ", ".join(f"{m:.1f}" for m, _ in util)
    evidence = (
        f"utilisation mean {mean:.1f} % (per rank {ranks}; highest p95 {max(p for _, p in util):.1f} %), "
        f"memory used {min(used):.0f}-{max(used):.0f} MiB"
    )
    if not ok:
        evidence += "; expected utilisation above 0 on average, none outside 0-100 %, memory above 0"
    return Check(rid, "nvml", ok, evidence)


def _sampled(part: SampledPart | None) -> bool:
    """A sampler's summary with both its numbers (a record of an older suite may lack one)."""
    return part is not None and part.mean is not None and part.p95 is not None


def engine_checks(record: Record) -> list[Check]:
    """The checks the record's engine class asks for (its ``gpu_checks``: Horovod's NCCL operations and process sets)."""
    from ..config.registry import ENGINES

    engine = record.engine
    if not isinstance(engine, str) or engine not in ENGINES:
        return []
    rid = record.run_id or "?"
    try:
        checks = getattr(ENGINES[engine].load(), "gpu_checks", None)
        found = checks(record) if checks is not None else []
    except Exception as error:  # a plugin engine that cannot be loaded or checked: a FAIL line, not a traceback
        return [Check(rid, "engine checks", False, f"{engine}: {type(error).__name__}: {' '.join(str(error).split())[:200]}")]
    return [Check(rid, name, ok, evidence) for name, ok, evidence in found]


def record_checks(record: Record) -> list[Check]:
    """The checks of one run's record: status, devices, nvml, timeline, scoring, then its engine's own
    (:func:`engine_checks`); only status when it failed."""
    rid = record.run_id or "?"
    if record.status != "ok":
        error = (record.error or "no error recorded").splitlines()[0]
        return [Check(rid, "status", False, f"{record.status}: {error}")]
    per_rank = (record.telemetry.per_rank if record.telemetry else None) or []
    devices = [str(r.device) for r in per_rank]
    distinct = len(set(devices)) == len(devices) == record.procs and all(d.startswith("cuda") for d in devices)
    timelines = [r.timeline for r in per_rank]
    quality = record.quality
    scored = str(quality.device if quality else None)
    return [
        Check(rid, "status", True, f"ok, training window {record.train_s or 0:.1f} s on {record.device}"),
        Check(rid, "devices", distinct, f"{record.procs} ranks on {', '.join(devices) or 'no device recorded'}"),
        _nvml_check(rid, per_rank),
        Check(
            rid,
            "timeline",
            bool(timelines) and all(t == "cuda_events" for t in timelines),
            "steps timed with " + ", ".join(f"{t} (rank {i})" for i, t in enumerate(timelines)) if timelines else "none",
        ),
        Check(
            rid,
            "scoring",
            scored.startswith("cuda"),
            f"quality scored on {scored}" + (f" ({quality.features}, n {quality.n})" if quality else ": no quality"),
        ),
        *engine_checks(record),
    ]


def _machine_lines(caps: dict[str, Any], engines: Sequence[str], skipped: Sequence[str]) -> list[str]:
    from ..measure.env import GPU_MONITORS
    from ..measure.gpu_platform import current

    t, versions, platform = caps["torch"], caps["versions"], current()
    monitor = caps.get(GPU_MONITORS[platform.name][0]) or {}
    collectives = t.get(f"{platform.collectives.lower()}_version", "none")
    return [
        f"- GPUs: {len(t.get('devices', []))} visible: {', '.join(t.get('devices', []))}",
        f"- driver {monitor.get('driver', f'unknown ({platform.monitor}: ' + str(monitor.get('error')) + ')')}, "
        f"{platform.toolkit.upper()} {t.get(f'{platform.toolkit}_build')} (torch {t.get('version')}), {platform.collectives} {collectives}",
        f"- engines checked: {', '.join(engines) or 'none'} (horovod {versions.get('horovod')} "
        f"{caps['horovod'].get('build', 'not importable')}, "
        f"deepspeed {versions.get('deepspeed')}, mpi4py {versions.get('mpi4py')})",
        *(f"- not checked: {s}" for s in skipped),
    ]


def _run_scenario(path: Path, results: Path, timeout: float) -> int:
    """``suite run`` of the check's scenario (:func:`suite.running.sweep.run_scenario`; a seam the tests replace)."""
    from ..config.expansion import expand, load_scenario
    from .sweep import RunOptions, SweepOptions, run_scenario

    scenario = load_scenario(path)
    options = RunOptions(sweep=SweepOptions(quiet=True, timeout=timeout, rerun=True))  # every check measures anew
    return run_scenario(path, scenario, expand(scenario), [], results, options)


def gpu_check(out: Path, timeout: float = 600.0, engines: Sequence[str] | None = None) -> int:
    """Run the check into ``out`` and return its exit code (module docstring); ``engines``: only these of the installed
    GPU engines (default every one; ``ci/gpu/run.py`` checks those that fit its time)."""
    if engines is not None and (problem := unknown_engines(engines)):
        print(problem, file=sys.stderr)
        return ExitCode.BAD_INPUT
    reason = no_gpu_reason()
    if reason:
        print(reason, file=sys.stderr)
        return EXIT_NO_GPU
    import torch
    import yaml

    from ..config.expansion import expand, parse_scenario
    from ..measure.env import capabilities
    from ..measure.gpu_platform import current
    from ..records.results import atomic_write_text, read_record

    caps = capabilities()
    checked, skipped = gpu_engines(caps, engines)
    nccl = caps["torch"].get(f"{current().collectives.lower()}_version")
    has_nccl = bool((caps["torch"].get("distributed") or {}).get("nccl"))
    checks = [Check("machine", "nccl", has_nccl, f"torch.distributed NCCL {nccl or 'not available in this torch build'}")]
    scenario = scenario_for(torch.cuda.device_count(), checked)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "gpu-check.yaml", yaml.safe_dump(scenario, sort_keys=False))
    if scenario["runs"]:
        code = _run_scenario(out / "gpu-check.yaml", out / "runs", timeout)
        note = {0: "", 1: " (a run failed: below)"}.get(code, " (suite run stopped: see its message above)")
        checks.append(Check("machine", "suite run", code in (0, 1), f"exit code {code}{note}"))
        for run in expand(parse_scenario(scenario, "gpu-check.yaml")):
            missing = Record(run_id=run.run_id, status="missing", error="no result.json")
            checks += record_checks(read_record(out / "runs" / run.run_id) or missing)
    failed = [c for c in checks if not c.ok]
    verdict = f"FAIL: {len(failed)} of {len(checks)} checks failed" if failed else f"PASS: all {len(checks)} checks passed"
    lines = ["# suite gpu-check", "", *_machine_lines(caps, checked, skipped), "", f"**{verdict}**", ""]
    atomic_write_text(out / "gpu-check.md", "\n".join([*lines, *(f"- {c.line()}" for c in checks), ""]))
    report = {"passed": not failed, "engines": checked, "skipped": skipped, "capabilities": caps}
    atomic_write_text(
        out / "gpu-check.json", json.dumps({**report, "checks": [asdict(c) for c in checks]}, indent=2, default=str)
    )
    print("\n".join([*(c.line() for c in failed), f"gpu-check {verdict}; report in {out / 'gpu-check.md'}"]))
    return EXIT_FAIL if failed else EXIT_PASS
