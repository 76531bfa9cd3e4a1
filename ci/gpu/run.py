"""The GPU session on a machine with only its own Python and torch: install a carry folder, then run, each step
time-limited, packing the results after each step.

Usage, on the GPU machine (``ci/gpu/carry.py`` built the folder here; docs/gpu.md)::

    bash CARRY/run.sh OUT                                   # the default set, within --budget (480 s)
    bash CARRY/run.sh OUT --steps engines,check --engines horovod,mpi,deepspeed   # a second call

Runs with the machine's ``python3`` (standard library only until the carried wheels are installed):

1. ``install``: reads ``CARRY/MANIFEST.json`` and refuses, in one line naming both, a folder built for another Python or
   torch than this machine's (or a file whose SHA-256 differs, or a wheel the manifest does not list); then
   ``pip install --no-index --no-deps --target TARGET`` of every carried wheel (no registry is asked);
2. ``machine``: ``nvidia-smi``, the cores and ``suite env`` into ``OUT/machine.txt``;
3. the steps that ``--steps`` names (default ``steps,digits,check``), in this order, each under its own time limit and
   what is left of ``--budget``:

   - ``steps`` (75 s): ``ci/step_overhead.py --device cuda``, the suite's step against the bare loop on the GPU
     (``--cuda-graphs`` adds the graphed step);
   - ``engines`` (120 s): the same script's Horovod against DDP runs on the GPU;
   - ``digits`` (270 s, then 30 s for its report): ``scenarios/digits-gpu.yaml``, the main job on one GPU; the runs that
     finish in time keep their results, and the report reads them;
   - ``check`` (what is left): ``suite gpu-check`` on the engines ``--engines`` names, or by default (``fit``) on as many
     of torch and horovod, in that order, as fit the time left (about 20 s a run).

Without a GPU each GPU step ends in its own one line (``step_overhead: --device cuda: no CUDA GPU visible ...``,
``gpu-check: no CUDA GPU visible ...``, exit code 4; ``digits`` is skipped with ``digits-gpu: skipped: no CUDA GPU
visible``). ``OUT`` receives at most 8 files, rewritten after every step: ``summary.txt`` (one line per step: exit
code, seconds, limit), ``machine.txt``, ``logs.tgz`` (every step's output) and one ``.tgz`` per step's results
(``steps.tgz``, ``engines.tgz``, ``digits.tgz``, ``check.tgz``; no model weights). Stopped by a signal, it stops the
step in progress, packs what it left and exits 128 + the signal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[1]
MANIFEST = "MANIFEST.json"
MANIFEST_FORMAT = 1
NO_GPU = 4
BAD_INPUT = 2
STOPPED = 124
PACK_RESERVE_S = 10.0
"""Seconds of the budget kept for packing after the last step."""
MIN_STEP_S = 15.0
"""A step given fewer seconds than this is skipped (said in its line)."""
CHECK_RUN_S = 20.0
CHECK_FIXED_S = 20.0
"""What ``suite gpu-check`` takes on one GPU, estimated: each run (start, warm-up, 4 s of training, scoring) and the
check's own set-up; ``--engines fit`` checks the engines whose runs fit the time left."""
FIT_ENGINES = ("torch", "horovod")
ALL_ENGINES = ("torch", "horovod", "mpi", "deepspeed")
STEP_NAMES = ("steps", "engines", "digits", "check")
DEFAULT_STEPS = "steps,digits,check"
LIMITS_S = {"install": 60.0, "machine": 30.0, "steps": 75.0, "engines": 120.0, "digits": 270.0, "digits-report": 30.0}
"""Each step's own time limit (``check`` takes what is left)."""


class Refused(Exception):
    """The carry folder does not fit this machine, or bad input: one line, exit code 2."""


# --- the manifest ---------------------------------------------------------------------------------------------------


def same_release(a: str, b: str) -> bool:
    """Whether two torch versions are the same release (the public part; a local ``+cu130`` on both must agree too)."""
    pa, _, la = a.partition("+")
    pb, _, lb = b.partition("+")
    return pa == pb and (not la or not lb or la == lb)


def wheel_python_tags(filename: str) -> list[str]:
    """The python tags of a wheel's file name (``cp312``, ``py3``)."""
    parts = filename[: -len(".whl")].split("-")
    return parts[-3].split(".") if len(parts) in (5, 6) else []


def check_manifest(manifest: dict[str, Any], python: str, torch: str) -> None:
    """Refuse (:class:`Refused`, one line naming both) a carry folder built for another Python or torch than this
    machine's ``python`` ("3.12") and ``torch`` ("2.11.0+cu130"), or one whose manifest this runner cannot read."""
    if manifest.get("format") != MANIFEST_FORMAT:
        raise Refused(f"{MANIFEST}: format {manifest.get('format')!r}, this runner reads format {MANIFEST_FORMAT}")
    horovod = manifest.get("horovod") or {}
    built_for = f"Python {manifest.get('python')} and torch {manifest.get('torch')}"
    if horovod:
        built_for += (
            f" (Horovod {Path(str(horovod.get('file'))).name}: Python {horovod.get('python')}, torch {horovod.get('torch')})"
        )
    here = f"this machine's python3 is Python {python} with torch {torch}"
    fix = f"build the carry folder again with ci/gpu/carry.py --python {python} --torch {torch.partition('+')[0]}"
    if manifest.get("python") != python or not same_release(str(manifest.get("torch")), torch):
        raise Refused(f"the carried wheels are built for {built_for}; {here}: {fix}")
    if horovod and (horovod.get("python") != python or not same_release(str(horovod.get("torch")), torch)):
        raise Refused(f"the carried Horovod wheel is built for {built_for}; {here}: {fix}")
    major, minor = python.split(".")
    fits = {f"cp{major}{minor}", f"py{major}{minor}", f"py{major}"}
    for entry in manifest.get("wheels") or []:
        name = Path(str(entry.get("file"))).name
        if not fits & set(wheel_python_tags(name)):
            raise Refused(f"the carried wheel {name} is built for {'.'.join(wheel_python_tags(name))}; {here}: {fix}")


def check_files(carry: Path, manifest: dict[str, Any]) -> list[Path]:
    """The carried wheels, each checked against the manifest (present, size and SHA-256), and none it does not list."""
    listed = {str(entry.get("file")): entry for entry in manifest.get("wheels") or []}
    wheels = []
    for name, entry in listed.items():
        path = carry / name
        if Path(name).is_absolute() or ".." in Path(name).parts or not path.is_file() or path.is_symlink():
            raise Refused(f"{MANIFEST}: {name} is not a file in {carry}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != entry.get("sha256"):
            raise Refused(
                f"{name}: SHA-256 {digest[:12]}... is not the manifest's {str(entry.get('sha256'))[:12]}... (a changed file)"
            )
        wheels.append(path)
    extra = sorted(p.name for p in (carry / "wheels").glob("*.whl") if f"wheels/{p.name}" not in listed)
    if extra:
        raise Refused(f"{', '.join(extra)}: in {carry / 'wheels'} but not in {MANIFEST} (a wheel added by hand is not installed)")
    return wheels


def read_manifest(carry: Path) -> dict[str, Any]:
    path = carry / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise Refused(f"--carry: no {MANIFEST} in {carry} (build the folder with ci/gpu/carry.py)") from None
    except (OSError, ValueError) as error:
        raise Refused(f"{path}: cannot be read: {error}") from None
    if not isinstance(manifest, dict):
        raise Refused(f"{path}: not a JSON object")
    return manifest


PROBE = (
    "import json, sys\n"
    "try:\n"
    "    import torch\n"
    "    facts = {'torch': torch.__version__, 'cuda': torch.version.cuda, 'gpu': torch.cuda.is_available()}\n"
    "except Exception as error:\n"
    "    facts = {'torch': None, 'error': f'{type(error).__name__}: {error}'}\n"
    "print(json.dumps({'python': '%d.%d' % sys.version_info[:2], 'python_full': sys.version.split()[0], **facts}))\n"
)


def machine_facts(python: str) -> dict[str, Any]:
    """This machine's Python, torch and whether torch sees a GPU (asked of ``python`` in a subprocess)."""
    done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise Refused(f"{python}: cannot be asked for its Python and torch: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    if not facts.get("torch"):
        raise Refused(
            f"{python} (Python {facts['python_full']}) has no torch ({facts.get('error')}); the machine's own torch is used"
        )
    return facts


# --- steps and packing ----------------------------------------------------------------------------------------------


@dataclass
class Session:
    """One call's state: where things go, the budget's clock and each step's line."""

    out: Path
    work: Path
    budget_s: float
    began: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    packed: dict[str, Path] = field(default_factory=dict)  # OUT file name -> the work folder it packs
    child: subprocess.Popen | None = None
    failed: list[str] = field(default_factory=list)  # the steps that failed (not a missing GPU, not a skip)
    current: str = ""  # the step in progress

    def left(self) -> float:
        """Seconds of the budget left for steps (the packing's share kept back)."""
        return self.budget_s - (time.monotonic() - self.began) - PACK_RESERVE_S

    def say(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)


def write_atomic(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def pack_folder(folder: Path, target: Path) -> None:
    """``folder`` as a gzipped tar at ``target`` (written beside it, then moved into place), model weights (``*.pt``)
    and links left out."""
    partial = target.with_name(target.name + ".partial")

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if info.issym() or info.islnk() or info.name.endswith(".pt") else info

    with tarfile.open(partial, "w:gz") as tar:
        tar.add(folder, arcname=folder.name, filter=keep)
    os.replace(partial, target)


def pack(session: Session) -> None:
    """Rewrite ``OUT``: ``summary.txt``, ``logs.tgz`` and each finished step's ``.tgz`` (at most 8 files in all)."""
    session.out.mkdir(parents=True, exist_ok=True)
    write_atomic(session.out / "summary.txt", ("\n".join(session.lines) + "\n").encode())
    if (session.work / "logs").exists():
        pack_folder(session.work / "logs", session.out / "logs.tgz")
    for name, folder in session.packed.items():
        if folder.exists():  # a step that wrote nothing (no GPU) leaves no file
            pack_folder(folder, session.out / name)


def describe(code: int, log: Path) -> str:
    """What a step's exit code says, with the log's last line where it is not plain success."""
    last = ""
    if log.exists():
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        last = lines[-1].strip()[:300] if lines else ""
    if code == 0:
        return "ok"
    if code == NO_GPU:
        return f"no GPU: {last}"
    if code == STOPPED:
        return "stopped at its time limit (what it finished is kept)"
    return f"failed: {last or 'no output'}"


def run_step(session: Session, name: str, command: list[str], limit: float, env: dict[str, str]) -> int:
    """Run ``command`` as step ``name`` under ``limit`` seconds (SIGINT at the limit, SIGKILL 20 s later), its output in
    ``WORK/logs/NAME.log``; say its line; return its exit code (124 when stopped at the limit)."""
    limit = min(limit, session.left())
    if limit < MIN_STEP_S:
        session.say(f"step {name}: skipped: {max(session.left(), 0):.0f} s left of the {session.budget_s:.0f} s budget")
        return STOPPED
    log = session.work / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    began, session.current = time.monotonic(), name
    with open(log, "wb") as sink:
        # its own process group (stopped as one), in this session (ended with this call's command, not left running)
        session.child = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=CHECKOUT, preexec_fn=os.setpgrp
        )
        try:
            code = session.child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            stop_child(session)
            code = STOPPED
        finally:
            session.child, session.current = None, ""
    session.say(f"step {name}: exit {code} in {time.monotonic() - began:.0f} s (limit {limit:.0f} s): {describe(code, log)}")
    if code not in (0, NO_GPU):
        session.failed.append(name)
    return code


def stop_child(session: Session, grace: float = 20.0) -> None:
    """SIGINT to the step's process group (the suite keeps finished runs), SIGKILL after ``grace`` seconds."""
    child = session.child
    if child is None or child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGINT)
        child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        pass


def install(session: Session, carry: Path, target: Path, python: str) -> dict[str, Any]:
    """Check the carry folder against this machine and install its wheels into ``target``; the machine's facts."""
    manifest = read_manifest(carry)
    facts = machine_facts(python)
    check_manifest(manifest, facts["python"], facts["torch"])
    wheels = check_files(carry, manifest)
    stamp = target / ".carry-manifest.sha256"
    digest = hashlib.sha256((carry / MANIFEST).read_bytes()).hexdigest()
    if stamp.is_file() and stamp.read_text().strip() == digest:
        session.say(f"step install: {len(wheels)} wheels already installed in {target} (same manifest)")
        return facts
    if target.exists():
        shutil.rmtree(target)
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    command = [python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile", "--target", str(target)]
    code = run_step(session, "install", [*command, *map(str, wheels)], LIMITS_S["install"], env) if wheels else 0
    if code != 0:
        raise Refused(f"install: pip could not install the carried wheels into {target} (logs.tgz: install.log)")
    target.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest + "\n")
    return facts


def suite_env(target: Path) -> dict[str, str]:
    """The environment of every step: the carried packages and the checkout first on ``PYTHONPATH``, their scripts
    (horovodrun, deepspeed) first on ``PATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(CHECKOUT), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(target / "bin"), env.get("PATH", "/usr/bin:/bin")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def check_counts(python: str, env: dict[str, str], engines: tuple[str, ...]) -> dict[str, int]:
    """How many runs ``suite gpu-check`` makes of each engine on one GPU (its scenario, asked of the installed suite)."""
    code = (
        "import json, sys\nfrom suite.running.gpucheck import scenario_for\n"
        f"print(json.dumps({{e: len(scenario_for(1, [e])['runs']) for e in {list(engines)!r}}}))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=CHECKOUT)
    return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else {}


def fitting_engines(counts: dict[str, int], seconds: float, candidates: tuple[str, ...]) -> list[str]:
    """The leading ``candidates`` whose gpu-check runs fit in ``seconds`` (:data:`CHECK_RUN_S` a run,
    :data:`CHECK_FIXED_S` once)."""
    chosen: list[str] = []
    need = CHECK_FIXED_S
    for engine in candidates:
        need += counts.get(engine, 0) * CHECK_RUN_S
        if engine not in counts or need > seconds:
            break
        chosen.append(engine)
    return chosen


def session_steps(
    args: argparse.Namespace, python: str, facts: dict[str, Any], env: dict[str, str], horovod: bool
) -> dict[str, Callable[[Session], None]]:
    """Each step the session can run, by name (:data:`STEP_NAMES`)."""
    work = args.work

    def steps(session: Session) -> None:
        command = [python, "ci/step_overhead.py", "--device", "cuda", "--out", str(work / "steps"), "--rounds", "5"]
        command += ["--steps", "100", "--warmup", "10", "--skip-compile", "--skip-engines"]
        command += ["--cuda-graphs"] if args.cuda_graphs else []
        session.packed["steps.tgz"] = work / "steps"
        run_step(session, "steps", command, LIMITS_S["steps"], env)

    def engines(session: Session) -> None:
        command = [python, "ci/step_overhead.py", "--device", "cuda", "--out", str(work / "engines"), "--skip-arms"]
        command += ["--engine-repeats", "2", "--engine-epochs", "2"]
        session.packed["engines.tgz"] = work / "engines"
        run_step(session, "engines", command, LIMITS_S["engines"], env)

    def digits(session: Session) -> None:
        if not facts.get("gpu"):
            session.say("step digits: digits-gpu: skipped: no CUDA GPU visible (torch.cuda.is_available() is False)")
            return
        results = work / "digits-gpu"
        session.packed["digits.tgz"] = results
        command = [python, "-m", "suite", "run", "scenarios/digits-gpu.yaml", "--out", str(results), "--quiet"]
        run_step(session, "digits", command, LIMITS_S["digits"], env)
        if (results / "runs.csv").exists() or any(results.glob("*/result.json")):
            run_step(session, "digits-report", [python, "-m", "suite", "report", str(results)], LIMITS_S["digits-report"], env)

    def check(session: Session) -> None:
        results = work / "gpu-check"
        if args.engines == "fit":
            candidates = tuple(e for e in FIT_ENGINES if e != "horovod" or horovod)
            counts = check_counts(python, env, candidates)
            chosen = fitting_engines(counts, session.left(), candidates)
            runs = ", ".join(f"{e} {counts[e]} runs" for e in candidates if e in counts)
            if not chosen:
                session.say(
                    f"step check: skipped: {session.left():.0f} s left fit no engine ({runs}, about {CHECK_RUN_S:.0f} s a run)"
                )
                return
            session.say(
                f"step check: engines {', '.join(chosen)} fit the {session.left():.0f} s left ({runs}, about {CHECK_RUN_S:.0f} s a run)"
            )
        else:
            chosen = list(ALL_ENGINES) if args.engines == "all" else args.engines.split(",")
        session.packed["check.tgz"] = results
        command = [python, "-m", "suite", "gpu-check", "--out", str(results), "--timeout", f"{args.check_timeout:g}"]
        run_step(session, "check", [*command, "--engines", ",".join(chosen)], session.left(), env)

    return {"steps": steps, "engines": engines, "digits": digits, "check": check}


def machine(session: Session, python: str, env: dict[str, str], facts: dict[str, Any]) -> None:
    """``OUT/machine.txt``: nvidia-smi, the cores, the Python and torch, ``suite env``."""
    parts = [f"python3: Python {facts['python_full']}, torch {facts['torch']} (CUDA {facts.get('cuda')}), GPU {facts.get('gpu')}"]
    parts.append(f"cores: {os.cpu_count()}")
    for command in (["nvidia-smi"], [python, "-m", "suite", "env"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=LIMITS_S["machine"], cwd=CHECKOUT)
            parts.append(f"$ {' '.join(command[-3:])}\n{done.stdout}{done.stderr}")
        except (OSError, subprocess.TimeoutExpired) as error:
            parts.append(f"$ {' '.join(command[-3:])}: {type(error).__name__}: {error}")
    write_atomic(session.out / "machine.txt", "\n".join(parts).encode())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where the packed results go (at most 8 files)")
    parser.add_argument("--carry", type=Path, help="the carry folder (default: the one this checkout sits in, else ./carry)")
    parser.add_argument("--target", type=Path, help="where the wheels are installed (default /tmp/suite-carried)")
    parser.add_argument("--work", type=Path, help="the steps' own results before packing (default /tmp/suite-gpu-work)")
    parser.add_argument("--steps", default=DEFAULT_STEPS, help=f"of {','.join(STEP_NAMES)} (default {DEFAULT_STEPS})")
    parser.add_argument("--engines", default="fit", help="gpu-check's engines: fit (default), all, or a comma list")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for the whole call (default 480)")
    parser.add_argument("--check-timeout", type=float, default=90.0, help="seconds before a gpu-check run is stopped")
    parser.add_argument("--cuda-graphs", action="store_true", help="the step comparison also measures the graphed step")
    parser.add_argument("--python", default=sys.executable, help="the machine's Python with torch (default this one)")
    args = parser.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = [s for s in steps if s not in STEP_NAMES]
    if unknown or not steps:
        parser.error(f"--steps: {', '.join(unknown) or 'none'}: choose from {', '.join(STEP_NAMES)}")
    args.step_list = steps
    if args.engines not in ("fit", "all") and not set(args.engines.split(",")) <= set(ALL_ENGINES):
        parser.error(f"--engines {args.engines}: fit, all, or a comma list of {', '.join(ALL_ENGINES)}")
    if args.carry is None:
        args.carry = CHECKOUT.parent if (CHECKOUT.parent / MANIFEST).is_file() else CHECKOUT / "carry"
    args.target = (args.target or Path("/tmp/suite-carried")).resolve()
    args.work = (args.work or Path("/tmp/suite-gpu-work")).resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    session = Session(args.out.resolve(), args.work, args.budget)
    session.out.mkdir(parents=True, exist_ok=True)

    def stopped(signum: int, frame: Any) -> None:
        during = f" during step {session.current} (what it wrote is packed too)" if session.current else ""
        stop_child(session)
        session.say(f"stopped by {signal.Signals(signum).name}{during}: the steps finished so far are packed")
        pack(session)
        os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stopped)
    session.say(f"run.py: carry {args.carry.resolve()}, steps {','.join(args.step_list)}, budget {args.budget:.0f} s")
    try:
        facts = install(session, args.carry.resolve(), args.target, args.python)
    except (Refused, subprocess.TimeoutExpired) as error:
        session.lines.append(f"run.py: refused: {error}")
        print(f"run.py: refused: {error}", file=sys.stderr)  # one line, on stderr only
        pack(session)
        return BAD_INPUT
    env = suite_env(args.target)
    horovod = bool(read_manifest(args.carry.resolve()).get("horovod"))
    machine(session, args.python, env, facts)
    if not facts.get("gpu"):
        session.say("run.py: no CUDA GPU visible (torch.cuda.is_available() is False): each GPU step says so in one line")
    pack(session)
    steps = session_steps(args, args.python, facts, env, horovod)
    for name in STEP_NAMES:
        if name in args.step_list:
            steps[name](session)
            pack(session)
    failed = f"; failed: {', '.join(session.failed)}" if session.failed else ""
    session.say(f"run.py: done in {time.monotonic() - session.began:.0f} s{failed}; results in {session.out}")
    pack(session)
    return 1 if session.failed else 0


if __name__ == "__main__":
    sys.exit(main())
