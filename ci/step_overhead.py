"""Side by side, in one run: the suite's step against a bare PyTorch loop, compile against eager, Horovod against DDP.

Usage (on a quiet machine; the numbers of a shared one are not worth keeping)::

    python ci/step_overhead.py --out reports/cpu-step --rounds 5 --steps 40 --engine-repeats 3
    python ci/step_overhead.py --out /tmp/step --rounds 1 --steps 3 --skip-engines   # a quick check of the script
    python ci/step_overhead.py --device cuda --out OUT --rounds 5 --steps 100 --warmup 10 --skip-compile   # on a GPU

``--device cuda`` runs every arm on the GPU (the bare loop there is the anchor), waits for the GPU
before reading each clock, and samples NVML's busy share during each arm's steps (column
``busy_pct``); ``--cuda-graphs`` adds the suite's step with ``performance.cuda_graphs`` (arm
``graphed``). Without a visible CUDA GPU, ``--device cuda`` ends in one line on stderr,
``step_overhead: --device cuda: no CUDA GPU visible (...): nothing measured``, with exit code 4
(as ``suite gpu-check``'s). An optional arm (compiled, graphed) that fails is left out in one line,
the others are still measured.

Writes ``OUT/step-overhead.csv`` (one row per round and arm: seconds per step, images per second, GPU busy %)
and ``OUT/step-overhead.md`` (the medians and paired ratios). The arms are interleaved round by
round (suite, bare, eager, compiled, suite, bare, ...) so that a machine's drift hits them alike.
``--profile`` also writes ``OUT/suite-step.prof`` and the top functions of the suite's step
(cProfile; relative shares stay meaningful on a loaded machine).

- **suite vs bare**: :class:`suite.train.training.GanTrainer` on one rank against a loop of the
  same networks, loss, optimizer, batch and threads with nothing else (no telemetry, checks, seeds
  per batch). Goal: at most 1.03.
- **compile vs eager**: the suite's step with ``performance.compile`` against without, after a
  warm-up that compiles.
- **graphed vs eager** (``--cuda-graphs``, GPU only): images/s of the step with
  ``performance.cuda_graphs`` against without. Goal: at least 3.
- **horovod vs ddp**: ``suite run`` of ``data_parallel`` at P = 2 (on a GPU: P = the visible GPUs) on
  each engine, interleaved repeats (``scenarios`` written into OUT), images/s from the records.
  Goal: at least 0.95.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import io
import math
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from suite.config.exitcodes import ExitCode  # noqa: E402
from suite.config.expansion import expand, parse_scenario  # noqa: E402
from suite.gan.data import load_dataset  # noqa: E402
from suite.gan.losses import get_loss  # noqa: E402
from suite.gan.models import build_pair  # noqa: E402
from suite.measure.sampler import ResourceSampler  # noqa: E402
from suite.measure.telemetry import CommStats, Telemetry  # noqa: E402
from suite.measure.timelines import timeline_for  # noqa: E402
from suite.train.engines.base import Engine, Group  # noqa: E402
from suite.train.gan_plan import GanPlan  # noqa: E402
from suite.train.training import GanTrainer  # noqa: E402


class OneRank(Engine):
    """One process, no communication: the suite's step without an engine's cost."""

    name = "one-rank"

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device, self.timeline = device, timeline_for(device)

    def start(self) -> None: ...

    def shutdown(self) -> None: ...

    def split(self, groups: list[list[int]]) -> Group:
        return Group(index=0, ranks=[0], rank=0)

    def _replicate(self, network, optimizer, group, name):  # type: ignore[no-untyped-def]
        raise AssertionError("one rank replicates nothing")

    def _allreduce_sum_(self, tensor: torch.Tensor, group: Group) -> None: ...

    def _max_(self, votes: torch.Tensor, group: Group) -> None: ...

    def allgather_object(self, obj: Any) -> list[Any]:
        return [obj]


def scenario_dict(args: argparse.Namespace, perf: dict | None = None) -> dict:
    return {
        "name": "step-overhead",
        "dataset": {"name": "digits", "image_size": args.image_size},
        # the arms' warm-up is --warmup's untimed steps; a graphed scenario must still name enough warm-up steps to be
        # accepted (the capture after two eager steps)
        "train": {"epochs": 1000, "steps": 10**6, "batch_size": args.batch, "threads": 1}
        | {"warmup_steps": 3 if (perf or {}).get("cuda_graphs") else 0},
        "metrics": {"enabled": False},
        "performance": perf or {},
        # the engine is never started (one rank, OneRank); CUDA graphs are allowed on the torch engine only
        "runs": [{"strategy": "data_parallel", "engine": "torch" if (perf or {}).get("cuda_graphs") else "mpi"}],
    }


WARMUP_S: dict[str, float] = {}
"""Seconds of each arm's untimed warm-up steps (with compile: the compilation)."""
LEFT_OUT: dict[str, str] = {}
"""Optional arms that failed (set-up or a timed round), each with the one line that says why."""


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a GPU's kernels run after the host has moved on)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, one: Callable[[], None]) -> Callable[[int], float]:
    """``run(steps)``: seconds per step of ``steps`` calls of ``one``, the device's queue drained at both ends."""

    def steps(n: int) -> float:
        synchronize(device)
        began = time.perf_counter()
        for _ in range(n):
            one()
        synchronize(device)
        return (time.perf_counter() - began) / n

    return steps


def suite_arm(args: argparse.Namespace, perf: dict | None = None, name: str = "suite") -> Callable[[int], float]:
    """The suite's step on one rank: ``run(steps)`` returns seconds per step."""
    run = expand(parse_scenario(scenario_dict(args, perf)))[0]
    engine = OneRank(args.torch_device)
    telemetry = Telemetry(engine.device, CommStats())
    trainer = GanTrainer(
        run, engine, GanPlan("all", load_dataset("digits", args.image_size), engine.world(), args.batch), telemetry
    )
    began = time.perf_counter()
    trainer.warm_up(args.warmup)  # the FLOP-counting step and, with compile, the compilation
    synchronize(engine.device)
    WARMUP_S[name] = time.perf_counter() - began
    telemetry.open_window()
    trainer.open_window()
    return timed(engine.device, trainer.step)


def bare_arm(args: argparse.Namespace) -> Callable[[int], float]:
    """The same networks, loss, Adam and batch in a plain loop (on ``--device``: a batch drawn on the host and
    copied over, as the suite does; the noise drawn on the device)."""
    device = args.torch_device
    data = load_dataset("digits", args.image_size)
    images = data.images
    assert images is not None, "digits are held in memory"
    run = expand(parse_scenario(scenario_dict(args)))[0]  # the suite arm's model settings
    g, d = build_pair(
        args.image_size, data.channels, run.model.latent_dim, dropout=run.model.dropout, seed=0, critic_norm=run.critic_norm
    )
    g, d = g.to(device), d.to(device)
    loss = get_loss("bce")
    lr, betas = run.train.lr, tuple(run.train.betas)
    opt_g = torch.optim.Adam(g.parameters(), lr=lr, betas=betas)  # type: ignore[arg-type]
    opt_d = torch.optim.Adam(d.parameters(), lr=lr, betas=betas)  # type: ignore[arg-type]
    rng = torch.Generator().manual_seed(0)
    noise_rng = rng if device.type == "cpu" else torch.Generator(device).manual_seed(0)

    def noise() -> torch.Tensor:
        return torch.randn(args.batch, run.model.latent_dim, generator=noise_rng, device=device)

    def one() -> None:
        real = images[torch.randint(len(images), (args.batch,), generator=rng)].to(device, non_blocking=True)
        with torch.no_grad():
            fake = g(noise(), None)
        d_loss = loss.discriminator(d(real, None), d(fake, None))
        opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        opt_d.step()
        for p in d.parameters():
            p.requires_grad_(False)
        g_loss = loss.generator(d(g(noise(), None), None))
        opt_g.zero_grad(set_to_none=True)
        g_loss.backward()
        opt_g.step()
        for p in d.parameters():
            p.requires_grad_(True)

    began = time.perf_counter()
    for _ in range(args.warmup):
        one()
    synchronize(device)
    WARMUP_S["bare"] = time.perf_counter() - began
    return timed(device, one)


ENGINES = ("horovod", "torch")
"""The engines the engine arm compares, in the order of its even rounds."""


def engine_scenario(args: argparse.Namespace, order: tuple[str, ...]) -> dict[str, Any]:
    """The scenario of one engine round: ``data_parallel`` on each engine of ``order``, with ``--horovod``'s settings."""
    return {
        "name": "step-overhead-engines",
        "dataset": {"name": "digits", "image_size": args.image_size},
        "train": {"epochs": args.engine_epochs, "batch_size": args.batch, "threads": 1},
        "metrics": {"enabled": False},
        "runs": [{"strategy": "data_parallel", "engine": e, "procs": [args.engine_procs]} for e in order],
        **({"horovod": args.horovod} if args.horovod else {}),
    }


def engine_rows(args: argparse.Namespace) -> list[dict]:
    """Horovod and DDP at ``--engine-procs`` ranks, ``--engine-repeats`` rounds of ``suite run``, the order swapped every
    round (Horovod first, then DDP first: a machine whose speed drifts over the runs favours neither); images/s from the
    records."""
    import yaml

    from suite.records.results import iter_records

    rows = []
    for round_ in range(args.engine_repeats):
        order = ENGINES if round_ % 2 == 0 else ENGINES[::-1]
        path = args.out / "engines.yaml"
        path.write_text(yaml.safe_dump(engine_scenario(args, order)))
        results = args.out / "engines" / f"round{round_}"
        env = {**os.environ, "SUITE_DEVICE": "auto" if args.device == "cuda" else "cpu"}
        command = [sys.executable, "-m", "suite", "run", str(path), "--out", str(results), "--quiet"]
        subprocess.run(command, cwd=ROOT, check=True, env=env)
        rows += [{"arm": r.engine, "round": round_, "images_per_s": r.images_per_s} for r in iter_records(results)]
    return rows


def no_gpu_reason() -> str | None:
    """Why ``--device cuda`` cannot run here, or None when a CUDA GPU is visible."""
    if torch.cuda.is_available():
        return None
    return f"no CUDA GPU visible (torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'})"


def leave_out(name: str, where: str, error: BaseException) -> None:
    """Record (and say on stderr) that the optional arm ``name`` is left out, and why, in one line."""
    LEFT_OUT[name] = f"{where}: {type(error).__name__}: {' '.join(str(error).split())[:200]}"
    print(f"step_overhead: arm {name} left out ({LEFT_OUT[name]})", file=sys.stderr)


def measure(arms: dict[str, Callable[[int], float]], args: argparse.Namespace) -> list[dict]:
    """The interleaved rounds: every arm's ``--steps`` steps in turn, ``--rounds`` times; on a GPU, NVML's busy share
    sampled during each arm's steps. An optional arm that fails in a round is left out from then on."""
    rows = []
    for r in range(args.rounds):
        for name, arm in list(arms.items()):
            sampler = ResourceSampler(args.torch_device, interval=0.05)
            sampler.start()
            try:
                seconds = arm(args.steps)
            except Exception as error:
                if name in ("suite", "bare"):
                    raise
                leave_out(name, f"round {r}", error)
                del arms[name]
                continue
            finally:
                sampler.stop()
            busy = statistics.fmean(sampler.gpu_util) if sampler.gpu_util else None
            rows.append({"arm": name, "round": r, "step_s": seconds, "images_per_s": 3 * args.batch / seconds, "busy_pct": busy})
    return rows


def profile_suite(args: argparse.Namespace) -> str:
    """cProfile of the suite's steps: the top functions by own time, as text."""
    arm = suite_arm(args)
    profiler = cProfile.Profile()
    profiler.runcall(arm, args.steps)
    profiler.dump_stats(str(args.out / "suite-step.prof"))
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    return text.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "cpu-step")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of every arm")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per arm and round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before the first round (compile happens here)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--engine-repeats", type=int, default=3)
    parser.add_argument("--engine-epochs", type=int, default=1)
    parser.add_argument("--skip-engines", action="store_true", help="no Horovod vs DDP runs")
    parser.add_argument("--skip-arms", action="store_true", help="only the Horovod vs DDP runs (no suite, bare, compiled arms)")
    parser.add_argument("--skip-compile", action="store_true", help="no compile arm (it compiles for minutes on a small CPU)")
    parser.add_argument("--profile", action="store_true", help="also profile the suite's step with cProfile")
    parser.add_argument(
        "--warm-cache", action="store_true", help="keep Inductor's compile cache (default: an empty one, as a fresh node has)"
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where every arm trains (default cpu)")
    parser.add_argument("--cuda-graphs", action="store_true", help="also the step with performance.cuda_graphs (--device cuda)")
    parser.add_argument("--engine-procs", type=int, help="ranks of the Horovod and DDP runs (default 2; on a GPU, the GPUs)")
    parser.add_argument(
        "--horovod",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a Horovod engine setting of the Horovod runs (the scenario's horovod section, docs/engine-settings.md; "
        "repeatable), e.g. cycle_time_ms=5 or groups=1",
    )
    args = parser.parse_args()
    try:
        args.horovod = horovod_settings(args.horovod)
    except ValueError as error:
        print(f"step_overhead: {error}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    if args.device == "cuda" and (reason := no_gpu_reason()):
        print(f"step_overhead: --device cuda: {reason}: nothing measured", file=sys.stderr)
        return int(ExitCode.NO_GPU)
    if args.cuda_graphs and args.device != "cuda":
        print("step_overhead: --cuda-graphs: CUDA graphs need --device cuda", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    args.torch_device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    if args.engine_procs is None:
        args.engine_procs = torch.cuda.device_count() if args.device == "cuda" else 2
    if args.horovod and (problem := horovod_problem(args)):
        print(f"step_overhead: --horovod: {problem}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    if not args.warm_cache:  # a compile the cache serves costs seconds; the one a fresh node pays costs tens of seconds
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)

    arms = {} if args.skip_arms else {"suite": suite_arm(args), "bare": bare_arm(args)}
    optional = {"compiled": {"compile": True}} if not (args.skip_compile or args.skip_arms) else {}
    if args.cuda_graphs and not args.skip_arms:
        optional["graphed"] = {"cuda_graphs": True}
    for name, perf in optional.items():
        try:
            arms[name] = suite_arm(args, perf, name)
        except Exception as error:  # an optional arm that cannot run is left out, said in one line
            leave_out(name, "set-up", error)
    rows = measure(arms, args)
    if not args.skip_engines:
        rows += engine_rows(args)

    with open(args.out / "step-overhead.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["arm", "round", "step_s", "images_per_s", "busy_pct"])
        writer.writeheader()
        writer.writerows(rows)
    args.out.joinpath("step-overhead.md").write_text(summary(rows, args) + (profile_section(args) if args.profile else ""))
    print(args.out / "step-overhead.md")
    return 0


def paired(rows: list[dict], a: str, b: str, field: str) -> list[float]:
    """Ratios a/b of one field, round by round."""
    by = {(r["arm"], r["round"]): r[field] for r in rows if r.get(field) is not None}
    return [by[(a, k)] / by[(b, k)] for (arm, k) in sorted(by) if arm == a and (b, k) in by]


def ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of paired ratios and its 95 % t-interval (on the log ratios; scipy)."""
    from scipy import stats

    logs = [math.log(x) for x in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    low, high = stats.t.interval(0.95, len(logs) - 1, loc=mean, scale=stats.sem(logs))
    return math.exp(mean), math.exp(low), math.exp(high)


def machine_line(args: argparse.Namespace) -> str:
    """Where the arms ran: the CPU (with its kernel set) and, on a GPU, the GPU and its CUDA."""
    cpu = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    if args.torch_device.type == "cuda":
        gpu = f"{torch.cuda.get_device_name(args.torch_device)} (CUDA {torch.version.cuda})"
        return f"on the GPU: {gpu}, host {cpu}, torch {torch.__version__}"
    return f"{cpu}, torch {torch.__version__} (CPU kernels {torch.backends.cpu.get_cpu_capability()})"


def arm_medians(rows: list[dict]) -> list[str]:
    """A table of each arm's medians over its rounds: step time, images/s and (on a GPU) NVML's busy share."""
    lines = ["| arm | step (median) | images/s (median) | GPU busy (NVML, median) |", "|---|---|---|---|"]
    for arm in dict.fromkeys(r["arm"] for r in rows if r.get("step_s") is not None):
        mine = [r for r in rows if r["arm"] == arm]
        busy = [r["busy_pct"] for r in mine if r.get("busy_pct") is not None]
        shown = f"{statistics.median(busy):.0f} %" if busy else "n/a"
        step_ms = statistics.median(r["step_s"] for r in mine) * 1000
        lines.append(f"| {arm} | {step_ms:.2f} ms | {statistics.median(r['images_per_s'] for r in mine):,.0f} | {shown} |")
    return lines


def verdict(low: float, high: float, met: Callable[[float], bool] | float) -> str:
    """yes, no or not shown: a ceiling (``met`` a test of an end) is met when the interval's upper end passes it; a floor
    (``met`` a number) when its lower end is at least the floor."""
    if math.isnan(low):  # one round: no interval
        return "not shown"
    if isinstance(met, float):
        return "yes" if low >= met else ("no" if high < met else "not shown")
    return "yes" if met(high) else ("no" if not met(low) else "not shown")


def horovod_settings(pairs: list[str]) -> dict[str, Any]:
    """``--horovod FIELD=VALUE`` options as the scenario's ``horovod`` section (each value read as YAML: a number, a
    flag, ...); :class:`ValueError` in one line naming the option that is not one."""
    import yaml

    settings: dict[str, Any] = {}
    for pair in pairs:
        field, sep, value = pair.partition("=")
        if not sep or not field.strip():
            raise ValueError(f"--horovod {pair!r}: expected FIELD=VALUE, e.g. cycle_time_ms=5")
        settings[field.strip()] = yaml.safe_load(value)
    return settings


def horovod_problem(args: argparse.Namespace) -> str | None:
    """Why ``--horovod``'s settings cannot be used (the suite's own check of the engine rounds' scenario), or None."""
    from suite.config.scenario import ScenarioError

    if args.skip_engines:
        return "no Horovod run to give them to (--skip-engines)"
    try:
        expand(parse_scenario(engine_scenario(args, ENGINES)))
    except ScenarioError as error:
        return str(error).splitlines()[0]
    return None


def summary(rows: list[dict], args: argparse.Namespace) -> str:
    arms = "" if args.skip_arms else f"{args.rounds} interleaved rounds of {args.steps} steps per arm; "
    engines = ""
    if not args.skip_engines:
        hvd = ", ".join(f"{k}: {v}" for k, v in args.horovod.items()) or "the suite's defaults"
        engines = (
            f"{args.engine_repeats} engine rounds of {args.engine_epochs} epoch{'s' if args.engine_epochs != 1 else ''} "
            f"at P = {args.engine_procs}, alternating which engine runs first, Horovod settings: {hvd}; "
        )
    lines = [
        "# Step overhead, side by side",
        "",
        f"digits {args.image_size} px, batch {args.batch}, 1 thread, {arms}{engines}"
        f"{machine_line(args)}; `python ci/step_overhead.py` (docs/gpu.md). "
        "Ratios are paired round by round; the estimate is their geometric mean with a 95 % t-interval.",
        "",
        "| comparison | paired ratios | estimate [95 % interval] | goal | met |",
        "|---|---|---|---|---|",
    ]
    comparisons: tuple[tuple[str, str, str, str, Callable[[float], bool] | float], ...] = (
        ("suite", "bare", "step_s", "at most 1.03", lambda hi: hi <= 1.03),
        ("compiled", "suite", "step_s", "below 1 to become the default", lambda hi: hi < 1),
        ("graphed", "suite", "images_per_s", "at least 3", 3.0),
        ("horovod", "torch", "images_per_s", "at least 0.95", 0.95),
    )
    for a, b, field, goal, met in comparisons:
        ratios = paired(rows, a, b, field)
        if not ratios:
            continue
        estimate, low, high = ratio_interval(ratios)
        shown = ", ".join(f"{x:.3f}" for x in ratios)
        lines.append(
            f"| {a} / {b} ({field}) | {shown} | {estimate:.3f} [{low:.3f}, {high:.3f}] | {goal} | {verdict(low, high, met)} |"
        )
    lines += ["", *arm_medians(rows)]
    if LEFT_OUT:
        lines += ["", *(f"Arm {name} left out: {why}." for name, why in LEFT_OUT.items())]
    if WARMUP_S:
        lines += ["", "Warm-up (untimed) seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in WARMUP_S.items()) + "."]
    timed_arms = {r["arm"] for r in rows if r.get("step_s") is not None}
    if {"compiled", "suite"} <= timed_arms and {"compiled", "suite"} <= set(WARMUP_S):
        per_step = {arm: statistics.median(r["step_s"] for r in rows if r["arm"] == arm) for arm in ("suite", "compiled")}
        saved = per_step["suite"] - per_step["compiled"]
        extra = WARMUP_S["compiled"] - WARMUP_S["suite"]
        if saved > 0:
            lines.append(
                f"Compiling costs {extra:.1f} s more per rank before training and saves {saved * 1000:.0f} ms a step: "
                f"it pays for itself after {extra / saved:.0f} steps of one rank."
            )
        else:
            lines.append(f"Compiling costs {extra:.1f} s more per rank and saves nothing a step.")
    return "\n".join(lines) + "\n"


def profile_section(args: argparse.Namespace) -> str:
    return "\n## Where the suite's step spends its time (cProfile, by own time)\n\n```text\n" + profile_suite(args) + "```\n"


if __name__ == "__main__":
    sys.exit(main())
