"""Build a carry folder: everything a GPU machine without a package registry needs to run the suite's GPU session.

Usage (here, with network; docs/gpu.md "A GPU machine with only its own Python")::

    .venv/bin/python ci/gpu/carry.py --out carry                       # Python 3.12, torch 2.11.0 (the defaults)
    .venv/bin/python ci/gpu/carry.py --out carry --python 3.11 --torch 2.13.0 --horovod-wheel PATH
    .venv/bin/python ci/gpu/carry.py --out carry --without-horovod --no-checkout

The folder holds:

- ``checkout/``: the project at HEAD (``git archive``), or with ``--worktree`` the working tree's tracked files as they
  are now; ``--no-checkout`` leaves it out (the device tool sends the working tree anyway);
- ``wheels/``: the suite's dependencies that such a machine may lack (:data:`CARRIED`, at the versions
  ``ci/requirements.lock`` pins), downloaded as wheels for the target Python (``pip download --only-binary``), or built
  here as pure-Python wheels where PyPI has only a source archive (DeepSpeed); never torch, nor nvidia-* packages;
- the NCCL Horovod wheel built for the target's Python and torch (``ci/build_horovod_nccl.sh`` caches it under
  ``$SUITE_WHEEL_CACHE``, default ``~/.cache/suite/wheels``, in a folder whose name says the torch and Python it was
  built for), or ``--horovod-wheel PATH``;
- ``MANIFEST.json``: the target Python and torch, each file's size and SHA-256, the Horovod wheel's Python, torch and
  GPU operations, the commit; ``ci/gpu/run.py`` there refuses a folder whose Python or torch is not the machine's;
- ``run.sh``: the one command there, ``bash CARRY/run.sh OUT`` (``ci/gpu/run.py``).

A folder over ``--max-mib`` (default 60) is refused, and so is bad input, each in one line (exit code 2).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "ci" / "requirements.lock"
MANIFEST = "MANIFEST.json"
MANIFEST_FORMAT = 1
HOROVOD_VERSION = "0.28.1"

CARRIED = (
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
    "typing-extensions",
    "deepspeed",
    "hjson",
    "pytorch-fid",
    "mlperf-logging",
)
"""What the suite needs (pyproject's dependencies and extras, with what they need) that a GPU machine's own Python may
lack: the image lent to this project (torch 2.11.0+cu130, numpy, scipy, pandas, matplotlib, scikit-learn, pyyaml, psutil,
pillow, tqdm, nvidia-ml-py, mpi4py, einops, msgpack, ninja, py-cpuinfo, packaging, cloudpickle, tensorboard) has none of
these; typing-extensions is carried because pydantic needs a newer one than an image may hold."""

BUILT_HERE = frozenset({"deepspeed"})
"""Carried packages that PyPI has only as a source archive: built here into pure-Python wheels (ops compiled there, on
first use, as DeepSpeed does)."""

PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64")
HOROVOD_KEY = re.compile(
    r"^horovod-(?P<version>[^-]+)-torch(?P<torch>[^-]+)-py(?P<py>\d)(?P<minor>\d+)-mpi(?P<mpi>[01])-gpu(?P<ops>\w+)$"
)
"""``ci/build_horovod.sh``'s cache key: the folder a wheel is cached in names its torch (``+`` as ``_``) and Python."""


class CarryError(Exception):
    """Bad input or a folder that cannot be built: one line, exit code 2."""


@dataclass
class HorovodWheel:
    """A Horovod wheel and what it was built for."""

    path: Path
    python: str  # "3.12"
    torch: str  # "2.11.0+cu130"
    gpu_operations: str  # "NCCL" or "none"
    mpi: bool


def lock_pins(lock: Path = LOCK) -> dict[str, str]:
    """``name: version`` of every ``name==version`` line of a pip-compile lock file (names normalised)."""
    pins = {}
    for line in lock.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line):
            pins[normalise(match.group(1))] = match.group(2)
    return pins


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_tags(filename: str) -> tuple[str, str, list[str]]:
    """(distribution name, version, python tags) of a wheel's file name; :class:`CarryError` if it is not one."""
    parts = filename[: -len(".whl")].split("-") if filename.endswith(".whl") else []
    if len(parts) not in (5, 6):
        raise CarryError(f"{filename}: not a wheel's file name (name-version-python-abi-platform.whl)")
    return normalise(parts[0]), parts[1], parts[-3].split(".")


def wheel_fits(filename: str, python: str) -> bool:
    """Whether a wheel's python tags accept CPython ``python`` ("3.12"): ``cp312``, ``py312``, ``py3``."""
    major, minor = python.split(".")
    return bool({f"cp{major}{minor}", f"py{major}{minor}", f"py{major}"} & set(wheel_tags(filename)[2]))


def horovod_from_key(path: Path, torch_override: str | None = None) -> HorovodWheel:
    """What a Horovod wheel was built for, from the name of the cache folder it sits in (``HOROVOD_KEY``) or, for a
    wheel elsewhere, ``torch_override``; :class:`CarryError` when neither says it."""
    match = HOROVOD_KEY.match(path.parent.name)
    name, _, tags = wheel_tags(path.name)
    if name != "horovod":
        raise CarryError(f"--horovod-wheel: {path.name} is not a Horovod wheel")
    py = next((t[2:] for t in tags if t.startswith("cp") and t[2:].isdigit()), "")
    python = f"{py[0]}.{py[1:]}" if len(py) >= 2 else "?"
    if match is None and torch_override is None:
        raise CarryError(
            f"--horovod-wheel: cannot tell which torch {path} was built against (its folder is not named as "
            "ci/build_horovod.sh's cache, horovod-VERSION-torchTORCH-pyXY-mpiM-gpuOPS); pass --horovod-torch VERSION"
        )
    torch = torch_override or match.group("torch").replace("_", "+")  # type: ignore[union-attr]
    ops = match.group("ops") if match else "NCCL"
    mpi = bool(match and match.group("mpi") == "1")
    return HorovodWheel(path, python, torch, ops, mpi)


def find_horovod(cache: Path, python: str, torch: str) -> Path | None:
    """The NCCL Horovod wheel cached for ``python`` and the torch release ``torch`` (any CUDA build of it), or None."""
    py = python.replace(".", "")
    found = sorted(cache.glob(f"horovod-{HOROVOD_VERSION}-torch{torch}*-py{py}-mpi*-gpuNCCL/horovod-*.whl"))
    return found[-1] if found else None


def same_release(a: str, b: str) -> bool:
    """Whether two torch versions are the same release (the public part; a local ``+cu130`` on both must agree too)."""
    pa, _, la = a.partition("+")
    pb, _, lb = b.partition("+")
    return pa == pb and (not la or not lb or la == lb)


def check_horovod(wheel: HorovodWheel, python: str, torch: str) -> None:
    """Refuse (one line) a Horovod wheel built for another Python or torch than the target's, or without NCCL."""
    if wheel.python != python or not same_release(wheel.torch, torch):
        raise CarryError(
            f"--horovod-wheel: {wheel.path.name} was built for Python {wheel.python} and torch {wheel.torch}, "
            f"the target is Python {python} and torch {torch}"
        )
    if wheel.gpu_operations != "NCCL":
        raise CarryError(
            f"--horovod-wheel: {wheel.path} has GPU operations {wheel.gpu_operations}, not NCCL "
            "(build it with bash ci/build_horovod_nccl.sh PYTHON)"
        )


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def write_checkout(dest: Path, worktree: bool) -> tuple[str, bool]:
    """The project into ``dest``: ``git archive`` of HEAD, or the working tree's tracked files; (commit, dirty)."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    dirty = bool(
        subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True).stdout
    )
    dest.mkdir(parents=True)
    if not worktree:
        with tempfile.TemporaryFile() as archive:
            subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, stdout=archive, check=True)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                tar.extractall(dest, filter="data")
        return commit, False
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():  # a deleted file or a link is left out
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return commit, dirty


def pip(args: list[str], what: str, env: dict[str, str] | None = None) -> None:
    """Run pip (this interpreter's); a failure is one line naming ``what``, with pip's last line."""
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        last = [line for line in (done.stderr + done.stdout).splitlines() if line.strip() and "is ignored" not in line]
        raise CarryError(f"{what}: pip failed: {last[-1] if last else 'exit ' + str(done.returncode)}")


def fetch_wheels(dest: Path, python: str, pins: dict[str, str], source: Path | None) -> None:
    """The :data:`CARRIED` wheels at their pinned versions into ``dest``: from ``source`` (a folder, no network) or
    downloaded for ``python`` (and built here where PyPI has only a source archive)."""
    dest.mkdir(parents=True)
    missing = [name for name in CARRIED if name not in pins]
    if missing:
        raise CarryError(f"{LOCK.relative_to(ROOT)}: no pinned version of {', '.join(missing)}")
    if source is not None:
        for name in CARRIED:
            matches = [p for p in source.glob("*.whl") if wheel_tags(p.name)[:2] == (name, pins[name])]
            fitting = [p for p in matches if wheel_fits(p.name, python)]
            if not fitting:
                raise CarryError(f"--wheels-from: no wheel of {name} {pins[name]} for Python {python} in {source}")
            shutil.copy2(fitting[0], dest / fitting[0].name)
        return
    major, minor = python.split(".")
    downloaded = [f"{name}=={pins[name]}" for name in CARRIED if name not in BUILT_HERE]
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    target = ["--python-version", python, "--implementation", "cp", "--abi", f"cp{major}{minor}", *platforms]
    pip(["download", "--quiet", "--no-deps", "--only-binary=:all:", *target, "-d", str(dest), *downloaded], "download")
    for name in sorted(BUILT_HERE & set(CARRIED)):  # DS_BUILD_OPS=0: no ops compiled here (there, on first use)
        build = ["wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-binary", name, "-w", str(dest)]
        pip([*build, f"{name}=={pins[name]}"], f"build {name}", {"DS_BUILD_OPS": "0"})
    for wheel in dest.glob("*.whl"):
        if not wheel_fits(wheel.name, python):
            raise CarryError(f"{wheel.name}: not a wheel for Python {python}")


def summary_line(folder: Path) -> str:
    """The folder's size by part, in MiB."""
    parts = {p.name: folder_bytes(p) if p.is_dir() else p.stat().st_size for p in sorted(folder.iterdir())}
    return ", ".join(f"{name} {size / 2**20:.1f}" for name, size in parts.items() if size >= 2**16)


def build(args: argparse.Namespace) -> Path:
    """Build the carry folder ``args.out`` (next to it first, then moved into place) and return it."""
    out: Path = args.out.resolve()
    if out.exists() and not (out / MANIFEST).is_file():
        raise CarryError(f"--out: {out} exists and is not a carry folder (no {MANIFEST}); name another")
    if not re.fullmatch(r"\d+\.\d+", args.python):
        raise CarryError(f"--python: {args.python!r} is not MAJOR.MINOR (e.g. 3.12)")
    horovod = None
    if not args.without_horovod:
        path = args.horovod_wheel or find_horovod(args.wheel_cache, args.python, args.torch)
        if path is None:
            raise CarryError(
                f"no NCCL Horovod wheel for Python {args.python} and torch {args.torch} in {args.wheel_cache}: build it "
                f"with `bash ci/build_horovod_nccl.sh VENV/bin/python` in a venv of that Python and torch (about 20 minutes "
                "on 2 cores; docs/gpu.md), or pass --horovod-wheel PATH, or --without-horovod"
            )
        if not path.is_file():
            raise CarryError(f"--horovod-wheel: no file {path}")
        horovod = horovod_from_key(path, args.horovod_torch)
        check_horovod(horovod, args.python, args.torch)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=out.name + ".partial-", dir=out.parent))
    work.chmod(0o755)  # mkdtemp's 0700 would keep the folder from others who run it there
    try:
        commit, dirty = ("", False) if args.no_checkout else write_checkout(work / "checkout", args.worktree)
        fetch_wheels(work / "wheels", args.python, lock_pins(), args.wheels_from)
        if horovod is not None:
            shutil.copy2(horovod.path, work / "wheels" / horovod.path.name)
        files = [
            {"file": f"wheels/{p.name}", "bytes": p.stat().st_size, "sha256": sha256(p)}
            for p in sorted((work / "wheels").glob("*.whl"))
        ]
        manifest = {
            "format": MANIFEST_FORMAT,
            "built_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit or None,
            "tree": None if args.no_checkout else ("working tree" if args.worktree else "HEAD"),
            "dirty": dirty,
            "python": args.python,
            "torch": args.torch,
            "wheels": files,
            "horovod": None
            if horovod is None
            else {
                "file": f"wheels/{horovod.path.name}",
                "python": horovod.python,
                "torch": horovod.torch,
                "gpu_operations": horovod.gpu_operations,
                "mpi": horovod.mpi,
            },
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        (work / "run.sh").write_text(RUN_SH)
        (work / "run.sh").chmod(0o755)
        size = folder_bytes(work)
        if size > args.max_mib * 2**20:
            raise CarryError(
                f"the carry folder would be {size / 2**20:.1f} MiB, over the {args.max_mib:g} MiB limit "
                f"({summary_line(work)} MiB): leave out the checkout (--no-checkout) or Horovod (--without-horovod)"
            )
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"carry: {out} ({folder_bytes(out) / 2**20:.1f} MiB: {summary_line(out)} MiB) for Python {args.python}, torch {args.torch}"
    )
    print(f"carry: there, run `bash {out.name}/run.sh OUT` (docs/gpu.md)")
    return out


RUN_SH = """#!/usr/bin/env bash
# The GPU session from this carry folder, on the machine's own python3 (docs/gpu.md): bash run.sh OUT [run.py options]
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/checkout/ci/gpu/run.py" ]; then runner="$here/checkout/ci/gpu/run.py"; else runner="$(pwd)/ci/gpu/run.py"; fi
exec "${PYTHON:-python3}" "$runner" --carry "$here" "$@"
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "carry", help="the carry folder (default ./carry)")
    parser.add_argument("--python", default="3.12", help="the target's Python, MAJOR.MINOR (default 3.12)")
    parser.add_argument("--torch", default="2.11.0", help="the target's torch release (default 2.11.0)")
    parser.add_argument("--horovod-wheel", type=Path, help="the NCCL Horovod wheel (default: the one cached for the target)")
    parser.add_argument("--horovod-torch", help="the torch --horovod-wheel was built against, if its folder does not say")
    parser.add_argument("--without-horovod", action="store_true", help="carry no Horovod (gpu-check then leaves it out)")
    parser.add_argument("--no-checkout", action="store_true", help="no checkout/ (run.py then runs from the tree it is in)")
    parser.add_argument("--worktree", action="store_true", help="the working tree's tracked files instead of HEAD")
    parser.add_argument("--wheels-from", type=Path, help="take the wheels from this folder instead of downloading them")
    parser.add_argument("--max-mib", type=float, default=60.0, help="refuse a folder larger than this (default 60)")
    default_cache = Path(os.environ.get("SUITE_WHEEL_CACHE") or Path.home() / ".cache" / "suite" / "wheels")
    parser.add_argument("--wheel-cache", type=Path, default=default_cache, help="where ci/build_horovod_nccl.sh cached its wheel")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        build(args)
    except CarryError as error:
        print(f"carry: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
