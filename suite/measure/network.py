"""The network in the projection model: alpha-beta links, named presets, collective costs.

A message of n bytes over a link costs ``alpha + n * beta`` seconds (the Hockney model). A
:class:`Network` has a link inside a node and one between nodes; ranks fill nodes in order. The
allreduce algorithms (``ring``, ``tree``, ``rhd``, ``best``) follow Thakur, Rabenseifner and Gropp
(IJHPCA 2005); across nodes the allreduce is hierarchical, one within the node plus one among the
nodes. The presets are nominal datasheet numbers, not measurements; ``suite probe`` measures this
machine instead (docs/reports.md).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..config.jsonfile import read_json
from ..config.shown import shown

ALGORITHMS = ("best", "ring", "tree", "rhd")
GB = 1e9
ONE_NODE = 1 << 20
"""Ranks per node of a network that is one machine (the ``shm`` preset)."""


@dataclass(frozen=True)
class Link:
    """One kind of connection: ``alpha`` seconds of latency, ``beta`` seconds per byte."""

    alpha: float
    beta: float

    def seconds(self, nbytes: float) -> float:
        """One message of ``nbytes`` over this link."""
        return self.alpha + nbytes * self.beta


@dataclass(frozen=True)
class Network:
    """Links inside and between nodes, and how many ranks share a node."""

    name: str
    intra: Link
    inter: Link
    ranks_per_node: int
    source: str

    def nodes(self, procs: int) -> int:
        """Nodes used by ``procs`` ranks placed in order."""
        return -(-procs // self.ranks_per_node)

    def describe(self, placement: str | None = None) -> str:
        """One line naming the network and its numbers (``placement`` replaces the ranks per node)."""

        def link(it: Link) -> str:
            return (
                f"alpha {it.alpha * 1e6:.3g} us, {1 / it.beta / GB:.3g} GB/s" if it.beta > 0 else f"alpha {it.alpha * 1e6:.3g} us"
            )

        return (
            f"`{self.name}`: inside a node {link(self.intra)}; between nodes {link(self.inter)}; "
            f"{placement or self._placement()} ({self.source})"
        )

    def _placement(self) -> str:
        k = self.ranks_per_node
        return "all ranks on one node" if k >= ONE_NODE else f"{k} rank{'s' if k != 1 else ''} per node"


def _preset(name: str, intra: tuple[float, float], inter: tuple[float, float], ranks_per_node: int, source: str) -> Network:
    """A preset from (latency in microseconds, bandwidth in GB/s) pairs."""
    return Network(
        name, Link(intra[0] * 1e-6, 1 / (intra[1] * GB)), Link(inter[0] * 1e-6, 1 / (inter[1] * GB)), ranks_per_node, source
    )


PRESETS = {
    "summit": _preset(
        "summit",
        (5.0, 50.0),
        (1.5, 25.0),
        6,
        "OLCF Summit: 6 V100 per node on NVLink 2 (50 GB/s), dual-rail EDR InfiniBand 2 x 12.5 GB/s per node",
    ),
    "frontier": _preset(
        "frontier",
        (5.0, 50.0),
        (2.0, 100.0),
        8,
        "OLCF Frontier: 8 GCDs per node (4 MI250X) on Infinity Fabric (50 GB/s between GCDs of different MI250X), "
        "4 x Slingshot-11 200 Gb/s per node (100 GB/s)",
    ),
    "perlmutter": _preset(
        "perlmutter",
        (5.0, 100.0),
        (2.0, 100.0),
        4,
        "NERSC Perlmutter GPU nodes: 4 A100 per node on NVLink 3 (4 links, 100 GB/s, between every pair), "
        "4 x Slingshot-11 200 Gb/s per node (100 GB/s)",
    ),
    "nvlink-node": _preset(
        "nvlink-node",
        (5.0, 300.0),
        (2.0, 25.0),
        8,
        "8 GPUs per node on NVLink 3 / NVSwitch (300 GB/s), one HDR 200 Gb/s InfiniBand port per node",
    ),
    "hdr-cluster": _preset(
        "hdr-cluster",
        (5.0, 300.0),
        (2.0, 100.0),
        8,
        "8 GPUs per node on NVLink 3 (300 GB/s), 4 x HDR 200 Gb/s InfiniBand per node (100 GB/s)",
    ),
    "edr-cluster": _preset(
        "edr-cluster",
        (5.0, 12.0),
        (1.5, 12.5),
        4,
        "4 GPUs per node on PCIe 3 x16 (12 GB/s), one EDR 100 Gb/s InfiniBand port per node",
    ),
    "100gbe": _preset(
        "100gbe", (1.0, 10.0), (10.0, 12.5), 8, "8 ranks per node over shared memory (10 GB/s), 100 Gb/s Ethernet between nodes"
    ),
    "10gbe": _preset(
        "10gbe",
        (1.0, 10.0),
        (30.0, 1.25),
        8,
        "8 ranks per node over shared memory (10 GB/s), 10 Gb/s Ethernet (TCP) between nodes",
    ),
    "shm": _preset(
        "shm",
        (1.0, 5.0),
        (1.0, 5.0),
        ONE_NODE,
        "one machine, MPI over shared memory (5 GB/s); a stand-in until `suite probe` measures it",
    ),
}
"""Named networks. Bandwidths are nominal per-direction datasheet figures; latencies typical."""


def _ring(p: int, n: float, link: Link) -> float:
    return 2 * (p - 1) * link.alpha + 2 * (p - 1) / p * n * link.beta


def _tree(p: int, n: float, link: Link) -> float:
    return 2 * math.ceil(math.log2(p)) * (link.alpha + n * link.beta)


def _rhd(p: int, n: float, link: Link) -> float:
    return 2 * math.ceil(math.log2(p)) * link.alpha + 2 * (p - 1) / p * n * link.beta


_ALLREDUCE = {"ring": _ring, "tree": _tree, "rhd": _rhd}


def allreduce_seconds(nbytes: float, procs: int, net: Network, algorithm: str = "best") -> float:
    """Seconds of one allreduce of ``nbytes`` per rank over ``procs`` ranks (0 for one rank).

    Hierarchical: T_A(k, n, intra) + T_A(N, n, inter) with k ranks on each of N nodes.
    """
    if procs <= 1 or nbytes <= 0:
        return 0.0
    k, nodes = min(procs, net.ranks_per_node), net.nodes(procs)

    def cost(f: Callable[[int, float, Link], float]) -> float:
        return (f(k, nbytes, net.intra) if k > 1 else 0.0) + (f(nodes, nbytes, net.inter) if nodes > 1 else 0.0)

    if algorithm == "best":
        return min(cost(f) for f in _ALLREDUCE.values())
    return cost(_ALLREDUCE[algorithm])


# --- measuring this machine --------------------------------------------------------------------------


def fit_link(sizes: Sequence[float], seconds: Sequence[float]) -> Link:
    """Least-squares alpha and beta (both >= 0) of one-way message times, in relative error.

    Relative error weighs every size alike, so the small messages fix alpha and the large ones beta.
    """
    from scipy.optimize import nnls

    n, t = np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float)
    (alpha, beta), _ = nnls(np.column_stack([1 / t, n / t]), np.ones_like(t))
    return Link(float(alpha), float(beta))


PROBE_BYTES = 16 << 20
"""The largest probe file read (the suite's are a few KB)."""


MAX_LINK_S = 1.0
"""The largest latency (seconds) and the largest seconds per byte of a link: a slower one is no network."""


def cost_problem(value: object) -> str | None:
    """Why ``value`` is not a link's alpha or beta (a finite number of seconds from 0 to :data:`MAX_LINK_S`), or None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return f"expected a finite number of seconds, got {shown(value)}"
    if not 0 <= value <= MAX_LINK_S:
        return f"must be from 0 to {MAX_LINK_S:g} seconds, got {shown(value)}"
    return None


_LABEL = re.compile(r"[\w .,:()/+-]{1,100}")


def _label(value: object) -> str | None:
    """A probe file's host or engine as the network's description quotes it: None unless plain words (it goes into
    markdown and the terminal)."""
    return value if isinstance(value, str) and _LABEL.fullmatch(value) else None


def _probe_link(data: dict, field: str, source: Path) -> Link:
    """The link at ``field`` of a probe file's data; :class:`ValueError` naming the file and the field unless it is
    one: a mapping of ``alpha`` and ``beta``, each of :func:`cost_problem`'s range."""
    value = data.get(field)
    if not isinstance(value, dict):
        raise ValueError(f"{source}: {field}: expected a mapping of alpha and beta, got {shown(value)}")
    numbers = []
    for name in ("alpha", "beta"):
        if name not in value:
            raise ValueError(f"{source}: {field}.{name}: required field is missing")
        if (problem := cost_problem(value[name])) is not None:
            raise ValueError(f"{source}: {field}.{name}: {problem}")
        numbers.append(float(value[name]))
    return Link(*numbers)


def probe_network(path: str | os.PathLike) -> Network:
    """The network measured by ``suite probe`` (its JSON file); :class:`ValueError` naming the file and the field
    where it is not one (``link`` and ``inter`` mappings of alpha and beta, finite seconds from 0 to 1;
    ``ranks_per_node`` a positive integer).

    A probe on one machine measures the intra-node link only; the inter-node link is then taken
    equal to it, which the name says.
    """
    path = Path(path)
    try:
        data = read_json(path, max_bytes=PROBE_BYTES)
    except OSError as error:
        raise ValueError(f"{path}: not a probe file written by `suite probe` ({error.strerror or error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a probe file written by `suite probe` (a JSON object), got {type(data).__name__}")
    link = _probe_link(data, "link", path)
    inter = _probe_link(data, "inter", path) if data.get("inter") is not None else link
    ranks = data.get("ranks_per_node")
    if ranks is not None and (not isinstance(ranks, int) or isinstance(ranks, bool) or not 1 <= ranks <= ONE_NODE):
        raise ValueError(f"{path}: ranks_per_node: expected a whole number from 1 to {ONE_NODE}, got {shown(ranks)}")
    host, engine = (_label(data.get(key)) for key in ("host", "engine"))
    note = "" if data.get("inter") is not None else "; one machine: intra-node only, inter-node taken equal"
    return Network(
        f"probe:{path.name}",
        link,
        inter,
        ranks or os.cpu_count() or 1,
        f"measured by `suite probe` on {host or 'this machine'} over {engine or 'mpi'}{note}",
    )


def with_link(name: str, alpha: float, beta: float) -> Network:
    """One link everywhere (``--alpha`` / ``--beta``): every allreduce is one flat allreduce over all ranks."""
    link = Link(alpha, beta)
    return Network(name, link, link, 1, "given on the command line")
