"""The per-rank entry point: ``python -m suite.worker RUN_DIR``.

Every rank reads ``RUN_DIR/run.json`` (written by ``suite run``, also with ``--dry-run`` for
hand launches), starts the engine, trains with the run's strategy, and hands its measurements
to rank 0, which scores the trained model and writes ``RUN_DIR/result.json``.

Launch it under any launcher, e.g. ``horovodrun -np 8 python -m suite.worker results/x/RUN``,
``mpirun -np 4 python -m suite.worker ...``, ``torchrun --nproc_per_node 4 -m suite.worker ...``,
``jsrun -n 6 -a 1 -g 1 python -m suite.worker ...``.

A failure on rank 0 is written into the record (status ``failed``, with the error); a failure
elsewhere goes to ``RUN_DIR/error-rank<N>.txt``, which ``suite run`` folds into the record.
The process exits non-zero so that the launcher stops the other ranks.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .launchenv import LaunchInfo, detect
from .results import GENERATOR_FILE, RUN_FILE, SAMPLES_FILE, write_record
from .scenario import Run

log = logging.getLogger("suite.worker")


class LaunchMismatch(RuntimeError):
    """The launcher, the engine and the run disagree about the processes."""


def threads_per_rank(run: Run, launch: LaunchInfo) -> int:
    """CPU threads for this rank: ``train.threads``, else the node's cores shared by its ranks."""
    if run.train.threads:
        return run.train.threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // max(1, launch.local_size))


def _check_agreement(engine, launch: LaunchInfo, run: Run) -> None:
    if launch.launcher != "none" and (engine.rank, engine.size) != (launch.rank, launch.size):
        raise LaunchMismatch(
            f"the {launch.launcher} launcher says rank {launch.rank} of {launch.size}, but the {engine.name} engine "
            f"says rank {engine.rank} of {engine.size}; start the worker with a launcher that matches engine {engine.name}"
        )
    if engine.size != run.procs:
        raise LaunchMismatch(
            f"run {run.run_id} is defined for {run.procs} processes but was launched with {engine.size}; "
            f"launch it with -np {run.procs} (or re-expand the scenario)"
        )


def _summaries(per_rank: list[dict], warmup_steps: int) -> dict:
    """Record-level telemetry from the per-rank dictionaries."""
    windows = [r["window"] for r in per_rank]
    steps = [w["steps"] for w in windows]

    def per_step(name: str) -> float | None:
        values = [w[name] / w["steps"] for w in windows if w["steps"]]
        return float(np.mean(values)) if values else None

    step_s, comm_s = per_step("seconds"), per_step("comm")

    def mean_of(key: str, field: str = "mean") -> float | None:
        values = [r[key][field] for r in per_rank if r.get(key)]
        return float(np.mean(values)) if values else None

    gpu_peaks = [r["gpu_mem_peak_bytes"] for r in per_rank if r.get("gpu_mem_peak_bytes") is not None]
    gpu_used = mean_of("gpu_mem_used_bytes")
    return {
        "warmup_steps_per_rank": warmup_steps,
        "timed_steps": int(min(steps)) if steps else 0,
        "step_s": step_s,
        "data_s": per_step("data"),
        "compute_s": per_step("compute"),
        "comm_s": comm_s,
        "comm_share": (comm_s / step_s) if step_s and comm_s is not None else None,
        "steps": int(sum(r["steps"] for r in per_rank)),
        "cpu_util_mean": mean_of("cpu_util"),
        "host_mem_peak_mb": max(r["host_mem_peak_bytes"] for r in per_rank) / 2**20,
        "gpu_util_mean": mean_of("gpu_util"),
        "gpu_util_p95": mean_of("gpu_util", "p95"),
        "gpu_mem_used_mb": gpu_used / 2**20 if gpu_used is not None else None,
        "gpu_mem_peak_mb": max(gpu_peaks) / 2**20 if gpu_peaks else None,
        "gpu_note": per_rank[0].get("gpu_note"),
        "per_rank": per_rank,
    }


def _score(run: Run, outcome, device) -> tuple[dict, list[dict], dict[str, dict]]:
    """Quality of the final model, of the snapshots along the way, and of extra models (rank 0)."""
    from .metrics import Reference, evaluate_sampler
    from .sampling import Sampler

    ref = Reference.for_run(run, device)
    networks = ref.networks()
    quality = evaluate_sampler(Sampler(outcome.bundle, device), ref, seed=run.train.seed, networks=networks)
    curve = []
    for clock, bundle in outcome.curve:
        q = evaluate_sampler(Sampler(bundle, device), ref, seed=run.train.seed, networks=networks)
        curve.append({"clock_s": clock, "fid": q["fid"], "is_mean": q["is_mean"], "features": q["features"], "n": q["n"]})
    extra = {name: evaluate_sampler(Sampler(bundle, device), ref, seed=run.train.seed, networks=networks)
             for name, bundle in outcome.extra_bundles.items()}
    return quality, curve, extra


def _save_sample_grid(bundle, path: Path, seed: int) -> None:
    from .plots import save_image_grid
    from .sampling import Sampler

    images, _ = Sampler(bundle).sample(64, seed=seed)
    save_image_grid(images, path)


def _ok_record(run: Run, launch: LaunchInfo, engine, data, per_rank: list[dict], outcome) -> dict:
    """Rank 0's record of a finished training: settings, times, throughput, traffic, telemetry."""
    import torch

    from .env import versions

    rates = [r["images_per_s"] for r in per_rank if r["images_per_s"]]
    complete = len(rates) == len(per_rank)  # every rank has a timed window
    return {
        "status": "ok",
        "error": None,
        "dataset": {"name": data.name, "split": data.split, "image_size": run.dataset.image_size,
                    "images": len(data), "classes": data.classes},
        "launcher": launch.launcher,
        "device": str(engine.device) if engine.device.type == "cpu" else torch.cuda.get_device_name(engine.device),
        "threads_per_rank": torch.get_num_threads(),
        "train_s": max(r["train_s"] for r in per_rank),
        "images_per_s": float(sum(rates)) if complete else None,
        "images_per_s_per_rank": float(np.mean(rates)) if complete else None,
        "comm": {"bytes": int(sum(r["comm_bytes"] for r in per_rank)),
                 "seconds": float(np.mean([r["comm_s"] for r in per_rank])),
                 "largest_group": max(r["comm_largest_group"] for r in per_rank),
                 "per_rank_bytes": [r["comm_bytes"] for r in per_rank],
                 "per_rank_seconds": [r["comm_s"] for r in per_rank]},
        "telemetry": _summaries(per_rank, run.train.warmup_steps),
        "env": versions(),
        **outcome.fields,
    }


def _finish(run: Run, run_dir: Path, record: dict, outcome, device) -> None:
    """Rank 0: save the model and a sample grid, score them, and write the record."""
    outcome.bundle.save(run_dir / GENERATOR_FILE)
    for name, bundle in outcome.extra_bundles.items():
        bundle.save(run_dir / f"generator_{name}.pt")
    _save_sample_grid(outcome.bundle, run_dir / SAMPLES_FILE, run.train.seed)
    if run.metrics.enabled:
        record["quality"], curve, extra = _score(run, outcome, device)
        if curve:  # strategies that score during training (cellular) bring their own curve
            record["curve"] = curve
        record.update({f"quality_{name}": q for name, q in extra.items()})


def execute(run: Run, run_dir: Path) -> int:
    """Run the worker for ``run`` in ``run_dir`` on this rank; returns the exit code."""
    started = time.perf_counter()
    launch = detect()
    import torch

    torch.set_num_threads(threads_per_rank(run, launch))
    rank = launch.rank
    base = run.identity()
    try:
        from . import strategies
        from .data import load_dataset
        from .engines import create_engine
        from .telemetry import Telemetry

        engine = create_engine(run.engine, launch, run.deepspeed)
        engine.start()
        rank = engine.rank
        _check_agreement(engine, launch, run)
        data = load_dataset(
            run.dataset.name, run.dataset.image_size, run.dataset.split, run.dataset.root,
            run.dataset.classes, run.dataset.download, run.dataset.limit,
        )
        import torch._dynamo  # noqa: F401  (torch.optim imports it on first use: seconds that are not training)

        telemetry = Telemetry(engine.device, engine.comm, run.train.warmup_steps)
        telemetry.start()
        outcome = strategies.train(run, engine, data, telemetry, run_dir / "partial")
        telemetry.stop()
        mine = {**telemetry.as_dict(), "rank": engine.rank, "comm_bytes": engine.comm.bytes, "comm_s": engine.comm.seconds,
                "comm_largest_group": engine.comm.largest_group}
        per_rank = engine.gather_object(mine)  # after training: not counted as communication
        if engine.rank == 0:
            record = {**base, **_ok_record(run, launch, engine, data, per_rank, outcome)}
            _finish(run, run_dir, record, outcome, engine.device)
            record["worker_s"] = time.perf_counter() - started
            write_record(run_dir, record)
            log.info("%s: ok, train %.1fs", run.run_id, record["train_s"])
        engine.shutdown()
        return 0
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
        log.error("%s (rank %d) failed: %s", run.run_id, rank, message)
        if rank == 0:
            write_record(run_dir, {**base, "status": "failed", "error": message, "traceback": traceback.format_exc()})
        else:
            (run_dir / f"error-rank{rank}.txt").write_text(f"{message}\n\n{traceback.format_exc()}")
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suite.worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="folder holding run.json (results/SCENARIO/RUN_ID)")
    # deepspeed's launcher (and torch.distributed.launch) append this; the rank is read from the environment
    parser.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("SUITE_LOG", "INFO"), format="%(asctime)s %(name)s: %(message)s")
    path = args.run_dir / RUN_FILE
    if not path.is_file():
        print(f"error: {path} not found; create run folders with `suite run SCENARIO --out DIR` "
              f"(or `suite run ... --dry-run`)", file=sys.stderr)
        return 2
    try:
        run = Run.load(path)
    except (ValueError, KeyError) as error:  # ScenarioError and JSONDecodeError are ValueErrors
        print(f"error: {path} is not a valid run ({error}); recreate it with `suite run SCENARIO --dry-run`", file=sys.stderr)
        return 2
    return execute(run, args.run_dir)


if __name__ == "__main__":
    sys.exit(main())
