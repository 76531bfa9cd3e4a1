"""The ``suite`` command: run | report | compare | score | sample | ruler | env | gpu-check | jobscript | project | probe.

Every sub-command turns bad input into one clear line on stderr and exit code 2; a failed
run is recorded in its ``result.json`` and makes ``suite run`` exit with code 1; a run that
diverged (:mod:`suite.gan.divergence`), when none failed, with code 3 (:data:`DIVERGED_EXIT_CODE`). ``suite run``
holds its results folder's lock (:mod:`suite.running.lock`) while it works there; SIGTERM or SIGINT
stops it after stopping the current run's ranks and recording the run as interrupted, with
exit code 143 or 130.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .config.registry import FEATURES

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .config.scenario import Run, Scenario
    from .measure.network import Network
    from .running.launch import LaunchOptions

log = logging.getLogger("suite")


DIVERGED_EXIT_CODE = 3
"""``suite run``'s exit code when no run failed but at least one diverged: the benchmark worked, a model did not."""


class UsageError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""


# --- suite run -------------------------------------------------------------------------------


def _launch_options(args: argparse.Namespace) -> LaunchOptions:
    from .running.launch import LaunchOptions

    return LaunchOptions(
        launcher=args.launcher,
        hosts=args.hosts,
        nodes=args.nodes,
        ranks_per_node=args.ranks_per_node,
        gpus_per_rank=args.gpus_per_rank,
        cpus_per_rank=args.cpus_per_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        python=args.python or sys.executable,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from .measure.metrics.features import FeatureUnavailable
    from .running.launch import command_for
    from .running.lock import ResultsLock

    scenario, runs, out = _selected_runs(args)
    opts = _launch_options(args)
    for run in runs:  # build every command first: a launcher problem shows before anything is written
        command_for(run, out / run.run_id, opts)
    try:
        _check_rulers(runs)
    except FeatureUnavailable as error:
        if not args.dry_run:
            raise
        log.warning("warning: %s", error)  # a dry run shows the commands; the real run stops here
    with ResultsLock(out):
        return _run_sweep(args, scenario, runs, out, opts)


def _check_rulers(runs: list[Run]) -> None:
    """Every ruler the runs will score with is there and is the pinned file, before anything trains."""
    from .measure.metrics.rulers import find_classifier

    for dataset in sorted({r.dataset.name for r in runs if r.metrics.enabled or r.strategy == "cellular"}):
        find_classifier(dataset)  # every scored run also predicts classes with it; cellular ranks mixtures with it


def _selected_runs(args: argparse.Namespace) -> tuple[Scenario, list[Run], Path]:
    from .config.expansion import expand, load_scenario

    scenario = load_scenario(args.scenario)
    runs = expand(scenario)
    if args.only:
        runs = [r for r in runs if any(fnmatch.fnmatch(r.run_id, pattern) for pattern in args.only)]
        if not runs:
            raise UsageError(f"--only {' '.join(args.only)} matches no run of {scenario.name}")
    if args.trace:  # the run.json files carry it, so hand launches from them trace too
        for run in runs:
            run.trace = True
    if args.grace < 0:
        raise UsageError("--grace: must not be negative")
    return scenario, runs, Path(args.out or Path("results") / scenario.name)


def _run_sweep(args: argparse.Namespace, scenario: Scenario, runs: list[Run], out: Path, opts: LaunchOptions) -> int:
    """``suite run`` inside its results folder's lock."""
    import shlex

    from .records.results import read_record
    from .running.launch import SignalGuard, Stop, check_tools, command_for, launch, prepare
    from .running.lock import check_room

    (out / "scenario.yaml").write_text(Path(args.scenario).read_text())
    run_dirs = [prepare(run, out, opts) for run in runs]  # run.json: all a worker needs, also for hand launches
    if args.dry_run:
        for run, run_dir in zip(runs, run_dirs):
            print(shlex.join(command_for(run, run_dir.resolve(), opts)))
        return 0
    check_tools(runs, opts)
    kept = {
        run.run_id for run, run_dir in zip(runs, run_dirs) if args.resume and ((read_record(run_dir) or {}).get("status") == "ok")
    }
    check_room(out, [run for run in runs if run.run_id not in kept])
    failures = diverged = 0
    progress = None
    if not args.quiet and sys.stderr.isatty():  # a progress bar in a terminal, plain lines in logs
        from tqdm import tqdm

        progress = tqdm(total=len(runs), unit="run", desc=scenario.name, dynamic_ncols=True)
    current = None  # the run being launched
    with SignalGuard() as guard:
        try:
            for i, (run, run_dir) in enumerate(zip(runs, run_dirs)):
                if run.run_id in kept:
                    log.info("[%d/%d] %s: kept (--resume)", i + 1, len(runs), run.run_id)
                    progress and progress.update(1)
                    continue
                if progress:
                    progress.set_postfix_str(f"{run.run_id} 0s")
                    tick = lambda elapsed, rid=run.run_id: progress.set_postfix_str(f"{rid} {elapsed:.0f}s")  # noqa: E731
                else:
                    log.info("[%d/%d] %s: started", i + 1, len(runs), run.run_id)
                    tick = None
                current = run, run_dir
                record = launch(run, run_dir, opts, timeout=args.timeout, tick=tick, grace=args.grace, guard=guard)
                current = None
                ok, diverging = record["status"] == "ok", record["status"] == "diverged"
                failures += not ok and not diverging
                diverged += diverging
                if diverging:  # "RUN: diverged at step 12 on rank 0: discriminator loss inf"
                    line = f"[{i + 1}/{len(runs)}] {run.run_id}: {record['reason']} ({record['wall_s']:.1f}s)"
                else:
                    line = f"[{i + 1}/{len(runs)}] {run.run_id}: {record['status']} in {record['wall_s']:.1f}s" + (
                        "" if ok else f": {record['error'].splitlines()[0]}"
                    )
                if progress:
                    progress.write(line)
                    progress.update(1)
                else:
                    log.info(line)
        except Stop as stop:
            progress and progress.close()
            record = (read_record(current[1]) or {}) if current else {}
            where = (
                f"{current[0].run_id}: {record['error']}"
                if current and record.get("status") == "interrupted"
                else "no run was going"
            )
            print(
                f"stopped by {stop}; {where}\nfinished runs keep their results; `suite run ... --resume` continues",
                file=sys.stderr,
            )
            return 128 + stop.signum
    if progress:
        progress.close()
    print(
        f"results in {out}; {len(runs) - failures - diverged} ok, {failures} failed, {diverged} diverged. "
        f"Next: suite report {out}"
    )
    return 1 if failures else DIVERGED_EXIT_CODE if diverged else 0


# --- suite report ------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    from .analysis.report import write_report

    out = Path(args.out) if args.out else Path(args.results) / "report"
    path = write_report(Path(args.results), out, baselines=Path(args.baselines) if args.baselines else None)
    print(f"report written to {path}")
    return 0


# --- suite compare ------------------------------------------------------------------------------


def cmd_compare(args: argparse.Namespace) -> int:
    from .analysis.compare import compare, parse_tolerances, to_markdown

    result = compare(
        Path(args.new), Path(args.baseline), parse_tolerances(args.tolerance), allow_different_device=args.allow_different_device
    )
    print(json.dumps(result.as_dict(), indent=2) if args.json else to_markdown(result))
    return result.exit_code


# --- suite gate --------------------------------------------------------------------------------


def cmd_gate(args: argparse.Namespace) -> int:
    from .analysis.gate import GateError, Settings, run_gate

    settings = Settings(
        scenario=Path(args.scenario),
        out=Path(args.out),
        baseline=args.baseline,
        threshold=args.threshold,
        alpha=args.alpha,
        min_pairs=args.min_pairs,
        max_pairs=args.max_pairs,
        max_minutes=args.max_minutes,
        timeout=args.timeout,
        allow_dirty=args.allow_dirty,
        inject_slowdown=args.inject_slowdown,
    )
    try:
        result = run_gate(settings)
    except GateError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print((settings.out / "gate.md").read_text())
    print(result.reason, file=sys.stderr)
    return result.exit_code


# --- suite sample / score ----------------------------------------------------------------------


def cmd_sample(args: argparse.Namespace) -> int:
    import numpy as np

    from .gan.sampling import GeneratorBundle, Sampler
    from .records.results import GENERATOR_FILE, atomic_write

    bundle = GeneratorBundle.load(Path(args.run_dir) / GENERATOR_FILE)
    if args.n < 1:
        raise UsageError("--n: must be at least 1")
    images, labels = Sampler(bundle).sample(args.n, seed=args.seed)
    out = Path(args.out)
    with atomic_write(out) as tmp:
        np.savez(tmp, images=images.numpy().astype(np.float32), labels=labels.numpy().astype(np.int64))
    print(
        f"{args.n} samples written to {out} (images {tuple(images.shape)} in [-1, 1], labels {'-1: unconditional' if (labels < 0).all() else 'per sample'})"
    )
    return 0


def _load_samples(path: Path) -> tuple[torch.Tensor, np.ndarray]:
    import numpy as np
    import torch

    if not path.is_file():
        raise UsageError(f"--samples: {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "images" not in npz.files:
                raise UsageError(
                    f"--samples: {path} has no 'images' array (found {', '.join(npz.files) or 'nothing'}); write it with `suite sample`"
                )
            images = torch.from_numpy(np.asarray(npz["images"], dtype=np.float32))
            labels = np.asarray(npz["labels"], dtype=np.int64) if "labels" in npz.files else np.full(len(images), -1)
    except ValueError as error:
        raise UsageError(f"--samples: {path} is not a readable .npz file ({error})") from None
    if images.ndim != 4:
        raise UsageError(f"--samples: images in {path} must be (N, C, H, W), got shape {tuple(images.shape)}")
    if images.min() < -1.001 or images.max() > 1.001:
        raise UsageError(
            f"--samples: images in {path} must be scaled to [-1, 1] (found {float(images.min()):.3g}..{float(images.max()):.3g})"
        )
    if len(labels) != len(images):
        raise UsageError(f"--samples: {len(labels)} labels for {len(images)} images in {path}")
    return images, labels


def cmd_score(args: argparse.Namespace) -> int:
    from .gan.sampling import GeneratorBundle, Sampler
    from .measure.metrics import Reference, evaluate_images
    from .records.results import GENERATOR_FILE, PER_CLASS_BASES, per_class_summary, read_record

    if args.run:
        bundle = GeneratorBundle.load(Path(args.run) / GENERATOR_FILE)
        record = read_record(args.run) or {}
        n = args.n or 1000
        labels: torch.Tensor | np.ndarray
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
    ref = Reference(
        dataset=dataset,
        image_size=image_size,
        root=args.root,
        split=args.split,
        classes=classes,
        features=args.features,
        n=len(images),
        inception_weights=args.inception_weights,
    )
    q = evaluate_images(images, labels, ref)
    if args.json:
        print(json.dumps(q, indent=2))
    else:
        is_text = (
            f"{q['is_mean']:.3f} ± {q['is_std']:.3f}  ({q['is_splits']} splits of {q['is_split_n']})"
            if q["is_mean"] is not None
            else f"n/a ({q['is_note']})"
        )
        print(f"features   {q['features']}  ({q['features_detail']}; {q['feature_dim']} dimensions)")
        print(
            f"samples    {q['n']} generated, {q['n_real']} real ({dataset}/{args.split}, {len(q['classes'])} of {q['num_classes']} classes)"
        )
        print(f"IS         {is_text}")
        print(f"FID        {q['fid']:.3f}" if q["fid"] is not None else f"FID        n/a ({q['fid_note']})")
        print(f"KID        {q['kid_mean']:.3g} ± {q['kid_std']:.3g}  ({q['kid_subsets']} subsets of {q['kid_subset_size']})")
        for field, basis in PER_CLASS_BASES.items():
            summary = per_class_summary(q[field])
            if summary and summary["kid_mean"] is not None:
                print(
                    f"per class  by {basis}: mean KID {summary['kid_mean']:.3g} over {summary['scored']} of "
                    f"{summary['classes']} classes, n {summary['n_min']}-{summary['n_max']} per class, "
                    f"FID sound for {summary['fid_classes']} (--json for each class)"
                )
        print(f"TVD        {q['tvd']:.4f}")
        if q["label_acc"] is not None:
            print(f"label acc  {q['label_acc']:.4f}")
    return 0


# --- suite ruler -------------------------------------------------------------------------------


def cmd_ruler_train(args: argparse.Namespace) -> int:
    from .measure.metrics.features import ClassifierSpec, make_classifier_ruler
    from .measure.metrics.rulers import PACKAGED_RULERS, user_rulers

    folder = Path(args.out) if args.out else (PACKAGED_RULERS if args.packaged else user_rulers())
    if args.image_size < 8 or args.image_size % 4:
        raise UsageError(f"--image-size: {args.image_size} is not a multiple of 4 of at least 8")
    spec = ClassifierSpec(args.dataset, args.image_size, args.root, "train", args.seed)
    log.info("training the %s classifier ruler at %dpx (seed %d) into %s", args.dataset, args.image_size, args.seed, folder)
    ruler = make_classifier_ruler(spec, folder)
    print(f"{ruler.name}  {folder / ruler.file}")
    print(f"sha256 {ruler.sha256}  (pinned in {folder / 'rulers.json'})")
    print(f"held-out accuracy {ruler.heldout_accuracy:.4f} on {ruler.heldout_images} {ruler.heldout_split} images")
    return 0


def cmd_ruler_list(args: argparse.Namespace) -> int:
    from .measure.metrics.rulers import RulerError, read_manifest, ruler_folders, verify

    broken = 0
    for folder in ruler_folders():
        for name, ruler in read_manifest(folder).items():
            try:
                verify(folder / ruler.file, ruler.sha256, name)
                state = "ok"
            except RulerError as error:
                state, broken = f"BROKEN: {error}", broken + 1
            print(
                f"{name:24s} {ruler.sha256}  {ruler.image_size}px  acc {ruler.heldout_accuracy:.3f}  {folder / ruler.file}  {state}"
            )
    return 1 if broken else 0


# --- suite env / jobscript -----------------------------------------------------------------------


def cmd_env(args: argparse.Namespace) -> int:
    from .measure.env import capabilities

    print(json.dumps(capabilities(), indent=2))
    return 0


def cmd_gpu_check(args: argparse.Namespace) -> int:
    from .running.gpucheck import gpu_check

    if args.timeout <= 0:
        raise UsageError("--timeout: must be positive")
    return gpu_check(Path(args.out), args.timeout)


def cmd_jobscript(args: argparse.Namespace) -> int:
    from .running.jobscript import write_jobscript

    path = write_jobscript(
        Path(args.scenario),
        args.scheduler,
        Path(args.out) if args.out else None,
        _launch_options(args),
        results=args.results,
        walltime=args.walltime,
        account=args.account,
        queue=args.queue,
    )
    print(f"job script written to {path}")
    return 0


# --- suite project / probe ---------------------------------------------------------------------------


def _int_list(option: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UsageError(f"{option}: expected comma-separated positive integers such as 1,2,4,1024, got '{text}'")
    return sorted(set(values))


def _target_network(args: argparse.Namespace, out: Path) -> Network:
    """The network to project on, from --network / --alpha --beta / --ranks-per-node (``measure`` probes into ``out``)."""
    import dataclasses

    from .measure.network import with_link
    from .running.probe import resolve

    if (args.alpha is None) != (args.beta is None):
        raise UsageError(f"--{'beta' if args.beta is None else 'alpha'}: give --alpha and --beta together")
    if args.alpha is not None:
        if args.network:
            raise UsageError("--network: give either --network or --alpha and --beta, not both")
        if args.alpha < 0 or args.beta < 0:
            raise UsageError("--alpha/--beta: latency (s) and seconds per byte must not be negative")
        net = with_link(f"alpha {args.alpha:g} s, beta {args.beta:g} s/B", args.alpha, args.beta)
    else:
        net = resolve(args.network or "summit", out)
    if args.ranks_per_node is not None:
        if args.ranks_per_node < 1:
            raise UsageError("--ranks-per-node: must be at least 1")
        net = dataclasses.replace(net, ranks_per_node=args.ranks_per_node)
    return net


def cmd_project(args: argparse.Namespace) -> int:
    from .analysis.markdown import markdown_table
    from .analysis.projection.render import local_network, percent, run_projection, write_projection
    from .analysis.report import DEFAULT_BASELINES
    from .records.results import atomic_write_text, read_records

    ranks = _int_list("--ranks", args.ranks)
    fit_procs = _int_list("--fit-procs", args.fit_procs) if args.fit_procs else None
    if args.compute_scale <= 0:
        raise UsageError("--compute-scale: must be positive (0.01: a device 100 times faster than the measured one)")
    source = Path(args.results)
    records = read_records(source)  # a results folder, a report folder (its records.json) or a records file
    results = source if source.is_dir() else source.parent  # where probe.json is looked for; the default --out
    out = Path(args.out) if args.out else results / "projection"
    net = _target_network(args, out)
    result = run_projection(
        records,
        net,
        local_network(results, args.probe),
        ranks,
        Path(args.baselines) if args.baselines else DEFAULT_BASELINES,
        fit_procs,
        args.allreduce,
        args.compute_scale,
    )
    if result is None:
        raise UsageError(
            f"{source}: no run to fit: a fit needs an ok run with per-rank window times that is not "
            "oversubscribed (ranks x threads within the node's cores)"
        )
    lines = write_projection(result, out)
    path = out / "projection.md"
    atomic_write_text(path, "\n".join([f"Results: `{source}` ({len(records)} runs).\n", *lines]))
    shown = result.validation[["run_id", "measured_s", "predicted_s", "error", "role"]]
    print(markdown_table(shown.assign(error=shown["error"].map(percent))))
    print(f"projection on {net.describe()}\nwritten to {path}")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    import json

    from .measure.network import probe_network
    from .running.probe import run_probe

    if args.np < 2:
        raise UsageError("--np: the probe needs at least 2 processes")
    path = run_probe(Path(args.out), args.np)
    net = probe_network(path)
    data = json.loads(path.read_text())
    print(f"{net.describe()}")
    for n, pp, ar, model in zip(data["sizes"], data["pingpong_s"], data["allreduce_s"], data["allreduce_model_s"]):
        print(
            f"{n:>10} B  one-way {pp * 1e6:10.1f} us  allreduce over {data['procs']}: measured {ar * 1e6:10.1f} us, model {model * 1e6:10.1f} us"
        )
    print(f"written to {path}")
    return 0


# --- argument parsing ------------------------------------------------------------------------------


def _add_placement(p: argparse.ArgumentParser) -> None:
    from .running.launch import LAUNCHERS

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
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="write the run folders (run.json) and print the launch commands, without running them",
    )
    p.add_argument("--timeout", type=float, default=3600, help="seconds before a run is stopped and recorded as failed")
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep runs that already have an ok result; continue unfinished ones from their last checkpoint",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=60,
        help="seconds a run that checkpoints gets to save one and exit when suite run is stopped (SIGTERM, SIGINT)",
    )
    p.add_argument("--only", nargs="+", metavar="PATTERN", help="only run ids matching these shell patterns")
    p.add_argument(
        "--trace",
        action="store_true",
        help="trace every run: torch profiler, Horovod timeline, DeepSpeed comms log (timings include the overhead)",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="one log line per run instead of a progress bar (automatic when not in a terminal)",
    )
    _add_placement(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("report", help="write report.md, CSVs and plots from a results folder")
    p.add_argument("results", help="results folder written by suite run")
    p.add_argument("--out", help="report folder (default RESULTS/report)")
    p.add_argument("--baselines", help="papers' numbers CSV (default: the suite's baselines/)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="compare results with a baseline: exit 1 on a regression beyond tolerance and noise")
    p.add_argument("new", help="results folder (or records JSON) to check")
    p.add_argument("baseline", help="baseline: a results folder, a records JSON list, or a folder holding records.json")
    p.add_argument(
        "--tolerance",
        action="append",
        metavar="METRIC=PCT",
        help="accepted worsening of a metric in %% of the baseline (comm_share: percentage points); repeatable; "
        "the defaults are in docs/benchmarks-and-ci.md and in the tolerance column of the output",
    )
    p.add_argument("--allow-different-device", action="store_true", help="compare results from different devices anyway")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON instead of markdown")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("sample", help="draw samples from a trained run into an .npz file")
    p.add_argument("run_dir", help="a run folder (holding generator.pt)")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output .npz (arrays: images, labels)")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("score", help="IS / FID / KID / per-class FID or KID / TVD of a run or of samples")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", help="a run folder: sample its model and score it")
    src.add_argument("--samples", help=".npz with images (N, C, H, W) in [-1, 1] and optional labels")
    p.add_argument("--dataset", help="real data to compare with (default: the run's)")
    p.add_argument("--root", help="dataset folder (torchvision files / ImageNet)")
    p.add_argument("--split", default="train", choices=("train", "test"))
    p.add_argument("--features", default="auto", choices=FEATURES.names())
    p.add_argument("--inception-weights", help="path to pytorch-fid's pt_inception-2015-12-05 weights")
    p.add_argument("--n", type=int, help="number of samples to score (default: all / 1000 for --run)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("ruler", help="make or list the pinned feature networks (rulers) that IS / FID / KID use")
    ruler = p.add_subparsers(dest="ruler_command", required=True)
    q = ruler.add_parser("train", help="train the suite classifier of a dataset once and pin its sha256")
    q.add_argument("--dataset", required=True, help="digits, mnist, cifar10, cifar100 or imagenet")
    q.add_argument("--image-size", type=int, default=20, help="the ruler's input size; images are resized to it (default 20)")
    q.add_argument("--root", help="dataset folder (default $SUITE_DATA)")
    q.add_argument("--seed", type=int, default=0)
    where = q.add_mutually_exclusive_group()
    where.add_argument("--out", help="ruler folder to write (default $SUITE_RULERS, else the cache's rulers/)")
    where.add_argument("--packaged", action="store_true", help="write into the package's own folder (maintainers)")
    q.set_defaults(func=cmd_ruler_train)
    q = ruler.add_parser("list", help="list the pinned rulers and check every file against its hash (exit 1 if one fails)")
    q.set_defaults(func=cmd_ruler_list)

    p = sub.add_parser(
        "gate",
        help="regression gate: this checkout against a baseline revision, paired and interleaved on this host",
        description="Run the regression workload alternately from a baseline revision (a git worktree) and from this "
        "checkout (A B B A ...), then test the per-pair ratios (Wilcoxon signed-rank) against a practical threshold. "
        "Exit codes: 0 PASS, 1 FAIL (significantly worse by the threshold or more), 3 INCONCLUSIVE (too noisy to "
        "tell), 2 bad input or a side whose workload failed. See docs/benchmarks-and-ci.md.",
    )
    p.add_argument("--baseline", help="baseline revision (default: the merge base of HEAD with the main branch)")
    p.add_argument("--scenario", default="scenarios/gate.yaml", help="the workload (default scenarios/gate.yaml)")
    p.add_argument("--out", default="results/gate", help="folder for the runs and gate.md (default results/gate)")
    p.add_argument("--threshold", type=float, default=10.0, help="percent worse that counts as a regression (default 10)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument(
        "--min-pairs", type=int, default=6, help="pairs before the first verdict (default 5, the fewest that can fail)"
    )
    p.add_argument("--max-pairs", type=int, default=12, help="pairs at most while undecided (default 12)")
    p.add_argument("--max-minutes", type=float, default=15, help="no new pair once this would be exceeded (default 15)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per workload run before it counts as failed")
    p.add_argument("--allow-dirty", action="store_true", help="measure the working tree with its uncommitted changes")
    p.add_argument(
        "--inject-slowdown",
        type=float,
        default=0.0,
        metavar="F",
        help="measurement knob: slow the candidate's steps by the fraction F (sets SUITE_TEST_SLOWDOWN; "
        "used by ci/gate_error_rates.py to measure the detection rate)",
    )
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("env", help="print versions and capabilities as JSON")
    p.set_defaults(func=cmd_env)

    p = sub.add_parser(
        "gpu-check",
        help="self-check of the GPU paths on this node: short runs of every strategy and engine on every GPU",
        description="Train every strategy on every installed GPU engine for a few seconds at P = 1 and P = the visible "
        "GPUs, then check each run: ok, ranks on distinct GPUs, NVML utilisation and memory plausible, CUDA-event "
        "timings, quality scored on the GPU; writes gpu-check.md and gpu-check.json. Exit codes: 0 all checks "
        "passed, 1 a check failed, 2 bad input, 4 skipped: no CUDA GPU visible (one line on stderr).",
    )
    p.add_argument("--out", default="results/gpu-check", help="folder for the report and the runs (default results/gpu-check)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a run is stopped and recorded as failed")
    p.set_defaults(func=cmd_gpu_check)

    p = sub.add_parser("jobscript", help="write an LSF or Slurm batch script running a whole scenario")
    p.add_argument("scenario")
    p.add_argument("--scheduler", choices=("lsf", "slurm"), required=True)
    p.add_argument("--out", help="script path (default jobs/<scenario>.<scheduler>.sh)")
    p.add_argument("--results", help="results folder on the cluster (default results/<scenario>)")
    p.add_argument(
        "--walltime",
        default="2:00:00",
        help="as Slurm's --time: MINUTES, H:MM:SS, D-H, D-H:MM, D-H:MM:SS; or 90m, 6h, 1d (default 2:00:00; MM:SS is refused)",
    )
    p.add_argument("--account", help="project / account to charge")
    p.add_argument("--queue", help="queue (LSF) or partition (Slurm)")
    _add_placement(p)
    p.set_defaults(func=cmd_jobscript)

    from .analysis.projection.fit import DEFAULT_RANKS
    from .measure.network import ALGORITHMS, PRESETS

    p = sub.add_parser("project", help="fit a cost model per strategy on the runs, validate it, project it to many ranks")
    p.add_argument(
        "results", help="results folder written by suite run, or a report folder or records.json written by suite report"
    )
    p.add_argument(
        "--ranks", default=",".join(map(str, DEFAULT_RANKS)), help="process counts to project (default 1,2,4,...,4096)"
    )
    p.add_argument(
        "--network", help=f"network to project on: a preset ({', '.join(PRESETS)}), a probe file, or 'measure' (default summit)"
    )
    p.add_argument("--alpha", type=float, help="latency in seconds of one link everywhere (with --beta)")
    p.add_argument("--beta", type=float, help="seconds per byte of that link (with --alpha)")
    p.add_argument("--ranks-per-node", type=int, help="ranks per node of the projected network (default: the preset's)")
    p.add_argument(
        "--probe", help="probe file of the machine the runs were measured on (default RESULTS/probe.json, else the shm preset)"
    )
    p.add_argument("--fit-procs", help="fit on these process counts and predict the others (default: hold each out in turn)")
    p.add_argument(
        "--allreduce", choices=ALGORITHMS, default="best", help="allreduce algorithm of the model (default: the cheapest)"
    )
    p.add_argument(
        "--compute-scale", type=float, default=1.0, help="multiply computation times by this (0.01: a 100x faster device)"
    )
    p.add_argument("--out", help="output folder (default RESULTS/projection)")
    p.add_argument("--baselines", help="folder of the papers' numbers (default: the suite's baselines/)")
    p.set_defaults(func=cmd_project)

    p = sub.add_parser("probe", help="measure this machine's latency and bandwidth (MPI ping-pong and allreduce)")
    p.add_argument(
        "--out", default="probe.json", help="JSON file to write (default probe.json; RESULTS/probe.json is read by suite project)"
    )
    p.add_argument("--np", type=int, default=2, help="processes (default 2)")
    p.set_defaults(func=cmd_probe)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    from .config.scenario import ScenarioError
    from .gan.data import DataError
    from .measure.metrics.features import FeatureUnavailable
    from .running.launch import LaunchError

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
