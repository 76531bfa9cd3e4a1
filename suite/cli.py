"""The ``suite`` command: run | report | score | sample | env | jobscript.

Every sub-command turns bad input into one clear line on stderr and exit code 2; a failed
run is recorded in its ``result.json`` and makes ``suite run`` exit with code 1.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger("suite")


class UsageError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""


# --- suite run -------------------------------------------------------------------------------


def _launch_options(args) -> "LaunchOptions":
    from .launch import LaunchOptions

    return LaunchOptions(
        launcher=args.launcher, hosts=args.hosts, nodes=args.nodes, ranks_per_node=args.ranks_per_node,
        gpus_per_rank=args.gpus_per_rank, cpus_per_rank=args.cpus_per_rank, master_addr=args.master_addr,
        master_port=args.master_port, python=args.python or sys.executable,
    )


def cmd_run(args) -> int:
    import shlex

    from .launch import check_tools, command_for, launch, prepare
    from .results import read_record
    from .scenario import expand, load_scenario

    scenario = load_scenario(args.scenario)
    runs = expand(scenario)
    if args.only:
        runs = [r for r in runs if any(fnmatch.fnmatch(r.run_id, pattern) for pattern in args.only)]
        if not runs:
            raise UsageError(f"--only {' '.join(args.only)} matches no run of {scenario.name}")
    if args.trace:  # the run.json files carry it, so hand launches from them trace too
        for run in runs:
            run.trace = True
    out = Path(args.out or Path("results") / scenario.name)
    opts = _launch_options(args)
    for run in runs:  # build every command first: a launcher problem shows before anything runs
        command_for(run, out / run.run_id, opts)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.yaml").write_text(Path(args.scenario).read_text())
    run_dirs = [prepare(run, out, opts) for run in runs]  # run.json: all a worker needs, also for hand launches
    if args.dry_run:
        for run, run_dir in zip(runs, run_dirs):
            print(shlex.join(command_for(run, run_dir.resolve(), opts)))
        return 0
    check_tools(runs, opts)
    failures = 0
    progress = None
    if not args.quiet and sys.stderr.isatty():  # a progress bar in a terminal, plain lines in logs
        from tqdm import tqdm

        progress = tqdm(total=len(runs), unit="run", desc=scenario.name, dynamic_ncols=True)
    for i, (run, run_dir) in enumerate(zip(runs, run_dirs)):
        previous = read_record(run_dir) if args.resume else None
        if previous and previous.get("status") == "ok":
            log.info("[%d/%d] %s: kept (--resume)", i + 1, len(runs), run.run_id)
            progress and progress.update(1)
            continue
        if progress:
            progress.set_postfix_str(f"{run.run_id} 0s")
            tick = lambda elapsed, rid=run.run_id: progress.set_postfix_str(f"{rid} {elapsed:.0f}s")  # noqa: E731
        else:
            log.info("[%d/%d] %s: started", i + 1, len(runs), run.run_id)
            tick = None
        record = launch(run, run_dir, opts, timeout=args.timeout, tick=tick)
        ok = record["status"] == "ok"
        failures += not ok
        line = f"[{i + 1}/{len(runs)}] {run.run_id}: {record['status']} in {record['wall_s']:.1f}s" + ("" if ok else f": {record['error'].splitlines()[0]}")
        if progress:
            progress.write(line)
            progress.update(1)
        else:
            log.info(line)
    if progress:
        progress.close()
    print(f"results in {out}; {len(runs) - failures} ok, {failures} failed. Next: suite report {out}")
    return 1 if failures else 0


# --- suite report ------------------------------------------------------------------------------


def cmd_report(args) -> int:
    from .report import write_report

    out = Path(args.out) if args.out else Path(args.results) / "report"
    path = write_report(Path(args.results), out, baselines=Path(args.baselines) if args.baselines else None)
    print(f"report written to {path}")
    return 0


# --- suite sample / score ----------------------------------------------------------------------


def cmd_sample(args) -> int:
    import numpy as np

    from .results import GENERATOR_FILE, atomic_write
    from .sampling import GeneratorBundle, Sampler

    bundle = GeneratorBundle.load(Path(args.run_dir) / GENERATOR_FILE)
    if args.n < 1:
        raise UsageError("--n: must be at least 1")
    images, labels = Sampler(bundle).sample(args.n, seed=args.seed)
    out = Path(args.out)
    with atomic_write(out) as tmp:
        np.savez(tmp, images=images.numpy().astype(np.float32), labels=labels.numpy().astype(np.int64))
    print(f"{args.n} samples written to {out} (images {tuple(images.shape)} in [-1, 1], labels {'-1: unconditional' if (labels < 0).all() else 'per sample'})")
    return 0


def _load_samples(path: Path):
    import numpy as np
    import torch

    if not path.is_file():
        raise UsageError(f"--samples: {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "images" not in npz.files:
                raise UsageError(f"--samples: {path} has no 'images' array (found {', '.join(npz.files) or 'nothing'}); write it with `suite sample`")
            images = torch.from_numpy(np.asarray(npz["images"], dtype=np.float32))
            labels = np.asarray(npz["labels"], dtype=np.int64) if "labels" in npz.files else np.full(len(images), -1)
    except ValueError as error:
        raise UsageError(f"--samples: {path} is not a readable .npz file ({error})") from None
    if images.ndim != 4:
        raise UsageError(f"--samples: images in {path} must be (N, C, H, W), got shape {tuple(images.shape)}")
    if images.min() < -1.001 or images.max() > 1.001:
        raise UsageError(f"--samples: images in {path} must be scaled to [-1, 1] (found {float(images.min()):.3g}..{float(images.max()):.3g})")
    if len(labels) != len(images):
        raise UsageError(f"--samples: {len(labels)} labels for {len(images)} images in {path}")
    return images, labels


def cmd_score(args) -> int:
    from .metrics import Reference, evaluate_images
    from .results import GENERATOR_FILE, read_record
    from .sampling import GeneratorBundle, Sampler

    if args.run:
        bundle = GeneratorBundle.load(Path(args.run) / GENERATOR_FILE)
        record = read_record(args.run) or {}
        n = args.n or 1000
        images, labels = Sampler(bundle).sample(n, seed=args.seed)
        dataset = args.dataset or (record.get("dataset") or {}).get("name")
        classes = (record.get("dataset") or {}).get("classes")
        image_size = bundle.image_size
    else:
        images, labels = _load_samples(Path(args.samples))
        if args.n:
            images, labels = images[: args.n], labels[: args.n]
        dataset, classes, image_size = args.dataset, None, images.shape[-1]
    if not dataset:
        raise UsageError("--dataset: name the dataset to compare with (digits, mnist, cifar10, cifar100, imagenet)")
    ref = Reference(dataset=dataset, image_size=image_size, root=args.root, split=args.split, classes=classes,
                    features=args.features, n=len(images), inception_weights=args.inception_weights)
    quality = evaluate_images(images, labels, ref)
    if args.json:
        print(json.dumps(quality, indent=2))
    else:
        is_text = f"{quality['is_mean']:.3f} ± {quality['is_std']:.3f}" if quality["is_mean"] is not None else f"n/a ({quality['is_note']})"
        print(f"features   {quality['features']}  ({quality['features_detail']})")
        print(f"samples    {quality['n']} generated, {quality['n_real']} real ({dataset}/{args.split})")
        print(f"IS         {is_text}")
        print(f"FID        {quality['fid']:.3f}")
        print(f"TVD        {quality['tvd']:.4f}")
        if quality["label_acc"] is not None:
            print(f"label acc  {quality['label_acc']:.4f}")
    return 0


# --- suite env / jobscript -----------------------------------------------------------------------


def cmd_env(args) -> int:
    from .env import capabilities

    print(json.dumps(capabilities(), indent=2))
    return 0


def cmd_jobscript(args) -> int:
    from .jobscript import write_jobscript

    path = write_jobscript(Path(args.scenario), args.scheduler, Path(args.out) if args.out else None, _launch_options(args),
                           results=args.results, walltime=args.walltime, account=args.account, queue=args.queue)
    print(f"job script written to {path}")
    return 0


# --- argument parsing ------------------------------------------------------------------------------


def _add_placement(p: argparse.ArgumentParser) -> None:
    from .launch import LAUNCHERS

    g = p.add_argument_group("placement (cluster launchers)")
    g.add_argument("--launcher", choices=LAUNCHERS, default="local", help="how to start the ranks (default: local processes)")
    g.add_argument("--hosts", help="mpirun/horovodrun host list 'n1:4,n2:4', or a deepspeed hostfile")
    g.add_argument("--nodes", type=int, default=1, help="nodes in the allocation (torchrun, deepspeed, srun)")
    g.add_argument("--ranks-per-node", type=int, help="ranks per node (default: procs / nodes)")
    g.add_argument("--gpus-per-rank", type=int, default=1, help="GPUs per rank (jsrun, srun; default 1)")
    g.add_argument("--cpus-per-rank", type=int, help="CPU cores per rank (jsrun, srun)")
    g.add_argument("--master-addr", help="rendezvous host for torchrun/deepspeed across nodes")
    g.add_argument("--master-port", type=int, default=29500)
    g.add_argument("--python", help="interpreter on the compute nodes (default: this one)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="suite", description="Reference benchmark suite for distributed GAN training.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a scenario's runs and record results")
    p.add_argument("scenario", help="scenario YAML file, e.g. scenarios/smoke.yaml")
    p.add_argument("--out", help="results folder (default results/<scenario name>)")
    p.add_argument("--dry-run", action="store_true", help="write the run folders (run.json) and print the launch commands, without running them")
    p.add_argument("--timeout", type=float, default=3600, help="seconds before a run is stopped and recorded as failed")
    p.add_argument("--resume", action="store_true", help="keep runs that already have an ok result")
    p.add_argument("--only", nargs="+", metavar="PATTERN", help="only run ids matching these shell patterns")
    p.add_argument("--trace", action="store_true", help="trace every run: torch profiler, Horovod timeline, DeepSpeed comms log (timings include the overhead)")
    p.add_argument("-q", "--quiet", action="store_true", help="one log line per run instead of a progress bar (automatic when not in a terminal)")
    _add_placement(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="write report.md, CSVs and plots from a results folder")
    p.add_argument("results", help="results folder written by suite run")
    p.add_argument("--out", help="report folder (default RESULTS/report)")
    p.add_argument("--baselines", help="papers' numbers CSV (default: the suite's baselines/)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("sample", help="draw samples from a trained run into an .npz file")
    p.add_argument("run_dir", help="a run folder (holding generator.pt)")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output .npz (arrays: images, labels)")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("score", help="IS / FID / per-class FID / TVD of a run or of samples")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", help="a run folder: sample its model and score it")
    src.add_argument("--samples", help=".npz with images (N, C, H, W) in [-1, 1] and optional labels")
    p.add_argument("--dataset", help="real data to compare with (default: the run's)")
    p.add_argument("--root", help="dataset folder (torchvision files / ImageNet)")
    p.add_argument("--split", default="train", choices=("train", "test"))
    p.add_argument("--features", default="auto", choices=("auto", "inception", "classifier"))
    p.add_argument("--inception-weights", help="path to pytorch-fid's pt_inception-2015-12-05 weights")
    p.add_argument("--n", type=int, help="number of samples to score (default: all / 1000 for --run)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("env", help="print versions and capabilities as JSON")
    p.set_defaults(func=cmd_env)

    p = sub.add_parser("jobscript", help="write an LSF or Slurm batch script running a whole scenario")
    p.add_argument("scenario")
    p.add_argument("--scheduler", choices=("lsf", "slurm"), required=True)
    p.add_argument("--out", help="script path (default jobs/<scenario>.<scheduler>.sh)")
    p.add_argument("--results", help="results folder on the cluster (default results/<scenario>)")
    p.add_argument("--walltime", default="02:00", help="HH:MM")
    p.add_argument("--account", help="project / account to charge")
    p.add_argument("--queue", help="queue (LSF) or partition (Slurm)")
    _add_placement(p)
    p.set_defaults(func=cmd_jobscript)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    from .data import DataError
    from .launch import LaunchError
    from .metrics.features import FeatureUnavailable
    from .scenario import ScenarioError

    try:
        return args.func(args)
    except (UsageError, ScenarioError, LaunchError, DataError, FeatureUnavailable, FileNotFoundError, ValueError) as error:
        if args.verbose:
            log.exception("details")
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished runs keep their results (rerun with --resume)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
