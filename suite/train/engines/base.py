"""The small interface every communication engine implements.

A strategy sees an :class:`Engine` (who am I, how many are we, split us into groups, gather
results) and, for each network trained data-parallel, a :class:`Replica` (forward, backward,
step). Engines count the bytes they move in :attr:`Engine.comm` and mark, on their
:attr:`Engine.timeline`, where a rank waits for communication that computation did not hide;
object gathering after training is deliberately not counted.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import torch
from torch import nn

from ...measure.gpu_platform import nvidia_only_problem
from ...measure.telemetry import CommStats
from ...measure.timelines import CudaTimeline, HostTimeline, timeline_for

if TYPE_CHECKING:
    from ...config.scenario import Run
    from ...records.record import Record
    from ..launchenv import LaunchInfo


@dataclass
class Group:
    """A set of world ranks that trains one model together.

    ``index`` numbers the groups of one split, ``rank`` is this process's position inside the
    group, ``handle`` is the engine's own object (process set, process group, communicator).
    """

    index: int
    ranks: list[int]
    rank: int
    handle: Any = field(default=None, repr=False)
    host_handle: Any = field(default=None, repr=False)  # for host-side agreement where ``handle`` is device-only (NCCL)

    @property
    def size(self) -> int:
        return len(self.ranks)


def uses_cuda() -> bool:
    """Whether this process will train on a GPU (CUDA present, not forced off by ``SUITE_DEVICE=cpu``)."""
    return torch.cuda.is_available() and os.environ.get("SUITE_DEVICE", "auto") != "cpu"


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes the tensors hold."""
    return sum(t.numel() * t.element_size() for t in tensors)


@contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """No gradients into ``module``'s trainable parameters while inside (D while G trains through it)."""
    params = [p for p in module.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


class Replica:
    """One network and its optimizer, kept identical across the ranks of a group.

    This base class is the single-rank replica: no communication. ``module`` is what the
    training loop calls forward on (an engine may wrap the network), ``network`` the plain
    ``nn.Module`` underneath.
    """

    def __init__(self, network: nn.Module, optimizer: torch.optim.Optimizer):
        self.network = network
        self.module: nn.Module = network
        self.optimizer = optimizer

    shared_optimizer = True
    """Whether the optimizer's state is the same on every rank of the group (not so where it is partitioned)."""

    def optimizer_state(self) -> dict:
        """The optimizer's state, for a checkpoint."""
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state: dict) -> None:
        """Restore :meth:`optimizer_state` (after the network's weights)."""
        self.optimizer.load_state_dict(state)

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> None:
        self.optimizer.step()

    def frozen(self) -> AbstractContextManager[None]:
        """Stop gradients into this network (used for D while G trains through it)."""
        return frozen(self.network)


class Engine(ABC):
    """A communication engine: Horovod, torch.distributed, MPI or DeepSpeed."""

    name: str = "base"
    needs_nvidia: str | None = None
    """What in its GPU path needs an NVIDIA GPU, refused in one line on a ROCm torch (:func:`gpu_refusal`); None: its
    GPU path runs on AMD GPUs too (torch's ``cuda`` API, RCCL behind ``nccl``)."""

    @classmethod
    def gpu_refusal(cls, amd: str | None = None) -> str | None:
        """Why this engine cannot train on this machine's GPUs (a ROCm torch meeting :attr:`needs_nvidia`), or None;
        ``amd``: where GPUs known to be AMD are (a site preset's), refused whatever this torch is."""
        return nvidia_only_problem(f"the {cls.name} engine on GPUs", cls.needs_nvidia, amd) if cls.needs_nvidia else None

    def __init__(self) -> None:
        self.comm = CommStats()
        self.rank = 0
        self.size = 1
        self.local_rank = 0
        self.local_size = 1
        self.device = torch.device("cpu")
        self.timeline: HostTimeline | CudaTimeline = HostTimeline()
        self._splits: dict[tuple[tuple[int, ...], ...], Group] = {}

    @classmethod
    def from_run(cls, run: Run, launch: LaunchInfo, run_dir: Path) -> Engine:
        """The engine with ``run``'s settings, not started yet; engines without settings take none.

        ``run_dir`` receives what the engine writes itself (traces, logs).
        """
        return cls()

    # --- life cycle ---------------------------------------------------------------------------
    @abstractmethod
    def start(self) -> None:
        """Initialise the communication library; sets rank, size, local rank and device."""

    @abstractmethod
    def shutdown(self) -> None:
        """Leave cleanly (every rank, even when groups finished at different times)."""

    def settings(self) -> dict[str, Any]:
        """The engine's settings in effect (for the run's record); engines without any return {}."""
        return {}

    def begin_run(self) -> None:
        """A new run on the started engine (a launch that carries several runs): its own traffic count and timeline;
        the communicators and groups made so far stay (creating them is start-up, not the run's)."""
        self.comm = CommStats()
        self.timeline = timeline_for(self.device)

    @classmethod
    def launch_traits(cls, run: Run) -> str:
        """What of ``run`` besides its engine section the engine is started with (runs of a launch share them); ''
        for engines started with nothing else."""
        return ""

    @classmethod
    def shared_launch_refusal(cls, run: Run) -> str | None:
        """Why ``run`` needs a launch of its own under this engine (one line), or None where its ranks may go on to
        train other runs of the same settings (:mod:`suite.running.launchgroups`)."""
        return None

    @classmethod
    def gpu_checks(cls, record: Record) -> list[tuple[str, bool, str]]:
        """What ``suite gpu-check`` checks of an ok record of this engine's runs beyond the checks every run gets:
        ``(name, passed, evidence)`` each, from the record alone (none for an engine without checks of its own)."""
        return []

    def pick_device(self) -> torch.device:
        """The GPU of this rank's local rank when CUDA is available, else the CPU."""
        if uses_cuda():
            if (refusal := self.gpu_refusal()) is not None:
                raise RuntimeError(refusal)
            torch.cuda.set_device(self.local_rank % torch.cuda.device_count())
            device = torch.device("cuda", torch.cuda.current_device())
        else:
            device = torch.device("cpu")
        self.timeline = timeline_for(device)
        return device

    # --- groups and replicas ------------------------------------------------------------------
    @abstractmethod
    def split(self, groups: list[list[int]]) -> Group:
        """Create one communicator per list of world ranks (collective); return this rank's."""

    def _split_with(
        self,
        groups: list[list[int]],
        new_handle: Callable[[list[int]], Any],
        new_host_handle: Callable[[list[int]], Any] | None = None,
    ) -> Group:
        """:meth:`split` for engines where every rank creates every group's handle, in order.

        ``new_handle(ranks)`` makes the engine's object for a group of two or more ranks (and
        ``new_host_handle(ranks)`` one for host-side agreement, where ``handle`` cannot do it); a
        group of one never communicates and gets none. Creating handles is collective and done
        once per split.
        """
        key = tuple(tuple(ranks) for ranks in groups)
        if key not in self._splits:
            for index, ranks in enumerate(groups):
                handle = new_handle(list(ranks)) if len(ranks) > 1 else None
                host = new_host_handle(list(ranks)) if new_host_handle and len(ranks) > 1 else handle
                if self.rank in ranks:
                    self._splits[key] = Group(
                        index=index, ranks=list(ranks), rank=ranks.index(self.rank), handle=handle, host_handle=host
                    )
        return self._splits[key]

    def world(self) -> Group:
        """The group of all ranks."""
        return self.split([list(range(self.size))])

    def replicate(
        self, network: nn.Module, optimizer: torch.optim.Optimizer, group: Group, name: str, local_batch: int | None = None
    ) -> Replica:
        """Keep ``network`` identical across ``group`` by averaging gradients every step.

        ``local_batch`` (images per rank per step) is only needed by engines that configure
        themselves with it (DeepSpeed).
        """
        if group.size == 1:
            return Replica(network, optimizer)
        return self._replicate(network, optimizer, group, name)

    @abstractmethod
    def _replicate(self, network: nn.Module, optimizer: torch.optim.Optimizer, group: Group, name: str) -> Replica: ...

    # --- tensor collectives (counted) ---------------------------------------------------------
    def allreduce_sum_(self, tensor: torch.Tensor, group: Group) -> torch.Tensor:
        """Sum ``tensor`` over the group in place; counted in :attr:`comm`."""
        if group.size == 1:
            return tensor
        start = self.timeline.mark()
        self._allreduce_sum_(tensor, group)
        self.comm.add(tensor_bytes([tensor]), group.size, (start, self.timeline.mark()))
        return tensor

    @abstractmethod
    def _allreduce_sum_(self, tensor: torch.Tensor, group: Group) -> None: ...

    # --- control (not counted: the benchmark's own decisions, not the method's traffic) ---------
    def any_rank(self, flags: list[bool], group: Group) -> list[bool]:
        """For each flag, whether it is true on any rank of ``group``, on every rank of it (collective).

        A tiny host-side exchange used to agree on when to stop, snapshot or evaluate by the
        clock (time budgets, quality targets), so that the ranks of a data-parallel group never
        disagree about which step is the last.
        """
        if group.size == 1:
            return [bool(f) for f in flags]
        votes = torch.tensor([int(bool(f)) for f in flags], dtype=torch.int32)
        self._max_(votes, group)
        return [bool(v) for v in votes.tolist()]

    @abstractmethod
    def _max_(self, votes: torch.Tensor, group: Group) -> None:
        """Element-wise maximum of a small host tensor over ``group``, in place (not counted)."""

    # --- capabilities (see suite.config.registry) -------------------------------------------------------
    def capabilities(self) -> frozenset[str]:
        """What this engine offers beyond the common interface, as registered in :mod:`suite.config.registry`."""
        from ...config.registry import ENGINES

        return ENGINES[self.name].capabilities if self.name in ENGINES else frozenset()

    def cartesian(self, dims: Sequence[int]) -> Any:
        """A periodic Cartesian communicator of shape ``dims`` over all ranks (engines with the ``cartesian`` capability).

        Ranks keep their world rank (no reordering); the communicator offers point-to-point
        sends between grid neighbours (mpi4py's ``Cartcomm``).
        """
        raise NotImplementedError(f"the {self.name} engine has no Cartesian communicator")

    # --- checkpoints ---------------------------------------------------------------------------------
    def checkpoint_types(self) -> list[type]:
        """Classes this engine's optimizer states hold besides tensors and plain data: the only ones loading a
        checkpoint builds (see :mod:`suite.gan.tensorfiles`); none for the engines that use torch's optimizers."""
        return []

    # --- objects (not counted: used to gather results after training) -------------------------
    @abstractmethod
    def allgather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""

    def gather_object(self, obj: Any) -> list[Any] | None:
        """Every rank's ``obj`` on rank 0 (None elsewhere)."""
        gathered = self.allgather_object(obj)
        return gathered if self.rank == 0 else None

    def barrier(self) -> None:
        """Wait until every rank gets here (not counted as communication)."""
        self.allgather_object(None)

    def abort(self, code: int = 1) -> None:
        """End this process at once after a failure, skipping clean-up that would wait for the other ranks.

        The launcher sees the exit and stops the other ranks; engines whose library can end the
        whole job itself (MPI) do so.
        """
        os._exit(code)
