"""``python -m suite.probe OUT.json`` under mpirun: measure this machine's alpha and beta.

Ranks 0 and 1 time ping-pongs of a few message sizes (one-way time = half the round trip,
the fastest of several: on a shared machine the slower ones measure the scheduler, not the
network), and all ranks time an allreduce of the same sizes. Rank 0 fits
``t = alpha + n * beta`` to the one-way times (:func:`suite.network.fit_link`) and writes
OUT.json: the link, the raw times, the allreduce times beside the model's prediction, the host
and the process count. On one machine this measures the intra-node link only. ``suite probe``
starts it; ``suite project --network measure`` too.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from dataclasses import asdict
from typing import Any

import numpy as np

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
    return max(comm.allgather(min(times)))


def main(argv: list[str] | None = None) -> int:
    from mpi4py import MPI

    from .network import Network, allreduce_seconds, fit_link

    parser = argparse.ArgumentParser(prog="python -m suite.probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="JSON file to write (rank 0)")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        print("error: the probe needs at least 2 processes (mpirun -np 2 python -m suite.probe OUT.json)", file=sys.stderr)
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
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
